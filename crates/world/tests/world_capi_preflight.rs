//! The simulated Cluster API's MachineSet preflight checks: a failing check (sim's
//! `preflight-hold` knob, on a MachineDeployment or on a MachineSet) holds scale-ups — no
//! Machine is created, scale-downs go on — and is reported as Cluster API v1.14 reports it:
//! the MachineSet's v1beta2 `ScalingUp` says the scale-up "is blocked because", its v1beta1
//! `MachinesCreated` is `False`/`PreflightCheckFailed`; the MachineDeployment's `ScalingUp`
//! only counts replicas (CAPI does not carry the MachineSet's message up). Releasing the hold
//! lets the Machine come and clears the message.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod capi_support;

use std::time::Duration;

use capi_support::{machines_of, md_json, owned_by, scale, wait_for};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sim::convert::capi::{CapiKind, CapiVersion};
use world::config::annotations::PREFLIGHT_HOLD;
use world::objects::{capi_resource, machine_deployments, machine_sets, machines};
use world::{World, WorldConfig};

const HOLD: &str =
    "KubeadmControlPlane default/cp is upgrading (\"ControlPlaneIsStable\" preflight check failed)";

/// The condition of type `kind` in the list at JSON pointer `path`.
fn condition<'a>(obj: &'a Value, path: &str, kind: &str) -> Option<&'a Value> {
    obj.pointer(path)?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// `(status, reason, message)` of a condition.
fn state(c: Option<&Value>) -> (String, String, String) {
    let c = c.cloned().unwrap_or(Value::Null);
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    (s("status"), s("reason"), s("message"))
}

fn t(status: &str, reason: &str, message: &str) -> (String, String, String) {
    (status.to_owned(), reason.to_owned(), message.to_owned())
}

async fn annotate(api: &Api<DynamicObject>, name: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {PREFLIGHT_HOLD: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

async fn the_set(sets: &Api<DynamicObject>, md: &str) -> Value {
    let mut all = owned_by(sets, md).await;
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

#[tokio::test(start_paused = true)]
async fn a_failing_preflight_check_holds_scale_ups_and_is_reported_as_capi_reports_it() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let mc = world.management_client();
    let mds = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_deployments());
    let sets = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_sets());
    let ms_api = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machines());
    mds.create(&PostParams::default(), &md_json("held", json!({})))
        .await
        .unwrap();
    scale(&mds, "held", 1).await;
    wait_for("one Machine", 400, || async {
        (machines_of(&ms_api, "held").await.len() == 1).then_some(())
    })
    .await;
    let ms = wait_for("the MachineSet ready, not scaling up", 400, || async {
        let ms = the_set(&sets, "held").await;
        (ms["status"]["readyReplicas"] == 1
            && state(condition(&ms, "/status/conditions", "ScalingUp"))
                == t("False", "NotScalingUp", ""))
        .then_some(ms)
    })
    .await;
    let created = condition(
        &ms,
        "/status/deprecated/v1beta1/conditions",
        "MachinesCreated",
    );
    assert_eq!(created.unwrap()["status"], "True");
    let ms_name = ms["metadata"]["name"].as_str().unwrap().to_owned();

    // Hold on the deployment (its MachineSet reads it), and raise a replica.
    annotate(&mds, "held", Some(HOLD)).await;
    scale(&mds, "held", 2).await;
    let blocked = format!("Scaling up from 1 to 2 replicas is blocked because:\n* {HOLD}");
    let ms = wait_for("the blocked scale-up on the MachineSet", 400, || async {
        let ms = the_set(&sets, "held").await;
        (state(condition(&ms, "/status/conditions", "ScalingUp"))
            == t("True", "ScalingUp", &blocked))
        .then_some(ms)
    })
    .await;
    let scaling_up = condition(&ms, "/status/conditions", "ScalingUp").unwrap();
    assert_eq!(
        scaling_up["observedGeneration"],
        ms["metadata"]["generation"]
    );
    let created = condition(
        &ms,
        "/status/deprecated/v1beta1/conditions",
        "MachinesCreated",
    );
    assert_eq!(
        state(created),
        t("False", "PreflightCheckFailed", HOLD),
        "{ms:#}"
    );
    assert_eq!(created.unwrap()["severity"], "Error");
    let version = |o: &Value| o["metadata"]["resourceVersion"].clone();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        machines_of(&ms_api, "held").await.len(),
        1,
        "no Machine while held"
    );
    assert_eq!(
        version(&the_set(&sets, "held").await),
        version(&ms),
        "a held MachineSet's status is written once, not every pass"
    );
    // The deployment says it scales up, and — as CAPI's — not why it cannot.
    let md = serde_json::to_value(mds.get("held").await.unwrap()).unwrap();
    let md_scaling_up = state(condition(&md, "/status/conditions", "ScalingUp"));
    assert_eq!(
        md_scaling_up,
        t("True", "ScalingUp", "Scaling up from 1 to 2 replicas")
    );
    // v1beta1 clients: the v1beta2 conditions under `status.v1beta2`, the deprecated ones as
    // `status.conditions`.
    let old_mds = Api::<DynamicObject>::namespaced_with(
        mc.clone(),
        "default",
        &capi_resource(CapiKind::MachineDeployment, CapiVersion::V1beta1),
    );
    let old_md = serde_json::to_value(old_mds.get("held").await.unwrap()).unwrap();
    assert_eq!(
        state(condition(
            &old_md,
            "/status/v1beta2/conditions",
            "ScalingUp"
        )),
        md_scaling_up
    );
    let old_sets = Api::<DynamicObject>::namespaced_with(
        mc.clone(),
        "default",
        &capi_resource(CapiKind::MachineSet, CapiVersion::V1beta1),
    );
    let old_ms = serde_json::to_value(old_sets.get(&ms_name).await.unwrap()).unwrap();
    assert_eq!(
        state(condition(
            &old_ms,
            "/status/v1beta2/conditions",
            "ScalingUp"
        )),
        t("True", "ScalingUp", &blocked)
    );
    let old_created = condition(&old_ms, "/status/conditions", "MachinesCreated").unwrap();
    assert_eq!(
        (&old_created["reason"], &old_created["severity"]),
        (&json!("PreflightCheckFailed"), &json!("Error"))
    );

    // Scale-downs go on while held; with its replicas the set is not scaling up.
    scale(&mds, "held", 0).await;
    wait_for("the Machine gone and nothing to scale up", 400, || async {
        let ms = the_set(&sets, "held").await;
        (machines_of(&ms_api, "held").await.is_empty()
            && state(condition(&ms, "/status/conditions", "ScalingUp"))
                == t("False", "NotScalingUp", ""))
        .then_some(())
    })
    .await;

    // Released: the Machine comes and the blocked message goes.
    scale(&mds, "held", 1).await;
    let blocked = format!("Scaling up from 0 to 1 replicas is blocked because:\n* {HOLD}");
    wait_for("held again", 400, || async {
        let ms = the_set(&sets, "held").await;
        (state(condition(&ms, "/status/conditions", "ScalingUp"))
            == t("True", "ScalingUp", &blocked))
        .then_some(())
    })
    .await;
    annotate(&mds, "held", None).await;
    wait_for("the Machine and no hold", 400, || async {
        let ms = the_set(&sets, "held").await;
        let md = serde_json::to_value(mds.get("held").await.unwrap()).unwrap();
        (machines_of(&ms_api, "held").await.len() == 1
            && state(condition(&ms, "/status/conditions", "ScalingUp"))
                == t("False", "NotScalingUp", "")
            && condition(
                &ms,
                "/status/deprecated/v1beta1/conditions",
                "MachinesCreated",
            )
            .is_some_and(|c| c["status"] == "True")
            && state(condition(&md, "/status/conditions", "ScalingUp"))
                == t("False", "NotScalingUp", ""))
        .then_some(())
    })
    .await;

    // A hold on the MachineSet itself holds it too.
    annotate(&sets, &ms_name, Some("KubernetesVersionSkew: too new")).await;
    scale(&mds, "held", 2).await;
    wait_for("the MachineSet's own hold", 400, || async {
        let ms = the_set(&sets, "held").await;
        let (_, _, message) = state(condition(&ms, "/status/conditions", "ScalingUp"));
        message
            .ends_with("is blocked because:\n* KubernetesVersionSkew: too new")
            .then_some(())
    })
    .await;
    annotate(&sets, &ms_name, None).await;
    wait_for("two Machines", 400, || async {
        (machines_of(&ms_api, "held").await.len() == 2).then_some(())
    })
    .await;
    let health = world.health();
    assert!(health.values().all(|h| h.failures == 0), "{health:?}");
}
