//! The NodeClaim lifecycle controller (spec §4.1–4.5) and the NodeClaim finalizer (§4.8).
//!
//! Responsibility: [`Lifecycle`], a kube-runtime `Controller` over the NodeClaims of our
//! NodeClass group (`karpenter.cluster.x-k8s.io`) in the workload cluster, also driven by Node
//! events. Per NodeClaim: add the `karpenter.sh/termination` finalizer before anything else,
//! then run the phases [`launch`] → [`registration`] → [`initialization`] → [`liveness`] on one
//! in-memory copy and write one metadata and one status patch ([`patch`]); a deleting
//! NodeClaim goes through [`finalize`] (Nodes first, then the instance, then the finalizer).
//! Unlike upstream, Create returns before the providerID exists: a launched NodeClaim polls
//! `CloudProvider::get_launch` until it does.
//!
//! [`garbage_collection`] deletes registered NodeClaims whose instance disappeared (§4.7).
//!
//! Inputs: a workload `kube::Client`, a [`cloudprovider::CloudProvider`], [`LifecycleConfig`].
//! Outputs: NodeClaim and Node writes, Events, metrics (`nodeclaims_disrupted`,
//! `nodes_created`, `nodeclaims_terminated`, termination durations).

mod context;
mod controller;
pub mod error;
pub mod finalize;
pub mod garbage_collection;
pub mod initialization;
pub mod launch;
pub mod liveness;
pub mod patch;
pub mod registration;
mod work;

pub use context::{Clock, LifecycleConfig, backoff_delay};
pub use controller::Lifecycle;
pub use error::Error;
pub use work::{DEPENDENTS, Flow, Work};
