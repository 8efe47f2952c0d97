//! [`Overlaid`]: a CloudProvider whose instance types carry the NodeOverlays.
//!
//! Responsibility: forward every call to the wrapped provider and apply the
//! [`OverlayStore`] to what `get_instance_types` returns, so the provisioner, consolidation
//! and static pools all see overlaid prices and capacities. A NodePool the store has not
//! evaluated yet is a transient error: the caller skips the pool and tries again, as
//! upstream's "awaiting nodeoverlay evaluation". The NodeOverlay controller queries the
//! wrapped provider, never this one. A provider that picks offerings itself at launch (Cluster
//! API's cheapest offering) is given the same store.
//! Without a store ([`Overlaid::disabled`], the gate off) every call is passed through.
//! Inputs: a provider and the store. Outputs: the same contract.

use std::sync::Arc;

use api::{NodeClaim, NodePool};
use scheduling::instance_type::InstanceType;

use super::store::OverlayStore;
use crate::{CloudProvider, CloudProviderError, Launch, RemovalRoom};

/// A provider with NodeOverlays applied to its instance types.
#[derive(Debug)]
pub struct Overlaid<P> {
    inner: Arc<P>,
    store: Option<Arc<OverlayStore>>,
}

impl<P> Overlaid<P> {
    /// Wraps `inner`; `store` is the one the NodeOverlay controller writes.
    pub fn new(inner: Arc<P>, store: Arc<OverlayStore>) -> Self {
        Self {
            inner,
            store: Some(store),
        }
    }

    /// Wraps `inner` without overlays (the gate is off): every call is passed through.
    pub fn disabled(inner: Arc<P>) -> Self {
        Self { inner, store: None }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &Arc<P> {
        &self.inner
    }

    /// The store, when overlays are on.
    pub fn store(&self) -> Option<&Arc<OverlayStore>> {
        self.store.as_ref()
    }
}

impl<P: CloudProvider> CloudProvider for Overlaid<P> {
    async fn create(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.inner.create(node_claim).await
    }

    async fn get_launch(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.inner.get_launch(node_claim).await
    }

    fn launch_changes(&self) -> Option<futures::stream::BoxStream<'static, String>> {
        self.inner.launch_changes()
    }

    async fn get(&self, provider_id: &str) -> Result<Launch, CloudProviderError> {
        self.inner.get(provider_id).await
    }

    async fn list(&self) -> Result<Vec<Launch>, CloudProviderError> {
        self.inner.list().await
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        self.inner.delete(node_claim).await
    }

    async fn get_instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let its = self.inner.get_instance_types(node_pool).await?;
        let Some(store) = &self.store else {
            return Ok(its);
        };
        let name = node_pool.metadata.name.as_deref().unwrap_or_default();
        store
            .apply(name, its)
            .map_err(|e| CloudProviderError::Transient(e.to_string()))
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        self.inner.is_drifted(node_claim).await
    }

    async fn removal_room(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<RemovalRoom>, CloudProviderError> {
        self.inner.removal_room(node_claim).await
    }

    fn repair_policies(&self) -> crate::RepairPolicies {
        self.inner.repair_policies()
    }

    async fn remediated_elsewhere(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        self.inner.remediated_elsewhere(node_claim).await
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }
}
