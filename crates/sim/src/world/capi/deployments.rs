//! The MachineDeployment controller (management cluster), simplified.
//!
//! Responsibility: give each MachineDeployment one MachineSet it owns (`generateName:
//! <md>-`, controller owner reference, labels = template labels + `deployment-name` +
//! `cluster-name`, revision annotation), keep that MachineSet's replicas, selector and
//! template equal to the deployment's (patched in place: no rolling updates, no revisions),
//! default an unset `spec.replicas` as CAPI's webhook does (min-size when both autoscaler size
//! annotations are set, else 1), and keep the deployment's status (`replicas`,
//! `readyReplicas`, `availableReplicas`, `updatedReplicas`, `unavailableReplicas`, `selector`,
//! `observedGeneration`, `phase`) current from its MachineSets. Paused and deleting deployments
//! are left alone (the garbage collector removes a deleted deployment's MachineSets).
//! Inputs: MachineDeployments and MachineSets (fresh lists). Outputs: MachineSet creates and
//! patches, deployment spec/status patches.

use std::collections::BTreeMap;

use api::well_known::capi as keys;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::object;
use crate::world::WorldError;
use crate::world::driver::{PassResult, Reconciler};
use crate::world::objects::{
    self as o, annotations, controller_ref, controller_uid, labels, list_json, merge_diff,
    patch_status_if_changed, selector_string, string_map, text,
};

/// The MachineDeployment controller.
pub struct Deployments {
    client: kube::Client,
}

impl std::fmt::Debug for Deployments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployments").finish_non_exhaustive()
    }
}

impl Deployments {
    /// Over a management cluster.
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// Whether CAPI leaves this object alone (`spec.paused` or the paused annotation).
pub fn paused(obj: &Value) -> bool {
    obj.pointer("/spec/paused").and_then(Value::as_bool) == Some(true)
        || annotations(obj).contains_key(keys::PAUSED)
}

/// The replicas CAPI's defaulting webhook gives a deployment without `spec.replicas`.
pub fn default_replicas(md: &Value) -> i64 {
    let ann = annotations(md);
    let parse = |k: &str| ann.get(k).and_then(|v| v.parse::<i64>().ok());
    match (parse(keys::MIN_SIZE), parse(keys::MAX_SIZE)) {
        (Some(min), Some(_)) => min.max(0),
        _ => 1,
    }
}

/// The labels CAPI adds to the selector and template of a deployment's Machines.
fn identity(md: &Value) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert(
        keys::CLUSTER_NAME.to_owned(),
        text(md, ".spec.clusterName").unwrap_or_default().to_owned(),
    );
    l.insert(
        keys::DEPLOYMENT_NAME.to_owned(),
        object::name(md).to_owned(),
    );
    l
}

/// The MachineSet selector for a deployment.
pub fn set_selector(md: &Value) -> Value {
    let mut sel = md.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    let mut match_labels = string_map(md, ".spec.selector.matchLabels");
    match_labels.extend(identity(md));
    object::as_map(&mut sel).insert("matchLabels".into(), json!(match_labels));
    sel
}

/// The MachineSet template for a deployment: its template, with the identity labels and the
/// cluster name.
pub fn set_template(md: &Value) -> Value {
    let mut t = md.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut l = string_map(&t, ".metadata.labels");
    l.extend(identity(md));
    object::set_path(&mut t, ".metadata.labels", json!(l));
    let cluster = text(md, ".spec.clusterName").unwrap_or_default().to_owned();
    object::set_path(&mut t, ".spec.clusterName", json!(cluster));
    t
}

fn int(v: &Value, path: &str) -> i64 {
    object::get_path(v, path)
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

impl Deployments {
    async fn reconcile(&self, md: &Value, sets: &[Value]) -> Result<(), WorldError> {
        if object::is_deleting(md) || paused(md) {
            return Ok(());
        }
        let (ns, name, uid) = (object::namespace(md), object::name(md), object::uid(md));
        let mds = o::namespaced(&self.client, ns, &o::machine_deployments());
        let sets_api = o::namespaced(&self.client, ns, &o::machine_sets());
        let replicas = match md.pointer("/spec/replicas").and_then(Value::as_i64) {
            Some(r) => r,
            None => {
                let r = default_replicas(md);
                let patch = json!({"spec": {"replicas": r}});
                mds.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                r
            }
        };
        let owned: Vec<&Value> = sets
            .iter()
            .filter(|s| controller_uid(s).as_deref() == Some(uid) && !object::is_deleting(s))
            .collect();
        let template = set_template(md);
        let selector = set_selector(md);
        let cluster = text(md, ".spec.clusterName").unwrap_or_default();
        match owned.first() {
            None => {
                let mut set_labels = labels(&template);
                set_labels.extend(identity(md));
                let mut spec = json!({"clusterName": cluster, "replicas": replicas,
                    "selector": selector, "template": template});
                if let Some(policy) = md.pointer("/spec/strategy/rollingUpdate/deletePolicy") {
                    object::set_path(&mut spec, ".deletePolicy", policy.clone());
                }
                let ms = json!({
                    "apiVersion": "cluster.x-k8s.io/v1beta1",
                    "kind": "MachineSet",
                    "metadata": {"generateName": format!("{name}-"), "namespace": ns,
                        "labels": set_labels, "annotations": {keys::REVISION: "1"},
                        "ownerReferences": [controller_ref(md)]},
                    "spec": spec,
                });
                let ms: DynamicObject = serde_json::from_value(ms)?;
                sets_api.create(&PostParams::default(), &ms).await?;
            }
            Some(ms) => {
                let mut patch = serde_json::Map::new();
                if ms.pointer("/spec/replicas").and_then(Value::as_i64) != Some(replicas) {
                    patch.insert("replicas".into(), json!(replicas));
                }
                let current = ms.pointer("/spec/template").cloned().unwrap_or(json!({}));
                if let Some(d) = merge_diff(&current, &template) {
                    patch.insert("template".into(), d);
                }
                let current = ms.pointer("/spec/selector").cloned().unwrap_or(json!({}));
                if let Some(d) = merge_diff(&current, &selector) {
                    patch.insert("selector".into(), d);
                }
                if !patch.is_empty() {
                    let patch = json!({"spec": patch});
                    sets_api
                        .patch(
                            object::name(ms),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await?;
                }
            }
        }
        let sum = |path: &str| owned.iter().map(|s| int(s, path)).sum::<i64>();
        let (have, ready, available) = (
            sum(".status.replicas"),
            sum(".status.readyReplicas"),
            sum(".status.availableReplicas"),
        );
        let phase = if have < replicas {
            "ScalingUp"
        } else if have > replicas {
            "ScalingDown"
        } else if ready >= replicas {
            "Running"
        } else {
            "ScalingUp"
        };
        let status = json!({
            "replicas": have,
            "readyReplicas": ready,
            "availableReplicas": available,
            "updatedReplicas": have,
            "unavailableReplicas": (replicas - available).max(0),
            "selector": selector_string(&string_map(&selector, ".matchLabels")),
            "observedGeneration": object::generation(md),
            "phase": phase,
        });
        patch_status_if_changed(&mds, md, status).await
    }
}

impl Reconciler for Deployments {
    fn name(&self) -> &'static str {
        "capi-machinedeployments"
    }

    async fn pass(&mut self) -> PassResult {
        let mds = list_json(&self.client, &o::machine_deployments()).await?;
        let sets = list_json(&self.client, &o::machine_sets()).await?;
        let mut first_error = None;
        for md in &mds {
            if let Err(e) = self.reconcile(md, &sets).await {
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
    fn replicas_default_like_the_webhook() {
        assert_eq!(default_replicas(&json!({})), 1);
        let sized =
            json!({"metadata": {"annotations": {keys::MIN_SIZE: "2", keys::MAX_SIZE: "5"}}});
        assert_eq!(default_replicas(&sized), 2);
        let min_only = json!({"metadata": {"annotations": {keys::MIN_SIZE: "2"}}});
        assert_eq!(default_replicas(&min_only), 1);
    }

    #[test]
    fn sets_select_and_label_their_deployment() {
        let md = json!({"metadata": {"name": "md"}, "spec": {"clusterName": "c",
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"version": "v1.33.0"}}}});
        let sel = set_selector(&md);
        assert_eq!(sel["matchLabels"][keys::DEPLOYMENT_NAME], "md");
        assert_eq!(sel["matchLabels"]["a"], "b");
        let t = set_template(&md);
        assert_eq!(t["metadata"]["labels"][keys::CLUSTER_NAME], "c");
        assert_eq!(t["spec"]["clusterName"], "c");
        assert_eq!(t["spec"]["version"], "v1.33.0");
        assert!(paused(&json!({"spec": {"paused": true}})));
    }
}
