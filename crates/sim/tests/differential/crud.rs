//! Create, read, update, delete: conflicts, AlreadyExists, NotFound, names, generateName,
//! preconditions, finalizers and graceful deletion.

use serde_json::{Value, json};

use crate::harness::{Ctx, PatchKind};

const CMS: &str = "/api/v1/namespaces/{ns}/configmaps";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// Create, conflicting and unconditional updates, and the errors of each verb.
pub async fn crud_and_conflicts(t: Ctx) {
    let created = t.post(CMS, cm("a", json!({"k": "1"}))).await;
    t.record("create", &created);
    t.record("create again", &t.post(CMS, cm("a", json!({}))).await);
    t.record("get", &t.get(&format!("{CMS}/a")).await);
    t.record("get missing", &t.get(&format!("{CMS}/missing")).await);
    let stale = created.rv();
    let mut body = created.body.clone();
    body["data"]["k"] = json!("2");
    let updated = t.put(&format!("{CMS}/a"), body.clone()).await;
    t.record("update at the current version", &updated);
    t.record(
        "update at a stale version",
        &t.put(&format!("{CMS}/a"), body.clone()).await,
    );
    assert_ne!(stale, updated.rv());
    let mut unconditional = body.clone();
    unconditional["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    unconditional["data"]["k"] = json!("3");
    t.record(
        "update without a version",
        &t.put(&format!("{CMS}/a"), unconditional).await,
    );
    let noop = t.get(&format!("{CMS}/a")).await;
    let same = t.put(&format!("{CMS}/a"), noop.body.clone()).await;
    t.note(
        "a no-op update keeps the version",
        json!(same.rv() == noop.rv()),
    );
    t.record(
        "update of a missing object",
        &t.put(&format!("{CMS}/nope"), cm("nope", json!({}))).await,
    );
    t.record(
        "update with another name",
        &t.put(&format!("{CMS}/a"), cm("b", json!({}))).await,
    );
    t.record(
        "create with an uppercase name",
        &t.post(CMS, cm("Bad_Name", json!({}))).await,
    );
    t.record(
        "create without a name",
        &t.post(CMS, json!({"metadata": {}, "data": {}})).await,
    );
    t.record(
        "create with a resourceVersion",
        &t.post(
            CMS,
            json!({"metadata": {"name": "rv", "resourceVersion": "5"}}),
        )
        .await,
    );
    t.record(
        "create in another namespace than the URL's",
        &t.post(
            CMS,
            json!({"metadata": {"name": "x", "namespace": "other"}}),
        )
        .await,
    );
    t.record(
        "create with a wrong kind",
        &t.post(
            CMS,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "k"}}),
        )
        .await,
    );
    t.record(
        "create in a missing namespace",
        &t.post(
            "/api/v1/namespaces/d-no-such-namespace/configmaps",
            cm("x", json!({})),
        )
        .await,
    );
    t.record(
        "unknown resource",
        &t.get("/api/v1/namespaces/{ns}/widgets").await,
    );
    t.record(
        "create a namespace with an invalid name",
        &t.post(
            "/api/v1/namespaces",
            json!({"metadata": {"name": "Bad.NS"}}),
        )
        .await,
    );
    let current = t.get(&format!("{CMS}/a")).await;
    let mut r = t
        .delete(
            &format!("{CMS}/a"),
            Some(json!({"preconditions": {"resourceVersion": stale}})),
        )
        .await;
    // The message quotes both resourceVersions.
    let digits = regex::Regex::new(r"\(\d+\)").unwrap();
    let message = r.at("/message").as_str().unwrap_or_default().to_owned();
    r.body["message"] = json!(digits.replace_all(&message, "(<rv>)"));
    t.record("delete with a stale resourceVersion precondition", &r);
    t.record(
        "delete with a wrong uid precondition",
        &t.delete(
            &format!("{CMS}/a"),
            Some(json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})),
        )
        .await,
    );
    t.record(
        "delete",
        &t.delete(
            &format!("{CMS}/a"),
            Some(json!({"preconditions": {"uid": current.uid(), "resourceVersion": current.rv()}})),
        )
        .await,
    );
    t.record("delete again", &t.delete(&format!("{CMS}/a"), None).await);
    t.record("get deleted", &t.get(&format!("{CMS}/a")).await);
}

/// `generateName`: a random five-character suffix; a given name wins.
pub async fn generate_name(t: Ctx) {
    let r = t
        .post(
            CMS,
            json!({"metadata": {"generateName": "gen-"}, "data": {"a": "b"}}),
        )
        .await;
    let name = r
        .at("/metadata/name")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let suffix = name.strip_prefix("gen-").unwrap_or_default();
    t.note(
        "suffix of five lowercase consonants and digits",
        json!(
            suffix.len() == 5
                && suffix
                    .chars()
                    .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
        ),
    );
    t.alias(&name, "gen-<suffix>");
    t.record("create with generateName", &r);
    let named = t
        .post(
            CMS,
            json!({"metadata": {"name": "given", "generateName": "gen-"}}),
        )
        .await;
    t.record("create with name and generateName", &named);
    let bad = t
        .post(CMS, json!({"metadata": {"generateName": "Gen-"}}))
        .await;
    if let Some(generated) = bad.at("/details/name").as_str() {
        t.alias(generated, "Gen-<suffix>");
    }
    t.record("generateName that makes an invalid name", &bad);
}

/// Finalizers keep a deleted object (with `deletionTimestamp`) until they are removed; no new
/// finalizer may be added meanwhile.
pub async fn finalizers(t: Ctx) {
    let path = format!("{CMS}/f");
    t.record(
        "create with finalizers",
        &t.post(
            CMS,
            json!({"metadata": {"name": "f", "finalizers": ["example.com/a", "example.com/b"]}}),
        )
        .await,
    );
    t.record("delete", &t.delete(&path, None).await);
    t.record("still there", &t.get(&path).await);
    t.record("delete again", &t.delete(&path, None).await);
    t.record(
        "add a finalizer while deleting",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}}),
        )
        .await,
    );
    t.record(
        "change data while deleting",
        &t.patch(&path, PatchKind::Merge, json!({"data": {"x": "y"}}))
            .await,
    );
    t.record(
        "remove one finalizer",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"metadata": {"finalizers": ["example.com/b"]}}),
        )
        .await,
    );
    t.record(
        "remove the last finalizer",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"metadata": {"finalizers": null}}),
        )
        .await,
    );
    t.record("gone", &t.get(&path).await);
}

/// A bound pod is deleted gracefully (its grace period, `deletionTimestamp` in the future)
/// and stays until a delete with grace period 0; an unbound one goes at once.
pub async fn graceful_pod_deletion(t: Ctx) {
    let pods = "/api/v1/namespaces/{ns}/pods";
    let pod = |name: &str, node: Option<&str>| {
        let mut spec = json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            "terminationGracePeriodSeconds": 20});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        json!({"metadata": {"name": name}, "spec": spec})
    };
    let created = t.post(pods, pod("bound", Some("node-1"))).await;
    t.outcome("create a bound pod", &created);
    let d = t.delete(&format!("{pods}/bound"), None).await;
    t.note(
        "delete a bound pod",
        json!({"code": d.code, "kind": d.at("/kind"),
            "deletionGracePeriodSeconds": d.at("/metadata/deletionGracePeriodSeconds"),
            "deleting": d.at("/metadata/deletionTimestamp").is_string()}),
    );
    let again = t
        .delete(
            &format!("{pods}/bound"),
            Some(json!({"gracePeriodSeconds": 5})),
        )
        .await;
    t.note(
        "delete with a shorter grace period",
        json!({"code": again.code,
            "deletionGracePeriodSeconds": again.at("/metadata/deletionGracePeriodSeconds")}),
    );
    let still = t.get(&format!("{pods}/bound")).await;
    t.note(
        "still there",
        json!({"code": still.code, "deleting": still.at("/metadata/deletionTimestamp").is_string()}),
    );
    let now = t
        .delete(
            &format!("{pods}/bound"),
            Some(json!({"gracePeriodSeconds": 0})),
        )
        .await;
    t.note(
        "delete with grace period 0",
        json!({"code": now.code, "kind": now.at("/kind"), "name": now.at("/metadata/name")}),
    );
    t.outcome("gone", &t.get(&format!("{pods}/bound")).await);
    t.outcome(
        "create an unbound pod",
        &t.post(pods, pod("free", None)).await,
    );
    let d = t.delete(&format!("{pods}/free"), None).await;
    t.note(
        "delete an unbound pod",
        json!({"code": d.code, "kind": d.at("/kind"),
            "deleting": d.at("/metadata/deletionTimestamp").is_string()}),
    );
    t.outcome("unbound pod gone", &t.get(&format!("{pods}/free")).await);
}
