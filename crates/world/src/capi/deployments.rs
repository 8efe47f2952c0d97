//! The MachineDeployment controller (management cluster), as Cluster API's decides replicas.
//!
//! Responsibility: roll each MachineDeployment out through MachineSets it owns, as CAPI
//! v1.12–v1.14 does ([`super::rollout`] holds the rules): the MachineSet whose template rolls
//! out like the deployment's is the new one; a template change (version, bootstrap,
//! infrastructure reference, failure domain) makes a new `v1beta2` MachineSet (`generateName:
//! <md>-`, controller owner reference, labels = template labels + `deployment-name` +
//! `cluster-name` + `machine-template-hash`, which its selector and template carry too, the
//! next revision); RollingUpdate and OnDelete set every MachineSet's replicas per the plan — so
//! lowering a deployment's replicas mid-rollout takes from the oldest old MachineSet, whatever
//! Machine is marked `delete-machine` elsewhere; old MachineSets of an OnDelete rollout get
//! `disable-machine-create: "true"`; emptied old MachineSets are deleted. What does not roll
//! out (labels, annotations, taints) is updated in place on the new MachineSet, and the
//! deletion order (`spec.deletion.order`) on every one. An unset `spec.replicas` is defaulted
//! as CAPI's webhook does (min-size when both autoscaler size annotations are set, else 1). The
//! deployment's v1beta2 status (`replicas`, `readyReplicas`, `availableReplicas`,
//! `upToDateReplicas`: the new MachineSet's, `selector`, `observedGeneration`, `phase`, the
//! `ScalingUp` condition — [`super::scaling::deployment_scaling_up`], which like CAPI's does
//! not carry a MachineSet's preflight hold up — other conditions kept, and the deprecated
//! v1beta1 counters under `deprecated.v1beta1`) is summed over its MachineSets.
//! Paused and deleting deployments are left alone (the garbage collector removes a deleted
//! deployment's MachineSets).
//! Inputs: MachineDeployments and MachineSets (fresh lists, v1beta2 through [`Capi`]).
//! Outputs: MachineSet creates, patches and deletes, deployment spec/status patches.

use std::collections::BTreeMap;
use std::sync::Arc;

use api::well_known::capi as keys;
use serde_json::{Value, json};

use super::client::Capi;
use super::{rollout, scaling};
use crate::WorldError;
use crate::driver::{PassResult, Reconciler};
use crate::objects::{
    annotations, controller_ref, controller_uid, labels, merge_diff, selector_string, string_map,
    text,
};
use sim::convert::capi::{CapiKind, CapiVersion};
use sim::object;

const MD: CapiKind = CapiKind::MachineDeployment;
const MS: CapiKind = CapiKind::MachineSet;

/// The MachineDeployment controller.
pub struct Deployments {
    capi: Arc<Capi>,
}

impl std::fmt::Debug for Deployments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deployments").finish_non_exhaustive()
    }
}

impl Deployments {
    /// Over a management cluster's Cluster API.
    pub fn new(capi: Arc<Capi>) -> Self {
        Self { capi }
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

/// What CAPI's defaulting webhook adds to a deployment, as a merge patch (`None`: nothing):
/// `spec.replicas` when unset ([`default_replicas`]) and the `cluster.x-k8s.io/cluster-name`
/// label naming `spec.clusterName`, which selectors such as a NodeClass's rely on.
pub fn defaults(md: &Value) -> Option<Value> {
    let mut patch = serde_json::Map::new();
    if md
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .is_none()
    {
        patch.insert("spec".into(), json!({"replicas": default_replicas(md)}));
    }
    let cluster = text(md, ".spec.clusterName").unwrap_or_default();
    if !cluster.is_empty()
        && labels(md).get(keys::CLUSTER_NAME).map(String::as_str) != Some(cluster)
    {
        patch.insert(
            "metadata".into(),
            json!({"labels": {keys::CLUSTER_NAME: cluster}}),
        );
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
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
        if let Some(patch) = defaults(md) {
            self.capi.patch(MD, md, &patch).await?;
        }
        let replicas = md
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or_else(|| default_replicas(md));
        let owned: Vec<&Value> = sets
            .iter()
            .filter(|s| controller_uid(s).as_deref() == Some(uid) && !object::is_deleting(s))
            .collect();
        let cluster = text(md, ".spec.clusterName").unwrap_or_default();
        let template = set_template(md);
        let fields = rollout::rollout_fields(&template);
        let strategy = rollout::strategy(md, replicas);
        // The new MachineSet: the first whose template rolls out like the deployment's, by
        // replicas (most first), then age, then name.
        let mut candidates = owned.clone();
        candidates.sort_by_key(|s| {
            (
                std::cmp::Reverse(int(s, ".spec.replicas")),
                text(s, ".metadata.creationTimestamp")
                    .unwrap_or_default()
                    .to_owned(),
                object::name(s).to_owned(),
            )
        });
        let new = candidates.iter().copied().find(|s| {
            rollout::rollout_fields(s.pointer("/spec/template").unwrap_or(&Value::Null)) == fields
        });
        let old: Vec<&Value> = owned
            .iter()
            .copied()
            .filter(|s| new.is_none_or(|n| object::uid(n) != object::uid(s)))
            .collect();
        let old_views: Vec<rollout::SetView> =
            old.iter().map(|s| rollout::SetView::of(s)).collect();
        let plan = rollout::plan(
            replicas,
            strategy,
            new.map(rollout::SetView::of).as_ref(),
            &old_views,
        );
        let on_delete = strategy == rollout::Strategy::OnDelete;
        let order = delete_order(md);
        match new {
            None => {
                let hash = template_hash(&fields);
                let mut template = template.clone();
                let mut template_labels = string_map(&template, ".metadata.labels");
                template_labels.insert(keys::MACHINE_TEMPLATE_HASH.to_owned(), hash.clone());
                object::set_path(&mut template, ".metadata.labels", json!(template_labels));
                let mut selector = set_selector(md);
                let mut match_labels = string_map(&selector, ".matchLabels");
                match_labels.insert(keys::MACHINE_TEMPLATE_HASH.to_owned(), hash.clone());
                object::as_map(&mut selector).insert("matchLabels".into(), json!(match_labels));
                let mut set_labels = labels(&template);
                set_labels.extend(identity(md));
                let revision = owned
                    .iter()
                    .filter_map(|s| annotations(s).get(keys::REVISION)?.parse::<i64>().ok())
                    .max()
                    .unwrap_or(0)
                    + 1;
                let mut spec = json!({"clusterName": cluster, "replicas": plan.new,
                    "selector": selector, "template": template});
                if let Some(order) = &order {
                    object::set_path(&mut spec, ".deletion.order", json!(order));
                }
                let ms = json!({
                    "apiVersion": CapiVersion::V1beta2.api_version(),
                    "kind": "MachineSet",
                    "metadata": {"generateName": format!("{name}-"), "namespace": ns,
                        "labels": set_labels,
                        "annotations": {keys::REVISION: revision.to_string(),
                            keys::DISABLE_MACHINE_CREATE: "false"},
                        "ownerReferences": [controller_ref(md)]},
                    "spec": spec,
                });
                self.capi.create(MS, ms).await?;
            }
            Some(ms) => {
                let mut patch = serde_json::Map::new();
                if int(ms, ".spec.replicas") != plan.new {
                    patch.insert("replicas".into(), json!(plan.new));
                }
                // What does not roll out is updated in place (labels, annotations, taints).
                let mut desired = template.clone();
                let mut desired_labels = string_map(&desired, ".metadata.labels");
                if let Some(hash) = string_map(ms, ".spec.template.metadata.labels")
                    .get(keys::MACHINE_TEMPLATE_HASH)
                {
                    desired_labels.insert(keys::MACHINE_TEMPLATE_HASH.to_owned(), hash.clone());
                }
                object::set_path(&mut desired, ".metadata.labels", json!(desired_labels));
                let current = ms.pointer("/spec/template").cloned().unwrap_or(json!({}));
                if let Some(d) = merge_diff(&current, &desired) {
                    patch.insert("template".into(), d);
                }
                self.update_set(ms, patch, false, order.as_deref()).await?;
            }
        }
        for ms in &old {
            let mut patch = serde_json::Map::new();
            let want = plan
                .old
                .iter()
                .find(|(n, _)| n == object::name(ms))
                .map_or(int(ms, ".spec.replicas"), |(_, r)| *r);
            if int(ms, ".spec.replicas") != want {
                patch.insert("replicas".into(), json!(want));
            }
            if want == 0 && int(ms, ".status.replicas") == 0 && int(ms, ".spec.replicas") == 0 {
                // Scaled away and empty: CAPI cleans old MachineSets up.
                self.capi.delete(MS, ns, object::name(ms)).await?;
                continue;
            }
            self.update_set(ms, patch, on_delete, order.as_deref())
                .await?;
        }
        let sum = |path: &str| owned.iter().map(|s| int(s, path)).sum::<i64>();
        let (have, ready, available) = (
            sum(".status.replicas"),
            sum(".status.readyReplicas"),
            sum(".status.availableReplicas"),
        );
        let updated = new.map_or(0, |n| int(n, ".status.replicas"));
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
            "upToDateReplicas": updated,
            "selector": selector_string(&string_map(&set_selector(md), ".matchLabels")),
            "observedGeneration": object::generation(md),
            "phase": phase,
            "conditions": scaling::with_condition(
                md,
                ".status.conditions",
                scaling::deployment_scaling_up(md, have, replicas),
            ),
            "deprecated": {"v1beta1": {
                "readyReplicas": ready,
                "availableReplicas": available,
                "updatedReplicas": updated,
                "unavailableReplicas": (replicas - available).max(0),
            }},
        });
        self.capi.patch_status_if_changed(MD, md, status).await
    }

    /// Patch a MachineSet's `spec` with `patch` plus its create switch (`disabled`: an old
    /// MachineSet of an OnDelete rollout) and deletion order, when anything differs.
    async fn update_set(
        &self,
        ms: &Value,
        mut patch: serde_json::Map<String, Value>,
        disabled: bool,
        order: Option<&str>,
    ) -> Result<(), WorldError> {
        if let Some(order) = order
            && text(ms, ".spec.deletion.order") != Some(order)
        {
            patch.insert("deletion".into(), json!({"order": order}));
        }
        let switch = if disabled { "true" } else { "false" };
        let mut body = serde_json::Map::new();
        if annotations(ms)
            .get(keys::DISABLE_MACHINE_CREATE)
            .map(String::as_str)
            != Some(switch)
        {
            body.insert(
                "metadata".into(),
                json!({"annotations": {keys::DISABLE_MACHINE_CREATE: switch}}),
            );
        }
        if !patch.is_empty() {
            body.insert("spec".into(), Value::Object(patch));
        }
        if body.is_empty() {
            return Ok(());
        }
        self.capi.patch(MS, ms, &Value::Object(body)).await
    }
}

/// The deployment's Machine deletion order for its MachineSets (v1beta2
/// `spec.deletion.order`, v1beta1 `spec.strategy.rollingUpdate.deletePolicy`).
fn delete_order(md: &Value) -> Option<String> {
    md.pointer("/spec/deletion/order")
        .or_else(|| md.pointer("/spec/strategy/rollingUpdate/deletePolicy"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A short, stable hash of a template's rollout fields (FNV-1a, as CAPI hashes templates).
fn template_hash(fields: &Value) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in fields.to_string().bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{h:08x}")
}

impl Reconciler for Deployments {
    fn name(&self) -> &'static str {
        "capi-machinedeployments"
    }

    async fn pass(&mut self) -> PassResult {
        let mds = self.capi.list(MD).await?;
        let sets = self.capi.list(MS).await?;
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
    fn the_cluster_name_label_is_defaulted_like_the_webhook() {
        let md = json!({"metadata": {"name": "md"}, "spec": {"clusterName": "c", "replicas": 1}});
        assert_eq!(
            defaults(&md),
            Some(json!({"metadata": {"labels": {keys::CLUSTER_NAME: "c"}}}))
        );
        let labelled = json!({"metadata": {"labels": {keys::CLUSTER_NAME: "c"}},
            "spec": {"clusterName": "c", "replicas": 1}});
        assert_eq!(defaults(&labelled), None);
        assert_eq!(
            defaults(&json!({"spec": {}})),
            Some(json!({"spec": {"replicas": 1}}))
        );
    }

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
