//! Provisioning: from pending pods to NodeClaims.
//!
//! Responsibility: everything the provisioner decides. For now the pure [`inputs`] module tree
//! (objects → scheduler inputs → plan); the batching loop and NodeClaim creation come later and
//! will call it. Inputs: API objects. Outputs: scheduler inputs and [`inputs::Plan`]s.

pub mod inputs;
