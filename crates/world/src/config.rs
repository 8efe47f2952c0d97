//! Configuration of the simulated world: which controllers run, their delays, and the failure
//! knobs.
//!
//! Responsibility: plain settings with realistic-but-fast defaults, and the annotations that
//! override them per MachineDeployment or Machine.
//! Inputs: none. Outputs: [`WorldConfig`] and its parts.

use std::time::Duration;

use sim::SimConfig;

use super::node_template::NodeOptions;
use sim::crds::CapiServing;

/// Annotations (on a Machine, or on its MachineDeployment) that steer the simulated
/// infrastructure of that Machine. The Machine's own annotation wins. [`PREFLIGHT_HOLD`] goes
/// on a MachineSet, or on its MachineDeployment (the MachineSet's own wins).
///
/// [`PREFLIGHT_HOLD`]: crate::config::annotations::PREFLIGHT_HOLD
pub mod annotations {
    /// `NoProviderID` (the instance never appears) or `Failed` (the Machine goes `Failed`
    /// with a failureReason and failureMessage).
    pub const FAILURE: &str = "sim.karpenter-capi.dev/failure";
    /// How long after creation the providerID appears (`90s`, `5m`, …).
    pub const PROVIDER_ID_DELAY: &str = "sim.karpenter-capi.dev/provider-id-delay";
    /// How long a deleting Machine takes to go (and take its Node along).
    pub const DELETION_DELAY: &str = "sim.karpenter-capi.dev/deletion-delay";
    /// [`FAILURE`] value: never provisioned.
    pub const NO_PROVIDER_ID: &str = "NoProviderID";
    /// [`FAILURE`] value: provisioning failed.
    pub const FAILED: &str = "Failed";
    /// On a Node: `NotReady` makes its kubelet stop posting status — `Ready=Unknown`, the
    /// `node.kubernetes.io/unreachable` taints (NoSchedule and NoExecute, so the taint manager
    /// evicts pods that do not tolerate it), no pod starts there. Remove it to heal the node.
    pub const NODE_FAILURE: &str = "sim.karpenter-capi.dev/node-failure";
    /// [`NODE_FAILURE`] value.
    pub const NOT_READY: &str = "NotReady";
    /// On a MachineSet or its MachineDeployment: a MachineSet preflight check fails with this
    /// message (e.g. `KubeadmControlPlane default/cp is upgrading ("ControlPlaneIsStable"
    /// preflight check failed)`), so the MachineSet creates no Machine while it is set — as
    /// Cluster API holds scale-ups — and says so in its conditions. Scale-downs go on. Remove
    /// it (or make it empty) to let the scale-up proceed.
    pub const PREFLIGHT_HOLD: &str = "sim.karpenter-capi.dev/preflight-hold";
}

/// The simulated Cluster API controllers and infrastructure (management cluster, creating
/// Nodes in the workload cluster).
#[derive(Debug, Clone)]
pub struct CapiConfig {
    /// Run them.
    pub enabled: bool,
    /// Simulate Cluster API's core controllers (MachineDeployment, MachineSet, Machine) too.
    /// Off when the management cluster runs the real Cluster API core manager: the world then
    /// acts only as its infrastructure and control plane provider
    /// ([`super::capi::infrastructure`]), and the delays count from the `SimMachine`.
    pub core: bool,
    /// Machine created → `Provisioning` (bootstrap data ready).
    pub bootstrap_delay: Duration,
    /// Machine created → `spec.providerID` set, `Provisioned`.
    pub provider_id_delay: Duration,
    /// providerID set → Node registered in the workload cluster, `status.nodeRef`, `Running`.
    pub node_join_delay: Duration,
    /// Machine deleting → its Node deleted and the Machine gone.
    pub deletion_delay: Duration,
    /// Probability that a Machine never gets a providerID.
    pub no_provider_id_rate: f64,
    /// Probability that a Machine goes `Failed`.
    pub failed_rate: f64,
    /// Seed of those draws (made per Machine name).
    pub seed: u64,
    /// How Nodes are made.
    pub node: NodeOptions,
    /// Full pass at least this often.
    pub resync: Duration,
    /// How the world serves the Cluster API kinds when it installs their CRDs: `None` (the
    /// default) as CAPI v1.14 does as far as the server allows
    /// ([`sim::crds::install_capi_crds`]: with conversion on sim, v1beta2 alone on a real
    /// kube-apiserver); `Some(CapiServing::V1beta1Only)` for a CAPI ≤ v1.10 management cluster.
    /// CRDs already there are left as they are. The controllers talk whichever version is
    /// served ([`super::capi::client`]).
    pub serving: Option<CapiServing>,
}

impl Default for CapiConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            core: true,
            bootstrap_delay: Duration::from_secs(1),
            provider_id_delay: Duration::from_secs(5),
            node_join_delay: Duration::from_secs(2),
            deletion_delay: Duration::from_secs(1),
            no_provider_id_rate: 0.0,
            failed_rate: 0.0,
            seed: 0,
            node: NodeOptions::default(),
            resync: Duration::from_secs(30),
            serving: None,
        }
    }
}

/// kube-scheduler-lite (workload cluster).
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Run it.
    pub enabled: bool,
    /// Pods with this `spec.schedulerName` are scheduled.
    pub scheduler_name: String,
    /// Unschedulable pods are retried at least this often (and on every pod or node change).
    pub retry_interval: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            scheduler_name: "default-scheduler".into(),
            retry_interval: Duration::from_secs(5),
        }
    }
}

/// kubelet-lite, with the node-lifecycle and pod garbage collection bits (workload cluster).
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Run it.
    pub enabled: bool,
    /// Node seen → Ready (and the `not-ready` taint removed).
    pub node_ready_delay: Duration,
    /// Pod bound to a Ready node → Running and Ready.
    pub pod_start_delay: Duration,
    /// Pod deleting (graceful) → removed (the kubelet's final delete).
    pub pod_termination_delay: Duration,
    /// Evict pods that do not tolerate a `NoExecute` taint of their node (taint manager).
    pub evict_untolerated_no_execute: bool,
    /// Force-delete pods bound to nodes that no longer exist (pod GC).
    pub pod_gc: bool,
    /// Full pass at least this often.
    pub resync: Duration,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            node_ready_delay: Duration::from_secs(2),
            pod_start_delay: Duration::from_secs(1),
            pod_termination_delay: Duration::from_secs(1),
            evict_untolerated_no_execute: true,
            pod_gc: true,
            resync: Duration::from_secs(30),
        }
    }
}

/// Deployment → ReplicaSet → Pod and DaemonSet controllers (workload cluster).
#[derive(Debug, Clone)]
pub struct WorkloadsConfig {
    /// Run the Deployment and ReplicaSet controllers.
    pub deployments: bool,
    /// Run the DaemonSet controller.
    pub daemonsets: bool,
    /// Full pass at least this often.
    pub resync: Duration,
}

impl Default for WorkloadsConfig {
    fn default() -> Self {
        Self {
            deployments: true,
            daemonsets: true,
            resync: Duration::from_secs(30),
        }
    }
}

/// The whole world.
#[derive(Debug, Clone, Default)]
pub struct WorldConfig {
    /// Cluster API.
    pub capi: CapiConfig,
    /// kube-scheduler-lite.
    pub scheduler: SchedulerConfig,
    /// kubelet-lite.
    pub kubelet: KubeletConfig,
    /// Workload controllers.
    pub workloads: WorkloadsConfig,
    /// The management API server's settings (when the world starts its own servers).
    pub management: SimConfig,
    /// The workload API server's settings (when the world starts its own servers).
    pub workload: SimConfig,
    /// Least time between the starts of two passes of one world controller. Zero (the
    /// default) passes again as soon as something changes; a few tens of milliseconds fold
    /// bursts of events into one pass (every pass lists its objects afresh), which keeps the
    /// simulated world cheap at thousands of pods.
    pub min_pass_interval: Duration,
}
