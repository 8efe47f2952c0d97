//! What the node groups hold and cost at one moment of a `simulate` run.
//!
//! Responsibility: every MachineDeployment, stand-alone MachineSet and MachinePool with its
//! replicas and its nodes (Machines with a Node), each node priced as the controller prices it
//! (the provider's catalogue with NodeClass `spec.prices`, price annotations and NodeOverlays:
//! [`clusterapi::ClusterApiProvider::node_prices`]) and the source of that price named. A node
//! without a NodeClaim (not Karpenter's) costs its group's price annotation.
//! Inputs: the management cluster's node groups and Machines, the workload's NodeClaims, the
//! running controller's provider. Outputs: [`Groups`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use api::NodeClaim;
use api::well_known::annotations::{LEGACY_MACHINE, MACHINE};
use api::well_known::capi::PRICE;
use clusterapi::ClusterApiProvider;
use clusterapi::instance_types::MachineDeploymentRef;
use kube::api::{Api, ListParams};
use serde_json::Value;
use sim::convert::capi::{CapiKind, CapiVersion};
use world::objects::{annotations, capi_resource, controller_uid, list_json, machines, text};

use super::NodeGroupSummary;

/// The node groups and what their nodes cost.
#[derive(Debug, Default)]
pub(super) struct Groups {
    /// By [`MachineDeploymentRef::key`].
    pub by_key: BTreeMap<String, NodeGroupSummary>,
    /// Sources of the prices seen per group (a group's nodes may differ: NodeOverlays apply
    /// per NodePool).
    sources: BTreeMap<String, BTreeSet<String>>,
}

impl Groups {
    /// Nodes over all groups.
    pub fn nodes(&self) -> usize {
        self.by_key.values().map(|g| g.nodes).sum()
    }

    /// The sum of every node's price per hour.
    pub fn cost(&self) -> f64 {
        self.by_key.values().map(|g| g.cost_per_hour).sum()
    }

    /// The summaries, each naming the sources of its nodes' prices.
    pub fn into_summaries(mut self) -> Vec<NodeGroupSummary> {
        for (key, group) in &mut self.by_key {
            if let Some(sources) = self.sources.get(key) {
                group.price_source = sources.iter().cloned().collect::<Vec<_>>().join("; ");
            }
        }
        self.by_key.into_values().collect()
    }

    fn add_node(&mut self, key: &str, price: Option<f64>, source: String) {
        let Some(group) = self.by_key.get_mut(key) else {
            return;
        };
        group.nodes += 1;
        if let Some(price) = price {
            group.cost_per_hour += price;
            // The first priced node's price stands for the group (they agree unless a
            // NodePool-specific NodeOverlay makes them differ; the cost is exact either way).
            if group.nodes == 1 || group.price_per_hour == 0.0 {
                group.price_per_hour = price;
            }
        }
        self.sources
            .entry(key.to_owned())
            .or_default()
            .insert(source);
    }
}

fn name_of(obj: &Value) -> (&str, &str) {
    (
        text(obj, "metadata.namespace").unwrap_or_default(),
        text(obj, "metadata.name").unwrap_or_default(),
    )
}

/// The node group of a Machine, as the provider attributes it
/// ([`clusterapi::provider::deployment_of`]); `None` for one that does not read as a Machine.
fn group_of(machine: &Value) -> Option<MachineDeploymentRef> {
    let machine: api::Machine = serde_json::from_value(machine.clone()).ok()?;
    clusterapi::provider::deployment_of(&machine)
}

fn summary(group: &MachineDeploymentRef, obj: &Value) -> NodeGroupSummary {
    NodeGroupSummary {
        name: group.key(),
        kind: group.kind.as_str().to_owned(),
        nodes: 0,
        replicas: obj
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0),
        price_per_hour: 0.0,
        price_source: String::new(),
        cost_per_hour: 0.0,
    }
}

/// Every node group with its nodes priced (see the module doc).
///
/// # Errors
/// A list fails.
pub(super) async fn node_groups(
    workload: &kube::Client,
    management: &kube::Client,
    provider: &ClusterApiProvider,
) -> anyhow::Result<Groups> {
    let resource = |kind| capi_resource(kind, CapiVersion::V1beta2);
    let mut groups = Groups::default();
    let mut annotated: HashMap<String, Option<f64>> = HashMap::new();
    let mut add = |group: MachineDeploymentRef, obj: &Value| {
        let price = annotations(obj)
            .get(PRICE)
            .and_then(|p| p.parse::<f64>().ok());
        annotated.insert(group.key(), price);
        groups.by_key.insert(group.key(), summary(&group, obj));
    };
    for md in list_json(management, &resource(CapiKind::MachineDeployment)).await? {
        let (ns, name) = name_of(&md);
        add(MachineDeploymentRef::deployment(ns, name), &md);
    }
    for set in list_json(management, &resource(CapiKind::MachineSet)).await? {
        // Only a stand-alone MachineSet is a node group of its own.
        if controller_uid(&set).is_none() {
            let (ns, name) = name_of(&set);
            add(MachineDeploymentRef::machine_set(ns, name), &set);
        }
    }
    // A management cluster without the MachinePool kind has no pools.
    if let Ok(pools) = list_json(management, &resource(CapiKind::MachinePool)).await {
        for pool in pools {
            let (ns, name) = name_of(&pool);
            add(MachineDeploymentRef::machine_pool(ns, name), &pool);
        }
    }

    let node_claims: Api<NodeClaim> = Api::all(workload.clone());
    let node_claims: Vec<NodeClaim> = node_claims.list(&ListParams::default()).await?.items;
    let priced = provider.node_prices(&node_claims).await;
    let mut by_machine: HashMap<String, (Option<f64>, String)> = HashMap::new();
    for (nc, price) in node_claims.iter().zip(priced) {
        let Some(machine) = nc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(MACHINE).or_else(|| a.get(LEGACY_MACHINE)))
        else {
            continue;
        };
        let found = match price {
            Ok(Some(p)) => (p.price, p.source),
            Ok(None) => (None, "none: no node group".to_owned()),
            Err(e) => (None, format!("none: {e}")),
        };
        by_machine.insert(machine.clone(), found);
    }
    for m in list_json(management, &machines()).await? {
        if m.pointer("/status/nodeRef/name").is_none() {
            continue;
        }
        let Some(group) = group_of(&m) else {
            continue;
        };
        let key = group.key();
        let (ns, name) = name_of(&m);
        let (price, source) = by_machine
            .remove(&format!("{ns}/{name}"))
            .unwrap_or_else(|| {
                let price = annotated.get(&key).copied().flatten();
                let source = match price {
                    Some(_) => "annotation (a node without a NodeClaim)",
                    None => "none (0)",
                };
                (price, source.to_owned())
            });
        groups.add_node(&key, price, source);
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn machine(labels: Value, owner: Option<(&str, &str)>) -> Value {
        let owners: Vec<Value> = owner
            .map(|(kind, name)| {
                json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind, "name": name,
                       "uid": "u", "controller": true})
            })
            .into_iter()
            .collect();
        json!({"metadata": {"namespace": "ns", "name": "m", "labels": labels,
                            "ownerReferences": owners}})
    }

    #[test]
    fn a_machine_belongs_to_its_deployment_else_its_set_or_pool() {
        let md = machine(
            json!({api::well_known::capi::DEPLOYMENT_NAME: "md"}),
            Some(("MachineSet", "md-x7")),
        );
        assert_eq!(group_of(&md).unwrap().key(), "ns/md");
        let set = machine(json!({}), Some(("MachineSet", "solo")));
        assert_eq!(group_of(&set).unwrap().key(), "MachineSet ns/solo");
        let pool = machine(json!({}), Some(("MachinePool", "mp")));
        assert_eq!(group_of(&pool).unwrap().key(), "MachinePool ns/mp");
        assert_eq!(group_of(&machine(json!({}), None)), None);
        assert_eq!(
            group_of(&machine(json!({}), Some(("KubeadmControlPlane", "cp")))),
            None
        );
    }

    #[test]
    fn each_node_adds_its_own_price_and_the_sources_are_named_once() {
        let group = MachineDeploymentRef::deployment("ns", "md");
        let mut groups = Groups::default();
        groups.by_key.insert(
            group.key(),
            summary(&group, &json!({"spec": {"replicas": 3}})),
        );
        groups.add_node(&group.key(), Some(0.12), "NodeOverlay a".into());
        groups.add_node(&group.key(), Some(0.12), "NodeOverlay a".into());
        groups.add_node(&group.key(), Some(0.2), "annotation".into());
        // A node of a group that is not listed (deleted meanwhile) is not counted.
        groups.add_node("ns/gone", Some(1.0), "annotation".into());
        assert_eq!(groups.nodes(), 3);
        assert!((groups.cost() - 0.44).abs() < 1e-9);
        let summaries = groups.into_summaries();
        assert_eq!(summaries[0].replicas, 3);
        assert!((summaries[0].price_per_hour - 0.12).abs() < 1e-9);
        assert_eq!(summaries[0].price_source, "NodeOverlay a; annotation");
        assert_eq!(summaries[0].kind, "MachineDeployment");
    }
}
