//! The Cluster API provider of karpenter-capi.
//!
//! Responsibility: turn Cluster API MachineDeployments and stand-alone MachineSets (node
//! groups, read alike: [`selection::stand_alone`]) in the management cluster and a
//! ClusterAPINodeClass (in the workload cluster) into what Karpenter schedules with, and launch and
//! terminate nodes. The pure parts (no client, no async):
//! - [`scale_up`]: whether Cluster API reports a MachineDeployment's scale-up blocked (its
//!   MachineSets' preflight checks, a missing template);
//! - [`selection`]: which MachineDeployments a NodeClass may use (member label AND selector,
//!   namespace and cluster scoping, paused detection);
//! - [`annotations`]: typed, panic-free parsers for the cluster-autoscaler scale-from-zero
//!   annotations, min/max size and price;
//! - [`instance_types`]: MachineDeployments (+ their infrastructure templates) → a [`Catalogue`]
//!   of instance types with offerings, each offering remembering its MachineDeployment, plus
//!   the MachineDeployments excluded for bad input.
//!
//! The client side:
//! - [`provider`]: the client side, [`ClusterApiProvider`], the `cloudprovider::CloudProvider`
//!   over a management and a workload cluster (replicas and the ownership record of the
//!   replicas we raised written together by compare-and-set, compare-and-set Machine claims
//!   naming the workload cluster, a reflector-backed Machine cache with a providerID index);
//! - [`discovery`]: which Cluster API group and version the management cluster is spoken to
//!   in (`v1beta2` or `v1beta1`, from discovery or `CAPI_GROUP` / `CAPI_VERSION`);
//! - [`templates`]: the infrastructure machine templates, one watch per kind;
//! - [`nodeclass_status`]: the controller writing ClusterAPINodeClass `status` (Ready,
//!   instanceTypes) and Warning Events for excluded MachineDeployments;
//! - [`gc`]: periodic removal, through the provider's delete path, of what is provably ours and
//!   unused: orphaned Machines (a NodeClaim of this workload cluster gone), surplus Machines
//!   (created for replicas we raised, unclaimed past a grace period), replicas we raised whose
//!   Machines never came, and our interrupted removals.
//!
//! Inputs: `api` objects and JSON values. Outputs: `scheduling` instance types and typed
//! problems. Nothing here panics on user input: bad input is a value the caller reports.

pub mod annotations;
pub mod discovery;
pub mod drift;
pub mod gc;
pub mod instance_types;
pub mod nodeclass_status;
pub mod provider;
pub mod scale_up;
pub mod selection;
pub mod templates;
mod watch_errors;

#[cfg(test)]
mod testing;

pub use annotations::{AnnotationError, AnnotationErrorKind, MachineDeploymentAnnotations};
pub use instance_types::{
    Catalogue, CatalogueEntry, InvalidMachineDeployment, MachineDeploymentInput,
    MachineDeploymentRef, NameSource, NodeClassError, OfferingOrigin, PriceSource, Unavailable,
    build_catalogue,
};
pub use provider::{ClusterApiProvider, ProviderConfig};
pub use selection::{Scope, Selector, SelectorError, is_member, is_paused, select};
