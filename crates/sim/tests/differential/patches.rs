//! Every patch type: JSON merge, JSON patch (with a failing `test`), strategic merge on
//! built-in kinds, and server-side apply with field-manager conflicts and `force`.

use serde_json::{Value, json};

use crate::harness::{Ctx, PatchKind};

const CMS: &str = "/api/v1/namespaces/{ns}/configmaps";

/// JSON merge patch and JSON patch on a ConfigMap.
pub async fn merge_and_json_patch(t: Ctx) {
    let path = format!("{CMS}/p");
    t.record(
        "create",
        &t.post(
            CMS,
            json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "data": {"x": "1", "y": "2"}}),
        )
        .await,
    );
    t.record(
        "merge: set, change and remove keys",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"metadata": {"labels": {"b": "2", "a": null}}, "data": {"x": "10", "y": null, "z": "3"}}),
        )
        .await,
    );
    t.record(
        "merge with a stale resourceVersion",
        &t.patch(
            &path,
            PatchKind::Merge,
            json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "11"}}),
        )
        .await,
    );
    t.record(
        "merge: not an object",
        &t.patch(&path, PatchKind::Merge, json!(["x"])).await,
    );
    t.record(
        "json: add, replace, remove",
        &t.patch(
            &path,
            PatchKind::Json,
            json!([
                {"op": "add", "path": "/data/w", "value": "4"},
                {"op": "replace", "path": "/data/x", "value": "20"},
                {"op": "remove", "path": "/data/z"},
                {"op": "test", "path": "/data/w", "value": "4"}
            ]),
        )
        .await,
    );
    t.record(
        "json: failing test",
        &t.patch(
            &path,
            PatchKind::Json,
            json!([{"op": "test", "path": "/data/x", "value": "nope"},
                   {"op": "replace", "path": "/data/x", "value": "30"}]),
        )
        .await,
    );
    t.record(
        "json: test null where the member is absent, then add it",
        &t.patch(
            &path,
            PatchKind::Json,
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/f"]},
                   {"op": "test", "path": "/data/absent", "value": null}]),
        )
        .await,
    );
    t.record(
        "json: test null where the member is present",
        &t.patch(
            &path,
            PatchKind::Json,
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": []}]),
        )
        .await,
    );
    t.record(
        "json: test null where the parent is absent",
        &t.patch(
            &path,
            PatchKind::Json,
            json!([{"op": "test", "path": "/spec/absent/x", "value": null}]),
        )
        .await,
    );
    t.record(
        "json: remove a missing path",
        &t.patch(
            &path,
            PatchKind::Json,
            json!([{"op": "remove", "path": "/data/missing"}]),
        )
        .await,
    );
    t.record(
        "json: unknown op",
        &t.patch(
            &path,
            PatchKind::Json,
            json!([{"op": "frobnicate", "path": "/data/x"}]),
        )
        .await,
    );
    t.record(
        "json: not a list",
        &t.patch(&path, PatchKind::Json, json!({"op": "add"})).await,
    );
    t.record(
        "patch of a missing object",
        &t.patch(
            &format!("{CMS}/missing"),
            PatchKind::Merge,
            json!({"data": {}}),
        )
        .await,
    );
    t.record("unchanged after failures", &t.get(&path).await);
}

fn containers(r: &Value) -> Value {
    let list = r
        .pointer("/spec/containers")
        .or_else(|| r.pointer("/spec/template/spec/containers"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Value::Array(
        list.iter()
            .map(|c| {
                // Only what the scenario set: built-in defaulting (e.g. a port's `protocol`)
                // is not modelled (DIFFERENCES.md).
                let ports: Option<Vec<&Value>> = c
                    .get("ports")
                    .and_then(Value::as_array)
                    .map(|ps| ps.iter().filter_map(|p| p.get("containerPort")).collect());
                json!({"name": c.get("name"), "image": c.get("image"), "env": c.get("env"),
                    "ports": ports})
            })
            .collect(),
    )
}

/// Strategic merge patch: containers merge by name, env by name, ports by containerPort,
/// `$patch: delete`, `$deleteFromPrimitiveList`; refused on custom resources.
pub async fn strategic_merge(t: Ctx) {
    let deploys = "/apis/apps/v1/namespaces/{ns}/deployments";
    let path = format!("{deploys}/web");
    let d = t
        .post(
            deploys,
            json!({"metadata": {"name": "web", "finalizers": ["example.com/a", "example.com/b"]},
              "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}],
                 "ports": [{"containerPort": 80}]},
                {"name": "side", "image": "side:1"}]}}}}),
        )
        .await;
    t.note(
        "create",
        json!({"code": d.code, "containers": containers(&d.body)}),
    );
    let r = t
        .patch(
            &path,
            PatchKind::Strategic,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": "app:2", "env": [{"name": "B", "value": "2"}],
                 "ports": [{"containerPort": 8080}]}]}}}}),
        )
        .await;
    t.note(
        "merge one container by name",
        json!({"code": r.code, "containers": containers(&r.body)}),
    );
    let r = t
        .patch(
            &path,
            PatchKind::Strategic,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "side", "$patch": "delete"}, {"name": "new", "image": "new:1"}]}}}}),
        )
        .await;
    t.note(
        "delete one container, add another",
        json!({"code": r.code, "containers": containers(&r.body)}),
    );
    let r = t
        .patch(
            &path,
            PatchKind::Strategic,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"],
                "labels": {"x": "y"}}}),
        )
        .await;
    t.note(
        "delete from a primitive list",
        json!({"code": r.code, "finalizers": r.at("/metadata/finalizers"), "labels": r.at("/metadata/labels")}),
    );
    let r = t
        .patch(
            &path,
            PatchKind::Strategic,
            json!({"metadata": {"finalizers": ["example.com/c"]}}),
        )
        .await;
    t.note(
        "finalizers merge as a set",
        json!({"code": r.code, "finalizers": r.at("/metadata/finalizers")}),
    );
    let r = t
        .patch(
            &path,
            PatchKind::Strategic,
            json!({"metadata": {"finalizers": null}}),
        )
        .await;
    t.note(
        "null removes the list",
        json!({"code": r.code, "finalizers": r.at("/metadata/finalizers")}),
    );
    let pods = "/api/v1/namespaces/{ns}/pods";
    let p = t
        .post(
            pods,
            json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}),
        )
        .await;
    t.note(
        "create a pod",
        json!({"code": p.code, "containers": containers(&p.body)}),
    );
    let r = t
        .patch(
            &format!("{pods}/p"),
            PatchKind::Strategic,
            json!({"spec": {"containers": [{"name": "b", "image": "b:2"}]}}),
        )
        .await;
    t.note(
        "change one pod container's image",
        json!({"code": r.code, "containers": containers(&r.body)}),
    );
    t.outcome(
        "strategic merge: not JSON",
        &t.send(
            http::Method::PATCH,
            &format!("{pods}/p"),
            "application/strategic-merge-patch+json",
            Some(&json!("{")),
        )
        .await,
    );
}

fn apply_cm(manager_data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": manager_data})
}

/// Server-side apply: create, managed fields, conflicts between managers, shared ownership,
/// `force`, and removal of fields a manager stops applying.
pub async fn server_side_apply(t: Ctx) {
    t.keep_managed_fields();
    let path = format!("{CMS}/ssa");
    let apply = |manager: &str, force: bool| {
        format!(
            "{path}?fieldManager={manager}{}",
            if force { "&force=true" } else { "" }
        )
    };
    t.record(
        "apply creates",
        &t.patch(
            &apply("alice", false),
            PatchKind::Apply,
            apply_cm(json!({"a": "1", "b": "1"})),
        )
        .await,
    );
    t.record(
        "apply without a field manager",
        &t.patch(&path, PatchKind::Apply, apply_cm(json!({"a": "1"})))
            .await,
    );
    t.record(
        "apply without kind",
        &t.patch(
            &apply("alice", false),
            PatchKind::Apply,
            json!({"apiVersion": "v1", "metadata": {"name": "ssa"}}),
        )
        .await,
    );
    t.record(
        "another manager conflicts",
        &t.patch(
            &apply("bob", false),
            PatchKind::Apply,
            apply_cm(json!({"a": "2", "b": "2", "c": "2"})),
        )
        .await,
    );
    t.record(
        "the same values are shared",
        &t.patch(
            &apply("bob", false),
            PatchKind::Apply,
            apply_cm(json!({"a": "1", "c": "2"})),
        )
        .await,
    );
    t.record(
        "force takes ownership",
        &t.patch(
            &apply("bob", true),
            PatchKind::Apply,
            apply_cm(json!({"a": "3", "c": "2"})),
        )
        .await,
    );
    t.record(
        "the first manager conflicts now",
        &t.patch(
            &apply("alice", false),
            PatchKind::Apply,
            apply_cm(json!({"a": "1", "b": "1"})),
        )
        .await,
    );
    t.record(
        "a manager stops applying a field it alone owns",
        &t.patch(
            &apply("alice", false),
            PatchKind::Apply,
            apply_cm(json!({})),
        )
        .await,
    );
    t.record(
        "apply with a stale resourceVersion",
        &t.patch(
            &apply("alice", false),
            PatchKind::Apply,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "ssa", "resourceVersion": "1"}, "data": {"d": "1"}}),
        )
        .await,
    );
    t.record(
        "a merge patch takes ownership as an update",
        &t.patch(
            &format!("{path}?fieldManager=carol"),
            PatchKind::Merge,
            json!({"data": {"c": "4"}}),
        )
        .await,
    );
    t.record(
        "applying a field an updater changed conflicts",
        &t.patch(
            &apply("bob", false),
            PatchKind::Apply,
            apply_cm(json!({"a": "3", "c": "2"})),
        )
        .await,
    );
    let plain = format!("{CMS}/plain");
    t.record(
        "create without a field manager",
        &t.post(
            CMS,
            json!({"metadata": {"name": "plain", "labels": {"a": "b"}}, "data": {"x": "1"}}),
        )
        .await,
    );
    t.record(
        "merge patch without a field manager",
        &t.patch(&plain, PatchKind::Merge, json!({"data": {"y": "2"}}))
            .await,
    );
    t.record(
        "update with a field manager",
        &t.put(
            &format!("{plain}?fieldManager=dave"),
            json!({"metadata": {"name": "plain", "labels": {"a": "b"}}, "data": {"x": "1", "y": "3"}}),
        )
        .await,
    );
    t.record(
        "apply over fields an unnamed writer set",
        &t.patch(
            &format!("{plain}?fieldManager=alice"),
            PatchKind::Apply,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}, "data": {"x": "9"}}),
        )
        .await,
    );
}
