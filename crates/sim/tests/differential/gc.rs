//! Garbage collection through ownerReferences: background, foreground (blocked by a
//! dependent's finalizer) and orphan propagation; dependents with a second owner.
//! On the real server kube-controller-manager's garbage collector does this asynchronously:
//! the scenarios poll for the final states.

use serde_json::{Value, json};

use crate::harness::{Ctx, PatchKind, Resp};

const CMS: &str = "/api/v1/namespaces/{ns}/configmaps";

fn owner_ref(owner: &Resp, block: Option<bool>) -> Value {
    let mut r = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "name": owner.at("/metadata/name"), "uid": owner.uid()});
    if let Some(b) = block {
        r["blockOwnerDeletion"] = json!(b);
    }
    r
}

async fn owner(t: &Ctx, name: &str) -> Resp {
    let r = t.post(CMS, json!({"metadata": {"name": name}})).await;
    assert_eq!(r.code, 201, "{r:?}");
    r
}

async fn dependent(t: &Ctx, name: &str, refs: Value, finalizers: Value) -> Resp {
    let r = t
        .post(
            CMS,
            json!({"metadata": {"name": name, "ownerReferences": refs, "finalizers": finalizers}}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    r
}

/// The names in the namespace with their owners' names and deletion state.
async fn inventory(t: &Ctx) -> Value {
    let list = t.get(CMS).await;
    Value::Array(
        list.at("/items")
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i.pointer("/metadata/name") != Some(&json!("kube-root-ca.crt")))
            .map(|i| {
                json!({"name": i.pointer("/metadata/name"),
                    "owners": i.pointer("/metadata/ownerReferences"),
                    "finalizers": i.pointer("/metadata/finalizers"),
                    "deleting": i.pointer("/metadata/deletionTimestamp").is_some()})
            })
            .collect(),
    )
}

/// Background (the default): the owner goes at once; the collector then deletes its
/// dependents, but only drops the reference from a dependent with another live owner.
pub async fn gc_background(t: Ctx) {
    let o = owner(&t, "owner").await;
    let other = owner(&t, "other").await;
    dependent(&t, "dep-1", json!([owner_ref(&o, Some(true))]), json!([])).await;
    dependent(&t, "dep-2", json!([owner_ref(&o, None)]), json!([])).await;
    dependent(
        &t,
        "dep-shared",
        json!([owner_ref(&o, None), owner_ref(&other, None)]),
        json!([]),
    )
    .await;
    t.record(
        "delete the owner",
        &t.delete(&format!("{CMS}/owner"), None).await,
    );
    t.gone(&format!("{CMS}/dep-1")).await;
    t.gone(&format!("{CMS}/dep-2")).await;
    t.poll(&format!("{CMS}/dep-shared"), |r| {
        r.at("/metadata/ownerReferences").as_array().map(Vec::len) == Some(1)
    })
    .await;
    t.note("after collection", inventory(&t).await);
}

/// Foreground: the owner stays (`foregroundDeletion`) until every blocking dependent is gone;
/// a dependent with a finalizer holds it.
pub async fn gc_foreground(t: Ctx) {
    let o = owner(&t, "owner").await;
    dependent(
        &t,
        "held",
        json!([owner_ref(&o, Some(true))]),
        json!(["example.com/hold"]),
    )
    .await;
    dependent(&t, "free", json!([owner_ref(&o, Some(false))]), json!([])).await;
    t.record(
        "delete the owner in the foreground",
        &t.delete(
            &format!("{CMS}/owner"),
            Some(json!({"propagationPolicy": "Foreground"})),
        )
        .await,
    );
    t.gone(&format!("{CMS}/free")).await;
    t.poll(&format!("{CMS}/held"), |r| {
        r.at("/metadata/deletionTimestamp").is_string()
    })
    .await;
    t.note("while held", inventory(&t).await);
    t.outcome(
        "release the dependent",
        &t.patch(
            &format!("{CMS}/held"),
            PatchKind::Merge,
            json!({"metadata": {"finalizers": null}}),
        )
        .await,
    );
    t.gone(&format!("{CMS}/owner")).await;
    t.note("after collection", inventory(&t).await);
}

/// Orphan: the owner carries `orphan` until its references are removed from every
/// dependent; the dependents stay.
pub async fn gc_orphan(t: Ctx) {
    let o = owner(&t, "owner").await;
    dependent(&t, "dep-1", json!([owner_ref(&o, Some(true))]), json!([])).await;
    dependent(&t, "dep-2", json!([owner_ref(&o, None)]), json!([])).await;
    t.record(
        "delete the owner, orphaning",
        &t.delete(
            &format!("{CMS}/owner"),
            Some(json!({"propagationPolicy": "Orphan"})),
        )
        .await,
    );
    t.gone(&format!("{CMS}/owner")).await;
    t.note("after orphaning", inventory(&t).await);
    t.record(
        "bad propagation policy",
        &t.delete(
            &format!("{CMS}/dep-1"),
            Some(json!({"propagationPolicy": "Sometimes"})),
        )
        .await,
    );
}
