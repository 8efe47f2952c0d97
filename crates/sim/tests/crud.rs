//! Storage semantics through kube-rs over the in-process service: resourceVersion, uid,
//! creationTimestamp, generation, generateName, AlreadyExists/Conflict/NotFound as `Status`
//! objects, finalizers and deletionTimestamp, delete preconditions, status subresource,
//! namespace lifecycle, pod binding, events in two API versions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{api_err, client, from_json, namespace};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    from_json(json!({"metadata": {"name": name}, "data": {"k": "v"}}))
}

fn rv<K: kube::Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn create_sets_system_metadata_and_versions_increase() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let a = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let b = cms.create(&PostParams::default(), &cm("b")).await.unwrap();
    assert!(rv(&b) > rv(&a));
    assert_ne!(a.metadata.uid, b.metadata.uid);
    assert_eq!(a.metadata.uid.as_ref().unwrap().len(), 36);
    assert!(a.metadata.creation_timestamp.is_some());
    assert_eq!(a.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(
        a.metadata.generation, None,
        "configmaps do not track generation"
    );
    let got = cms.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, a.metadata.uid);
    assert_eq!(got.data.unwrap()["k"], "v");
    let list = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert!(
        list.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= rv(&b)
    );
}

#[tokio::test]
async fn errors_are_status_objects() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let missing = api_err(cms.get("nope").await);
    assert_eq!(missing.code, 404);
    assert_eq!(missing.reason, "NotFound");
    assert_eq!(missing.message, "configmaps \"nope\" not found");
    let details = missing.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("nope", "configmaps")
    );

    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let dup = api_err(cms.create(&PostParams::default(), &cm("a")).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));

    let deploys: Api<Deployment> = Api::default_namespaced(client.clone());
    let missing = api_err(deploys.get("web").await);
    assert_eq!(missing.message, "deployments.apps \"web\" not found");
    assert_eq!(missing.details.unwrap().group, "apps");

    let bad_name = api_err(cms.create(&PostParams::default(), &cm("Not_Valid")).await);
    assert_eq!((bad_name.code, bad_name.reason.as_str()), (422, "Invalid"));

    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "no-such-ns");
    let no_ns = api_err(elsewhere.create(&PostParams::default(), &cm("x")).await);
    assert_eq!(no_ns.code, 404);
    assert_eq!(no_ns.message, "namespaces \"no-such-ns\" not found");
}

#[tokio::test]
async fn generate_name_makes_unique_names() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let template: ConfigMap = from_json(json!({"metadata": {"generateName": "gen-"}}));
    let a = cms.create(&PostParams::default(), &template).await.unwrap();
    let b = cms.create(&PostParams::default(), &template).await.unwrap();
    let (na, nb) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(na.starts_with("gen-") && na.len() == 9, "{na}");
    assert_ne!(na, nb);
    let missing = api_err(
        cms.create(&PostParams::default(), &from_json(json!({"metadata": {}})))
            .await,
    );
    assert_eq!(missing.code, 422);
}

#[tokio::test]
async fn stale_resource_version_conflicts_and_no_op_updates_keep_it() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let v1 = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut edit = v1.clone();
    edit.data = Some([("k".to_owned(), "w".to_owned())].into());
    let v2 = cms
        .replace("a", &PostParams::default(), &edit)
        .await
        .unwrap();
    assert!(rv(&v2) > rv(&v1));
    // v1's resourceVersion is now stale.
    let stale = api_err(cms.replace("a", &PostParams::default(), &edit).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert!(
        stale.message.contains("the object has been modified"),
        "{}",
        stale.message
    );
    // Same through a patch carrying the stale version.
    let patch =
        json!({"metadata": {"resourceVersion": v1.metadata.resource_version}, "data": {"k": "x"}});
    let stale = api_err(
        cms.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(stale.code, 409);
    // An unconditional update (no resourceVersion) succeeds.
    let mut unconditional = v2.clone();
    unconditional.metadata.resource_version = None;
    unconditional.data = Some([("k".to_owned(), "z".to_owned())].into());
    let v3 = cms
        .replace("a", &PostParams::default(), &unconditional)
        .await
        .unwrap();
    assert!(rv(&v3) > rv(&v2));
    // Writing the same content again changes nothing.
    let same = cms.replace("a", &PostParams::default(), &v3).await.unwrap();
    assert_eq!(rv(&same), rv(&v3));
    // Name mismatch between body and URL.
    let wrong = api_err(cms.replace("b", &PostParams::default(), &v3).await);
    assert_eq!(wrong.code, 400);
    let absent = api_err(cms.replace("zzz", &PostParams::default(), &cm("zzz")).await);
    assert_eq!(absent.code, 404);
}

#[tokio::test]
async fn generation_tracks_spec_and_status_subresource_is_separate() {
    let (_sim, client) = client();
    let deploys: Api<Deployment> = Api::default_namespaced(client);
    let d: Deployment = from_json(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
        "status": {"replicas": 9}
    }));
    let d = deploys.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    assert!(d.status.is_none(), "status is dropped on create");
    assert_eq!(
        d.spec.as_ref().unwrap().replicas,
        Some(1),
        "replicas defaulted"
    );

    let labels = json!({"metadata": {"labels": {"x": "y"}}});
    let d = deploys
        .patch("web", &PatchParams::default(), &Patch::Merge(&labels))
        .await
        .unwrap();
    assert_eq!(
        d.metadata.generation,
        Some(1),
        "metadata changes keep generation"
    );

    let status = json!({"status": {"replicas": 1, "readyReplicas": 1}});
    let d = deploys
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(
        d.metadata.generation,
        Some(1),
        "status changes keep generation"
    );
    assert_eq!(d.status.as_ref().unwrap().ready_replicas, Some(1));

    let spec_and_status = json!({"spec": {"replicas": 4}, "status": {"replicas": 7}});
    let d = deploys
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&spec_and_status),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(d.spec.as_ref().unwrap().replicas, Some(4));
    assert_eq!(
        d.status.as_ref().unwrap().replicas,
        Some(1),
        "main writes ignore status"
    );

    let mut through_status = d.clone();
    through_status.spec.as_mut().unwrap().replicas = Some(100);
    through_status.status.as_mut().unwrap().replicas = Some(3);
    let d = deploys
        .replace_status("web", &PostParams::default(), &through_status)
        .await
        .unwrap();
    assert_eq!(
        d.spec.as_ref().unwrap().replicas,
        Some(4),
        "status writes ignore spec"
    );
    assert_eq!(d.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(
        deploys
            .get_status("web")
            .await
            .unwrap()
            .status
            .unwrap()
            .replicas,
        Some(3)
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let (sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let held: ConfigMap =
        from_json(json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}));
    cms.create(&PostParams::default(), &held).await.unwrap();
    let deleting = cms.delete("held", &DeleteParams::default()).await.unwrap();
    let obj = deleting.left().expect("a deleting object is returned");
    assert!(obj.metadata.deletion_timestamp.is_some());
    let still = cms.get("held").await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_some());
    // A second delete changes nothing.
    let again = cms
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        again.metadata.resource_version,
        still.metadata.resource_version
    );
    // New finalizers cannot be added while deleting.
    let add = json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}});
    let refused = api_err(
        cms.patch("held", &PatchParams::default(), &Patch::Merge(&add))
            .await,
    );
    assert_eq!(refused.code, 422);
    // Removing the last finalizer removes the object.
    let before = sim.resource_version();
    let clear = json!({"metadata": {"finalizers": null}});
    cms.patch("held", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert_eq!(api_err(cms.get("held").await).code, 404);
    assert!(sim.resource_version() > before);

    cms.create(&PostParams::default(), &cm("plain"))
        .await
        .unwrap();
    let gone = cms.delete("plain", &DeleteParams::default()).await.unwrap();
    let status = gone.right().expect("an immediate delete returns a Status");
    assert_eq!(status.details.unwrap().name, "plain");
    assert_eq!(
        api_err(cms.delete("plain", &DeleteParams::default()).await).code,
        404
    );
}

#[tokio::test]
async fn delete_preconditions() {
    let (_sim, client) = client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let c = cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-it".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let err = api_err(cms.delete("a", &wrong_uid).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));
    assert!(
        err.message.contains("the UID in the precondition (not-it)"),
        "{}",
        err.message
    );
    let wrong_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..DeleteParams::default()
    };
    assert_eq!(api_err(cms.delete("a", &wrong_rv).await).code, 409);
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: c.metadata.uid.clone(),
            resource_version: c.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    cms.delete("a", &right).await.unwrap();
    assert_eq!(api_err(cms.get("a").await).code, 404);
}

#[tokio::test]
async fn namespace_deletion_empties_it_and_waits_for_finalizers() {
    let (_sim, client) = client();
    namespace(&client, "team").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    cms.create(&PostParams::default(), &cm("plain"))
        .await
        .unwrap();
    let held: ConfigMap = from_json(json!({"metadata": {"name": "held", "finalizers": ["x/y"]}}));
    cms.create(&PostParams::default(), &held).await.unwrap();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let ns = nss.get("team").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert_eq!(api_err(cms.get("plain").await).code, 404);
    assert!(
        cms.get("held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let refused = api_err(cms.create(&PostParams::default(), &cm("new")).await);
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    let clear = json!({"metadata": {"finalizers": null}});
    cms.patch("held", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    assert_eq!(api_err(nss.get("team").await).code, 404);
}

#[tokio::test]
async fn pods_get_defaults_status_and_binding() {
    let (_sim, client) = client();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let pod: Pod = from_json(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    );
    let p = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    let spec = p.spec.unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert!(
        spec.tolerations
            .unwrap()
            .iter()
            .any(|t| t.key.as_deref() == Some("node.kubernetes.io/not-ready"))
    );

    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}});
    let _: serde_json::Value = pods
        .create_subresource("binding", "p", &PostParams::default(), &binding)
        .await
        .unwrap();
    let bound = pods.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let conds = bound.status.unwrap().conditions.unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let twice: kube::Result<serde_json::Value> = pods
        .create_subresource("binding", "p", &PostParams::default(), &binding)
        .await;
    assert_eq!(api_err(twice).code, 409);

    // Nodes keep the status they are created with (the kubelet registers that way).
    let nodes: Api<Node> = Api::all(client);
    let node: Node =
        from_json(json!({"metadata": {"name": "n1"}, "status": {"capacity": {"cpu": "4"}}}));
    let n = nodes.create(&PostParams::default(), &node).await.unwrap();
    assert!(n.status.unwrap().capacity.unwrap().contains_key("cpu"));
}

#[tokio::test]
async fn leases_can_be_created_by_put_and_events_are_served_in_both_versions() {
    let (_sim, client) = client();
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    let lease: Lease =
        from_json(json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "me"}}));
    let l = leases
        .replace("leader", &PostParams::default(), &lease)
        .await
        .unwrap();
    assert_eq!(l.spec.unwrap().holder_identity.as_deref(), Some("me"));

    let core: Api<Event> = Api::default_namespaced(client.clone());
    let ev: Event = from_json(json!({
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Scheduled", "message": "assigned", "type": "Normal"
    }));
    core.create(&PostParams::default(), &ev).await.unwrap();
    let v1: Api<EventV1> = Api::default_namespaced(client);
    let seen = v1.get("e1").await.unwrap();
    assert_eq!(seen.note.as_deref(), Some("assigned"));
    assert_eq!(seen.regarding.unwrap().name.as_deref(), Some("p"));
    let by_field = v1
        .list(&ListParams::default().fields("regarding.name=p"))
        .await
        .unwrap();
    assert_eq!(by_field.items.len(), 1);
}
