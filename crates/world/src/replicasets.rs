//! Deployment and ReplicaSet controllers (workload cluster), simplified.
//!
//! Responsibility:
//! - Deployments: one ReplicaSet per pod template (`<deployment>-<pod-template-hash>`, the hash
//!   label added to its selector and template, a controller owner reference); the current one
//!   gets the deployment's replicas, older ones are scaled to 0 (a `Recreate`-like rollout);
//!   status `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`,
//!   `unavailableReplicas`, `observedGeneration`.
//! - ReplicaSets: keep the active pods (owned, not terminating, not finished) at
//!   `spec.replicas`, so evicted or deleted pods come back: new pods via `generateName:
//!   <rs>-` with the template and a controller owner reference; on scale-down, unbound pods
//!   go first, then pending, then unready, then the newest. Status `replicas`,
//!   `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas`, `observedGeneration`.
//!
//! Inputs: Deployments, ReplicaSets, Pods (fresh lists; pods brief, [`crate::brief`]). Outputs:
//! creates, patches, deletes.
//! Approximations: no surge/unavailability budgets, no minReadySeconds, no revision history.

use std::cmp::Reverse;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::WorldError;
use crate::driver::{PassResult, Reconciler};
use crate::objects::{
    code, concurrently, condition_true, controller_ref, controller_uid, ignore_not_found, labels,
    list_values, patch_status_if_changed, string_map, text,
};
use sim::object;

/// The label that ties a ReplicaSet and its pods to one pod template.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The Deployment and ReplicaSet controllers.
pub struct ReplicaSets {
    client: kube::Client,
}

impl std::fmt::Debug for ReplicaSets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaSets").finish_non_exhaustive()
    }
}

impl ReplicaSets {
    /// Over a workload cluster.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// A short stable hash of a pod template, in kube's "safe" alphabet.
pub fn template_hash(template: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut h = template
        .to_string()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    let mut out = String::new();
    for _ in 0..10 {
        let i = usize::try_from(h % 27).unwrap_or(0);
        out.push(ALPHABET.get(i).map_or('x', |c| char::from(*c)));
        h /= 27;
    }
    out
}

fn int(v: &Value, path: &str) -> i64 {
    object::get_path(v, path)
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn active(p: &Value) -> bool {
    !object::is_deleting(p) && !matches!(text(p, ".status.phase"), Some("Succeeded" | "Failed"))
}

/// Which pods a ReplicaSet scale-down removes first: lower goes first.
fn scale_down_rank(p: &Value) -> (u8, Reverse<String>) {
    let rank = if text(p, ".spec.nodeName").is_none_or(str::is_empty) {
        0
    } else if text(p, ".status.phase") != Some("Running") {
        1
    } else if !condition_true(p, "Ready") {
        2
    } else {
        3
    };
    let created = text(p, ".metadata.creationTimestamp")
        .unwrap_or_default()
        .to_owned();
    (rank, Reverse(created))
}

impl ReplicaSets {
    async fn deployment(&self, d: &Value, sets: &[Value]) -> Result<(), WorldError> {
        if object::is_deleting(d)
            || d.pointer("/spec/paused").and_then(Value::as_bool) == Some(true)
        {
            return Ok(());
        }
        let ns = object::namespace(d);
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), ns);
        let template = d.pointer("/spec/template").cloned().unwrap_or(json!({}));
        let hash = template_hash(&template);
        let replicas = d
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let owned: Vec<&Value> = sets
            .iter()
            .filter(|s| controller_uid(s).as_deref() == Some(object::uid(d)))
            .collect();
        let current = owned
            .iter()
            .find(|s| labels(s).get(POD_TEMPLATE_HASH) == Some(&hash));
        match current {
            None => {
                let mut t = template.clone();
                let mut l = string_map(&t, ".metadata.labels");
                l.insert(POD_TEMPLATE_HASH.into(), hash.clone());
                object::set_path(&mut t, ".metadata.labels", json!(l));
                let mut selector = d.pointer("/spec/selector").cloned().unwrap_or(json!({}));
                let mut ml = string_map(&selector, ".matchLabels");
                ml.insert(POD_TEMPLATE_HASH.into(), hash.clone());
                object::set_path(&mut selector, ".matchLabels", json!(ml));
                let rs = json!({"metadata": {"name": format!("{}-{hash}", object::name(d)),
                    "namespace": ns, "labels": l,
                    "annotations": {"deployment.kubernetes.io/revision": "1"},
                    "ownerReferences": [controller_ref(d)]},
                    "spec": {"replicas": replicas, "selector": selector, "template": t}});
                let rs: ReplicaSet = serde_json::from_value(rs)?;
                match api.create(&PostParams::default(), &rs).await {
                    Ok(_) => {}
                    Err(e) if code(&e) == Some(409) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Some(rs) if rs.pointer("/spec/replicas").and_then(Value::as_i64) != Some(replicas) => {
                let patch = json!({"spec": {"replicas": replicas}});
                api.patch(
                    object::name(rs),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            }
            Some(_) => {}
        }
        for old in owned
            .iter()
            .filter(|s| labels(s).get(POD_TEMPLATE_HASH) != Some(&hash))
        {
            if old.pointer("/spec/replicas").and_then(Value::as_i64) != Some(0) {
                let patch = json!({"spec": {"replicas": 0}});
                api.patch(
                    object::name(old),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            }
        }
        let sum = |path: &str| owned.iter().map(|s| int(s, path)).sum::<i64>();
        let updated = current.map_or(0, |c| int(c, ".status.replicas"));
        let available = sum(".status.availableReplicas");
        let status = json!({"replicas": sum(".status.replicas"), "updatedReplicas": updated,
            "readyReplicas": sum(".status.readyReplicas"), "availableReplicas": available,
            "unavailableReplicas": (replicas - available).max(0),
            "observedGeneration": object::generation(d)});
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        patch_status_if_changed(&deployments, d, status).await
    }

    async fn replica_set(&self, rs: &Value, pods: &[Value]) -> Result<(), WorldError> {
        if object::is_deleting(rs) {
            return Ok(());
        }
        let ns = object::namespace(rs);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let mine: Vec<&Value> = pods
            .iter()
            .filter(|p| controller_uid(p).as_deref() == Some(object::uid(rs)) && active(p))
            .collect();
        let want = usize::try_from(
            rs.pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(0),
        )
        .unwrap_or(0);
        // Creates and deletes go out concurrently, as the ReplicaSet controller sends them in
        // (slow-start) batches of goroutines.
        if mine.len() < want {
            let template = rs.pointer("/spec/template").cloned().unwrap_or(json!({}));
            let mut meta = template.get("metadata").cloned().unwrap_or(json!({}));
            let m = object::as_map(&mut meta);
            m.insert(
                "generateName".into(),
                json!(format!("{}-", object::name(rs))),
            );
            m.insert("namespace".into(), json!(ns));
            m.insert("ownerReferences".into(), json!([controller_ref(rs)]));
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                "spec": template.get("spec").cloned().unwrap_or(json!({}))});
            let pod: Pod = serde_json::from_value(pod)?;
            let (api, pod) = (&api, &pod);
            concurrently(mine.len()..want, |_| async move {
                api.create(&PostParams::default(), pod).await.map(drop)
            })
            .await
            .into_iter()
            .collect::<Result<Vec<()>, _>>()?;
        } else if mine.len() > want {
            let mut doomed = mine.clone();
            doomed.sort_by_key(|p| scale_down_rank(p));
            let doomed: Vec<String> = doomed
                .into_iter()
                .take(mine.len() - want)
                .map(|p| object::name(p).to_owned())
                .collect();
            let api = &api;
            concurrently(doomed, |name: String| async move {
                ignore_not_found(api.delete(&name, &DeleteParams::default()).await)
            })
            .await
            .into_iter()
            .collect::<Result<Vec<()>, _>>()?;
        }
        let count = i64::try_from(mine.len()).unwrap_or(0);
        let ready =
            i64::try_from(mine.iter().filter(|p| condition_true(p, "Ready")).count()).unwrap_or(0);
        let status = json!({"replicas": count, "fullyLabeledReplicas": count,
            "readyReplicas": ready, "availableReplicas": ready,
            "observedGeneration": object::generation(rs)});
        let sets: Api<ReplicaSet> = Api::namespaced(self.client.clone(), ns);
        patch_status_if_changed(&sets, rs, status).await
    }
}

impl Reconciler for ReplicaSets {
    fn name(&self) -> &'static str {
        "deployments-replicasets"
    }

    async fn pass(&mut self) -> PassResult {
        let deployments = list_values::<Deployment>(&self.client).await?;
        let sets = list_values::<ReplicaSet>(&self.client).await?;
        if deployments.is_empty() && sets.is_empty() {
            return Ok(None);
        }
        let pods = crate::brief::pods(&self.client).await?;
        let mut first_error = None;
        for d in &deployments {
            if let Err(e) = self.deployment(d, &sets).await {
                first_error.get_or_insert(e);
            }
        }
        for rs in &sets {
            if let Err(e) = self.replica_set(rs, &pods).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(None), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hashes_are_stable_and_distinct() {
        let a = json!({"spec": {"containers": [{"name": "a"}]}});
        let b = json!({"spec": {"containers": [{"name": "b"}]}});
        assert_eq!(template_hash(&a), template_hash(&a.clone()));
        assert_ne!(template_hash(&a), template_hash(&b));
        assert_eq!(template_hash(&a).len(), 10);
    }

    #[test]
    fn unbound_and_new_pods_go_first() {
        let unbound = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}});
        let old = json!({"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"nodeName": "n"}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let new = json!({"metadata": {"creationTimestamp": "2024-01-02T00:00:00Z"},
            "spec": {"nodeName": "n"}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}});
        let mut pods = [&old, &new, &unbound];
        pods.sort_by_key(|p| scale_down_rank(p));
        assert_eq!(pods, [&unbound, &new, &old]);
    }
}
