//! The chaos rounds that act on Cluster API groups rather than on the workloads: paused
//! MachineSets, MachineSet preflight holds, template changes of `OnDelete` MachineDeployments,
//! and rollouts Cluster API drives itself.
//!
//! Responsibility:
//! - [`Action::PausedGroup`]: pause the MachineSets of every group we use while `burst` pods
//!   that need new nodes wait; then resume them.
//! - [`Action::PreflightHold`]: put sim's `preflight-hold` knob on one group we use (the
//!   cheapest half the time, else a random one) while `burst` pods need new nodes, then lift
//!   it. Its MachineSet creates no Machine and says its scale-up "is blocked because" a
//!   preflight check fails, as Cluster API does; a launch there fails as insufficient capacity
//!   (at the latest after the claim timeout) and the group is offered as unavailable for the
//!   unavailable-offering TTL, so the pods go to other groups.
//! - Both sample the held groups once a second: their unmet replicas never exceed the
//!   NodeClaims waiting for a launch ([`Invariant::NoRunaway`]).
//! - [`Action::TemplateChange`]: bump the patch version of the Kubernetes version of one
//!   random `OnDelete` group (preferring one with our Machines). The provider reports those
//!   NodeClaims drifted (`KubernetesVersionChanged`) and Karpenter replaces them within the
//!   NodePool's disruption budget; [`DriftWatch`] follows that while the round settles
//!   ([`Invariant::DriftReplaced`]).
//! - [`Action::Rollout`]: with two `rolled` pods running on the `RollingUpdate` group `m2-r`
//!   (one per node), bump its Kubernetes version. Cluster API surges a new Machine, drains an
//!   old one through the Eviction API and deletes it, and so on; the evicted pods' launches
//!   claim the new Machines (or the collector adopts them), the old NodeClaims end with their
//!   Nodes. [`RolloutWatch`] keeps the round settling until no Machine of the old template is
//!   left ([`Invariant::RolledOut`]); the other invariants say the rest (every Machine claimed
//!   once, replicas equal Machines, every pod Running). The other `RollingUpdate` groups hold
//!   Machines that are not ours, which a rollout would replace: they never get one.
//!
//! Inputs: the [`Runner`]'s clients and draws. Outputs: object writes, samples, [`DriftWatch`].

use std::time::Duration;

use ::world::config::annotations::PREFLIGHT_HOLD;
use anyhow::Context;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use super::invariants::{self, CLAIMED_BY_CLUSTER, Invariant, Snapshot, Violation};
use super::world::{self, BURST, CHEAPEST, CLUSTER_ID, MANAGED, ON_DELETE, ROLLED, ROLLING};
use super::{Action, Runner, text};

/// The failing preflight check a [`Action::PreflightHold`] round reports (as CAPI words a
/// control plane upgrade).
pub const HOLD_MESSAGE: &str = "KubeadmControlPlane default/chaos is upgrading (\"ControlPlaneIsStable\" preflight check failed)";

/// The drift reason the provider gives a Machine whose group's version changed.
const VERSION_CHANGED: &str = "KubernetesVersionChanged";

/// The NodePool whose nodes a template change drifts (`burst` nodes go every round).
const POOL: &str = "default";

/// What the held groups' samples showed.
#[derive(Debug, Clone, Copy, Default)]
struct Sampled {
    /// Replicas were raised on a held group.
    raised: bool,
    /// One of its MachineSets said its scale-up is blocked.
    blocked: bool,
}

impl Runner {
    /// Pauses (or resumes) the MachineSets of `groups`: the MachineDeployments stay as they
    /// are, so their offerings look available, but no Machine is created — as with a paused
    /// Cluster, a rejecting webhook or an exhausted quota.
    async fn set_paused(&self, groups: &[&str], paused: bool) -> anyhow::Result<()> {
        let sets = ::world::objects::machine_sets();
        let api: Api<DynamicObject> = Api::namespaced_with(self.mgmt.clone(), "default", &sets);
        let value = if paused { json!("") } else { Value::Null };
        for ms in world::list(&self.mgmt, &sets).await? {
            if !groups.contains(&invariants::group_of(&ms)) {
                continue;
            }
            let name = text(&ms, "/metadata/name");
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": value}}}),
                ),
            )
            .await
            .with_context(|| format!("cannot pause MachineSet {name}"))?;
        }
        Ok(())
    }

    pub(super) async fn paused_group(&mut self) -> anyhow::Result<()> {
        let groups = MANAGED;
        self.set_paused(&groups, true).await?;
        // Pods only new nodes of the `burst` pool take: every one needs a launch.
        self.scale(BURST, 2).await?;
        let sampled = self.sample_held("paused groups", &groups, 8).await?;
        self.reached(Action::PausedGroup, sampled.raised);
        self.set_paused(&groups, false).await?;
        Ok(())
    }

    /// Sets (or, with `None`, removes) the preflight hold on MachineDeployment `group`.
    async fn set_hold(&self, group: &str, message: Option<&str>) -> anyhow::Result<()> {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.mgmt.clone(),
            "default",
            &::world::objects::machine_deployments(),
        );
        api.patch(
            group,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {PREFLIGHT_HOLD: message}}})),
        )
        .await
        .with_context(|| format!("cannot set the preflight hold of {group}"))?;
        Ok(())
    }

    pub(super) async fn preflight_hold(&mut self) -> anyhow::Result<()> {
        // Half the rounds hold the cheapest group, where the `burst` launches go first (a
        // hold elsewhere is only met when that one is unavailable); the others a random one.
        let group = if self.rng.chance(0.5) {
            CHEAPEST
        } else {
            MANAGED
                .get(self.below(MANAGED.len()))
                .copied()
                .unwrap_or(CHEAPEST)
        };
        self.set_hold(group, Some(HOLD_MESSAGE)).await?;
        self.scale(BURST, 2).await?;
        let sampled = self
            .sample_held("preflight-held group", &[group], 8)
            .await?;
        tracing::info!(group, ?sampled, "chaos preflight hold");
        self.reached(Action::PreflightHold, sampled.raised && sampled.blocked);
        self.set_hold(group, None).await?;
        Ok(())
    }

    /// Samples once a second for `seconds`: the unmet replicas of `groups` (whose Machines do
    /// not come) never exceed the NodeClaims that are waiting for a launch — twice in a row,
    /// a second apart: one sample may fall between a rollback's write and the NodeClaim's
    /// deletion. A runaway is recorded for [`Invariant::NoRunaway`].
    async fn sample_held(
        &mut self,
        what: &str,
        groups: &[&str],
        seconds: u32,
    ) -> anyhow::Result<Sampled> {
        let mut over = 0;
        let mut sampled = Sampled::default();
        let sets_resource = ::world::objects::machine_sets();
        for _ in 0..seconds {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let s = self.snapshot().await?;
            let unmet: i64 = s
                .machine_deployments
                .iter()
                .filter(|md| groups.contains(&invariants::name(md)))
                .map(|md| {
                    let n = invariants::name(md);
                    let want = md
                        .pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    let have = s
                        .machines
                        .iter()
                        .filter(|m| !invariants::deleting(m) && invariants::group_of(m) == n)
                        .count();
                    want - i64::try_from(have).unwrap_or(0)
                })
                .sum();
            let waiting = s
                .node_claims
                .iter()
                .filter(|nc| {
                    !invariants::deleting(nc)
                        && nc.pointer("/status/providerID").is_none_or(Value::is_null)
                })
                .count();
            sampled.raised |= unmet > 0;
            sampled.blocked |= world::list(&self.mgmt, &sets_resource)
                .await?
                .iter()
                .filter(|ms| groups.contains(&invariants::group_of(ms)))
                .any(scale_up_blocked);
            if unmet > i64::try_from(waiting).unwrap_or(i64::MAX) {
                over += 1;
                if over >= 2 {
                    self.runaway.push(format!(
                        "{what} {groups:?}: {unmet} unmet replicas, {waiting} NodeClaims waiting"
                    ));
                    break;
                }
            } else {
                over = 0;
            }
        }
        Ok(sampled)
    }

    pub(super) async fn template_change(&mut self) -> anyhow::Result<()> {
        let mds = world::list(&self.mgmt, &::world::objects::machine_deployments()).await?;
        let machines = world::list(&self.mgmt, &::world::objects::machines()).await?;
        let ours = |group: &str| {
            machines.iter().any(|m| {
                invariants::group_of(m) == group
                    && invariants::annotation(m, CLAIMED_BY_CLUSTER) == Some(CLUSTER_ID)
            })
        };
        let with_ours: Vec<&str> = ON_DELETE.iter().copied().filter(|g| ours(g)).collect();
        let pool: &[&str] = if with_ours.is_empty() {
            &ON_DELETE
        } else {
            &with_ours
        };
        let group = pool.get(self.below(pool.len())).copied().unwrap_or("m4-a");
        let Some(md) = mds.iter().find(|md| invariants::name(md) == group) else {
            anyhow::bail!("MachineDeployment {group} is gone");
        };
        let version = bump_patch(invariants::text(md, "/spec/template/spec/version"));
        Api::<DynamicObject>::namespaced_with(
            self.mgmt.clone(),
            "default",
            &::world::objects::machine_deployments(),
        )
        .patch(
            group,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": version}}}})),
        )
        .await
        .with_context(|| format!("cannot change the template of {group}"))?;
        tracing::info!(group, %version, "chaos template change");
        self.drift = Some(DriftWatch::new(group, &version));
        Ok(())
    }
}

impl Runner {
    pub(super) async fn rollout(&mut self) -> anyhow::Result<()> {
        self.scale(ROLLED, 2).await?;
        let running_on_ours = |s: &Snapshot| {
            let ours = s
                .machines
                .iter()
                .filter(|m| invariants::group_of(m) == ROLLING && !invariants::deleting(m))
                .filter(|m| invariants::annotation(m, CLAIMED_BY_CLUSTER) == Some(CLUSTER_ID))
                .count();
            let running = s
                .pods
                .iter()
                .filter(|p| invariants::text(p, "/metadata/labels/app") == ROLLED)
                .filter(|p| invariants::text(p, "/status/phase") == "Running")
                .count();
            ours >= 2 && running >= 2
        };
        let had_ours = self
            .wait_until(Duration::from_secs(30), running_on_ours)
            .await?;
        let mds = world::list(&self.mgmt, &::world::objects::machine_deployments()).await?;
        let Some(md) = mds.iter().find(|md| invariants::name(md) == ROLLING) else {
            anyhow::bail!("MachineDeployment {ROLLING} is gone");
        };
        let version = bump_patch(invariants::text(md, "/spec/template/spec/version"));
        Api::<DynamicObject>::namespaced_with(
            self.mgmt.clone(),
            "default",
            &::world::objects::machine_deployments(),
        )
        .patch(
            ROLLING,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": version}}}})),
        )
        .await
        .with_context(|| format!("cannot change the template of {ROLLING}"))?;
        tracing::info!(group = ROLLING, %version, "chaos rollout");
        self.rollout = Some(RolloutWatch {
            version,
            had_ours,
            done: false,
        });
        Ok(())
    }
}

/// A rollout in flight: the version the group moved to, and whether it got there.
#[derive(Debug, Clone)]
pub(super) struct RolloutWatch {
    version: String,
    /// Our Machines ran the `rolled` pods when the template changed.
    had_ours: bool,
    /// No live Machine of the old template was left at a sample.
    done: bool,
}

impl RolloutWatch {
    /// What is still to roll out at this sample, as the violation a settle waits on.
    pub(super) fn observe(&mut self, s: &Snapshot) -> Vec<Violation> {
        let old: Vec<&str> = s
            .machines
            .iter()
            .filter(|m| invariants::group_of(m) == ROLLING && !invariants::deleting(m))
            .filter(|m| invariants::text(m, "/spec/version") != self.version)
            .map(invariants::name)
            .collect();
        if old.is_empty() {
            self.done = true;
            return Vec::new();
        }
        vec![Violation {
            invariant: Invariant::RolledOut,
            detail: format!(
                "{ROLLING} still runs {} Machine(s) of the old template: {old:?}",
                old.len()
            ),
        }]
    }

    /// Whether the round did what it aims at: a rollout of our Machines that ended.
    pub(super) fn reached(&self) -> bool {
        self.had_ours && self.done
    }
}

/// Whether a MachineSet's v1beta2 `ScalingUp` condition says its scale-up is blocked.
fn scale_up_blocked(ms: &Value) -> bool {
    ms.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                invariants::text(c, "/type") == "ScalingUp"
                    && invariants::text(c, "/status") == "True"
                    && invariants::text(c, "/message").contains("is blocked because")
            })
        })
}

/// `v1.33.4` → `v1.33.5` (anything unparsable → `v1.33.1`).
pub(super) fn bump_patch(version: &str) -> String {
    version
        .rsplit_once('.')
        .and_then(|(head, patch)| Some(format!("{head}.{}", patch.parse::<u64>().ok()? + 1)))
        .unwrap_or_else(|| "v1.33.1".to_owned())
}

/// A template change in flight: which group moved to which version, and what the rounds
/// since saw of its replacement.
#[derive(Debug, Clone)]
pub(super) struct DriftWatch {
    group: String,
    version: String,
    /// A NodeClaim of ours was seen `Drifted` with `KubernetesVersionChanged`.
    pub(super) drift_seen: bool,
    /// Consecutive samples above the budget.
    over: u32,
}

impl DriftWatch {
    fn new(group: &str, version: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            drift_seen: false,
            over: 0,
        }
    }

    /// Looks at one settle sample. Returns a budget overrun (two samples in a row with more
    /// NodeClaims of the pool deleting than its default budget, 10 % of its nodes rounded up,
    /// allows) as `Err`, and as `Ok` what is still to replace (Machines of the group we claim
    /// that still run the old version): not settled yet, not a violation by itself.
    pub(super) fn observe(&mut self, s: &Snapshot) -> Result<Vec<Violation>, Violation> {
        self.drift_seen |= s.node_claims.iter().any(|nc| {
            nc.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        invariants::text(c, "/type") == "Drifted"
                            && invariants::text(c, "/status") == "True"
                            && invariants::text(c, "/reason") == VERSION_CHANGED
                    })
                })
        });
        let in_pool: Vec<&Value> = s
            .node_claims
            .iter()
            .filter(|nc| {
                nc.pointer("/metadata/labels/karpenter.sh~1nodepool")
                    .and_then(Value::as_str)
                    == Some(POOL)
            })
            .collect();
        let deleting = in_pool.iter().filter(|nc| invariants::deleting(nc)).count();
        let allowed = in_pool.len().div_ceil(10).max(1);
        if deleting > allowed {
            self.over += 1;
            if self.over >= 2 {
                return Err(Violation {
                    invariant: Invariant::DriftReplaced,
                    detail: format!(
                        "{deleting} NodeClaims of NodePool {POOL} deleting at once, its budget allows {allowed} of {}",
                        in_pool.len()
                    ),
                });
            }
        } else {
            self.over = 0;
        }
        let old: Vec<&str> = s
            .machines
            .iter()
            .filter(|m| {
                invariants::group_of(m) == self.group
                    && !invariants::deleting(m)
                    && invariants::annotation(m, CLAIMED_BY_CLUSTER) == Some(CLUSTER_ID)
                    && invariants::text(m, "/spec/version") != self.version
            })
            .map(invariants::name)
            .collect();
        Ok(if old.is_empty() {
            Vec::new()
        } else {
            vec![Violation {
                invariant: Invariant::DriftReplaced,
                detail: format!(
                    "{} Machines of {} not yet at {}: {old:?}",
                    old.len(),
                    self.group,
                    self.version
                ),
            }]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_bump_their_patch() {
        assert_eq!(bump_patch("v1.33.0"), "v1.33.1");
        assert_eq!(bump_patch("v1.33.9"), "v1.33.10");
        assert_eq!(bump_patch(""), "v1.33.1");
    }

    fn node_claim(name: &str, deleting: bool, drifted: bool) -> Value {
        let mut nc = json!({"metadata": {"name": name,
            "labels": {"karpenter.sh/nodepool": POOL}}, "status": {"conditions": []}});
        if deleting {
            nc["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        if drifted {
            nc["status"]["conditions"] = json!([{"type": "Drifted", "status": "True",
                "reason": VERSION_CHANGED}]);
        }
        nc
    }

    fn machine(name: &str, version: &str) -> Value {
        json!({"metadata": {"name": name,
            "labels": {invariants::DEPLOYMENT_NAME: "m4-a"},
            "annotations": {CLAIMED_BY_CLUSTER: CLUSTER_ID}},
            "spec": {"version": version}})
    }

    #[test]
    fn the_watch_waits_for_the_old_machines_and_names_a_budget_overrun() {
        let mut w = DriftWatch::new("m4-a", "v1.33.1");
        let mut s = Snapshot {
            node_claims: vec![node_claim("a", false, true), node_claim("b", true, false)],
            machines: vec![machine("m1", "v1.33.0"), machine("m2", "v1.33.1")],
            ..Snapshot::default()
        };
        let pending = w.observe(&s).unwrap();
        assert!(w.drift_seen);
        assert_eq!(pending.len(), 1);
        assert!(pending[0].detail.contains("m1"), "{}", pending[0].detail);
        s.machines.remove(0);
        assert_eq!(w.observe(&s).unwrap(), vec![]);
        // Two of three deleting: over the budget of one, twice in a row.
        s.node_claims.push(node_claim("c", true, false));
        assert!(w.observe(&s).is_ok());
        assert!(w.observe(&s).is_err());
    }
}
