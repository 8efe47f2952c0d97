//! The scheduling simulation every consolidation decision is made with (spec §5.8).
//!
//! Responsibility: "what if these nodes were gone?" through the same scheduling engine the
//! provisioner uses. [`World::new`] converts one snapshot once (the scheduler's cluster, the
//! NodePools with their instance types, the pending pods); [`World::simulate`] removes the
//! candidates' nodes (and the pods bound to them) from a copy of the cluster and schedules the
//! pending pods (and the pods of nodes already leaving: tainted by a command in flight, or
//! being deleted) plus the candidates' pods that can move — not those with an active
//! do-not-disrupt annotation or covered by a PDB that never allows a disruption. The answer
//! says which moved pods, or pods of leaving nodes, found no place (pending pods that fit
//! nowhere do not count: they did not fit before either; the leaving ones do, so a second
//! command can never take the room the first one's pods need), which moved pods would land
//! on an uninitialized node, and the new NodeClaims needed.
//!
//! A consolidation's simulation ([`World::simulate_consolidation`]) also keeps the moved pods
//! off nodes still inside their NodePool's `consolidateAfter` window (pending pods and the
//! pods of leaving nodes may still land there), as upstream's `IsConsolidationSimulation`.
//!
//! CapacityBuffer virtual pods ([`World::with_buffer_pods`]) are pending pods here too.
//!
//! The world also keeps every managed node's price and disruption cost from the same snapshot
//! (the denominators of Balanced scoring, [`super::balanced`]).
//!
//! Inputs: a snapshot's objects, instance types per NodePool, candidates. Outputs:
//! [`Simulation`]. Pure (the solve is CPU-bound; callers run it on a blocking thread).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::NodePool;
use k8s_openapi::jiff::Timestamp;
use scheduling::instance_type::{InstanceType, MinValuesPolicy};
use scheduling::labels::{NODE_POOL, WellKnownLabels};
use scheduling::scheduler::{Cluster, Options, PodError, PreferencePolicy, Results, Scheduler};
use scheduling::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

use super::balanced::{NodeCost, node_costs};
use super::candidates::Candidate;
use super::pdb::Pdbs;
use crate::provisioning::inputs::{self, ClusterObjects};
use crate::termination::do_not_disrupt::do_not_disrupt;

/// The last pod event this process saw on a node (by name).
pub type LastPodEvent<'a> = dyn Fn(&str) -> Option<Timestamp> + Sync + 'a;

/// What a simulation is built from.
#[derive(Clone, Copy)]
pub struct Objects<'a> {
    /// The cluster's objects.
    pub cluster: ClusterObjects<'a>,
    /// NodePools.
    pub node_pools: &'a [NodePool],
    /// PDBs.
    pub pdbs: &'a [k8s_openapi::api::policy::v1::PodDisruptionBudget],
    /// Instance types per NodePool name.
    pub instance_types: &'a BTreeMap<String, Vec<Arc<InstanceType>>>,
    /// Now.
    pub now: Timestamp,
    /// The last pod event this process saw on a node, newer than `status.lastPodEventTime`
    /// may be (`None`: the status alone).
    pub last_pod_event: Option<&'a LastPodEvent<'a>>,
}

/// The taint a consolidation simulation puts on nodes still inside their `consolidateAfter`
/// window (and the toleration pending pods get): only moved pods stay off them. Never written
/// to a cluster.
const SETTLING: &str = "karpenter-capi.internal/consolidate-after-window";

impl std::fmt::Debug for Objects<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects")
            .field("cluster", &self.cluster)
            .field("node_pools", &self.node_pools.len())
            .field("pdbs", &self.pdbs.len())
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// One snapshot, converted once for many simulations.
#[derive(Debug, Clone)]
pub struct World {
    cluster: Cluster,
    pools: Vec<scheduling::scheduler::NodePool>,
    pending: Vec<scheduling::pod::Pod>,
    options: Options,
    /// Pods of candidates that cannot move (by UID): do-not-disrupt or a fully blocking PDB.
    immovable: BTreeSet<String>,
    /// Pods of nodes already leaving (by UID): like moved pods, they must find a place, so a
    /// decision never takes the room they need (upstream's `AllNonPendingPodsScheduled`).
    leaving: BTreeSet<Arc<str>>,
    /// Nodes still inside their NodePool's `consolidateAfter` window (a pod came or went
    /// lately): no destination for the pods a consolidation moves (spec §5.8).
    settling: BTreeSet<String>,
    /// Every node of a NodePool with its price and disruption cost (Balanced scoring).
    costs: Vec<NodeCost>,
    /// Warnings from the conversion (objects skipped).
    pub warnings: Vec<String>,
    /// Simulations run so far (for benchmarks).
    count: Arc<std::sync::atomic::AtomicUsize>,
    /// Whether spot nodes may be replaced by spot nodes (gate `SpotToSpotConsolidation`).
    spot_to_spot: bool,
}

/// The outcome of one simulation.
#[derive(Debug, Clone, Default)]
pub struct Simulation {
    /// The engine's results.
    pub results: Results,
    /// Moved pods that found no place.
    pub unscheduled: Vec<PodError>,
    /// Moved pods the engine put on an uninitialized node (`pod → node`).
    pub on_uninitialized: Vec<(String, String)>,
}

impl Simulation {
    /// Every pod of the candidates found a place, none on an uninitialized node.
    #[must_use]
    pub fn all_moved(&self) -> bool {
        self.unscheduled.is_empty() && self.on_uninitialized.is_empty()
    }

    /// Why not [`Self::all_moved`], in upstream's words (at most 5 pods named).
    #[must_use]
    pub fn why_not(&self) -> String {
        if let Some((pod, node)) = self.on_uninitialized.first() {
            return format!("pod {pod:?} would schedule against uninitialized node/{node}");
        }
        let named: Vec<String> = self
            .unscheduled
            .iter()
            .take(5)
            .map(|e| format!("{:?}: {}", e.pod, e.message))
            .collect();
        format!("not all pods would schedule, {}", named.join("; "))
    }
}

impl World {
    /// Converts the snapshot. Pools without instance types, invalid or static, are left out.
    #[must_use]
    pub fn new(objects: &Objects<'_>, well_known: &WellKnownLabels) -> Self {
        let (mut cluster, mut warnings) = inputs::cluster(&objects.cluster);
        let mut pools = Vec::new();
        for pool in objects.node_pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            // A static pool never grows for pods: nothing may move onto a new node of it.
            if pool.spec.is_static() {
                continue;
            }
            let Some(its) = objects.instance_types.get(&name) else {
                continue;
            };
            match inputs::scheduler_node_pool(pool, its.clone(), well_known) {
                Ok(p) => pools.push(p),
                Err(e) => warnings.push(format!("NodePool {name} skipped: {e}")),
            }
        }
        let mut pending: Vec<scheduling::pod::Pod> = objects
            .cluster
            .pods
            .iter()
            .filter(|p| inputs::provisionable(p))
            .filter_map(|p| inputs::validate_pod(p, well_known).ok())
            .collect();
        // The pods of nodes already leaving (a command in flight tainted them, or they are
        // being deleted) are about to need a place too: they go first, like pending pods, so
        // two commands never count on the same free room (upstream schedules the pods of
        // deleting nodes in every simulation).
        let leaving: BTreeSet<&str> = objects
            .cluster
            .nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some() || super::writes::is_tainted(n))
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let mut leaving_pods = BTreeSet::new();
        if !leaving.is_empty() {
            let on_leaving = |node: Option<&str>| node.is_some_and(|n| leaving.contains(n));
            for pod in objects.cluster.pods.iter().filter(|p| {
                on_leaving(p.spec.as_ref().and_then(|s| s.node_name.as_deref()))
                    && super::candidates::is_reschedulable(p)
            }) {
                if let Ok(mut p) = scheduling::k8s::pod(pod) {
                    p.node_name = None;
                    p.terminal_or_terminating = false;
                    leaving_pods.insert(p.uid.clone());
                    pending.push(p);
                }
            }
            cluster.pods.retain(|p| !on_leaving(p.node_name.as_deref()));
        }
        let pdbs = Pdbs::new(objects.pdbs);
        let immovable = objects
            .cluster
            .pods
            .iter()
            .filter(|p| do_not_disrupt(p).is_active(p, objects.now) || pdbs.fully_blocks(p))
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let settling = settling(objects);
        Self {
            cluster,
            pools,
            pending,
            options: Options {
                preference_policy: PreferencePolicy::Respect,
                min_values_policy: MinValuesPolicy::Strict,
                well_known: well_known.clone(),
                ..Options::default()
            },
            immovable,
            leaving: leaving_pods,
            settling,
            costs: node_costs(
                objects.cluster.nodes,
                objects.cluster.pods,
                objects.instance_types,
            ),
            warnings,
            count: Arc::default(),
            spot_to_spot: false,
        }
    }

    /// Lets consolidation replace spot nodes by spot nodes (gate `SpotToSpotConsolidation`).
    #[must_use]
    pub fn with_spot_to_spot(mut self, on: bool) -> Self {
        self.spot_to_spot = on;
        self
    }

    /// Adds CapacityBuffer virtual pods to the pending pods (after every real pod in the
    /// engine's queue): a decision keeps room for them or plans it, but one that fits nowhere
    /// blocks nothing, as for any pending pod.
    #[must_use]
    pub fn with_buffer_pods(mut self, pods: &[k8s_openapi::api::core::v1::Pod]) -> Self {
        for pod in pods {
            if let Ok(mut p) = inputs::validate_pod(pod, &self.options.well_known) {
                p.placeholder = true;
                self.pending.push(p);
            }
        }
        self
    }

    /// Whether spot-to-spot consolidation is on.
    #[must_use]
    pub fn spot_to_spot(&self) -> bool {
        self.spot_to_spot
    }

    /// The engine's options (the provisioner's policies).
    #[must_use]
    pub fn with_policies(
        mut self,
        preference: PreferencePolicy,
        min_values: MinValuesPolicy,
    ) -> Self {
        self.options.preference_policy = preference;
        self.options.min_values_policy = min_values;
        self
    }

    /// Whether minValues may be relaxed (`MinValuesPolicy::BestEffort`).
    #[must_use]
    pub fn min_values_best_effort(&self) -> bool {
        self.options.min_values_policy == MinValuesPolicy::BestEffort
    }

    /// The well-known labels.
    #[must_use]
    pub fn well_known(&self) -> &WellKnownLabels {
        &self.options.well_known
    }

    /// Schedules everything as if `candidates` were gone (drift, explanations).
    #[must_use]
    pub fn simulate(&self, candidates: &[&Candidate]) -> Simulation {
        self.run(candidates, false)
    }

    /// [`Self::simulate`] for a consolidation: the candidates' pods do not move onto nodes
    /// still inside their `consolidateAfter` window (pending pods and the pods of leaving nodes
    /// may), so a node that just emptied is left to emptiness instead of being filled again.
    #[must_use]
    pub fn simulate_consolidation(&self, candidates: &[&Candidate]) -> Simulation {
        self.run(candidates, true)
    }

    fn run(&self, candidates: &[&Candidate], consolidation: bool) -> Simulation {
        self.count
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let gone: BTreeSet<&str> = candidates.iter().map(|c| c.node.as_str()).collect();
        let mut cluster = self.cluster.clone();
        cluster.nodes.retain(|n| !gone.contains(&*n.name));
        cluster
            .pods
            .retain(|p| p.node_name.as_deref().is_none_or(|n| !gone.contains(n)));
        let mut pods = self.pending.clone();
        if consolidation && !self.settling.is_empty() {
            let taint = Taint::new(SETTLING, "", TaintEffect::NoSchedule);
            let mut any = false;
            for n in &mut cluster.nodes {
                if self.settling.contains(&*n.name) {
                    n.taints.push(taint.clone());
                    any = true;
                }
            }
            if any {
                for p in &mut pods {
                    p.tolerations.push(Toleration {
                        key: SETTLING.to_owned(),
                        operator: TolerationOperator::Exists,
                        value: String::new(),
                        effect: Some(TaintEffect::NoSchedule),
                        toleration_seconds: None,
                    });
                }
            }
        }
        let mut moved: BTreeSet<Arc<str>> = BTreeSet::new();
        let mut unscheduled = Vec::new();
        for c in candidates {
            for pod in &c.reschedulable {
                if pod
                    .metadata
                    .uid
                    .as_ref()
                    .is_some_and(|u| self.immovable.contains(u))
                {
                    continue;
                }
                match scheduling::k8s::pod(pod) {
                    Ok(mut p) => {
                        p.node_name = None;
                        p.terminal_or_terminating = false;
                        moved.insert(p.uid.clone());
                        pods.push(p);
                    }
                    Err(e) => unscheduled.push(PodError {
                        uid: Arc::from(pod.metadata.uid.as_deref().unwrap_or_default()),
                        pod: format!(
                            "{}/{}",
                            pod.metadata.namespace.as_deref().unwrap_or_default(),
                            pod.metadata.name.as_deref().unwrap_or_default()
                        ),
                        message: e.to_string(),
                    }),
                }
            }
        }
        let uninitialized: BTreeSet<&str> = cluster
            .nodes
            .iter()
            .filter(|n| !n.initialized)
            .map(|n| &*n.name)
            .collect();
        let results = if self.pools.is_empty() && pods.is_empty() {
            Results::default()
        } else {
            Scheduler::new(&self.pools, &cluster, &pods, self.options.clone()).solve(&pods)
        };
        unscheduled.extend(
            results
                .errors
                .iter()
                .filter(|e| moved.contains(&e.uid) || self.leaving.contains(&e.uid))
                .cloned(),
        );
        let names: BTreeMap<&str, String> = pods.iter().map(|p| (&*p.uid, p.key())).collect();
        let on_uninitialized = results
            .existing_nodes
            .iter()
            .filter(|b| uninitialized.contains(&*b.node))
            .flat_map(|b| {
                b.pods
                    .iter()
                    .filter(|u| moved.contains(*u))
                    .map(|u| {
                        (
                            names.get(&**u).cloned().unwrap_or_default(),
                            b.node.to_string(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        Simulation {
            results,
            unscheduled,
            on_uninitialized,
        }
    }

    /// How many simulations this world (and its clones) ran.
    #[must_use]
    pub fn simulations(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Every node of a NodePool in the snapshot, with its price and disruption cost.
    #[must_use]
    pub fn node_costs(&self) -> &[NodeCost] {
        &self.costs
    }

    /// The NodePools the world schedules with.
    #[must_use]
    pub fn pools(&self) -> &[scheduling::scheduler::NodePool] {
        &self.pools
    }
}

/// The nodes of `objects` whose NodeClaim is initialized but quiet for less than its
/// NodePool's `consolidateAfter` (reference: the last pod event seen, `status.lastPodEventTime`
/// or initialization, whichever is latest).
fn settling(objects: &Objects<'_>) -> BTreeSet<String> {
    objects
        .cluster
        .node_claims
        .iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_none())
        .filter_map(|nc| {
            let node = nc.status.as_ref()?.node_name.clone()?;
            let pool_name = nc.metadata.labels.as_ref()?.get(NODE_POOL)?;
            let pool = objects
                .node_pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(pool_name))?;
            let last = objects.last_pod_event.and_then(|f| f(&node));
            matches!(
                super::consolidatable::evaluate(nc, pool, last, objects.now),
                super::consolidatable::Consolidation::NotYet(_)
            )
            .then_some(node)
        })
        .collect()
}
