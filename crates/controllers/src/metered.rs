//! The CloudProvider metrics decorator (upstream's `metrics.Decorate`).
//!
//! Responsibility: [`Metered`] wraps any [`CloudProvider`] for one calling controller and
//! records every call in `karpenter_cloudprovider_duration_seconds{controller, method,
//! provider}` and every error in `karpenter_cloudprovider_errors_total{controller, method,
//! provider, error}` (`error`: [`CloudProviderError::metric_label`]); results pass through
//! unchanged. `launch_changes` (a stream, not a call) and `name` are forwarded unmeasured.
//!
//! Inputs: the provider, the controller's name, the [`Metrics`]. Outputs: the same results.

use std::future::Future;
use std::sync::Arc;

use api::{NodeClaim, NodePool};
use cloudprovider::{CloudProvider, CloudProviderError, Launch, RemovalRoom};
use scheduling::instance_type::InstanceType;
use tokio::time::Instant;

use crate::metrics::{MethodErrorLabels, MethodLabels, Metrics};

/// `P` as seen by one controller, its calls measured.
pub struct Metered<P> {
    inner: Arc<P>,
    controller: &'static str,
    metrics: Arc<Metrics>,
}

impl<P> std::fmt::Debug for Metered<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metered")
            .field("controller", &self.controller)
            .finish_non_exhaustive()
    }
}

impl<P: CloudProvider> Metered<P> {
    /// `inner`, measured as called by `controller` (upstream's names: `provisioner`,
    /// `nodeclaim.lifecycle`, `node.termination`, `disruption`, ...).
    #[must_use]
    pub fn new(inner: Arc<P>, controller: &'static str, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            controller,
            metrics,
        }
    }

    async fn measure<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<T, CloudProviderError>>,
    ) -> Result<T, CloudProviderError> {
        let started = Instant::now();
        let outcome = call.await;
        let provider = self.inner.name();
        self.metrics
            .cloudprovider_duration
            .get_or_create(&MethodLabels {
                controller: self.controller.to_owned(),
                method: method.to_owned(),
                provider: provider.to_owned(),
            })
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = &outcome {
            self.metrics
                .cloudprovider_errors
                .get_or_create(&MethodErrorLabels {
                    controller: self.controller.to_owned(),
                    method: method.to_owned(),
                    provider: provider.to_owned(),
                    error: e.metric_label().to_owned(),
                })
                .inc();
        }
        outcome
    }
}

impl<P: CloudProvider> CloudProvider for Metered<P> {
    async fn create(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.measure("Create", self.inner.create(node_claim)).await
    }

    async fn get_launch(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.measure("GetLaunch", self.inner.get_launch(node_claim))
            .await
    }

    fn launch_changes(&self) -> Option<futures::stream::BoxStream<'static, String>> {
        self.inner.launch_changes()
    }

    async fn get(&self, provider_id: &str) -> Result<Launch, CloudProviderError> {
        self.measure("Get", self.inner.get(provider_id)).await
    }

    async fn list(&self) -> Result<Vec<Launch>, CloudProviderError> {
        self.measure("List", self.inner.list()).await
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        self.measure("Delete", self.inner.delete(node_claim)).await
    }

    async fn get_instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        self.measure("GetInstanceTypes", self.inner.get_instance_types(node_pool))
            .await
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        self.measure("IsDrifted", self.inner.is_drifted(node_claim))
            .await
    }

    async fn removal_room(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<RemovalRoom>, CloudProviderError> {
        self.measure("RemovalRoom", self.inner.removal_room(node_claim))
            .await
    }

    fn repair_policies(&self) -> cloudprovider::RepairPolicies {
        self.inner.repair_policies()
    }

    async fn remediated_elsewhere(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        self.measure(
            "RemediatedElsewhere",
            self.inner.remediated_elsewhere(node_claim),
        )
        .await
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cloudprovider::FakeCloudProvider;

    #[tokio::test]
    async fn calls_and_errors_are_recorded_per_controller_and_method() {
        let metrics = Arc::new(Metrics::new());
        let fake = Arc::new(FakeCloudProvider::default());
        let metered = Metered::new(Arc::clone(&fake), "disruption", Arc::clone(&metrics));
        let nc: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}
        }))
        .unwrap();
        let outcome = metered.get_launch(&nc).await;
        assert_eq!(
            outcome.is_err(),
            fake.get_launch(&nc).await.is_err(),
            "the result passes through"
        );
        let _ = metered.list().await;
        let text = metrics.encode();
        let name = fake.name();
        for series in [
            format!(
                "karpenter_cloudprovider_duration_seconds_count{{controller=\"disruption\",method=\"GetLaunch\",provider=\"{name}\"}} 1"
            ),
            format!(
                "karpenter_cloudprovider_duration_seconds_count{{controller=\"disruption\",method=\"List\",provider=\"{name}\"}} 1"
            ),
        ] {
            assert!(text.contains(&series), "{series} missing in\n{text}");
        }
        // A NodeClaim the fake never launched: NodeClaimNotFound, counted by its label.
        assert!(outcome.unwrap_err().is_not_found());
        assert!(
            text.contains(&format!(
                "karpenter_cloudprovider_errors_total{{controller=\"disruption\",method=\"GetLaunch\",provider=\"{name}\",error=\"NodeClaimNotFoundError\"}} 1"
            )),
            "{text}"
        );
    }
}
