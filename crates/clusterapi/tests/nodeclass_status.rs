//! The ClusterAPINodeClass status controller against the simulated world: Ready and its
//! reasons, status.instanceTypes, Warning Events for excluded MachineDeployments, stable
//! lastTransitionTime.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use api::ClusterAPINodeClass;
use api::common::{Condition, ConditionStatus};
use api::well_known::capi::KARPENTER_MEMBER;
use clusterapi::Scope;
use clusterapi::nodeclass_status::{self, Context, StatusConfig};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use world::{World, WorldConfig};

async fn world() -> World {
    support::world(WorldConfig::default()).await
}

async fn add_md(world: &World, name: &str, cpu: &str, member: bool) {
    support::md(name)
        .cpu(cpu)
        .member(member)
        .create(world)
        .await;
}

async fn nodeclass(world: &World) -> ClusterAPINodeClass {
    Api::<ClusterAPINodeClass>::all(world.workload_client())
        .get("default")
        .await
        .unwrap()
}

fn ready(nc: &ClusterAPINodeClass) -> Option<Condition> {
    nc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .cloned()
}

fn context(world: &World, scope: Scope) -> Context {
    Context::new(
        world.workload_client(),
        world.management_client(),
        StatusConfig {
            scope,
            ..StatusConfig::default()
        },
    )
}

async fn reconcile(world: &World, ctx: &Context) -> ClusterAPINodeClass {
    ctx.reconcile(&nodeclass(world).await).await.unwrap();
    nodeclass(world).await
}

async fn warnings(world: &World) -> Vec<Event> {
    Api::<Event>::namespaced(world.workload_client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("InvalidMachineDeployment")
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn no_matching_machine_deployment_is_not_ready() {
    let world = world().await;
    add_md(&world, "not-a-member", "4", false).await;
    let scope = Scope {
        namespace: Some("default".into()),
        cluster_name: Some("c1".into()),
    };
    let nc = reconcile(&world, &context(&world, scope)).await;
    let ready = ready(&nc).expect("Ready written");
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.reason, "NoMachineDeploymentsSelected");
    assert!(
        ready.message.contains(KARPENTER_MEMBER),
        "{}",
        ready.message
    );
    assert!(
        ready.message.contains("namespace default / cluster c1"),
        "{}",
        ready.message
    );
    assert_eq!(ready.observed_generation, nc.metadata.generation);
    assert_eq!(
        nc.status.unwrap().instance_types.unwrap_or_default(),
        vec![]
    );
}

#[tokio::test(start_paused = true)]
async fn a_valid_member_makes_it_ready_with_instance_types() {
    let world = world().await;
    add_md(&world, "good", "4", true).await;
    let nc = reconcile(&world, &context(&world, Scope::everywhere())).await;
    let ready = ready(&nc).unwrap();
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.reason, "Ready");
    let types = nc.status.unwrap().instance_types.unwrap();
    assert_eq!(types.len(), 1);
    assert_eq!(types[0].name, "good");
    assert_eq!(
        types[0].machine_deployments,
        vec!["default/good".to_owned()]
    );
    assert!(warnings(&world).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_malformed_member_is_excluded_with_one_warning() {
    let world = world().await;
    add_md(&world, "good", "4", true).await;
    add_md(&world, "bad", "four", true).await;
    let ctx = context(&world, Scope::everywhere());
    let nc = reconcile(&world, &ctx).await;
    let ready = ready(&nc).unwrap();
    assert_eq!(ready.status, ConditionStatus::True);
    let names: Vec<String> = nc
        .status
        .unwrap()
        .instance_types
        .unwrap()
        .iter()
        .flat_map(|t| t.machine_deployments.clone())
        .collect();
    assert_eq!(names, vec!["default/good".to_owned()]);
    let events = warnings(&world).await;
    assert_eq!(events.len(), 1);
    let note = events[0].note.clone().unwrap();
    assert!(note.contains("default/bad"), "{note}");
    assert!(
        note.contains("capacity.cluster-autoscaler.kubernetes.io/cpu"),
        "{note}"
    );
    assert_eq!(
        events[0].regarding.as_ref().unwrap().name.as_deref(),
        Some("default")
    );
    // The same problem again: no second Event.
    reconcile(&world, &ctx).await;
    let events = warnings(&world).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].series, None);
}

#[tokio::test(start_paused = true)]
async fn only_invalid_members_is_no_valid_machine_deployments() {
    let world = world().await;
    add_md(&world, "bad", "four", true).await;
    let nc = reconcile(&world, &context(&world, Scope::everywhere())).await;
    let ready = ready(&nc).unwrap();
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.reason, "NoValidMachineDeployments");
    assert!(ready.message.contains("default/bad"), "{}", ready.message);
}

#[tokio::test(start_paused = true)]
async fn an_invalid_selector_is_reported() {
    let world = world().await;
    add_md(&world, "good", "4", true).await;
    let api: Api<ClusterAPINodeClass> = Api::all(world.workload_client());
    let patch = json!({"spec": {"scalableResourceSelector": {"matchExpressions": [
        {"key": "pool", "operator": "In", "values": []}]}}});
    api.patch(
        "default",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    let nc = reconcile(&world, &context(&world, Scope::everywhere())).await;
    let ready = ready(&nc).unwrap();
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.reason, "InvalidSelector");
}

#[tokio::test(start_paused = true)]
async fn last_transition_time_is_stable_without_change() {
    let world = world().await;
    add_md(&world, "good", "4", true).await;
    let ctx = context(&world, Scope::everywhere());
    let first = reconcile(&world, &ctx).await;
    let rv = first.metadata.resource_version.clone();
    let before = ready(&first).unwrap();
    tokio::time::sleep(Duration::from_secs(90)).await;
    let second = reconcile(&world, &ctx).await;
    assert_eq!(ready(&second).unwrap(), before);
    assert_eq!(second.metadata.resource_version, rv, "nothing was written");
}

#[tokio::test(start_paused = true)]
async fn the_controller_follows_machine_deployment_changes() {
    let world = world().await;
    let task = tokio::spawn(nodeclass_status::run(
        world.workload_client(),
        world.management_client(),
        StatusConfig::default(),
    ));
    let mut reason = None;
    for _ in 0..240 {
        reason = ready(&nodeclass(&world).await).map(|c| c.reason);
        if reason.as_deref() == Some("NoMachineDeploymentsSelected") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(reason.as_deref(), Some("NoMachineDeploymentsSelected"));
    add_md(&world, "good", "4", true).await;
    let mut status: Option<Value> = None;
    for _ in 0..240 {
        let nc = nodeclass(&world).await;
        if ready(&nc).is_some_and(|c| c.status == ConditionStatus::True) {
            status = Some(serde_json::to_value(nc.status).unwrap());
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    task.abort();
    let status = status.expect("Ready became True after the MachineDeployment appeared");
    assert_eq!(status["instanceTypes"][0]["name"], json!("good"));
}

fn condition(nc: &ClusterAPINodeClass, type_: &str) -> Option<Condition> {
    nc.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// A selected MachineDeployment that Cluster API would roll out by itself (the default
/// `RollingUpdate`) is named in `RolloutStrategyCompatible` False and one Warning Event, without
/// touching Ready; switching it to `OnDelete` turns the condition True.
#[tokio::test(start_paused = true)]
async fn a_rolling_update_machine_deployment_is_named_in_the_rollout_condition() {
    let world = world().await;
    add_md(&world, "rolling", "4", true).await;
    let ctx = context(&world, Scope::everywhere());
    let nc = reconcile(&world, &ctx).await;
    assert_eq!(ready(&nc).unwrap().status, ConditionStatus::True);
    let rollout = condition(&nc, "RolloutStrategyCompatible").expect("written");
    assert_eq!(rollout.status, ConditionStatus::False);
    assert_eq!(rollout.reason, "RollingUpdate");
    assert!(
        rollout.message.contains("default/rolling")
            && rollout
                .message
                .contains("spec.rollout.strategy.type: OnDelete"),
        "{}",
        rollout.message
    );
    reconcile(&world, &ctx).await;
    let events: Vec<Event> = Api::<Event>::namespaced(world.workload_client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("IncompatibleRolloutStrategy"))
        .collect();
    assert_eq!(events.len(), 1, "one Event, not one per reconcile");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));

    support::patch_md(
        &world,
        "rolling",
        json!({"spec": {"rollout": {"strategy": {"type": "OnDelete"}}}}),
    )
    .await;
    let nc = reconcile(&world, &ctx).await;
    let rollout = condition(&nc, "RolloutStrategyCompatible").unwrap();
    assert_eq!(rollout.status, ConditionStatus::True);
    assert_eq!(rollout.reason, "OnDelete");
    assert!(
        rollout
            .message
            .contains("has spec.rollout.strategy.type OnDelete"),
        "{}",
        rollout.message
    );
    assert_eq!(ready(&nc).unwrap().status, ConditionStatus::True);
    // Speaking v1beta1 (Cluster API ≤ v1.10), the message names v1beta1's field.
    let v1beta1 = Context::new(
        world.workload_client(),
        world.management_client(),
        StatusConfig {
            capi: api::CapiVersion::v1beta1(),
            ..StatusConfig::default()
        },
    );
    let message = condition(
        &reconcile(&world, &v1beta1).await,
        "RolloutStrategyCompatible",
    )
    .unwrap()
    .message;
    assert!(
        message.contains("has spec.strategy.type OnDelete"),
        "{message}"
    );
}

/// A selected MachineDeployment Cluster API reports Failed, or whose scale-up its MachineSet's
/// preflight checks block, is named in `MachineDeploymentsHealthy` False with a Warning Event,
/// without touching Ready; when it recovers the condition turns True.
#[tokio::test(start_paused = true)]
async fn failed_and_blocked_machine_deployments_are_named_in_the_health_condition() {
    // No simulated Cluster API: the statuses below are what it would write.
    let mut config = WorldConfig::default();
    config.capi.enabled = false;
    let world = support::world(config).await;
    add_md(&world, "ok", "4", true).await;
    add_md(&world, "stuck", "8", true).await;
    let ctx = context(&world, Scope::everywhere());
    let nc = reconcile(&world, &ctx).await;
    let health = condition(&nc, "MachineDeploymentsHealthy").expect("written");
    assert_eq!(health.status, ConditionStatus::True);
    assert_eq!(health.reason, "Healthy");

    support::patch_md_status(
        &world,
        "stuck",
        json!({"conditions": [{"type": "ScalingUp", "status": "True", "reason": "ScalingUp",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "message": "Scaling up from 0 to 1 replicas is blocked because:\n* MachineSet stuck-x: \
                        ControlPlaneIsStable: the control plane is upgrading"}]}),
    )
    .await;
    let nc = reconcile(&world, &ctx).await;
    let health = condition(&nc, "MachineDeploymentsHealthy").unwrap();
    assert_eq!(health.status, ConditionStatus::False);
    assert_eq!(health.reason, "ScaleUpBlocked");
    assert!(
        health.message.contains("default/stuck: scale-up blocked:")
            && health.message.contains("ControlPlaneIsStable"),
        "{}",
        health.message
    );
    assert_eq!(ready(&nc).unwrap().status, ConditionStatus::True);

    support::patch_md_status(&world, "ok", json!({"phase": "Failed"})).await;
    let nc = reconcile(&world, &ctx).await;
    let health = condition(&nc, "MachineDeploymentsHealthy").unwrap();
    assert_eq!(health.reason, "Failed");
    assert!(
        health.message.starts_with(
            "MachineDeployment default/ok: Cluster API reports it Failed; MachineDeployment default/stuck"
        ),
        "{}",
        health.message
    );
    let events: Vec<Event> = Api::<Event>::namespaced(world.workload_client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("UnhealthyMachineDeployment"))
        .collect();
    // Published once per new message, each its own Event saying it (a series would have kept
    // the first message).
    let mut notes: Vec<&str> = events.iter().filter_map(|e| e.note.as_deref()).collect();
    notes.sort_unstable();
    assert_eq!(notes.len(), 2, "{events:?}");
    assert!(
        notes[0].starts_with(
            "MachineDeployment default/ok: Cluster API reports it Failed; MachineDeployment default/stuck"
        ) && notes[1].starts_with("MachineDeployment default/stuck: scale-up blocked"),
        "{notes:?}"
    );
    assert!(events.iter().all(|e| e.series.is_none()), "{events:?}");

    support::patch_md_status(&world, "ok", json!({"phase": "Running"})).await;
    support::patch_md_status(&world, "stuck", json!({"conditions": []})).await;
    let nc = reconcile(&world, &ctx).await;
    assert_eq!(
        condition(&nc, "MachineDeploymentsHealthy").unwrap().status,
        ConditionStatus::True
    );
}
