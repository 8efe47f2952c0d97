//! End-to-end: the whole controller (`karpenter_capi::operator::Operator`) against the simulated world — simulated
//! Cluster API and kubelets, with fast (not instant) infrastructure — once on `sim` (management
//! and workload clusters in two separate API servers, kube-scheduler-lite) and once on a real
//! kube-apiserver with the real kube-controller-manager and kube-scheduler (`NAME::real`).
//!
//! One binary, a module per subject; tests are named `<module>::<test>::{sim,real}`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod capacity_buffer;
mod disruption;
mod machine_pools;
mod machine_sets;
mod node_overlay;
mod node_repair;
mod provisioning;
mod rollouts;
mod static_pool;
mod support;
