//! The pure Karpenter scheduling engine.
//!
//! Responsibility: everything the provisioning and disruption simulations decide, as plain data in
//! and plain data out. No kube client, no tokio, no I/O: facts come in as domain types, decisions
//! go out as values.
//!
//! Modules:
//! - [`fixtures`]: fake instance types, pod builders and benchmark workloads for tests.
//! - [`instance_type`]: instance types, offerings, price helpers and instance-type filtering.
//! - `k8s` (feature `k8s`): the adapter from Kubernetes API objects to these types.
//! - [`labels`]: well-known label keys, aliases, restricted domains and label syntax checks.
//! - [`pod`]: the pod model, label selectors and the node requirements a pod implies.
//! - [`quantity`]: exact Kubernetes resource quantities.
//! - [`requirements`]: the node-selector requirements algebra Karpenter schedules with.
//! - [`resources`]: resource lists, fit checks and pod request aggregation.
//! - [`scheduler`]: the provisioning scheduler (queue, placement, relaxation, results).
//! - [`taints`]: taints, tolerations and the toleration test.
//! - [`topology`]: topology spread, pod affinity and anti-affinity domain tracking.

pub mod fixtures;
pub mod instance_type;
#[cfg(feature = "k8s")]
pub mod k8s;
pub mod labels;
pub mod pod;
pub mod quantity;
pub mod requirements;
pub mod resources;
pub mod scheduler;
pub mod taints;
pub mod topology;
