//! RBAC on a real kube-apiserver (issue 11 item 8): a provider whose ServiceAccount may not
//! list or watch Machines names the cause (the API server's `forbidden`, from `caches_synced`
//! and from `create`) instead of hanging, raises no replica while it cannot see Machines, and
//! works as soon as the rule is granted, without a restart.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use api::well_known::capi::DEPLOYMENT_NAME;
use cloudprovider::{CloudProvider, CloudProviderError};
use clusterapi::{ClusterApiProvider, ProviderConfig};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::{machines, md, node_claim, replicas, wait_for};
use world::{Backend, World, WorldConfig};

const ROLE: &str = "karpenter-capi-test";

/// What the provider needs, except (unless `machines_listable`) list and watch of Machines.
fn rules(machines_listable: bool) -> Value {
    let machine_verbs = if machines_listable {
        json!(["get", "list", "watch", "patch", "update", "delete"])
    } else {
        json!(["get", "patch", "update", "delete"])
    };
    json!([
        {"apiGroups": ["cluster.x-k8s.io"],
         "resources": ["machinedeployments", "machinedeployments/scale", "machinesets"],
         "verbs": ["*"]},
        {"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines"], "verbs": machine_verbs},
        {"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": ["*"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["karpenter.sh", "karpenter.cluster.x-k8s.io"], "resources": ["*"],
         "verbs": ["*"]},
        // The workload cluster's identity: the UID of namespace kube-system.
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
    ])
}

/// A ServiceAccount bound to [`ROLE`] with [`rules`]`(false)`, and a client using its token.
async fn restricted_client(world: &World) -> kube::Client {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": ROLE}, "rules": rules(false),
    }))
    .unwrap();
    Api::<ClusterRole>::all(world.management_client())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let real = world.real().expect("a real API server");
    let token = real.service_account_token("karpenter", ROLE).await.unwrap();
    real.client_with_token(&token).await.unwrap()
}

fn forbidden_machine_cache(err: &CloudProviderError) -> bool {
    matches!(err, CloudProviderError::CacheNotSynced { cache, .. } if cache == "Machine")
        && err.to_string().to_lowercase().contains("forbidden")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_a_machine_watch_forbidden_by_rbac_is_named_and_nothing_is_raised_until_granted() {
    let world = support::world_on(Backend::Real, WorldConfig::default()).await;
    md("md").create(&world).await;
    let client = restricted_client(&world).await;
    let p = ClusterApiProvider::new(
        client.clone(),
        client,
        ProviderConfig {
            cache_sync_timeout: Duration::from_secs(5),
            claim_timeout: Duration::from_secs(60),
            ..ProviderConfig::default()
        },
    );
    let nc = node_claim(&world, "nc", json!([])).await;

    // What `/readyz` of the leader reports, and what a create meets: the cause, not a hang.
    let err = tokio::time::timeout(Duration::from_secs(60), p.caches_synced())
        .await
        .expect("caches_synced hung")
        .unwrap_err();
    assert!(forbidden_machine_cache(&err), "{err:?}");
    let err = tokio::time::timeout(Duration::from_secs(60), p.create(&nc))
        .await
        .expect("create hung on the Machine cache")
        .unwrap_err();
    assert!(forbidden_machine_cache(&err), "{err:?}");
    assert_eq!(replicas(&world, "md").await, 0, "nothing raised blind");

    // Granted: the watch's next retry (backoff at most 30 s) lists, and the same provider
    // launches.
    let patch = json!({"rules": rules(true)});
    Api::<ClusterRole>::all(world.management_client())
        .patch(ROLE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(
        "the Machine cache to list",
        Duration::from_secs(90),
        || async { p.caches_synced().await.ok() },
    )
    .await;
    let launch = p.create(&nc).await.unwrap();
    assert_eq!(replicas(&world, "md").await, 1);
    let ours = machines(&world, "md").await;
    assert_eq!(ours.len(), 1);
    assert_eq!(
        ours[0].metadata.name.as_deref(),
        Some(launch.machine.name.as_str())
    );
    assert_eq!(
        ours[0].metadata.labels.as_ref().unwrap()[DEPLOYMENT_NAME],
        "md"
    );
}
