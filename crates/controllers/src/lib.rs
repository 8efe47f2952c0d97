//! The controllers of karpenter-capi (spec-karpenter-core §3–4).
//!
//! Responsibility:
//! - [`provisioning`]: pending pods → NodeClaims. The pure [`provisioning::inputs`] (objects →
//!   scheduler inputs → plan, shared with the offline `plan` command) and the batching loop;
//! - [`nodeclaim`]: the NodeClaim lifecycle (launch → registration → initialization →
//!   liveness) and the NodeClaim finalizer;
//! - [`termination`]: the Node finalizer: taint, drain through the Eviction API, instance
//!   termination;
//! - [`nodepool`]: NodePool status (resources, readiness, registration health) and hash;
//! - [`nodeoverlay`]: NodeOverlay evaluation (the overlay store) and status;
//! - [`health`]: node repair (gate `NodeRepair`): replacing nodes that stay unhealthy;
//! - [`capacitybuffer`]: CapacityBuffers (gate `CapacityBuffer`) as virtual pods, and their
//!   status;
//! - shared plumbing: [`clock`] (wall time that follows tokio time), [`conditions`] (upstream's condition library), [`events`] (deduplicated
//!   Kubernetes Events), [`metrics`] (upstream metric names), [`liveness`] (the tasks
//!   `/healthz` watches), [`metered`] (the CloudProvider metrics decorator), [`http`] (the health and metrics server).
//!
//! Inputs: a workload `kube::Client`, a [`cloudprovider::CloudProvider`], the cluster
//! [`state`]. Outputs: API writes, Events, metrics.

pub mod capacitybuffer;
pub mod clock;
pub mod conditions;
pub mod disruption;
pub mod events;
pub mod health;
pub mod http;
pub mod leader;
pub mod liveness;
pub mod metered;
pub mod metrics;
pub mod nodeclaim;
pub mod nodeoverlay;
pub mod nodepool;
pub mod provisioning;
pub mod static_capacity;
pub mod termination;
