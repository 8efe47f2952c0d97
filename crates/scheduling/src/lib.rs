//! The pure Karpenter scheduling engine.
//!
//! Responsibility: everything the provisioning and disruption simulations decide, as plain data in
//! and plain data out. No kube client, no tokio, no I/O: facts come in as domain types, decisions
//! go out as values.
//!
//! Modules:
//! - [`labels`]: well-known label keys, aliases, restricted domains and label syntax checks.
//! - [`quantity`]: exact Kubernetes resource quantities.
//! - [`requirements`]: the node-selector requirements algebra Karpenter schedules with.
//! - [`resources`]: resource lists, fit checks and pod request aggregation.
//! - [`taints`]: taints, tolerations and the toleration test.

pub mod labels;
pub mod quantity;
pub mod requirements;
pub mod resources;
pub mod taints;
