//! DaemonSet controller (workload cluster), simplified.
//!
//! Responsibility: one pod per DaemonSet on every node it may run on — the node is not being
//! deleted, matches the template's node selector and required node affinity, and has no
//! `NoSchedule`/`NoExecute` taint the pod (with the tolerations the DaemonSet controller adds:
//! not-ready and unreachable `NoExecute`, disk/memory/PID pressure and unschedulable
//! `NoSchedule`) does not tolerate. Pods are created bound (`spec.nodeName`, as the
//! DaemonSet controller did before it delegated to the scheduler) with `generateName:
//! <ds>-` and a controller owner reference; pods on nodes they may no longer run on (selector
//! mismatch, untolerated `NoExecute` taint, node gone) are
//! deleted (a `NoSchedule` taint or a deleting node keeps new pods away but lets running ones
//! stay, as in the real controller). Status: `desiredNumberScheduled`, `currentNumberScheduled`, `numberReady`,
//! `numberAvailable`, `updatedNumberScheduled`, `numberMisscheduled`, `observedGeneration`.
//! Inputs: DaemonSets, Pods, Nodes (fresh lists). Outputs: pod creates and deletes, status
//! patches. Approximations: no rolling updates, no resource check (pods may overcommit).

use std::collections::HashMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use scheduling::taints::TaintEffect;
use serde_json::{Value, json};

use crate::WorldError;
use crate::driver::{PassResult, Reconciler};
use crate::fit;
use crate::objects::{
    condition_true, controller_ref, controller_uid, ignore_not_found, patch_status_if_changed, text,
};
use crate::scheduler::node_info;
use sim::object;

/// The DaemonSet controller.
pub struct DaemonSets {
    client: kube::Client,
}

impl std::fmt::Debug for DaemonSets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonSets").finish_non_exhaustive()
    }
}

impl DaemonSets {
    /// Over a workload cluster.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// The tolerations the DaemonSet controller adds to its pods.
pub fn daemon_tolerations() -> Vec<Value> {
    let mut t = Vec::new();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        t.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute"}));
    }
    for key in [
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
    ] {
        t.push(json!({"key": key, "operator": "Exists", "effect": "NoSchedule"}));
    }
    t
}

/// The pod a DaemonSet runs on `node` (unbound when `node` is `None`, for fit checks).
pub fn daemon_pod(ds: &Value, node: Option<&str>) -> Value {
    let template = ds.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut meta = template.get("metadata").cloned().unwrap_or(json!({}));
    let m = object::as_map(&mut meta);
    m.insert(
        "generateName".into(),
        json!(format!("{}-", object::name(ds))),
    );
    m.insert("namespace".into(), json!(object::namespace(ds)));
    m.insert("ownerReferences".into(), json!([controller_ref(ds)]));
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    let mut tolerations: Vec<Value> = spec
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for t in daemon_tolerations() {
        if !tolerations.contains(&t) {
            tolerations.push(t);
        }
    }
    let s = object::as_map(&mut spec);
    s.insert("tolerations".into(), json!(tolerations));
    if let Some(n) = node {
        s.insert("nodeName".into(), json!(n));
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
}

impl DaemonSets {
    async fn reconcile(
        &self,
        ds: &Value,
        pods: &[Value],
        nodes: &[Node],
    ) -> Result<(), WorldError> {
        if object::is_deleting(ds) {
            return Ok(());
        }
        let ns = object::namespace(ds);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let probe: Pod = serde_json::from_value(daemon_pod(ds, None))?;
        let Ok(engine) = scheduling::k8s::pod(&probe) else {
            return Ok(());
        };
        // Where a new pod may start (NoSchedule and NoExecute taints count), and where an
        // existing one may keep running (only NoExecute taints and the selector count).
        let mut eligible: Vec<String> = Vec::new();
        let mut may_stay: Vec<String> = Vec::new();
        for n in nodes
            .iter()
            .map(|n| (n.metadata.deletion_timestamp.is_some(), node_info(n)))
        {
            let (deleting, n) = n;
            if !fit::node_affinity_matches(&engine, &n.labels)
                || fit::untolerated(&engine, &n.taints, &[TaintEffect::NoExecute]).is_some()
            {
                continue;
            }
            may_stay.push(n.name.clone());
            if !deleting
                && fit::untolerated(&engine, &n.taints, &[TaintEffect::NoSchedule]).is_none()
            {
                eligible.push(n.name);
            }
        }
        let mut on_node: HashMap<String, Vec<&Value>> = HashMap::new();
        for p in pods.iter().filter(|p| {
            controller_uid(p).as_deref() == Some(object::uid(ds)) && !object::is_deleting(p)
        }) {
            on_node
                .entry(text(p, ".spec.nodeName").unwrap_or_default().to_owned())
                .or_default()
                .push(p);
        }
        for node in &eligible {
            if !on_node.contains_key(node) {
                let pod: Pod = serde_json::from_value(daemon_pod(ds, Some(node)))?;
                api.create(&PostParams::default(), &pod).await?;
            }
        }
        for (node, list) in &on_node {
            if !may_stay.contains(node) {
                for p in list {
                    ignore_not_found(api.delete(object::name(p), &DeleteParams::default()).await)?;
                }
            }
        }
        let scheduled = eligible.iter().filter(|n| on_node.contains_key(*n)).count();
        let ready = eligible
            .iter()
            .filter(|n| {
                on_node
                    .get(*n)
                    .is_some_and(|ps| ps.iter().any(|p| condition_true(p, "Ready")))
            })
            .count();
        let as_i64 = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let status = json!({
            "desiredNumberScheduled": as_i64(eligible.len()),
            "currentNumberScheduled": as_i64(scheduled),
            "updatedNumberScheduled": as_i64(scheduled),
            "numberReady": as_i64(ready),
            "numberAvailable": as_i64(ready),
            "numberMisscheduled": 0,
            "observedGeneration": object::generation(ds),
        });
        let sets: Api<DaemonSet> = Api::namespaced(self.client.clone(), ns);
        patch_status_if_changed(&sets, ds, status).await
    }
}

impl Reconciler for DaemonSets {
    fn name(&self) -> &'static str {
        "daemonsets"
    }

    async fn pass(&mut self) -> PassResult {
        let dss = crate::objects::list_values::<DaemonSet>(&self.client).await?;
        if dss.is_empty() {
            // Nothing to keep: no need to read every pod and node.
            return Ok(None);
        }
        let pods = crate::brief::pods(&self.client).await?;
        let nodes = Api::<Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await?
            .items;
        let mut first_error = None;
        for ds in &dss {
            if let Err(e) = self.reconcile(ds, &pods, &nodes).await {
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
    fn daemon_pods_are_bound_and_tolerant() {
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "kube-system", "uid": "u"},
            "spec": {"template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "a"}],
                    "tolerations": [{"key": "x", "operator": "Exists"}]}}}});
        let p = daemon_pod(&ds, Some("n1"));
        assert_eq!(p["spec"]["nodeName"], "n1");
        assert_eq!(p["metadata"]["generateName"], "agent-");
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "DaemonSet");
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 7);
        assert_eq!(p["metadata"]["labels"]["app"], "agent");
    }
}
