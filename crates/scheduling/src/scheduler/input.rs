//! What the scheduler is given and what it decides, as plain data.
//!
//! Responsibility: the public input types (NodePools with their instance types, the existing
//! cluster, options) and output types (new NodeClaims, bindings to existing nodes, per-pod
//! errors) of [`super::Scheduler`].
//! Inputs/outputs: values only; adapters build the inputs, controllers act on the outputs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::instance_type::{InstanceType, MinValuesPolicy, OfferingMatcher};
use crate::labels::{CAPACITY_TYPE, INSTANCE_TYPE, WellKnownLabels};
use crate::pod::{Labels, Pod};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::taints::Taint;

use crate::topology::PreferencePolicy;

/// A NodePool as the scheduler needs it.
#[derive(Clone, Debug)]
pub struct NodePool {
    /// Name (also the `karpenter.sh/nodepool` label of its nodes).
    pub name: Arc<str>,
    /// Priority: higher first; ties by name descending (upstream's order).
    pub weight: i32,
    /// `spec.template.spec.requirements`.
    pub requirements: Requirements,
    /// `spec.template.metadata.labels` plus the node-class label (the scheduler adds
    /// `karpenter.sh/nodepool` itself).
    pub labels: BTreeMap<Arc<str>, Arc<str>>,
    /// `spec.template.spec.taints` (pods must tolerate them).
    pub taints: Vec<Taint>,
    /// `spec.template.spec.startupTaints` (ignored for scheduling, carried to the NodeClaim).
    pub startup_taints: Vec<Taint>,
    /// `spec.limits`, if any.
    pub limits: Option<Resources>,
    /// What the cloud provider offers this pool.
    pub instance_types: Vec<Arc<InstanceType>>,
}

/// A node that exists (or a NodeClaim launched but not yet registered) and may take pods.
#[derive(Clone, Debug, Default)]
pub struct ExistingNode {
    /// Node name (its hostname domain in topology).
    pub name: Arc<str>,
    /// Node labels (for a NodeClaim not yet registered: the NodeClaim's).
    pub labels: Labels,
    /// Taints that apply to scheduling.
    pub taints: Vec<Taint>,
    /// Allocatable resources.
    pub allocatable: Resources,
    /// Capacity (counted against the NodePool's limits).
    pub capacity: Resources,
    /// Initialized nodes are tried before uninitialized ones.
    pub initialized: bool,
}

/// The cluster as it is: nodes, pods bound to them, DaemonSets, namespaces.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Existing nodes not marked for deletion.
    pub nodes: Vec<ExistingNode>,
    /// Pods bound to nodes (counted by topology, subtracted from node capacity).
    pub pods: Vec<Pod>,
    /// One pod per DaemonSet (its newest pod, or one made from its template).
    pub daemonset_pods: Vec<Pod>,
    /// Namespace name → labels (for namespace selectors of affinity terms).
    pub namespaces: BTreeMap<Arc<str>, Labels>,
    /// Per NodePool: the capacity (with `nodes: 1` each) of its nodes that are not offered for
    /// scheduling — being deleted, or tainted `karpenter.sh/disrupted` — but still count
    /// against its `spec.limits`, as upstream counts every node of a pool until it is gone.
    /// Without it, replacements could exceed the limits while old nodes drain.
    pub limit_usage: BTreeMap<Arc<str>, Resources>,
}

/// How the scheduler treats preferences and minValues.
#[derive(Clone, Debug)]
pub struct Options {
    /// Respect (default) or ignore soft constraints.
    pub preference_policy: PreferencePolicy,
    /// Strict (default) or best-effort minValues.
    pub min_values_policy: MinValuesPolicy,
    /// Labels pods and NodePools may use without instance types defining them.
    pub well_known: WellKnownLabels,
    /// The most instance-type options a planned NodeClaim keeps (cheapest first); upstream: 600.
    pub max_instance_types: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            well_known: WellKnownLabels::default(),
            max_instance_types: 600,
        }
    }
}

/// A NodeClaim the scheduler wants created.
#[derive(Clone, Debug)]
pub struct PlannedNodeClaim {
    /// The NodePool it comes from.
    pub node_pool: Arc<str>,
    /// Final requirements (without the placeholder hostname and the simulation-only
    /// registered/initialized keys); see [`Self::launch_requirements`] for the NodeClaim's.
    pub requirements: Requirements,
    /// Instance-type options, cheapest first.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Summed pod requests plus the smallest daemon overhead among the remaining options.
    pub requests: Resources,
    /// Labels (template labels, the nodepool label).
    pub labels: BTreeMap<Arc<str>, Arc<str>>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// Startup taints.
    pub startup_taints: Vec<Taint>,
    /// UIDs of the pods planned onto it, in placement order.
    pub pods: Vec<Arc<str>>,
    /// Whether minValues had to be lowered (best-effort policy).
    pub min_values_relaxed: bool,
}

impl PlannedNodeClaim {
    /// The requirements to create the NodeClaim with: [`Self::requirements`] narrowed to
    /// `node.kubernetes.io/instance-type In [the options]` (its minValues kept) and
    /// `karpenter.sh/capacity-type In [what the options' available compatible offerings
    /// offer]`.
    pub fn launch_requirements(&self, well_known: &WellKnownLabels) -> Requirements {
        let mut requirements = self.requirements.clone();
        let names: Vec<Arc<str>> = self
            .instance_types
            .iter()
            .map(|it| it.name_arc().clone())
            .collect();
        requirements.add(Requirement::in_values(INSTANCE_TYPE, names));
        let matcher = OfferingMatcher::new(&self.requirements, well_known);
        let capacity_types: BTreeSet<&str> = self
            .instance_types
            .iter()
            .flat_map(|it| matcher.compatible(it))
            .filter(|o| o.available)
            .filter_map(|o| o.capacity_type())
            .collect();
        if !capacity_types.is_empty() {
            requirements.add(Requirement::in_values(CAPACITY_TYPE, capacity_types));
        }
        requirements
    }
}

/// Pods that fit on an existing node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingNodeBinding {
    /// The node.
    pub node: Arc<str>,
    /// UIDs of the pods, in placement order.
    pub pods: Vec<Arc<str>>,
}

/// Why a pod could not be placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodError {
    /// The pod's UID.
    pub uid: Arc<str>,
    /// `namespace/name`.
    pub pod: String,
    /// Human-readable reason (used for FailedScheduling events and `plan`).
    pub message: String,
}

/// The outcome of one solve.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// NodeClaims to create.
    pub new_node_claims: Vec<PlannedNodeClaim>,
    /// Pods that fit on existing nodes, per node (nodes without pods are omitted).
    pub existing_nodes: Vec<ExistingNodeBinding>,
    /// Pods that could not be placed, in queue order.
    pub errors: Vec<PodError>,
}

impl Results {
    /// The number of pods placed on new NodeClaims.
    pub fn pods_on_new_node_claims(&self) -> usize {
        self.new_node_claims.iter().map(|nc| nc.pods.len()).sum()
    }
}
