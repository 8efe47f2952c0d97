//! The CapacityBuffer controller against `sim`: a workload that cannot be read for a moment
//! keeps the buffer's virtual pods and status; one that is gone (404) empties the buffer and
//! says so.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::Duration;

use api::CapacityBuffer;
use api::well_known::capacity_buffer::READY_FOR_PROVISIONING;
use controllers::capacitybuffer::{CapacityBufferConfig, CapacityBufferController};
use controllers::events::Events;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodTemplate;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::store::Writer;
use serde_json::json;
use sim::{Sim, SimConfig};
use state::{ClusterState, StateConfig};

async fn create<K>(client: &kube::Client, value: serde_json::Value)
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(value).unwrap();
    Api::<K>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
}

async fn buffer(client: &kube::Client) -> CapacityBuffer {
    Api::<CapacityBuffer>::namespaced(client.clone(), "default")
        .get("warm")
        .await
        .unwrap()
}

fn ready(b: &CapacityBuffer) -> Option<(String, String)> {
    let c = b
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == READY_FOR_PROVISIONING)?;
    Some((format!("{:?}", c.status), c.reason.clone()))
}

#[tokio::test(start_paused = true)]
async fn an_unreadable_workload_keeps_the_buffer_and_a_deleted_one_empties_it() {
    let sim = Sim::new(SimConfig::default());
    let client = kube::Client::new(sim.router(), "default");
    sim::crds::install_karpenter_crds(&client).await.unwrap();
    create::<Deployment>(
        &client,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}),
    )
    .await;
    create::<CapacityBuffer>(
        &client,
        json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "warm", "namespace": "default"},
            "spec": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"},
                "percentage": 50}}),
    )
    .await;
    let state = ClusterState::start(&client, StateConfig::default());
    let controller = CapacityBufferController::new(
        client.clone(),
        Arc::clone(&state),
        Events::new(client.clone(), None),
        CapacityBufferConfig {
            poll: Duration::from_secs(1),
        },
    );
    let templates = Writer::<PodTemplate>::default().as_reader();
    let buffers = || async { vec![Arc::new(buffer(&client).await)] };

    controller.reconcile(&buffers().await, &templates).await;
    assert_eq!(state.buffer_pods().len(), 2, "50 % of 4 replicas");
    let resolved = buffer(&client).await;
    assert_eq!(
        ready(&resolved),
        Some(("True".to_owned(), "Resolved".to_owned()))
    );

    // Reads of the Deployment fail with 500 for a while: nothing changes.
    sim.set_faults(sim::fault::FaultConfig {
        seed: 1,
        rules: vec![sim::fault::FaultRule {
            verbs: vec![sim::fault::Verb::Get],
            resources: vec!["deployments.apps".into()],
            error_rate: 1.0,
            ..sim::fault::FaultRule::default()
        }],
    });
    for _ in 0..3 {
        controller.reconcile(&buffers().await, &templates).await;
        assert_eq!(state.buffer_pods().len(), 2, "a 500 is not an empty buffer");
    }
    assert!(
        sim.faults().counts().errors >= 3,
        "the faults were injected"
    );
    let during = buffer(&client).await;
    assert_eq!(during.status, resolved.status, "the status waits too");

    // The Deployment is gone: the buffer is empty and says why.
    sim.set_faults(sim::fault::FaultConfig::default());
    Api::<Deployment>::namespaced(client.clone(), "default")
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    controller.reconcile(&buffers().await, &templates).await;
    assert!(state.buffer_pods().is_empty());
    assert_eq!(
        ready(&buffer(&client).await),
        Some(("False".to_owned(), "ScalableRefNotFound".to_owned()))
    );
}
