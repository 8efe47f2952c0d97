//! Kubernetes objects → scheduler inputs, and scheduler results → a [`Plan`].
//!
//! Responsibility: the single conversion layer between what the API servers hold and what
//! `scheduling::scheduler::Scheduler` consumes, shared by the provisioner and `plan`:
//! - [`pods`]: which pods are pending ([`provisionable`], spec §3.3) and which of them must be
//!   ignored ([`validate_pod`], spec §3.3 item 2);
//! - [`pools`]: NodeClasses + MachineDeployments → instance-type [`clusterapi::Catalogue`]s
//!   ([`catalogues`]) and NodePools → scheduler NodePools ([`node_pools`]);
//! - [`mod@cluster`]: Nodes, NodeClaims, bound pods, DaemonSets, Namespaces → the scheduler's
//!   [`scheduling::scheduler::Cluster`] ([`cluster()`]);
//! - [`leaving`]: the nodes being deleted and their pods that will need a place
//!   ([`deleting_nodes`], [`pods_leaving`]);
//! - [`plan`]: the scheduler's [`scheduling::scheduler::Results`] joined back to names,
//!   MachineDeployments and prices ([`Plan`]).
//!
//! Inputs: typed objects. Outputs: plain values; problems are values (never panics).

pub mod cluster;
pub mod leaving;
pub mod plan;
pub mod pods;
pub mod pools;

pub use cluster::{ClusterObjects, cluster};
pub use leaving::{deleting_nodes, pods_leaving};
pub use plan::{
    Binding, IgnoredNodePool, InstanceTypeOption, Plan, PlanContext, PlannedNodeClaim,
    UnschedulablePod,
};
pub use pods::{IgnoreReason, IgnoredPod, PendingPolicy, is_pending, provisionable, validate_pod};
pub use pools::{
    CatalogueProblem, Catalogues, DroppedNodePool, catalogues, node_class_of, node_pools,
    scheduler_node_pool,
};
