//! The randomized safety suite: seeded rounds of scale-out, scale-in, NodeClaim and Machine
//! deletions, controller restarts at chosen points, injected API faults, paused groups,
//! MachineSet preflight holds and template changes of `OnDelete` groups, with the safety
//! invariants checked after every round (`karpenter-capi bench chaos`, and a short seed set in
//! the tests).
//!
//! Responsibility: run the [`Operator`] against the [`world`] and, per round, draw one
//! [`Action`] from the seeded generator, perform it, lift every fault, and wait until the
//! invariants of [`invariants::check`] all hold ("settled") or the settle timeout passes (a
//! violation: the run stops there and reports it). Two invariants are watched while the
//! round runs: the `guarded` PodDisruptionBudget (a pod watch: never fewer healthy pods than
//! `minAvailable`, except in a round that deleted a Machine by hand) with no pod ever deleted
//! by the controller outside the Eviction API, and the replicas of a paused or preflight-held
//! group (never more unmet replicas than NodeClaims waiting for a launch). After a template
//! change the round also waits, with a longer allowance, until the drifted Machines are
//! replaced, never faster than the disruption budget allows (`groups`).
//!
//! Restart points: [`Action::RestartBeforeClaim`] fails every Machine PATCH so replicas are
//! raised but never claimed, then restarts the controller; [`Action::RestartBeforeScaleDown`]
//! fails every MachineDeployment write so `delete-machine` is written but replicas are not
//! lowered, then restarts it; [`Action::Restart`] restarts at a random moment of a scale-out
//! or a deletion.
//!
//! The draws are reproducible for a seed; the interleaving of controllers is not (tokio
//! schedules them), so a failing seed is a strong hint, not an exact replay.
//! Inputs: [`ChaosConfig`]. Outputs: a [`ChaosReport`] (its invariant table, the actions drawn,
//! settle times, and the first violation with its round and action).

mod groups;
pub mod invariants;
pub mod world;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde::Serialize;
use serde_json::{Value, json};
use sim::fault::{FaultConfig, FaultError, FaultRule, Verb};
use sim::rng::Rng;
use tokio::time::Instant;

use crate::api_counter::ApiCounter;
use crate::operator::{Operator, OperatorConfig};
use invariants::{DELETE_MACHINE, Invariant, Snapshot, Violation};
use world::{BURST, CLUSTER_ID, GUARDED, GUARDED_MIN_AVAILABLE, GUARDED_REPLICAS, MANAGED, WEB};

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Rounds to run.
    pub rounds: u32,
    /// Seed of the draws (and of the simulated infrastructure).
    pub seed: u64,
    /// How long a round may take to settle before its broken invariants count as violations.
    pub settle_timeout: Duration,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            rounds: 20,
            seed: 1,
            settle_timeout: Duration::from_secs(120),
        }
    }
}

/// What a round does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Raise `web` by 1–8 pods.
    ScaleOut,
    /// Lower `web` by 1–8 pods.
    ScaleIn,
    /// Delete a NodeClaim (drain, then the Machine goes).
    DeleteNodeClaim,
    /// Delete one of our Machines by hand (its Node and pods go with it).
    DeleteMachine,
    /// A scale-out or a deletion, and a controller restart at a random moment of it.
    Restart,
    /// Replicas raised, claims failing, restart.
    RestartBeforeClaim,
    /// `delete-machine` written, scale-down failing, restart.
    RestartBeforeScaleDown,
    /// API errors, conflicts, throttling and broken watches on both clusters during a
    /// scale-out and a deletion.
    Faults,
    /// Pause the MachineSets of every group we use (their Machines never come) while pods
    /// that need new nodes wait; then resume them and delete those pods and their NodeClaims.
    PausedGroup,
    /// Bump the Kubernetes version of an `OnDelete` group: Karpenter replaces its drifted
    /// NodeClaims.
    TemplateChange,
    /// A failing MachineSet preflight check holds one group's scale-ups while pods that need
    /// new nodes wait; then it passes.
    PreflightHold,
    /// Bump the Kubernetes version of the `RollingUpdate` group while pods run on it: Cluster
    /// API rolls its Machines out itself (surge, drain, delete); Karpenter claims or adopts
    /// the new Machines and ends the old NodeClaims, replacing nothing a second time.
    Rollout,
}

impl Action {
    /// The old actions keep their weights; the newer ones are added with small ones.
    const WEIGHTS: [(Action, u64); 12] = [
        (Action::ScaleOut, 20),
        (Action::ScaleIn, 12),
        (Action::DeleteNodeClaim, 14),
        (Action::DeleteMachine, 8),
        (Action::Restart, 12),
        (Action::RestartBeforeClaim, 8),
        (Action::RestartBeforeScaleDown, 8),
        (Action::Faults, 10),
        (Action::PausedGroup, 8),
        (Action::TemplateChange, 6),
        (Action::PreflightHold, 6),
        (Action::Rollout, 5),
    ];

    fn draw(rng: &mut Rng) -> Action {
        let total: u64 = Self::WEIGHTS.iter().map(|(_, w)| w).sum();
        let mut x = rng.next_u64() % total.max(1);
        for (a, w) in Self::WEIGHTS {
            if x < w {
                return a;
            }
            x -= w;
        }
        Action::ScaleOut
    }
}

/// One row of the invariant table.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InvariantRow {
    /// The invariant.
    pub invariant: &'static str,
    /// Rounds it was checked in.
    pub checked: u32,
    /// Rounds it was broken in.
    pub violated: u32,
}

/// The round that broke an invariant.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// Its number (from 1).
    pub round: u32,
    /// What it did.
    pub action: Action,
    /// What was broken at the end of its settle time.
    pub violations: Vec<String>,
}

/// What a run found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChaosReport {
    /// The seed.
    pub seed: u64,
    /// Rounds asked for.
    pub rounds: u32,
    /// Rounds that settled with every invariant holding.
    pub rounds_passed: u32,
    /// Wall seconds of the run.
    pub seconds: f64,
    /// Rounds per action.
    pub actions: BTreeMap<String, u32>,
    /// The invariant table.
    pub invariants: Vec<InvariantRow>,
    /// Mean and largest seconds from a round's last action to settled.
    pub settle_seconds_mean: f64,
    /// See `settle_seconds_mean`.
    pub settle_seconds_max: f64,
    /// Controller restarts.
    pub restarts: u32,
    /// Per aiming action: how often it reached its state (`restart-before-claim`: replicas
    /// raised and a Machine unclaimed at the restart; `restart-before-scale-down`:
    /// `delete-machine` written at the restart; `paused-group`: replicas raised on a paused
    /// group; `preflight-hold`: replicas raised on the held group and its MachineSet saying the
    /// scale-up is blocked; `template-change`: a NodeClaim reported drifted with
    /// `KubernetesVersionChanged`).
    pub exercised: BTreeMap<String, Exercised>,
    /// Faults the servers injected (errors, delayed requests, broken watches).
    pub faults_injected: u64,
    /// NodeClaims and Machines at the end.
    pub node_claims_at_end: usize,
    /// See `node_claims_at_end`.
    pub machines_at_end: usize,
    /// The first round that broke an invariant, if any.
    pub failure: Option<Failure>,
}

impl ChaosReport {
    /// Whether every round passed.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.rounds_passed == self.rounds
    }

    /// The report as text: the invariant table, the actions, the figures and any failure.
    #[must_use]
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "chaos seed {}: {}/{} rounds passed in {:.1} s (settle mean {:.2} s, max {:.2} s; {} restarts; {} faults injected; {} NodeClaims, {} Machines at the end)",
            self.seed,
            self.rounds_passed,
            self.rounds,
            self.seconds,
            self.settle_seconds_mean,
            self.settle_seconds_max,
            self.restarts,
            self.faults_injected,
            self.node_claims_at_end,
            self.machines_at_end,
        );
        let _ = writeln!(s, "{:<45} {:>8} {:>9}", "invariant", "checked", "violated");
        for row in &self.invariants {
            let _ = writeln!(
                s,
                "{:<45} {:>8} {:>9}",
                row.invariant, row.checked, row.violated
            );
        }
        let actions: Vec<String> = self
            .actions
            .iter()
            .map(|(a, n)| format!("{a} {n}"))
            .collect();
        let _ = writeln!(s, "actions: {}", actions.join(", "));
        let exercised: Vec<String> = self
            .exercised
            .iter()
            .map(|(a, e)| format!("{a} {}/{}", e.reached, e.tried))
            .collect();
        let _ = writeln!(s, "aimed states reached: {}", exercised.join(", "));
        if let Some(f) = &self.failure {
            let _ = writeln!(s, "FAILED in round {} ({:?}):", f.round, f.action);
            for v in &f.violations {
                let _ = writeln!(s, "  {v}");
            }
        }
        s
    }
}

/// The `guarded` pods as a pod watch sees them, and what it found.
#[derive(Debug, Default)]
struct PdbMonitor {
    healthy: BTreeMap<String, bool>,
    /// Armed once every `guarded` pod ran; a drop below `minAvailable` after that counts.
    armed: bool,
    /// This round deleted a Machine by hand: its pods die without an eviction.
    excused: bool,
    violations: Vec<String>,
}

impl PdbMonitor {
    fn healthy_count(&self) -> usize {
        self.healthy.values().filter(|h| **h).count()
    }

    fn observe(&mut self) {
        let n = self.healthy_count();
        if n >= GUARDED_REPLICAS {
            self.armed = true;
        }
        if self.armed && !self.excused && n < GUARDED_MIN_AVAILABLE {
            self.violations.push(format!(
                "{GUARDED}: {n} healthy pods, minAvailable {GUARDED_MIN_AVAILABLE}"
            ));
        }
    }
}

fn pod_healthy(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn watch_guarded(client: kube::Client, monitor: Arc<Mutex<PdbMonitor>>) -> AbortOnDrop {
    let api: Api<Pod> = Api::namespaced(client, "default");
    let task = tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default().labels("app=guarded")).boxed();
        let mut init: BTreeMap<String, bool> = BTreeMap::new();
        while let Some(event) = events.next().await {
            let Ok(event) = event else { continue };
            let mut m = monitor.lock().unwrap_or_else(PoisonError::into_inner);
            match event {
                watcher::Event::Apply(p) => {
                    m.healthy
                        .insert(p.metadata.name.clone().unwrap_or_default(), pod_healthy(&p));
                }
                watcher::Event::Delete(p) => {
                    m.healthy
                        .remove(p.metadata.name.as_deref().unwrap_or_default());
                }
                watcher::Event::Init => init.clear(),
                watcher::Event::InitApply(p) => {
                    init.insert(p.metadata.name.clone().unwrap_or_default(), pod_healthy(&p));
                }
                watcher::Event::InitDone => m.healthy = std::mem::take(&mut init),
            }
            m.observe();
        }
    });
    AbortOnDrop(task)
}

/// Aborts its task when dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The controller's settings for a fast simulated world (the end-to-end tests use them too):
/// batches of 300 ms (at most 3 s), NodeClaim garbage collection every second.
#[must_use]
pub fn fast_operator_config() -> OperatorConfig {
    use controllers::provisioning::batcher::BatchConfig;
    use controllers::provisioning::provisioner::ProvisionerConfig;
    let mut config = OperatorConfig {
        provisioner: ProvisionerConfig {
            batch: BatchConfig {
                idle: Duration::from_millis(300),
                max: Duration::from_secs(3),
            },
            ..ProvisionerConfig::default()
        },
        ..OperatorConfig::default()
    };
    config.node_claim_gc.interval = Duration::from_secs(1);
    config
}

/// The controller's settings in the chaos world: [`fast_operator_config`] with a short claim
/// timeout, unavailable-offering TTL and grace for unclaimed Machines, so a round settles in
/// seconds.
fn operator_config() -> OperatorConfig {
    let mut config = fast_operator_config();
    config.provider.cluster_id = Some(CLUSTER_ID.to_owned());
    config.provider.claim_timeout = Duration::from_secs(5);
    config.provider.unavailable_offering_ttl = Duration::from_secs(5);
    config.provider.removal_escalation = Duration::from_secs(20);
    config.gc.interval = Duration::from_secs(1);
    config.gc.grace = Duration::from_secs(5);
    config.termination.min_drain_time = Duration::from_millis(500);
    config
}

struct Runner {
    started: world::Started,
    mgmt: kube::Client,
    wl: kube::Client,
    operator: Option<Operator>,
    counter: ApiCounter,
    rng: Rng,
    web: usize,
    burst: usize,
    monitor: Arc<Mutex<PdbMonitor>>,
    restarts: u32,
    runaway: Vec<String>,
    exercised: BTreeMap<String, Exercised>,
    /// The template change of this round, while its replacements settle.
    drift: Option<groups::DriftWatch>,
    /// `rolled`'s replicas.
    rolled: usize,
    /// The rollout of this round, while it settles.
    rollout: Option<groups::RolloutWatch>,
}

/// How often a round reached the state it aims at.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Exercised {
    /// Rounds that tried.
    pub tried: u32,
    /// Rounds that reached it.
    pub reached: u32,
}

fn action_key(action: Action) -> String {
    serde_json::to_value(action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn text(obj: &Value, pointer: &str) -> String {
    invariants::text(obj, pointer).to_owned()
}

impl Runner {
    fn start_operator(&mut self) {
        let Some(workload) = self.started.world.workload() else {
            return;
        };
        let client = kube::Client::new(
            tower::ServiceBuilder::new()
                .layer(self.counter.clone())
                .service(workload.router()),
            "default",
        );
        self.operator = Some(Operator::start(
            client,
            self.started.world.management_client(),
            operator_config(),
        ));
    }

    /// Stops the controller, lifts every fault (so the new one does not start into the
    /// faults that stopped the old one), and starts a new one.
    async fn restart(&mut self) {
        self.operator = None;
        // Let the aborted tasks unwind before the faults go.
        tokio::task::yield_now().await;
        self.set_faults(FaultConfig::default(), FaultConfig::default());
        self.start_operator();
        self.restarts += 1;
    }

    fn set_faults(&self, management: FaultConfig, workload: FaultConfig) {
        if let Some(s) = self.started.world.management() {
            s.set_faults(management);
        }
        if let Some(s) = self.started.world.workload() {
            s.set_faults(workload);
        }
    }

    fn faults_injected(&self) -> u64 {
        [
            self.started.world.management(),
            self.started.world.workload(),
        ]
        .into_iter()
        .flatten()
        .map(|s| {
            let c = s.faults().counts();
            c.errors + c.gone + c.disconnects
        })
        .sum()
    }

    fn below(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n.max(1)).unwrap_or(u64::MAX);
        usize::try_from(self.rng.next_u64() % n64).unwrap_or(0)
    }

    async fn snapshot(&self) -> anyhow::Result<Snapshot> {
        let pods = Api::<Pod>::namespaced(self.wl.clone(), "default")
            .list(&ListParams::default())
            .await
            .context("cannot list pods")?
            .items
            .into_iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("app"))
                    .is_some_and(|a| a == WEB || a == GUARDED || a == BURST || a == world::ROLLED)
            })
            .map(|p| serde_json::to_value(p).context("pod"))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut groups = world::list(&self.mgmt, &::world::objects::machine_deployments()).await?;
        let sets = world::list(&self.mgmt, &::world::objects::machine_sets()).await?;
        groups.extend(sets.into_iter().filter(|s| {
            invariants::group_of(s).is_empty()
                && s.pointer("/metadata/ownerReferences")
                    .is_none_or(Value::is_null)
        }));
        groups.extend(world::list(&self.mgmt, &machine_pools_resource()).await?);
        Ok(Snapshot {
            machine_deployments: groups,
            machines: world::list(&self.mgmt, &::world::objects::machines()).await?,
            node_claims: world::list(&self.wl, &node_claims_resource()).await?,
            pods,
            pods_wanted: self.web + GUARDED_REPLICAS + self.burst + self.rolled,
        })
    }

    async fn scale(&mut self, deployment: &str, replicas: usize) -> anyhow::Result<()> {
        if deployment == BURST {
            self.burst = replicas;
        } else if deployment == world::ROLLED {
            self.rolled = replicas;
        } else {
            self.web = replicas;
        }
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(self.wl.clone(), "default")
            .patch(
                deployment,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .with_context(|| format!("cannot scale {deployment}"))?;
        Ok(())
    }

    async fn scale_web(&mut self, replicas: usize) -> anyhow::Result<()> {
        self.scale(WEB, replicas).await
    }

    /// Scales `burst` to zero and deletes the NodeClaims of its NodePool (a round's burst
    /// nodes do not pile up).
    async fn burst_down(&mut self) -> anyhow::Result<()> {
        self.scale(BURST, 0).await?;
        let api: Api<DynamicObject> = Api::all_with(self.wl.clone(), &node_claims_resource());
        let burst = api
            .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={BURST}")))
            .await
            .context("cannot list the burst NodeClaims")?;
        for nc in burst.items {
            let name = nc.metadata.name.unwrap_or_default();
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e).context("cannot delete a burst NodeClaim"),
            }
        }
        Ok(())
    }

    async fn scale_out(&mut self) -> anyhow::Result<()> {
        let n = (self.web + 1 + self.below(8)).min(24);
        self.scale_web(n).await
    }

    async fn scale_in(&mut self) -> anyhow::Result<()> {
        let n = self.web.saturating_sub(1 + self.below(8)).max(2);
        self.scale_web(n).await
    }

    /// The NodeClaims that are not deleting.
    async fn node_claims(&self) -> anyhow::Result<Vec<Value>> {
        Ok(world::list(&self.wl, &node_claims_resource())
            .await?
            .into_iter()
            .filter(|nc| !invariants::deleting(nc))
            .collect())
    }

    /// Deletes a random live NodeClaim; its name, if there was one. With `spare_guarded`, one
    /// whose node runs no `guarded` pod if there is one (its drain then never waits for the
    /// PodDisruptionBudget, so it reaches the scale-down even while writes fail).
    async fn delete_node_claim(&mut self, spare_guarded: bool) -> anyhow::Result<Option<String>> {
        let mut ncs = self.node_claims().await?;
        if spare_guarded {
            let guarded: std::collections::BTreeSet<String> =
                Api::<Pod>::namespaced(self.wl.clone(), "default")
                    .list(&ListParams::default().labels(&format!("app={GUARDED}")))
                    .await
                    .context("cannot list the guarded pods")?
                    .items
                    .into_iter()
                    .filter_map(|p| p.spec?.node_name)
                    .collect();
            let free: Vec<Value> = ncs
                .iter()
                .filter(|nc| !guarded.contains(&text(nc, "/status/nodeName")))
                .cloned()
                .collect();
            if !free.is_empty() {
                ncs = free;
            }
        }
        if ncs.is_empty() {
            return Ok(None);
        }
        let i = self.below(ncs.len());
        let name = ncs
            .get(i)
            .map(|nc| text(nc, "/metadata/name"))
            .unwrap_or_default();
        let api: Api<DynamicObject> = Api::all_with(self.wl.clone(), &node_claims_resource());
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e).context("cannot delete a NodeClaim"),
        }
        Ok(Some(name))
    }

    async fn delete_machine(&mut self) -> anyhow::Result<()> {
        let ours: Vec<Value> = world::list(&self.mgmt, &::world::objects::machines())
            .await?
            .into_iter()
            .filter(|m| {
                !invariants::deleting(m)
                    && m.pointer("/metadata/annotations")
                        .and_then(|a| a.get(invariants::CLAIMED_BY_CLUSTER))
                        .and_then(Value::as_str)
                        == Some(CLUSTER_ID)
            })
            .collect();
        if ours.is_empty() {
            return self.scale_out().await;
        }
        let i = self.below(ours.len());
        let Some(m) = ours.get(i) else { return Ok(()) };
        self.monitor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .excused = true;
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.mgmt.clone(),
            &text(m, "/metadata/namespace"),
            &::world::objects::machines(),
        );
        match api
            .delete(&text(m, "/metadata/name"), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).context("cannot delete a Machine"),
        }
    }

    async fn wait_until<F>(&self, timeout: Duration, mut done: F) -> anyhow::Result<bool>
    where
        F: FnMut(&Snapshot) -> bool,
    {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if done(&self.snapshot().await?) {
                return Ok(true);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(false)
    }

    async fn perform(&mut self, action: Action) -> anyhow::Result<()> {
        match action {
            Action::ScaleOut => self.scale_out().await,
            Action::ScaleIn => self.scale_in().await,
            Action::DeleteNodeClaim => self.delete_node_claim(false).await.map(|_| ()),
            Action::DeleteMachine => self.delete_machine().await,
            Action::Restart => {
                if self.rng.chance(0.5) {
                    self.scale_out().await?;
                } else {
                    self.delete_node_claim(false).await?;
                }
                let wait = u64::try_from(self.below(2_500)).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                self.restart().await;
                Ok(())
            }
            Action::RestartBeforeClaim => self.restart_before_claim().await,
            Action::RestartBeforeScaleDown => self.restart_before_scale_down().await,
            Action::Faults => self.faults().await,
            Action::PausedGroup => self.paused_group().await,
            Action::TemplateChange => self.template_change().await,
            Action::PreflightHold => self.preflight_hold().await,
            Action::Rollout => self.rollout().await,
        }
    }

    /// Every PATCH and PUT of `resources` in the management cluster fails with a 500 (the
    /// workload cluster is left alone).
    fn fail_management_writes(&mut self, resources: &[&str]) {
        let rule = FaultRule {
            verbs: vec![Verb::Patch, Verb::Update],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            error_rate: 1.0,
            error: FaultError::Internal,
            ..FaultRule::default()
        };
        let seed = self.rng.next_u64();
        self.set_faults(
            FaultConfig {
                seed,
                rules: vec![rule],
            },
            FaultConfig::default(),
        );
    }

    async fn restart_before_claim(&mut self) -> anyhow::Result<()> {
        self.fail_management_writes(&["machines"]);
        let n = 1 + self.below(3);
        self.scale(BURST, n).await?;
        // Until some group has a Machine for a replica we raised but could not claim.
        let before = self.started.protected.machines.clone();
        let raised_unclaimed = |s: &Snapshot| {
            s.machines.iter().any(|m| {
                MANAGED.contains(&invariants::group_of(m))
                    && m.pointer("/metadata/annotations")
                        .and_then(|a| a.get(invariants::CLAIMED_BY))
                        .is_none()
                    && !before.contains_key(&text(m, "/metadata/name"))
            })
        };
        let reached = self
            .wait_until(Duration::from_secs(15), raised_unclaimed)
            .await?;
        self.reached(Action::RestartBeforeClaim, reached);
        self.restart().await;
        Ok(())
    }

    async fn restart_before_scale_down(&mut self) -> anyhow::Result<()> {
        self.fail_management_writes(&["machinedeployments", "machinedeployments/scale"]);
        let Some(nc) = self.delete_node_claim(true).await? else {
            self.set_faults(FaultConfig::default(), FaultConfig::default());
            return self.scale_out().await;
        };
        let annotated = |s: &Snapshot| {
            s.machines.iter().any(|m| {
                let a = m.pointer("/metadata/annotations");
                a.and_then(|a| a.get(invariants::CLAIMED_BY))
                    .and_then(Value::as_str)
                    == Some(nc.as_str())
                    && a.and_then(|a| a.get(DELETE_MACHINE)).is_some()
            })
        };
        let reached = self.wait_until(Duration::from_secs(20), annotated).await?;
        self.reached(Action::RestartBeforeScaleDown, reached);
        self.restart().await;
        Ok(())
    }

    async fn faults(&mut self) -> anyhow::Result<()> {
        let writes = vec![Verb::Create, Verb::Update, Verb::Patch, Verb::Delete];
        let rule = |error, rate| FaultRule {
            verbs: writes.clone(),
            error_rate: rate,
            error,
            ..FaultRule::default()
        };
        let watches = FaultRule {
            verbs: vec![Verb::Watch],
            watch_disconnect_rate: 0.02,
            watch_gone_rate: 0.05,
            ..FaultRule::default()
        };
        let config = |seed| FaultConfig {
            seed,
            rules: vec![
                rule(FaultError::Internal, 0.06),
                rule(FaultError::TooManyRequests, 0.04),
                rule(FaultError::Conflict, 0.04),
                watches.clone(),
            ],
        };
        let (a, b) = (self.rng.next_u64(), self.rng.next_u64());
        self.set_faults(config(a), config(b));
        self.scale_out().await?;
        self.delete_node_claim(false).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        self.set_faults(FaultConfig::default(), FaultConfig::default());
        Ok(())
    }

    /// Records whether the state a round aims at (a restart point, replicas raised on a
    /// paused or held group, drift reported) was reached, so a run shows that its checks
    /// were exercised.
    fn reached(&mut self, action: Action, reached: bool) {
        let e = self.exercised.entry(action_key(action)).or_default();
        e.tried += 1;
        if reached {
            e.reached += 1;
        }
    }

    /// Lifts faults and pauses, makes sure a controller runs, and waits until every invariant
    /// holds twice in a row (after a template change: and its drifted Machines are replaced).
    /// Returns the seconds it took, or the violations at the timeout.
    async fn settle(&mut self, timeout: Duration) -> anyhow::Result<Result<f64, Vec<Violation>>> {
        let result = self.settle_inner(timeout).await;
        if let Some(watch) = self.drift.take() {
            self.reached(Action::TemplateChange, watch.drift_seen);
        }
        if let Some(watch) = self.rollout.take() {
            self.reached(Action::Rollout, watch.reached());
        }
        result
    }

    async fn settle_inner(
        &mut self,
        timeout: Duration,
    ) -> anyhow::Result<Result<f64, Vec<Violation>>> {
        self.set_faults(FaultConfig::default(), FaultConfig::default());
        if self.operator.is_none() {
            self.start_operator();
        }
        let start = Instant::now();
        let deadline = start + timeout;
        let mut clean = 0;
        loop {
            let snapshot = self.snapshot().await?;
            let mut found = invariants::check(&snapshot, &self.started.protected);
            let pending = match self.drift.as_mut().map(|w| w.observe(&snapshot)) {
                Some(Ok(pending)) => pending,
                Some(Err(overrun)) => {
                    found.push(overrun);
                    return Ok(Err(found));
                }
                None => Vec::new(),
            };
            found.extend(self.immediate());
            if found
                .iter()
                .any(|v| matches!(v.invariant, Invariant::PdbRespected | Invariant::NoRunaway))
            {
                return Ok(Err(found));
            }
            found.extend(pending);
            if let Some(watch) = self.rollout.as_mut() {
                found.extend(watch.observe(&snapshot));
            }
            if found.is_empty() {
                clean += 1;
                if clean >= 2 {
                    let mut m = self.monitor.lock().unwrap_or_else(PoisonError::into_inner);
                    m.excused = false;
                    return Ok(Ok(start.elapsed().as_secs_f64()));
                }
            } else {
                clean = 0;
            }
            if Instant::now() >= deadline {
                return Ok(Err(found));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The violations watched over time: the PDB monitor, pods deleted directly, runaway.
    fn immediate(&mut self) -> Vec<Violation> {
        let mut out: Vec<Violation> = self
            .monitor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .violations
            .drain(..)
            .map(|detail| Violation {
                invariant: Invariant::PdbRespected,
                detail,
            })
            .collect();
        let deletes = self
            .counter
            .by_resource()
            .get("DELETE pods")
            .copied()
            .unwrap_or(0);
        if deletes > 0 {
            out.push(Violation {
                invariant: Invariant::PdbRespected,
                detail: format!("the controller deleted {deletes} pods outside the Eviction API"),
            });
        }
        out.extend(self.runaway.drain(..).map(|detail| Violation {
            invariant: Invariant::NoRunaway,
            detail,
        }));
        out
    }
}

/// Whether a round of `action` checks `invariant` (the ones watched over time only where the
/// round makes them meaningful).
fn checks(action: Action, invariant: Invariant) -> bool {
    match invariant {
        Invariant::NoRunaway => matches!(action, Action::PausedGroup | Action::PreflightHold),
        Invariant::DriftReplaced => action == Action::TemplateChange,
        Invariant::RolledOut => action == Action::Rollout,
        _ => true,
    }
}

/// Extra settle time of a template change: the provider's drift is asked about every 15 s
/// (`drift_recheck`) and the disruption loop pauses 10 s after an idle pass; then the drifted
/// nodes go one at a time (the default budget, 10 % of the pool's nodes rounded up, is 1 for
/// up to 10 nodes), each a launch, its initialization, a drain under the `guarded`
/// PodDisruptionBudget and a deletion — some 10–15 s a node for up to 8 nodes.
pub const TEMPLATE_CHANGE_EXTRA_SETTLE: Duration = Duration::from_secs(120);

/// How long a round of `action` may take to settle.
fn settle_timeout(config: &ChaosConfig, action: Action) -> Duration {
    if matches!(action, Action::TemplateChange | Action::Rollout) {
        config.settle_timeout + TEMPLATE_CHANGE_EXTRA_SETTLE
    } else {
        config.settle_timeout
    }
}

fn node_claims_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::erase::<api::NodeClaim>(&())
}

fn machine_pools_resource() -> kube::api::ApiResource {
    ::world::objects::capi_resource(
        sim::convert::capi::CapiKind::MachinePool,
        sim::convert::capi::CapiVersion::V1beta2,
    )
}

/// Runs `config.rounds` rounds from `config.seed` and reports what held.
///
/// # Errors
/// The world cannot be started, or a request of the harness itself fails (not the
/// controller's: those are what the rounds inject).
pub async fn run(config: &ChaosConfig) -> anyhow::Result<ChaosReport> {
    let begin = Instant::now();
    let web = 4;
    let started = world::start(config.seed, web).await?;
    let (Some(management), Some(workload)) = (started.world.management(), started.world.workload())
    else {
        anyhow::bail!("the chaos world runs on sim");
    };
    let mgmt = kube::Client::new(management.router_without_faults(), "default");
    let wl = kube::Client::new(workload.router_without_faults(), "default");
    let monitor = Arc::new(Mutex::new(PdbMonitor::default()));
    let _watch = watch_guarded(wl.clone(), monitor.clone());
    let mut runner = Runner {
        started,
        mgmt,
        wl,
        operator: None,
        counter: ApiCounter::default(),
        rng: Rng::new(config.seed),
        web,
        burst: 0,
        monitor,
        restarts: 0,
        runaway: Vec::new(),
        exercised: BTreeMap::new(),
        drift: None,
        rolled: 0,
        rollout: None,
    };
    runner.start_operator();

    let mut actions: BTreeMap<String, u32> = BTreeMap::new();
    let mut checked: BTreeMap<Invariant, u32> = BTreeMap::new();
    let mut violated: BTreeMap<Invariant, u32> = BTreeMap::new();
    let mut settles = Vec::new();
    let mut passed = 0;
    let mut failure = None;
    // Round 0: the initial workloads settle first.
    if let Err(found) = runner.settle(config.settle_timeout).await? {
        failure = Some(Failure {
            round: 0,
            action: Action::ScaleOut,
            violations: found.iter().map(ToString::to_string).collect(),
        });
    }
    for round in 1..=config.rounds {
        if failure.is_some() {
            break;
        }
        if runner.burst > 0 {
            runner.burst_down().await?;
        }
        let live = runner.node_claims().await?.len();
        let action = if live > 8 {
            Action::DeleteNodeClaim
        } else {
            Action::draw(&mut runner.rng)
        };
        let key = action_key(action);
        *actions.entry(key).or_default() += 1;
        tracing::info!(round, ?action, "chaos round");
        runner.perform(action).await?;
        let result = runner.settle(settle_timeout(config, action)).await?;
        for inv in Invariant::ALL {
            if checks(action, inv) {
                *checked.entry(inv).or_default() += 1;
            }
        }
        match result {
            Ok(seconds) => {
                tracing::info!(round, ?action, seconds, "chaos round settled");
                settles.push(seconds);
                passed += 1;
            }
            Err(found) => {
                tracing::warn!(round, ?action, ?found, "chaos round broke invariants");
                for v in &found {
                    *violated.entry(v.invariant).or_default() += 1;
                }
                failure = Some(Failure {
                    round,
                    action,
                    violations: found.iter().map(ToString::to_string).collect(),
                });
            }
        }
    }
    let end = runner.snapshot().await?;
    #[allow(clippy::cast_precision_loss)]
    let mean = if settles.is_empty() {
        0.0
    } else {
        settles.iter().sum::<f64>() / settles.len() as f64
    };
    Ok(ChaosReport {
        seed: config.seed,
        rounds: config.rounds,
        rounds_passed: passed,
        seconds: begin.elapsed().as_secs_f64(),
        actions,
        invariants: Invariant::ALL
            .iter()
            .map(|i| InvariantRow {
                invariant: i.name(),
                checked: checked.get(i).copied().unwrap_or(0),
                violated: violated.get(i).copied().unwrap_or(0),
            })
            .collect(),
        settle_seconds_mean: mean,
        settle_seconds_max: settles.iter().copied().fold(0.0, f64::max),
        restarts: runner.restarts,
        exercised: runner.exercised.clone(),
        faults_injected: runner.faults_injected(),
        node_claims_at_end: end.node_claims.len(),
        machines_at_end: end.machines.len(),
        failure,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_reproducible_and_cover_every_action() {
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..200).map(|_| Action::draw(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let seen: std::collections::BTreeSet<Action> = draw(7).into_iter().collect();
        assert_eq!(seen.len(), Action::WEIGHTS.len());
    }

    #[test]
    fn the_monitor_counts_a_drop_below_min_available_only_when_armed_and_not_excused() {
        let mut m = PdbMonitor::default();
        for i in 0..2 {
            m.healthy.insert(format!("p{i}"), true);
        }
        m.observe();
        assert!(m.violations.is_empty(), "not armed before every pod ran");
        for i in 2..GUARDED_REPLICAS {
            m.healthy.insert(format!("p{i}"), true);
        }
        m.observe();
        m.healthy.insert("p0".into(), false);
        m.observe();
        assert!(m.violations.is_empty(), "one down is within the budget");
        m.excused = true;
        m.healthy.insert("p1".into(), false);
        m.observe();
        assert!(m.violations.is_empty(), "excused");
        m.excused = false;
        m.observe();
        assert_eq!(m.violations.len(), 1);
    }
}
