//! `karpenter-capi doctor`: checks a real installation and says what blocks provisioning.
//!
//! Responsibility: given clients for the workload and the management cluster, read
//! ([`gather`]) and judge ([`checks`]): the CRDs `run` needs are served (and ours are not
//! older than this binary); every permission `run` uses is allowed to the caller, asked of
//! each server with a SelfSubjectAccessReview ([`permissions`]); for each
//! ClusterAPINodeClass, the MachineDeployments it selects and, for each, the instance type,
//! shape, price, zone, sizes, labels and taints it yields and where each came from, or why it
//! is left out; MachineDeployments that are also cluster-autoscaler node groups; NodePools
//! that can never launch a node. The [`Report`] renders as text or JSON and exits 1 when a
//! finding blocks provisioning.
//! Inputs: two clients, [`Options`]. Outputs: a [`Report`].

pub mod checks;
pub mod gather;
pub mod permissions;
pub mod report;

pub use gather::Options;
pub use report::{Finding, Report, Severity};

/// Examines the installation the two clients reach.
pub async fn doctor(
    workload: &kube::Client,
    management: &kube::Client,
    options: &Options,
) -> Report {
    let facts = gather::gather(workload, management, options).await;
    checks::examine(&facts)
}
