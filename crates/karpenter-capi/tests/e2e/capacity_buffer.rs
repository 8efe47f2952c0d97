//! CapacityBuffers end to end (gate `CapacityBuffer`).

use api::CapacityBuffer;
use api::common::{Condition, ConditionStatus};
use karpenter_capi::operator::OperatorConfig;
use karpenter_capi::scenario;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use std::time::Duration;
use world::{Backend, World};

use super::support::*;

/// The disruptive operator with CapacityBuffers on, polled every 200 ms.
fn buffering_operator() -> OperatorConfig {
    let mut config = disruptive_operator();
    config.capacity_buffer = Some(controllers::capacitybuffer::CapacityBufferConfig {
        poll: Duration::from_millis(200),
    });
    config
}

fn pod_template(name: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "template": {"metadata": {"labels": {"buffer": name}},
            "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "512Mi"}}}]}}})
}

fn buffer(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

async fn get_buffer(world: &World, name: &str) -> CapacityBuffer {
    Api::<CapacityBuffer>::namespaced(world.workload_client(), "default")
        .get(name)
        .await
        .unwrap()
}

fn condition(b: &CapacityBuffer, type_: &str) -> Option<Condition> {
    b.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// Waits until the buffer's condition `type_` has `reason`; returns the buffer.
async fn reason(world: &World, name: &str, type_: &str, reason: &str) -> CapacityBuffer {
    wait_for(
        &format!("{name}: {type_} {reason}"),
        Duration::from_secs(90),
        || async {
            let b = get_buffer(world, name).await;
            condition(&b, type_)
                .is_some_and(|c| c.reason == reason)
                .then_some(b)
        },
    )
    .await
}

/// Waits for an Event with `reason` regarding the object named `name`, its note containing
/// `note`. Events are posted after the status they explain, so a test that has just seen the
/// status must wait for them too.
async fn event(world: &World, reason: &str, name: &str, note: &str) {
    wait_for(
        &format!("Event {reason} regarding {name} with {note:?}"),
        Duration::from_secs(60),
        || async {
            events(world)
                .await
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                        && e.note.as_deref().is_some_and(|n| n.contains(note))
                })
                .then_some(())
        },
    )
    .await;
}

/// A buffer of one 2-CPU chunk makes a warm node before any pod asks for it, and emptiness
/// leaves that node alone (an `Unconsolidatable` "has buffer pods" Event says why) although
/// the NodePool consolidates at once. A burst pod then starts on the warm node at once — no
/// launch — and the buffer gets a new warm node for the room the burst took. Once the buffer
/// is deleted, the warm node nothing runs on is removed as empty; the one the burst uses stays.
async fn a_buffer_keeps_a_warm_node_that_a_burst_starts_on(backend: Backend) {
    let world = setup_consolidating(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    scenario::apply(
        &world.workload_client(),
        &[
            pod_template("warm", "2"),
            buffer(
                "warm",
                json!({"podTemplateRef": {"name": "warm"}, "replicas": 1}),
            ),
        ],
    )
    .await
    .unwrap();
    let _operator = start_with(&world, buffering_operator());

    let b = reason(&world, "warm", "Provisioning", "FitsExistingCapacity").await;
    let status = b.status.clone().unwrap();
    assert_eq!(status.replicas, Some(1));
    assert_eq!(status.pod_template_ref.unwrap().name, "warm");
    assert_eq!(
        status.provisioning_strategy.as_deref(),
        Some("buffer.x-k8s.io/active-capacity")
    );
    let ready = condition(&b, "ReadyForProvisioning").unwrap();
    assert_eq!(
        (ready.status, ready.reason.as_str()),
        (ConditionStatus::True, "Resolved")
    );
    let provisioning = condition(&b, "Provisioning").unwrap();
    assert_eq!(provisioning.status, ConditionStatus::True);
    assert_eq!(
        provisioning.message,
        "All 1 virtual pods fit on existing capacity"
    );
    node_count(&world, 1, Duration::from_secs(60)).await;
    let warm = nodes(&world).await[0].name_any();
    assert!(
        pods(&world).await.is_empty(),
        "virtual pods are never created"
    );
    event(&world, "Unconsolidatable", &warm, "has buffer pods").await;
    hold(&world, &warm, "a warm node is not empty").await;

    // The burst: kube-scheduler places it on the warm node without waiting for a launch.
    scenario::apply(
        &world.workload_client(),
        &[deployment("burst", 1, "3", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 1, Duration::from_secs(60)).await;
    assert_eq!(
        node_of(&world, "burst").await.as_deref(),
        Some(warm.as_str())
    );
    // The buffer's chunk no longer fits there: a second warm node.
    node_count(&world, 2, Duration::from_secs(90)).await;
    reason(&world, "warm", "Provisioning", "FitsExistingCapacity").await;
    let spare = nodes(&world)
        .await
        .into_iter()
        .map(|n| n.name_any())
        .find(|n| *n != warm)
        .unwrap();
    hold(&world, &spare, "the new warm node is not empty either").await;

    // Without the buffer, the spare node is empty: emptiness removes it, not the busy one.
    Api::<CapacityBuffer>::namespaced(world.workload_client(), "default")
        .delete("warm", &DeleteParams::default())
        .await
        .unwrap();
    node_count(&world, 1, Duration::from_secs(90)).await;
    assert_eq!(nodes(&world).await[0].name_any(), warm);
    assert_eq!(
        node_of(&world, "burst").await.as_deref(),
        Some(warm.as_str())
    );
}

/// What a buffer resolves to, and what it says when it cannot: a missing PodTemplate is
/// `PodTemplateNotFound` (with a Warning Event naming it) and provisions nothing; a Job is not
/// a scalableRef kind (`ResolutionFailed`); a Deployment's pod template with `percentage: 50`
/// of its 3 replicas is 2 chunks (rounded up); and a template that appears later resolves.
async fn buffer_statuses_say_what_each_resolved_to(backend: Backend) {
    let world = setup(backend, &[md("m", 4, 16, "zone-a", 0.2)]).await;
    scenario::apply(
        &world.workload_client(),
        &[
            deployment("web", 3, "100m", "128Mi", json!({})),
            buffer(
                "missing",
                json!({"podTemplateRef": {"name": "later"}, "replicas": 1}),
            ),
            buffer(
                "job",
                json!({"scalableRef": {"apiGroup": "batch", "kind": "Job", "name": "j"},
                    "replicas": 1}),
            ),
            buffer(
                "web",
                json!({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"},
                    "percentage": 50}),
            ),
        ],
    )
    .await
    .unwrap();
    let _operator = start_with(&world, buffering_operator());

    let missing = reason(
        &world,
        "missing",
        "ReadyForProvisioning",
        "PodTemplateNotFound",
    )
    .await;
    let ready = condition(&missing, "ReadyForProvisioning").unwrap();
    assert_eq!(ready.status, ConditionStatus::False);
    assert!(
        ready.message.contains("default/later") && ready.message.contains("spec.podTemplateRef"),
        "{}",
        ready.message
    );
    reason(&world, "missing", "Provisioning", "NotReadyForProvisioning").await;
    event(&world, "PodTemplateNotFound", "missing", "default/later").await;

    let job = reason(&world, "job", "ReadyForProvisioning", "ResolutionFailed").await;
    assert!(
        condition(&job, "ReadyForProvisioning")
            .unwrap()
            .message
            .contains("spec.scalableRef.apiGroup")
    );

    let web = reason(&world, "web", "ReadyForProvisioning", "Resolved").await;
    let status = web.status.unwrap();
    assert_eq!(status.replicas, Some(2));
    assert_eq!(status.pod_template_ref, None);

    scenario::apply(&world.workload_client(), &[pod_template("later", "500m")])
        .await
        .unwrap();
    let later = reason(&world, "missing", "ReadyForProvisioning", "Resolved").await;
    assert_eq!(later.status.unwrap().replicas, Some(1));
}

world::backend_tests!(a_buffer_keeps_a_warm_node_that_a_burst_starts_on);
world::backend_tests!(buffer_statuses_say_what_each_resolved_to);
