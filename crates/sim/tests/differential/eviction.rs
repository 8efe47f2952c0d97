//! Eviction with PodDisruptionBudgets. On the real server the budgets' status comes from
//! kube-controller-manager's disruption controller, so each scenario polls until the budget
//! has observed what it expects before evicting.
//! Pods are Running and Ready by a status write (no kubelet), bound to a made-up node so a
//! deletion is graceful; pods with a controller are owned by a StatefulSet nobody reconciles
//! (its `spec.replicas` is the expected scale the disruption controller reads).

use serde_json::{Value, json};

use crate::harness::{Ctx, PatchKind, Resp};

const PODS: &str = "/api/v1/namespaces/{ns}/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets";

/// A StatefulSet with `replicas` that nothing reconciles; its uid for owner references.
async fn stateful_set(t: &Ctx, app: &str, replicas: i64) -> Resp {
    let r = t
        .post(
            "/apis/apps/v1/namespaces/{ns}/statefulsets",
            json!({"metadata": {"name": app}, "spec": {"replicas": replicas,
                "serviceName": app,
                "selector": {"matchLabels": {"app": app}},
                "template": {"metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    r
}

/// A Running pod labelled `app`, Ready or not, owned by `owner` if given.
async fn pod(t: &Ctx, name: &str, app: &str, ready: bool, owner: Option<&Resp>) {
    let mut meta = json!({"name": name, "labels": {"app": app}});
    if let Some(o) = owner {
        meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet",
            "name": o.at("/metadata/name"), "uid": o.uid(), "controller": true,
            "blockOwnerDeletion": true}]);
    }
    let r = t
        .post(
            PODS,
            json!({"metadata": meta, "spec": {"nodeName": "node-1",
                "terminationGracePeriodSeconds": 30,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}),
        )
        .await;
    assert_eq!(r.code, 201, "{r:?}");
    let status = json!({"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
    let r = t
        .patch(&format!("{PODS}/{name}/status"), PatchKind::Merge, status)
        .await;
    assert_eq!(r.code, 200, "{r:?}");
}

async fn budget(t: &Ctx, name: &str, app: &str, spec: Value) {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    let r = t
        .post(PDBS, json!({"metadata": {"name": name}, "spec": spec}))
        .await;
    assert_eq!(r.code, 201, "{r:?}");
}

/// Poll a budget until its status has observed its generation with these counts (and no
/// pod evicted but not yet terminating).
async fn settled(t: &Ctx, name: &str, expected: i64, healthy: i64, allowed: i64) -> Resp {
    t.poll(&format!("{PDBS}/{name}"), |r| {
        r.at("/status/observedGeneration") == r.at("/metadata/generation")
            && r.at("/status/disruptedPods").is_null()
            && r.at("/status/expectedPods") == &json!(expected)
            && r.at("/status/currentHealthy") == &json!(healthy)
            && r.at("/status/disruptionsAllowed") == &json!(allowed)
    })
    .await
}

fn status_of(r: &Resp) -> Value {
    r.at("/status").clone()
}

async fn evict(t: &Ctx, name: &str) -> Resp {
    t.post(
        &format!("{PODS}/{name}/eviction"),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}),
    )
    .await
}

/// Deleting state of a pod after an eviction.
async fn pod_state(t: &Ctx, name: &str) -> Value {
    let r = t.get(&format!("{PODS}/{name}")).await;
    json!({"code": r.code, "deleting": r.at("/metadata/deletionTimestamp").is_string(),
        "grace": r.at("/metadata/deletionGracePeriodSeconds")})
}

/// `minAvailable: 2` of three healthy pods: one eviction is allowed, the next refused with
/// 429; evictions of missing or not-running pods ignore the budget.
pub async fn evict_min_available(t: Ctx) {
    for name in ["a", "b", "c"] {
        pod(&t, name, "web", true, None).await;
    }
    budget(&t, "web", "web", json!({"minAvailable": 2})).await;
    let s = settled(&t, "web", 3, 3, 1).await;
    t.note("budget", status_of(&s));
    t.record("evict a", &evict(&t, "a").await);
    t.note("a after eviction", pod_state(&t, "a").await);
    // Once the controller has seen the pod terminating, it drops it from `disruptedPods`.
    let s = t
        .poll(&format!("{PDBS}/web"), |r| {
            r.at("/status/currentHealthy") == &json!(2) && r.at("/status/disruptedPods").is_null()
        })
        .await;
    t.note("budget after an eviction", status_of(&s));
    t.record("evict b", &evict(&t, "b").await);
    t.note("b after a refused eviction", pod_state(&t, "b").await);
    t.record("evict a missing pod", &evict(&t, "missing").await);
    t.record(
        "eviction with another name in the body",
        &t.post(
            &format!("{PODS}/b/eviction"),
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "c"}}),
        )
        .await,
    );
    let r = t
        .post(
            PODS,
            json!({"metadata": {"name": "pending", "labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}),
        )
        .await;
    assert_eq!(r.code, 201);
    t.record("evict a pending pod", &evict(&t, "pending").await);
    t.note("pending pod after eviction", pod_state(&t, "pending").await);
}

/// An unready pod under a budget that is not healthy: refused with `IfHealthyBudget` (the
/// default), allowed with `AlwaysAllow`.
pub async fn evict_unhealthy_policy(t: Ctx) {
    for (app, policy) in [("strict", None), ("lenient", Some("AlwaysAllow"))] {
        for (i, ready) in [true, true, false].into_iter().enumerate() {
            pod(&t, &format!("{app}-{i}"), app, ready, None).await;
        }
        let mut spec = json!({"minAvailable": 3});
        if let Some(p) = policy {
            spec["unhealthyPodEvictionPolicy"] = json!(p);
        }
        budget(&t, app, app, spec).await;
        let s = settled(&t, app, 3, 2, 0).await;
        t.note(&format!("{app} budget"), status_of(&s));
        t.record(
            &format!("{app}: evict the unready pod"),
            &evict(&t, &format!("{app}-2")).await,
        );
        t.record(
            &format!("{app}: evict a ready pod"),
            &evict(&t, &format!("{app}-0")).await,
        );
    }
    // A healthy budget lets an unready pod go under the default policy too.
    for (i, ready) in [true, true, false].into_iter().enumerate() {
        pod(&t, &format!("ok-{i}"), "ok", ready, None).await;
    }
    budget(&t, "ok", "ok", json!({"minAvailable": 1})).await;
    settled(&t, "ok", 3, 2, 1).await;
    t.record(
        "healthy budget: evict the unready pod",
        &evict(&t, "ok-2").await,
    );
}

/// `maxUnavailable` counts only pods with a controller, scaled by the controller's replicas;
/// two budgets over one pod are a 500.
pub async fn evict_max_unavailable(t: Ctx) {
    let sts = stateful_set(&t, "db", 3).await;
    for name in ["db-0", "db-1", "db-2"] {
        pod(&t, name, "db", true, Some(&sts)).await;
    }
    pod(&t, "bare", "db", true, None).await;
    budget(&t, "db", "db", json!({"maxUnavailable": 1})).await;
    // The bare pod counts as healthy but not as expected.
    let s = settled(&t, "db", 3, 4, 2).await;
    t.note("budget", status_of(&s));
    t.record("evict a bare pod", &evict(&t, "bare").await);
    let s = settled(&t, "db", 3, 3, 1).await;
    t.note("budget once the bare pod is terminating", status_of(&s));
    t.record("evict db-0", &evict(&t, "db-0").await);
    // Until the disruption controller recounts after db-0, kube-apiserver refuses db-1 with
    // another message ("does not allow evicting pods currently"): wait for the recount.
    settled(&t, "db", 3, 2, 0).await;
    t.record("evict db-1", &evict(&t, "db-1").await);
    // The controller's scale still expects three pods.
    let s = settled(&t, "db", 3, 2, 0).await;
    t.note("budget after evictions", status_of(&s));
    budget(&t, "db-too", "db", json!({"maxUnavailable": 2})).await;
    t.poll(&format!("{PDBS}/db-too"), |r| {
        r.at("/status/observedGeneration") == &json!(1)
    })
    .await;
    t.record("two budgets", &evict(&t, "db-2").await);
}
