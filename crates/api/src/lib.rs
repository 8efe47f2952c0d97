//! The karpenter-capi API surface.
//!
//! Responsibility: the types every other crate shares, compatible with the manifests users
//! already have for upstream Karpenter and its Cluster API provider:
//! - [`nodepool`]: `karpenter.sh/v1` NodePool;
//! - [`nodeclaim`]: `karpenter.sh/v1` NodeClaim;
//! - [`nodeclass`]: `karpenter.cluster.x-k8s.io/v1alpha1` ClusterAPINodeClass;
//! - [`nodeoverlay`]: `karpenter.sh/v1alpha1` NodeOverlay (feature gate `NodeOverlay`);
//! - [`capacitybuffer`]: `autoscaling.x-k8s.io/v1beta1` CapacityBuffer (gate `CapacityBuffer`);
//! - [`capi`]: read-only views of the Cluster API kinds we read, in `v1beta2` or `v1beta1`;
//! - [`common`]: shared building blocks (taints, requirements, durations, conditions);
//! - [`well_known`]: every label / annotation / taint / finalizer / condition name;
//! - [`crd`]: CRD generation and rendering;
//! - [`schema`]: the schema vocabulary the CRDs share.
//!
//! No client and no I/O.

pub mod capacitybuffer;
pub mod capi;
pub mod common;
pub mod crd;
pub mod go_duration;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodeoverlay;
pub mod nodepool;
pub mod schema;
pub mod well_known;

pub use capacitybuffer::{CapacityBuffer, CapacityBufferSpec, CapacityBufferStatus};
pub use capi::{CapiVersion, GroupKind, Machine, MachineDeployment, MachinePool, MachineSet};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
pub use nodeclass::{ClusterAPINodeClass, ClusterAPINodeClassSpec, ClusterAPINodeClassStatus};
pub use nodeoverlay::{NodeOverlay, NodeOverlaySpec, NodeOverlayStatus};
pub use nodepool::{NodePool, NodePoolSpec, NodePoolStatus};
