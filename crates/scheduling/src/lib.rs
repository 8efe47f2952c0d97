//! The pure Karpenter scheduling engine (no kube client, no tokio, no I/O).
//!
//! Its modules arrive with the scheduling-engine issue.
