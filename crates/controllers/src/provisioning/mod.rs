//! Provisioning: from pending pods to NodeClaims (spec §3).
//!
//! Responsibility:
//! - [`inputs`]: pure — objects → scheduler inputs → [`inputs::Plan`] (shared with `plan`);
//! - [`batcher`]: the batching window (`BATCH_IDLE_DURATION` / `BATCH_MAX_DURATION`);
//! - [`node_claim`]: pure — a planned NodeClaim → the NodeClaim object;
//! - [`provisioner`]: the singleton loop: window → synced gate → snapshot → solve → create
//!   NodeClaims, nominate, publish events.
//!
//! Inputs: triggers, the cluster state, a CloudProvider. Outputs: NodeClaims, Events, metrics.

pub mod batcher;
pub mod inputs;
pub mod node_claim;
pub mod provisioner;
