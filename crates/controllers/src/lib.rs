//! The controllers of karpenter-capi.
//!
//! Responsibility: the reconcilers that drive NodePools, NodeClaims and MachineDeployments. For
//! now only the pure part of provisioning exists:
//! - [`provisioning`]: turn Kubernetes objects into the scheduler's inputs and its results back
//!   into a named [`provisioning::inputs::Plan`] — the code path both the provisioner and the
//!   offline `plan` command use.
//!
//! Inputs: typed API objects (`api`, k8s-openapi). Outputs: `scheduling` values and plans. No
//! kube client, no tokio, no I/O.

pub mod provisioning;
