//! Cluster API's conversion webhook, as sim stands in for it: MachineDeployments, MachineSets
//! and Machines whose CRDs name CAPI's webhook are stored as v1beta2 and served as v1beta1 and
//! v1beta2 through every verb — create, get, list, watch, merge and JSON patches, updates, the
//! status and scale subresources — each request answered in the version it asked for.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use sim::convert::capi::capi_resource;
use sim::convert::capi::{CONVERSION_DATA, CapiKind, CapiVersion};

use common::{client, from_json};

async fn setup() -> kube::Client {
    let (_sim, client) = client();
    // Detects sim: v1beta2 stored, v1beta1 served through the "webhook".
    sim::crds::install_capi_crds(&client).await.unwrap();
    client
}

fn api(client: &kube::Client, kind: CapiKind, version: CapiVersion) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), "default", &capi_resource(kind, version))
}

fn v(o: DynamicObject) -> Value {
    serde_json::to_value(o).unwrap()
}

const MD: CapiKind = CapiKind::MachineDeployment;
const V1: CapiVersion = CapiVersion::V1beta1;
const V2: CapiVersion = CapiVersion::V1beta2;

fn v1beta1_md(name: &str) -> DynamicObject {
    from_json(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
        "metadata": {"name": name},
        "spec": {"clusterName": "c", "replicas": 1,
            "strategy": {"type": "OnDelete", "rollingUpdate": {"deletePolicy": "Newest"}},
            "template": {"spec": {"clusterName": "c", "nodeDrainTimeout": "1m",
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "DockerMachineTemplate", "name": "t", "namespace": "default"}}}},
    }))
}

fn v1beta2_md(name: &str) -> DynamicObject {
    from_json(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": name},
        "spec": {"clusterName": "c", "replicas": 1,
            "rollout": {"strategy": {"type": "OnDelete"}},
            "template": {"spec": {"clusterName": "c",
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                    "kind": "DockerMachineTemplate", "name": "t"}}}},
    }))
}

#[tokio::test]
async fn a_v1beta1_deployment_reads_back_as_v1beta2() {
    let client = setup().await;
    let created = api(&client, MD, V1)
        .create(&PostParams::default(), &v1beta1_md("md"))
        .await
        .unwrap();
    let created = v(created);
    assert_eq!(created["apiVersion"], "cluster.x-k8s.io/v1beta1");
    assert_eq!(created["spec"]["strategy"]["type"], "OnDelete");

    let got = v(api(&client, MD, V2).get("md").await.unwrap());
    assert_eq!(got["apiVersion"], "cluster.x-k8s.io/v1beta2");
    let spec = &got["spec"];
    assert_eq!(spec["rollout"]["strategy"]["type"], "OnDelete");
    assert_eq!(spec["deletion"]["order"], "Newest");
    assert!(spec.get("strategy").is_none());
    assert_eq!(
        spec["template"]["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io",
            "kind": "DockerMachineTemplate", "name": "t"})
    );
    assert_eq!(
        spec["template"]["spec"]["deletion"]["nodeDrainTimeoutSeconds"],
        60
    );
    assert!(got["metadata"].get("annotations").is_none());

    // Lists, in each version.
    let listed = api(&client, MD, V2)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        v(listed.items[0].clone())["spec"]["rollout"]["strategy"]["type"],
        "OnDelete"
    );
    let listed = api(&client, MD, V1)
        .list(&ListParams::default())
        .await
        .unwrap();
    let item = v(listed.items[0].clone());
    assert_eq!(item["spec"]["strategy"]["type"], "OnDelete");
    assert_eq!(item["spec"]["template"]["spec"]["nodeDrainTimeout"], "1m0s");
    // As CAPI's webhook answers: the stored v1beta2 object in the conversion-data annotation.
    let data: Value = serde_json::from_str(
        item["metadata"]["annotations"][CONVERSION_DATA]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(data["spec"]["rollout"]["strategy"]["type"], "OnDelete");
}

#[tokio::test]
async fn a_v1beta2_deployment_reads_back_as_v1beta1_with_its_references_versioned() {
    let client = setup().await;
    api(&client, MD, V2)
        .create(&PostParams::default(), &v1beta2_md("md"))
        .await
        .unwrap();
    let got = v(api(&client, MD, V1).get("md").await.unwrap());
    assert_eq!(got["spec"]["strategy"]["type"], "OnDelete");
    assert!(got["spec"].get("rollout").is_none());
    // No CRD for the template's kind: v1beta1.
    let infra = &got["spec"]["template"]["spec"]["infrastructureRef"];
    assert_eq!(
        infra["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta1"
    );
    assert_eq!(infra["namespace"], "default");

    // With one, the latest version of the latest contract its labels name, as CAPI picks it.
    let crd: CustomResourceDefinition = from_json(json!({
        "metadata": {"name": "dockermachinetemplates.infrastructure.cluster.x-k8s.io",
            "labels": {"cluster.x-k8s.io/v1beta1": "v1beta1",
                "cluster.x-k8s.io/v1beta2": "v1alpha9_v1beta2"}},
        "spec": {"group": "infrastructure.cluster.x-k8s.io", "scope": "Namespaced",
            "names": {"plural": "dockermachinetemplates", "kind": "DockerMachineTemplate"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1beta2", "served": true, "storage": true},
                {"name": "v1alpha9", "served": true, "storage": false}]}}));
    sim::crds::install(&client, &[crd]).await.unwrap();
    let got = v(api(&client, MD, V1).get("md").await.unwrap());
    assert_eq!(
        got["spec"]["template"]["spec"]["infrastructureRef"]["apiVersion"],
        "infrastructure.cluster.x-k8s.io/v1beta2"
    );
}

#[tokio::test]
async fn patches_on_the_v1beta1_endpoint_apply_to_the_v1beta1_view() {
    let client = setup().await;
    let mut md = v(v1beta2_md("md"));
    md["spec"]["rollout"] = json!({"strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}, "after": "2025-01-01T00:00:00Z"});
    md["spec"]["machineNaming"] = json!({"template": "{{ .random }}"});
    api(&client, MD, V2)
        .create(&PostParams::default(), &from_json(md))
        .await
        .unwrap();
    let patch = json!({"spec": {"strategy": {"type": "OnDelete", "rollingUpdate": null},
        "minReadySeconds": 5}});
    let answer = api(&client, MD, V1)
        .patch("md", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let answer = v(answer);
    assert_eq!(answer["apiVersion"], "cluster.x-k8s.io/v1beta1");
    assert_eq!(answer["spec"]["strategy"], json!({"type": "OnDelete"}));
    let got = v(api(&client, MD, V2).get("md").await.unwrap());
    assert_eq!(
        got["spec"]["rollout"],
        json!({"strategy": {"type": "OnDelete"}, "after": "2025-01-01T00:00:00Z"})
    );
    assert_eq!(got["spec"]["template"]["spec"]["minReadySeconds"], 5);
    assert_eq!(got["spec"]["machineNaming"]["template"], "{{ .random }}");
    assert!(got["metadata"].get("annotations").is_none());

    // A JSON patch, likewise.
    let ops = json!([{"op": "replace", "path": "/spec/strategy/type", "value": "RollingUpdate"}]);
    api(&client, MD, V1)
        .patch(
            "md",
            &PatchParams::default(),
            &Patch::<()>::Json(from_json(ops)),
        )
        .await
        .unwrap();
    let got = v(api(&client, MD, V2).get("md").await.unwrap());
    assert_eq!(got["spec"]["rollout"]["strategy"]["type"], "RollingUpdate");

    // What v1beta1 cannot hold survives a v1beta1 client's patch (a Machine's minReadySeconds).
    let machine: DynamicObject = from_json(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "m"},
        "spec": {"clusterName": "c", "minReadySeconds": 10, "bootstrap": {"dataSecretName": "s"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                "kind": "DockerMachine", "name": "m"}}}));
    let machines = |version| api(&client, CapiKind::Machine, version);
    machines(V2)
        .create(&PostParams::default(), &machine)
        .await
        .unwrap();
    let label = json!({"metadata": {"labels": {"a": "b"}}});
    let answer = v(machines(V1)
        .patch("m", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap());
    assert!(answer["spec"].get("minReadySeconds").is_none());
    let got = v(machines(V2).get("m").await.unwrap());
    assert_eq!(got["spec"]["minReadySeconds"], 10);
    assert_eq!(got["metadata"]["labels"]["a"], "b");
}

#[tokio::test]
async fn a_v1beta1_read_and_write_back_changes_nothing_and_status_converts() {
    let client = setup().await;
    let created = v(api(&client, MD, V2)
        .create(&PostParams::default(), &v1beta2_md("md"))
        .await
        .unwrap());
    let read = api(&client, MD, V1).get("md").await.unwrap();
    let written = v(api(&client, MD, V1)
        .replace("md", &PostParams::default(), &read)
        .await
        .unwrap());
    assert_eq!(
        written["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(written["metadata"]["generation"], 1);

    // Status through v1beta1: the old counters go to `deprecated.v1beta1`, the new ones come
    // from `status.v1beta2`.
    let mut status = v(read);
    status["status"] = json!({"replicas": 2, "readyReplicas": 1, "updatedReplicas": 2,
        "v1beta2": {"readyReplicas": 2, "upToDateReplicas": 2}});
    api(&client, MD, V1)
        .replace_status("md", &PostParams::default(), &from_json(status))
        .await
        .unwrap();
    let got = v(api(&client, MD, V2).get("md").await.unwrap());
    assert_eq!(
        got["status"],
        json!({"replicas": 2, "readyReplicas": 2, "upToDateReplicas": 2,
            "deprecated": {"v1beta1": {"readyReplicas": 1, "updatedReplicas": 2}}})
    );
}

#[tokio::test]
async fn scale_and_watches_serve_each_version() {
    let client = setup().await;
    let watch = |version| {
        let api = api(&client, MD, version);
        async move {
            api.watch(&WatchParams::default(), "0")
                .await
                .unwrap()
                .boxed()
        }
    };
    let mut v1_events = watch(V1).await;
    let mut v2_events = watch(V2).await;
    api(&client, MD, V1)
        .create(&PostParams::default(), &v1beta1_md("md"))
        .await
        .unwrap();
    let object = |e: WatchEvent<DynamicObject>| match e {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => v(o),
        other => panic!("unexpected {other:?}"),
    };
    let added = object(v1_events.try_next().await.unwrap().unwrap());
    assert_eq!(added["spec"]["strategy"]["type"], "OnDelete");
    let added = object(v2_events.try_next().await.unwrap().unwrap());
    assert_eq!(added["spec"]["rollout"]["strategy"]["type"], "OnDelete");

    // The scale subresource is the same in both versions; the object stays stored as v1beta2.
    let scale = json!({"spec": {"replicas": 4}});
    api(&client, MD, V1)
        .patch_scale("md", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .unwrap();
    let modified = object(v2_events.try_next().await.unwrap().unwrap());
    assert_eq!(modified["spec"]["replicas"], 4);
    assert_eq!(modified["spec"]["rollout"]["strategy"]["type"], "OnDelete");
    assert!(modified["spec"].get("strategy").is_none());
    let modified = object(v1_events.try_next().await.unwrap().unwrap());
    assert_eq!(modified["spec"]["replicas"], 4);
    assert_eq!(modified["spec"]["strategy"]["type"], "OnDelete");
    let scale = api(&client, MD, V2).get_scale("md").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(4));
}

#[tokio::test]
async fn tables_print_the_columns_of_the_version_asked_for() {
    let client = setup().await;
    api(&client, MD, V2)
        .create(&PostParams::default(), &v1beta2_md("md"))
        .await
        .unwrap();
    let table = |version: &str| {
        let request = http::Request::get(format!(
            "/apis/cluster.x-k8s.io/{version}/namespaces/default/machinedeployments"
        ))
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .unwrap();
        let client = client.clone();
        async move { client.request::<Value>(request).await.unwrap() }
    };
    let names = |t: &Value| -> Vec<String> {
        t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let v1beta2 = table("v1beta2").await;
    assert!(names(&v1beta2).contains(&"Up-to-date".to_owned()));
    let v1beta1 = table("v1beta1").await;
    assert!(names(&v1beta1).contains(&"Updated".to_owned()));
    assert!(!names(&v1beta1).contains(&"Up-to-date".to_owned()));
}
