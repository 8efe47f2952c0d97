//! What voluntary disruption would do with a cluster, and why not more (for `plan`).
//!
//! Responsibility: from one set of objects (a cluster dump), the command the disruption loop's
//! next pass would start (the first of emptiness, drift, multi-node and single-node
//! consolidation that finds one, as the loop does), and a verdict for every managed node: in
//! that command, or what it alone could come to in a later pass — removed, replaced (by what),
//! or kept with the reason (a blocking rule, a budget, "would need more than one new node",
//! "not cheaper", a Balanced NodePool's score below 0.5, ...). Each other node is judged alone
//! in the cluster the next command leaves (its nodes gone, their pods on the nodes its
//! simulation chose — pending again when bound for a replacement), so two nodes that could
//! each go alone may not both go. Drift counts a `Drifted` condition in the
//! dump and the drift computable from the dump alone (NodePool hash, requirements, instance
//! type gone); the provider's Machine-template drift and the MachineDeployments' min sizes need
//! the management cluster and are not evaluated. Nomination and pod events are not in a dump:
//! no node is nominated and `consolidateAfter` counts from the NodeClaims' `lastPodEventTime`.
//!
//! Inputs: [`Objects`] and the well-known labels. Output: [`Explanation`]. Pure (no writes,
//! no validation delay).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::nodepool::DisruptionReason;
use scheduling::labels::{NODE_POOL, WellKnownLabels};
use serde::Serialize;

use super::budget_map::{BudgetMap, budget_map};
use super::candidates::{Candidate, Class, Inputs, candidates, is_ours, is_reschedulable};
use super::drift;
use super::floors::Floors;
use super::methods::{self, Command};
use super::simulation::{Objects, World};
use crate::provisioning::inputs::ClusterObjects;
use k8s_openapi::api::core::v1::{Node, Pod};

/// One command a pass would start.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandView {
    /// `emptiness`, `drift`, `multi-node` or `single-node`.
    pub method: String,
    /// `delete` or `replace`.
    pub decision: String,
    /// The nodes removed.
    pub nodes: Vec<String>,
    /// The replacements' cheapest instance types.
    pub replacements: Vec<String>,
    /// Price per hour saved.
    pub savings: f64,
}

/// One managed node's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    /// The node.
    pub node: String,
    /// Its NodePool.
    pub node_pool: String,
    /// `delete`, `replace` or `keep`.
    pub verdict: String,
    /// The command (index into [`Explanation::commands`]) that removes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<usize>,
    /// Why (for kept nodes: what holds them; for the others: the method).
    pub reason: String,
}

/// What disruption would do.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The commands, in the order the passes would start them.
    pub commands: Vec<CommandView>,
    /// Every managed node, by name.
    pub nodes: Vec<NodeVerdict>,
}

fn method_name(m: methods::Method) -> &'static str {
    match m {
        methods::Method::Emptiness => "emptiness",
        methods::Method::Drift => "drift",
        methods::Method::MultiNode => "multi-node",
        methods::Method::SingleNode => "single-node",
    }
}

fn view(cmd: &Command) -> CommandView {
    CommandView {
        method: method_name(cmd.method).into(),
        decision: cmd.decision().to_string(),
        nodes: cmd.nodes(),
        replacements: cmd.replacement_types(),
        savings: cmd.savings,
    }
}

/// One pass's view of a set of objects: candidates (drift computed from the objects too),
/// blocked nodes and the simulation world.
struct Pass<'o, 'a> {
    objects: &'o Objects<'a>,
    world: World,
    graceful: Vec<Candidate>,
    eventual: Vec<Candidate>,
    blocked: BTreeMap<String, String>,
}

impl<'o, 'a> Pass<'o, 'a> {
    fn new(objects: &'o Objects<'a>, well_known: &WellKnownLabels) -> Self {
        let floors = Floors::default();
        let nominated = |_: &str| false;
        let planned = |_: &str| Vec::new();
        let last = |_: &str| None;
        let in_flight = BTreeSet::new();
        let run = |class: Class| {
            candidates(
                &Inputs {
                    nodes: objects.cluster.nodes,
                    node_claims: objects.cluster.node_claims,
                    pods: objects.cluster.pods,
                    pdbs: objects.pdbs,
                    node_pools: objects.node_pools,
                    instance_types: objects.instance_types,
                    in_flight: &in_flight,
                    nominated: &nominated,
                    planned: &planned,
                    last_pod_event: &last,
                    floors: &floors,
                    now: objects.now,
                },
                class,
            )
        };
        let (graceful, blocked) = run(Class::Graceful);
        let (mut eventual, _) = run(Class::Eventual);
        // Drift: the condition in the objects, or what they alone show.
        for c in eventual.iter_mut().filter(|c| c.drifted.is_none()) {
            let nc = objects
                .cluster
                .node_claims
                .iter()
                .find(|nc| nc.metadata.name.as_deref() == Some(c.node_claim.as_str()));
            let pool = objects
                .node_pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(c.node_pool.as_str()));
            if let (Some(nc), Some(pool)) = (nc, pool) {
                let offered = objects.instance_types.get(&c.node_pool);
                let drifted = drift::computable(nc, pool, offered.map(Vec::as_slice), objects.now);
                if drifted.is_some() {
                    c.drifted = Some(objects.now);
                }
            }
        }
        Self {
            objects,
            world: World::new(objects, well_known),
            graceful,
            eventual,
            blocked: blocked.into_iter().map(|b| (b.node, b.reason)).collect(),
        }
    }

    fn budgets(&self, reason: DisruptionReason) -> BudgetMap {
        budget_map(
            self.objects.cluster.nodes,
            self.objects.cluster.node_claims,
            self.objects.node_pools,
            &BTreeSet::new(),
            reason,
            self.objects.now,
        )
    }

    /// The first command of emptiness, drift, multi- and single-node consolidation.
    fn next_command(&self) -> Option<Command> {
        let pools = self.objects.node_pools;
        methods::emptiness(&self.graceful, &mut self.budgets(DisruptionReason::Empty))
            .or_else(|| {
                methods::drift(
                    &self.world,
                    &self.eventual,
                    &mut self.budgets(DisruptionReason::Drifted),
                )
                .0
            })
            .or_else(|| {
                let b = self.budgets(DisruptionReason::Underutilized);
                methods::multi_node(&self.world, &self.graceful, pools, &b)
                    .or_else(|| methods::single_node(&self.world, &self.graceful, pools, &b).0)
            })
    }

    /// What node `name` alone could come to, or why it is kept.
    fn alone(&self, name: &str) -> Result<Command, String> {
        if let Some(why) = self.blocked.get(name) {
            return Err(why.clone());
        }
        let first = |why: Vec<methods::Unconsolidatable>, otherwise: &str| {
            why.into_iter()
                .next()
                .map_or_else(|| otherwise.to_owned(), |u| u.reason)
        };
        if let Some(c) = self
            .eventual
            .iter()
            .find(|c| c.node == name && c.drifted.is_some())
        {
            let (cmd, why) = methods::drift(
                &self.world,
                std::slice::from_ref(c),
                &mut self.budgets(DisruptionReason::Drifted),
            );
            return cmd.ok_or_else(|| first(why, "drifted, but not replaceable now"));
        }
        let Some(c) = self.graceful.iter().find(|c| c.node == name) else {
            return Err("not a candidate".into());
        };
        if c.is_empty() && c.consolidation.is_consolidatable() {
            return methods::emptiness(
                std::slice::from_ref(c),
                &mut self.budgets(DisruptionReason::Empty),
            )
            .ok_or_else(|| methods::budget_blocked(DisruptionReason::Empty));
        }
        let (cmd, why) = methods::single_node(
            &self.world,
            std::slice::from_ref(c),
            self.objects.node_pools,
            &self.budgets(DisruptionReason::Underutilized),
        );
        cmd.ok_or_else(|| first(why, "no cheaper arrangement of its pods was found"))
    }
}

/// The objects once `gone`'s nodes are removed: their NodeClaims go and their pods land where
/// `placed` (pod UID → node) says, or wait to be scheduled again (pending, unschedulable).
fn without(
    objects: &Objects<'_>,
    gone: &BTreeSet<String>,
    placed: &BTreeMap<String, String>,
) -> (Vec<Node>, Vec<api::NodeClaim>, Vec<Arc<Pod>>) {
    let named = |n: Option<&str>| n.is_some_and(|n| gone.contains(n));
    let nodes = objects
        .cluster
        .nodes
        .iter()
        .filter(|n| !named(n.metadata.name.as_deref()))
        .cloned()
        .collect();
    let claims = objects
        .cluster
        .node_claims
        .iter()
        .filter(|nc| !named(nc.status.as_ref().and_then(|s| s.node_name.as_deref())))
        .cloned()
        .collect();
    let pods = objects
        .cluster
        .pods
        .iter()
        .filter_map(|p| {
            if !named(p.spec.as_ref().and_then(|s| s.node_name.as_deref())) {
                return Some(Arc::clone(p));
            }
            if !is_reschedulable(p) {
                return None;
            }
            let mut p = Pod::clone(p);
            let to = p.metadata.uid.as_ref().and_then(|uid| placed.get(uid));
            if let Some(spec) = p.spec.as_mut() {
                spec.node_name = to.cloned();
            }
            if to.is_some() {
                return Some(Arc::new(p));
            }
            p.status = Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Pending".into()),
                conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            });
            Some(Arc::new(p))
        })
        .collect();
    (nodes, claims, pods)
}

/// Explains what disruption would do with `objects`.
#[must_use]
pub fn explain(objects: &Objects<'_>, well_known: &WellKnownLabels) -> Explanation {
    let first = Pass::new(objects, well_known);
    let next = first.next_command();
    let next_nodes: BTreeSet<String> = next
        .as_ref()
        .map(Command::nodes)
        .unwrap_or_default()
        .into_iter()
        .collect();
    // Where the next command's simulation puts the pods of its nodes (existing nodes only; a
    // pod bound for a replacement is pending in the "after" cluster).
    let placed: BTreeMap<String, String> = next
        .as_ref()
        .map(|cmd| {
            let gone: Vec<&Candidate> = cmd.candidates.iter().collect();
            first
                .world
                .simulate(&gone)
                .results
                .existing_nodes
                .into_iter()
                .flat_map(|b| {
                    let node = b.node.to_string();
                    b.pods
                        .into_iter()
                        .map(move |uid| (uid.to_string(), node.clone()))
                })
                .collect()
        })
        .unwrap_or_default();
    drop(first);
    // The other nodes are judged in the cluster the next command leaves.
    let (nodes_after, claims_after, pods_after) = without(objects, &next_nodes, &placed);
    let after_objects = Objects {
        cluster: ClusterObjects {
            nodes: &nodes_after,
            node_claims: &claims_after,
            pods: &pods_after,
            ..objects.cluster
        },
        ..*objects
    };
    let after = Pass::new(&after_objects, well_known);
    let ours: BTreeSet<&str> = objects
        .cluster
        .node_claims
        .iter()
        .filter(|nc| is_ours(nc))
        .filter_map(|nc| nc.status.as_ref()?.node_name.as_deref())
        .collect();
    let mut nodes = Vec::new();
    for node in objects.cluster.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(pool) = node.metadata.labels.as_ref().and_then(|l| l.get(NODE_POOL)) else {
            continue;
        };
        if !ours.contains(name.as_str()) && !after.blocked.contains_key(&name) {
            continue;
        }
        let in_next = next_nodes.contains(&name);
        let judged = match &next {
            Some(cmd) if in_next => Ok(cmd.clone()),
            _ => after.alone(&name),
        };
        let (verdict, reason) = match judged {
            Ok(cmd) => (cmd.decision().to_string(), why(&cmd, in_next)),
            Err(reason) => ("keep".to_owned(), reason),
        };
        nodes.push(NodeVerdict {
            node: name,
            node_pool: pool.clone(),
            verdict,
            command: in_next.then_some(0),
            reason,
        });
    }
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    Explanation {
        commands: next.iter().map(view).collect(),
        nodes,
    }
}

fn why(cmd: &Command, in_next: bool) -> String {
    let what = match (cmd.method, cmd.decision()) {
        (methods::Method::Emptiness, _) => "empty".to_owned(),
        (methods::Method::Drift, methods::Decision::Delete) => {
            "drifted; its pods fit on other nodes".to_owned()
        }
        (methods::Method::Drift, methods::Decision::Replace) => format!(
            "drifted; replaced by {}",
            cmd.replacement_types().join(", ")
        ),
        (m, methods::Decision::Delete) => {
            format!("{}: its pods fit on other nodes", method_name(m))
        }
        (m, methods::Decision::Replace) => format!(
            "{}: a cheaper node ({}) takes its pods",
            method_name(m),
            cmd.replacement_types().join(", ")
        ),
    };
    if in_next {
        format!("{what} (the next command)")
    } else {
        format!("{what} (alone, after the next command)")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::disruption::testing::{Fixture, instance_type, marginal_replacements};

    fn verdicts(e: &Explanation) -> Vec<(&str, &str)> {
        e.nodes
            .iter()
            .map(|n| (n.node.as_str(), n.verdict.as_str()))
            .collect()
    }

    #[test]
    fn the_cluster_after_the_next_command_has_its_pods_where_it_put_them() {
        let it = instance_type("m", 4, 1.0);
        let mut f = Fixture::default();
        f.pool("p", vec![it.clone()]);
        f.node("a", "p", &it).node("b", "p", &it);
        f.pod("moved", Some("a"), "1");
        f.pod("stays", Some("b"), "1");
        f.pod("homeless", Some("a"), "1");
        let objects = f.objects();
        let gone = BTreeSet::from(["a".to_owned()]);
        let placed = BTreeMap::from([("uid-moved".to_owned(), "b".to_owned())]);
        let (nodes, claims, pods) = without(&objects, &gone, &placed);
        assert_eq!(nodes.len(), 1);
        assert_eq!(claims.len(), 1);
        let pod = |name: &str| {
            pods.iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .unwrap()
        };
        let phase = |name: &str| pod(name).status.as_ref().unwrap().phase.clone().unwrap();
        let on = |name: &str| pod(name).spec.as_ref().unwrap().node_name.clone();
        assert_eq!(
            (on("moved"), phase("moved")),
            (Some("b".into()), "Running".into())
        );
        assert_eq!(
            (on("stays"), phase("stays")),
            (Some("b".into()), "Running".into())
        );
        assert_eq!(
            (on("homeless"), phase("homeless")),
            (None, "Pending".into())
        );
    }

    #[test]
    fn every_node_gets_a_verdict_and_the_kept_ones_a_reason() {
        let big = instance_type("big", 8, 0.8);
        let huge = instance_type("huge", 16, 1.6);
        let mut f = Fixture::default();
        f.pool("default", vec![big.clone(), huge.clone()]);
        for i in 0..4 {
            f.node(&format!("n{i}"), "default", &big);
        }
        f.node("n4", "default", &huge);
        // n0 empty; n1 and n2 half-empty (one goes); n3 holds a pod under a PDB allowing none;
        // n4's pod fits only on its own type.
        f.pod("a", Some("n1"), "3");
        f.pod("b", Some("n2"), "3");
        f.pod("guarded", Some("n3"), "1");
        f.pdb("guarded", 0);
        f.pod("full", Some("n4"), "9");
        let e = f.explain();
        assert_eq!(e.commands[0].method, "emptiness");
        assert_eq!(e.commands[0].nodes, ["n0"]);
        assert_eq!(
            verdicts(&e),
            [
                ("n0", "delete"),
                ("n1", "delete"),
                ("n2", "delete"),
                ("n3", "keep"),
                ("n4", "keep")
            ],
            "{e:#?}"
        );
        assert_eq!(e.nodes[0].command, Some(0));
        assert!(e.nodes[0].reason.contains("next command"), "{e:#?}");
        assert_eq!(e.nodes[1].command, None);
        assert!(
            e.nodes[1].reason.contains("after the next command"),
            "{e:#?}"
        );
        assert!(e.nodes[3].reason.contains("guarded"), "{e:#?}");
        assert!(!e.nodes[4].reason.is_empty(), "{e:#?}");
    }

    #[test]
    fn a_node_a_balanced_pool_keeps_is_explained_by_its_score() {
        let mut f = marginal_replacements();
        let e = f.explain();
        assert_eq!(e.commands[0].method, "single-node");
        assert_eq!(e.commands[0].nodes, ["s-half"], "{e:#?}");
        // The Balanced pool alone: nothing to do, and why.
        let ours = |name: Option<&str>| name.is_some_and(|n| n.starts_with("b-"));
        f.nodes.retain(|n| ours(n.metadata.name.as_deref()));
        f.node_claims.retain(|n| ours(n.metadata.name.as_deref()));
        f.pods.retain(|p| ours(p.metadata.name.as_deref()));
        let e = f.explain();
        assert!(e.commands.is_empty(), "{e:#?}");
        let half = e.nodes.iter().find(|n| n.node == "b-half").unwrap();
        assert_eq!(half.verdict, "keep");
        assert_eq!(
            half.reason,
            "Balanced score 0.10 is below 0.5 (savings 5.0% of the NodePool's cost, disruption 50.0% of its disruption cost)"
        );
    }
}
