//! The CloudProvider contract of karpenter-capi: what Karpenter core asks of an infrastructure
//! provider, shaped so that **launching never blocks on the providerID**.
//!
//! Responsibility:
//! - [`CloudProvider`]: the trait. [`CloudProvider::create`] returns a [`Launch`] as soon as
//!   capacity is requested and an instance (for Cluster API: a Machine) is bound to the
//!   NodeClaim; the providerID is often not known yet. Core learns it later through
//!   [`CloudProvider::get_launch`] (by NodeClaim) or [`CloudProvider::get`] (by providerID),
//!   seconds or many minutes later, without holding a Create call open.
//! - [`CloudProviderError`]: the typed errors core reacts to (§2.2 of the core spec), each with
//!   a low-cardinality [`CloudProviderError::metric_label`].
//! - [`convert`]: NodeClaim requirements and requests → scheduling values (shared by providers).
//! - [`fake`]: [`FakeCloudProvider`], a recording fake for core tests.
//! - [`repair`]: node repair policies (the `NodeRepair` gate) and their setting.
//! - [`overlay`]: NodeOverlays — validation, evaluation, the store and the [`overlay::Overlaid`]
//!   provider wrapper.
//!
//! **Async design.** The trait uses return-position `impl Future + Send` (Rust 2024 native
//! async in traits; implementors simply write `async fn`). It is therefore *not* object safe:
//! core is generic over `P: CloudProvider` (a single provider per binary, so monomorphisation
//! costs nothing), and the `Send` bound lets core spawn provider calls on a multi-threaded
//! runtime. Should a `dyn` provider ever be needed, a boxing adapter can wrap any `P`.
//!
//! Inputs: `api` NodeClaims and NodePools. Outputs: [`Launch`]es and scheduling instance types.

pub mod convert;
pub mod error;
pub mod fake;
pub mod overlay;
pub mod repair;
pub mod types;

use std::future::Future;
use std::sync::Arc;

use api::{NodeClaim, NodePool};
use scheduling::instance_type::InstanceType;

pub use error::CloudProviderError;
pub use fake::{Call, FakeCloudProvider, Method};
pub use repair::{RepairPolicies, RepairPolicy};
pub use types::{Launch, ObjectRef, RemovalRoom};

/// What Karpenter core needs from an infrastructure provider.
///
/// Every method is idempotent with respect to the API objects it reads: core retries freely.
pub trait CloudProvider: Send + Sync {
    /// Requests capacity for `node_claim` and binds one instance to it; returns without waiting
    /// for the providerID ([`Launch::provider_id`] is usually `None`).
    ///
    /// Calling it again for a NodeClaim that is already bound returns the same instance
    /// (restart safety) and requests no further capacity.
    ///
    /// # Errors
    /// [`CloudProviderError::InsufficientCapacity`] (core deletes the NodeClaim),
    /// [`CloudProviderError::NodeClassNotReady`], [`CloudProviderError::Create`],
    /// [`CloudProviderError::Transient`] (core retries with backoff).
    fn create(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<Launch, CloudProviderError>> + Send;

    /// The launch bound to `node_claim`, with its providerID once the instance has one. Core polls
    /// this (cheaply: providers answer from a cache) until `provider_id` is set.
    ///
    /// # Errors
    /// [`CloudProviderError::NodeClaimNotFound`] when no instance is bound to it (any more).
    fn get_launch(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<Launch, CloudProviderError>> + Send;

    /// Names of NodeClaims whose launch may have changed (for instance, their instance got its
    /// providerID, or is gone), for a provider that watches its instances: core reconciles
    /// them at once and polls [`CloudProvider::get_launch`] only as a safety net. `None` (the
    /// default): core polls. Called once by each controller that listens (the lifecycle and
    /// the Node termination controller); every call is a stream of its own.
    fn launch_changes(&self) -> Option<futures::stream::BoxStream<'static, String>> {
        None
    }

    /// The instance with this providerID (compared after normalisation, see
    /// [`types::normalize_provider_id`]).
    ///
    /// # Errors
    /// [`CloudProviderError::NodeClaimNotFound`] when no instance has it.
    fn get(
        &self,
        provider_id: &str,
    ) -> impl Future<Output = Result<Launch, CloudProviderError>> + Send;

    /// Every instance this Karpenter manages (bound or not yet bound to a providerID). One
    /// malformed instance never fails the whole list.
    ///
    /// # Errors
    /// Only when the listing itself is impossible ([`CloudProviderError::Transient`]).
    fn list(&self) -> impl Future<Output = Result<Vec<Launch>, CloudProviderError>> + Send;

    /// Starts (or continues) terminating the instance of `node_claim`. Idempotent: repeated
    /// calls while termination is in progress return `Ok(())` and change nothing.
    ///
    /// # Errors
    /// [`CloudProviderError::NodeClaimNotFound`] once the instance is gone.
    fn delete(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<(), CloudProviderError>> + Send;

    /// Every instance type `node_pool` may use, including those without available offerings.
    ///
    /// # Errors
    /// [`CloudProviderError::NodeClassNotReady`] when its NodeClass is missing or unusable,
    /// [`CloudProviderError::Transient`] otherwise.
    fn get_instance_types(
        &self,
        node_pool: &NodePool,
    ) -> impl Future<Output = Result<Vec<Arc<InstanceType>>, CloudProviderError>> + Send;

    /// The provider's own drift reason for `node_claim`, `None` when not drifted.
    ///
    /// # Errors
    /// [`CloudProviderError::NodeClaimNotFound`] (core treats it as not drifted) or transient.
    fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<Option<String>, CloudProviderError>> + Send;

    /// The group `node_claim`'s instance belongs to and how many of its instances may still
    /// go without a replacement (voluntary disruption removes no more: removing an instance at
    /// a group's minimum size only makes the infrastructure create another). `None` (the
    /// default): no such bound.
    ///
    /// # Errors
    /// When the bound exists but cannot be read (a malformed minimum, a cache not synced):
    /// core then does not remove the instance.
    fn removal_room(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<Option<RemovalRoom>, CloudProviderError>> + Send {
        let _ = node_claim;
        std::future::ready(Ok(None))
    }

    /// What the provider repairs (gate `NodeRepair`): Node conditions held too long, and a
    /// Node deleted under a live instance. Empty (the default): no repair.
    fn repair_policies(&self) -> RepairPolicies {
        RepairPolicies::default()
    }

    /// Another controller that remediates `node_claim`'s instance itself (for Cluster API: the
    /// MachineHealthCheck whose targets include its Machine), described for an Event; node
    /// repair then leaves it to that controller. `None` (the default): nothing else does.
    ///
    /// # Errors
    /// When that cannot be told (a list that failed): core then does not repair the node.
    fn remediated_elsewhere(
        &self,
        node_claim: &NodeClaim,
    ) -> impl Future<Output = Result<Option<String>, CloudProviderError>> + Send {
        let _ = node_claim;
        std::future::ready(Ok(None))
    }

    /// The provider's name, used as a metric label.
    fn name(&self) -> &'static str;
}
