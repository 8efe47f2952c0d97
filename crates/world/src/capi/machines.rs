//! The Machine controller and the simulated infrastructure behind it.
//!
//! Responsibility: walk each Machine (management cluster, `v1beta2`) through CAPI's phases
//! with configurable delays counted from when this controller first saw it — `Pending`, then
//! `Provisioning` (bootstrap ready: `status.initialization.bootstrapDataSecretCreated`), then
//! `Provisioned` with `spec.providerID = sim:///<zone>/<name>` (infrastructure ready:
//! `initialization.infrastructureProvisioned`), then `Running` once its Node was registered in
//! the workload cluster ([`super::super::node_template`]) and `status.nodeRef: {name}` set —
//! and keep its conditions ([`super::phases`]: v1beta2 `NodeReady`/`NodeHealthy`/`Ready`/
//! `Available` and the deprecated v1beta1 ones) following the Node's readiness. A deleting
//! Machine turns `Deleting` (condition `Deleting` true); its Node is drained first as CAPI
//! drains it ([`super::drain`]: cordoned, every pod but DaemonSet and mirror pods evicted
//! through the Eviction API, PodDisruptionBudgets respected, until
//! `spec.deletion.nodeDrainTimeoutSeconds` if set); after the deletion delay its Node is
//! deleted and its finalizer removed. Nodes with a `sim:///` providerID whose Machine no longer
//! exists are deleted too (the instance is gone). Failure knobs (config rates drawn per Machine
//! name from the seed, or the [`annotations`] on the Machine or its MachineDeployment): never
//! get a providerID; go `Failed` with `status.deprecated.v1beta1.failureReason`/
//! `failureMessage`; slow provisioning or deletion.
//! A pass reconciles its Machines concurrently ([`o::concurrently`]).
//! Inputs: Machines, MachineDeployments (management, through [`Capi`]), Nodes (workload).
//! Outputs: Machine spec/status/finalizer patches, Node creates and deletes.
//! Approximations: phase times are kept in memory, so a restarted controller starts the
//! delays over; no pre-drain hooks, no wait for volume detach.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use api::well_known::capi as keys;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::WorldError;
use crate::config::{CapiConfig, annotations};
use crate::driver::{PassResult, Reconciler};
use crate::node_template;
use crate::objects::{
    self as o, code, condition_true, ignore_not_found, parse_duration, text, world_code,
};
use sim::convert::capi::CapiKind;
use sim::object;

use super::client::Capi;
use super::phases::{Facts, Failure, conditions, deleting, failure, knob, v1beta1_conditions};
use super::sets::MACHINE_FINALIZER;

const MACHINE: CapiKind = CapiKind::Machine;

/// The status of a Machine in `phase` for these facts.
fn status(m: &Value, phase: &str, facts: Facts) -> Value {
    json!({
        "phase": phase,
        "initialization": {"bootstrapDataSecretCreated": facts.bootstrap,
            "infrastructureProvisioned": facts.infra},
        "conditions": conditions(m, facts),
        "deprecated": {"v1beta1": {"conditions": v1beta1_conditions(m, facts)}},
    })
}

/// The Machine controller.
pub struct Machines {
    capi: Arc<Capi>,
    workload: kube::Client,
    config: CapiConfig,
    seen: Clock,
    provisioned: Clock,
    deleting: Clock,
    orphans: HashMap<String, Instant>,
}

/// When each Machine (by uid) reached a phase. Behind a lock so that a pass reconciles its
/// Machines concurrently; the lock is never held across an await.
#[derive(Debug, Default)]
pub(super) struct Clock(std::sync::Mutex<HashMap<String, Instant>>);

impl Clock {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// When `uid` was first stamped (now, if this is the first time).
    pub(super) fn first(&self, uid: &str, now: Instant) -> Instant {
        *self.map().entry(uid.to_owned()).or_insert(now)
    }

    pub(super) fn set(&self, uid: &str, at: Instant) {
        self.map().insert(uid.to_owned(), at);
    }

    /// Forget the Machines not in `live`.
    pub(super) fn retain(&self, live: &std::collections::HashSet<&str>) {
        self.map().retain(|uid, _| live.contains(uid.as_str()));
    }
}

impl std::fmt::Debug for Machines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machines").finish_non_exhaustive()
    }
}

fn until(at: Instant, now: Instant) -> Option<Duration> {
    Some(at.saturating_duration_since(now))
}

impl Machines {
    /// Over a management cluster's Cluster API and a workload cluster.
    pub fn new(capi: Arc<Capi>, workload: kube::Client, config: CapiConfig) -> Self {
        Self {
            capi,
            workload,
            config,
            seen: Clock::default(),
            provisioned: Clock::default(),
            deleting: Clock::default(),
            orphans: HashMap::new(),
        }
    }

    fn delay(&self, m: &Value, md: Option<&Value>, key: &str, default: Duration) -> Duration {
        knob(m, md, key)
            .and_then(|d| parse_duration(&d))
            .unwrap_or(default)
    }

    async fn set_finalizers(
        &self,
        m: &Value,
        finalizers: Vec<String>,
    ) -> Result<Option<Duration>, WorldError> {
        let patch = o::finalizers_patch(m, &finalizers);
        match self.capi.patch(MACHINE, m, &patch).await {
            Ok(()) => Ok(None),
            Err(e) if world_code(&e) == Some(409) => Ok(Some(Duration::from_millis(100))),
            Err(e) if world_code(&e) == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn finish_deletion(
        &self,
        m: &Value,
        md: Option<&Value>,
        nodes: &[Value],
        now: Instant,
    ) -> Result<Option<Duration>, WorldError> {
        let since = self.deleting.first(object::uid(m), now);
        if !object::finalizers(m).iter().any(|f| f == MACHINE_FINALIZER) {
            return Ok(None);
        }
        let status = json!({"phase": "Deleting", "conditions": deleting(m)});
        self.capi
            .patch_status_if_changed(MACHINE, m, status)
            .await?;
        let provider_id = text(m, ".spec.providerID");
        let node = text(m, ".status.nodeRef.name")
            .map(str::to_owned)
            .or_else(|| {
                nodes
                    .iter()
                    .find(|n| provider_id.is_some() && text(n, ".spec.providerID") == provider_id)
                    .map(|n| object::name(n).to_owned())
            });
        if let Some(node) = &node
            && let Some(wait) = super::drain::drain(&self.workload, node, m, since, now).await?
        {
            return Ok(Some(wait));
        }
        let due = since
            + self.delay(
                m,
                md,
                annotations::DELETION_DELAY,
                self.config.deletion_delay,
            );
        if now < due {
            return Ok(until(due, now));
        }
        if let Some(node) = node {
            let nodes: Api<Node> = Api::all(self.workload.clone());
            ignore_not_found(nodes.delete(&node, &DeleteParams::default()).await)?;
        }
        let Some(fresh) = self
            .capi
            .get(MACHINE, object::namespace(m), object::name(m))
            .await?
        else {
            return Ok(None);
        };
        let rest = object::finalizers(&fresh)
            .into_iter()
            .filter(|f| f != MACHINE_FINALIZER)
            .collect();
        self.set_finalizers(&fresh, rest).await
    }

    async fn reconcile(
        &self,
        m: &Value,
        md: Option<&Value>,
        nodes: &[Value],
        now: Instant,
    ) -> Result<Option<Duration>, WorldError> {
        if object::is_deleting(m) {
            return self.finish_deletion(m, md, nodes, now).await;
        }
        let finalizers = object::finalizers(m);
        if !finalizers.iter().any(|f| f == MACHINE_FINALIZER) {
            let mut with = finalizers;
            with.push(MACHINE_FINALIZER.to_owned());
            return Ok(self.set_finalizers(m, with).await?.or(Some(Duration::ZERO)));
        }
        let uid = object::uid(m).to_owned();
        let name = object::name(m);
        let t0 = self.seen.first(&uid, now);
        let boot_at = t0 + self.config.bootstrap_delay;
        let bootstrapped = now >= boot_at;
        let pid_at = t0
            + self.delay(
                m,
                md,
                annotations::PROVIDER_ID_DELAY,
                self.config.provider_id_delay,
            );
        let fails = failure(m, md, &self.config);
        let Some(provider_id) = text(m, ".spec.providerID") else {
            if fails == Some(Failure::Failed) && bootstrapped {
                let facts = Facts {
                    bootstrap: true,
                    infra: false,
                    node: None,
                };
                let mut status = status(m, "Failed", facts);
                object::set_path(
                    &mut status,
                    ".deprecated.v1beta1.failureReason",
                    json!("CreateError"),
                );
                object::set_path(
                    &mut status,
                    ".deprecated.v1beta1.failureMessage",
                    json!("simulated infrastructure failure: the instance could not be created"),
                );
                self.capi
                    .patch_status_if_changed(MACHINE, m, status)
                    .await?;
                return Ok(None);
            }
            if fails.is_some() || now < pid_at {
                let facts = Facts {
                    bootstrap: bootstrapped,
                    infra: false,
                    node: None,
                };
                let phase = if bootstrapped {
                    "Provisioning"
                } else {
                    "Pending"
                };
                self.capi
                    .patch_status_if_changed(MACHINE, m, status(m, phase, facts))
                    .await?;
                return Ok(match (bootstrapped, fails) {
                    (false, _) => until(boot_at, now),
                    (true, None) => until(pid_at, now),
                    (true, Some(_)) => None,
                });
            }
            let zone = node_template::zone(m, md);
            let pid = node_template::provider_id(zone.as_deref(), name);
            let patch = json!({"spec": {"providerID": pid}});
            self.capi.patch(MACHINE, m, &patch).await?;
            self.provisioned.set(&uid, now);
            let facts = Facts {
                bootstrap: true,
                infra: true,
                node: None,
            };
            self.capi
                .patch_status_if_changed(MACHINE, m, status(m, "Provisioned", facts))
                .await?;
            return Ok(Some(self.config.node_join_delay));
        };
        let provisioned = self.provisioned.first(&uid, now);
        let node = nodes.iter().find(|n| {
            text(n, ".spec.providerID") == Some(provider_id)
                || Some(object::name(n)) == text(m, ".status.nodeRef.name")
        });
        let node = match (node, m.pointer("/status/nodeRef")) {
            (Some(n), _) => Some(n.clone()),
            (None, Some(_)) => None,
            (None, None) => {
                let join_at = provisioned + self.config.node_join_delay;
                if now < join_at {
                    return Ok(until(join_at, now));
                }
                Some(self.register_node(m, md, provider_id).await?)
            }
        };
        let facts = Facts {
            bootstrap: true,
            infra: true,
            node: Some(node.as_ref().is_some_and(|n| condition_true(n, "Ready"))),
        };
        let mut status = status(m, "Running", facts);
        if let Some(n) = &node {
            object::set_path(&mut status, ".nodeRef", json!({"name": object::name(n)}));
        }
        self.capi
            .patch_status_if_changed(MACHINE, m, status)
            .await?;
        Ok(None)
    }

    /// Create the Machine's Node (or find the one already there).
    async fn register_node(
        &self,
        m: &Value,
        md: Option<&Value>,
        provider_id: &str,
    ) -> Result<Value, WorldError> {
        let nodes: Api<Node> = Api::all(self.workload.clone());
        let node: Node =
            serde_json::from_value(node_template::node(m, md, provider_id, &self.config.node))?;
        let created = match nodes.create(&PostParams::default(), &node).await {
            Ok(n) => n,
            Err(e) if code(&e) == Some(409) => nodes.get(object::name(m)).await?,
            Err(e) => return Err(e.into()),
        };
        Ok(serde_json::to_value(created)?)
    }

    /// Delete Nodes of simulated instances whose Machine is gone.
    async fn collect_orphans(
        &mut self,
        machines: &[Value],
        nodes: &[Value],
        now: Instant,
    ) -> Result<Option<Duration>, WorldError> {
        let mut next = None;
        let mut orphans = HashMap::new();
        for n in nodes {
            let sim = text(n, ".spec.providerID").is_some_and(|p| p.starts_with("sim:///"));
            let ann = o::annotations(n);
            let (Some(machine), Some(ns)) = (
                ann.get(keys::NODE_MACHINE),
                ann.get(keys::NODE_CLUSTER_NAMESPACE),
            ) else {
                continue;
            };
            let exists = machines
                .iter()
                .any(|m| object::name(m) == machine && object::namespace(m) == ns);
            if !sim || exists || object::is_deleting(n) {
                continue;
            }
            let name = object::name(n).to_owned();
            let since = self.orphans.get(&name).copied().unwrap_or(now);
            orphans.insert(name.clone(), since);
            let due = since + self.config.deletion_delay;
            if now >= due {
                let api: Api<Node> = Api::all(self.workload.clone());
                ignore_not_found(api.delete(&name, &DeleteParams::default()).await)?;
            } else {
                let wait = due.saturating_duration_since(now);
                next = Some(next.map_or(wait, |n: Duration| n.min(wait)));
            }
        }
        self.orphans = orphans;
        Ok(next)
    }
}

impl Reconciler for Machines {
    fn name(&self) -> &'static str {
        "capi-machines"
    }

    async fn pass(&mut self) -> PassResult {
        let now = Instant::now();
        let machines = self.capi.list(MACHINE).await?;
        let mds = self.capi.list(CapiKind::MachineDeployment).await?;
        let mut sets = self.capi.list(CapiKind::MachineSet).await?;
        // A MachinePool Machine's shape is its pool's (found, like a set's, by its controller).
        sets.extend(self.capi.list(CapiKind::MachinePool).await?);
        let nodes = crate::objects::list_values::<Node>(&self.workload).await?;
        let live: std::collections::HashSet<&str> = machines.iter().map(object::uid).collect();
        for clock in [&self.seen, &self.provisioned, &self.deleting] {
            clock.retain(&live);
        }
        let mut next: Option<Duration> = None;
        let mut first_error = None;
        let (this, machines_ref, mds_ref, sets_ref, nodes_ref) =
            (&*self, &machines, &mds, &sets, &nodes);
        let results = o::concurrently(0..machines.len(), |i| async move {
            let Some(m) = machines_ref.get(i) else {
                return Ok(None);
            };
            let md = o::group_of(m, mds_ref, sets_ref);
            this.reconcile(m, md, nodes_ref, now).await
        })
        .await;
        for result in results {
            match result {
                Ok(Some(d)) => next = Some(next.map_or(d, |n| n.min(d))),
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(d) = self.collect_orphans(&machines, &nodes, now).await? {
            next = Some(next.map_or(d, |n| n.min(d)));
        }
        first_error.map_or(Ok(next), Err)
    }
}
