//! The safety invariants the chaos rounds check, as pure functions of one snapshot.
//!
//! Responsibility: given what the management and workload clusters hold (a [`Snapshot`] of
//! plain JSON objects) and what was there before the controller ever ran ([`Protected`]), name
//! every broken invariant. A round is settled when [`check`] returns nothing.
//! - [`Invariant::ForeignUntouched`]: every Machine that existed before the controller started
//!   (pre-existing members, non-members, other clusters' claims) is still there, not deleting,
//!   with the same Karpenter and `delete-machine` annotations; the MachineDeployments we were
//!   never asked to manage keep their replicas and carry no record of ours;
//! - [`Invariant::ReplicasMatchMachines`]: each MachineDeployment's `spec.replicas` equals its
//!   live (not deleting) Machines: no leaked replica, no missing one;
//! - [`Invariant::MachinesClaimedOrRemoved`]: every other Machine of a MachineDeployment we use
//!   is claimed (name and UID) by a live NodeClaim of this cluster, and no NodeClaim holds two;
//! - [`Invariant::NoNodeClaimStuck`]: every NodeClaim is Ready and not deleting, and its Machine
//!   exists;
//! - [`Invariant::PodsRunning`]: every pod of the workloads is Running, as many as asked for.
//!
//! [`Invariant::PdbRespected`], [`Invariant::NoRunaway`], [`Invariant::DriftReplaced`] and
//! [`Invariant::RolledOut`] are checked over time by the round runner (a pod watch; the
//! replicas of a paused or held group; the replacement of a group's Machines after its
//! template changed, within the disruption budget; the end of a rollout Cluster API drives)
//! and only named here.
//! Inputs: [`Snapshot`], [`Protected`]. Outputs: [`Violation`]s.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

pub use api::well_known::capi::{DELETE_MACHINE, DEPLOYMENT_NAME};
pub use clusterapi::provider::{CLAIMED_BY, CLAIMED_BY_CLUSTER, CLAIMED_BY_UID};

/// The invariants, in the order of the report's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invariant {
    /// Nothing we don't own was touched.
    ForeignUntouched,
    /// MachineDeployment replicas equal live Machines.
    ReplicasMatchMachines,
    /// Every Machine we use is claimed by a live NodeClaim (or gone).
    MachinesClaimedOrRemoved,
    /// No NodeClaim stuck.
    NoNodeClaimStuck,
    /// Every pod Running.
    PodsRunning,
    /// No PodDisruptionBudget violated, no pod deleted outside the Eviction API.
    PdbRespected,
    /// A group whose Machines never come does not get replicas beyond the NodeClaims waiting.
    NoRunaway,
    /// After a template change, our Machines of the old template are replaced, never more
    /// NodeClaims at once than the disruption budget allows.
    DriftReplaced,
    /// A `RollingUpdate` template change ends: Cluster API replaced every Machine, and the new
    /// ones are claimed (the other invariants) without Karpenter replacing them too.
    RolledOut,
}

impl Invariant {
    /// Every invariant.
    pub const ALL: [Invariant; 9] = [
        Invariant::ForeignUntouched,
        Invariant::ReplicasMatchMachines,
        Invariant::MachinesClaimedOrRemoved,
        Invariant::NoNodeClaimStuck,
        Invariant::PodsRunning,
        Invariant::PdbRespected,
        Invariant::NoRunaway,
        Invariant::DriftReplaced,
        Invariant::RolledOut,
    ];

    /// Its name in the report.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Invariant::ForeignUntouched => "no Machine we don't own touched",
            Invariant::ReplicasMatchMachines => "MD replicas == live Machines",
            Invariant::MachinesClaimedOrRemoved => "every Machine claimed by a live NodeClaim",
            Invariant::NoNodeClaimStuck => "no NodeClaim stuck",
            Invariant::PodsRunning => "every pod Running",
            Invariant::PdbRespected => "no PDB violated, no pod deleted directly",
            Invariant::NoRunaway => "no replica runaway on a stuck group",
            Invariant::DriftReplaced => "drifted Machines replaced within budget",
            Invariant::RolledOut => "rollouts end with every Machine claimed",
        }
    }
}

/// One broken invariant and what breaks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which.
    pub invariant: Invariant,
    /// The objects and values involved.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant.name(), self.detail)
    }
}

/// What the clusters hold at one moment (JSON objects as the API returns them).
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The node groups (management cluster): MachineDeployments, stand-alone MachineSets and
    /// MachinePools (their names are unique across the kinds in the chaos world).
    pub machine_deployments: Vec<Value>,
    /// Machines (management cluster).
    pub machines: Vec<Value>,
    /// NodeClaims (workload cluster).
    pub node_claims: Vec<Value>,
    /// Pods (workload cluster).
    pub pods: Vec<Value>,
    /// The pods asked for: the sum of the workloads' replicas.
    pub pods_wanted: usize,
}

/// What existed before the controller started, and what it was given.
#[derive(Debug, Clone, Default)]
pub struct Protected {
    /// This workload cluster's identity (the claim annotation's value).
    pub cluster_id: String,
    /// Machines by name: the annotations that must not change (ours and `delete-machine`).
    pub machines: BTreeMap<String, BTreeMap<String, String>>,
    /// Node groups we were never asked to manage, with their replicas.
    pub unmanaged: BTreeMap<String, i64>,
    /// MachineDeployments the controller may use.
    pub managed: BTreeSet<String>,
}

/// The annotations of `obj` that ownership rests on: the Karpenter domain and
/// `delete-machine`.
#[must_use]
pub fn guarded_annotations(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, "/metadata/annotations")
        .into_iter()
        .filter(|(k, _)| k.starts_with("karpenter.cluster.x-k8s.io/") || k == DELETE_MACHINE)
        .collect()
}

fn string_map(obj: &Value, pointer: &str) -> BTreeMap<String, String> {
    obj.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The string at a JSON pointer, or `""`.
pub(crate) fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// `metadata.name`, or `""`.
pub(crate) fn name(obj: &Value) -> &str {
    text(obj, "/metadata/name")
}

/// Whether `metadata.deletionTimestamp` is set.
pub(crate) fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// The node group a Machine or MachineSet belongs to: its MachineDeployment (CAPI's
/// `deployment-name` label), else the stand-alone MachineSet or MachinePool controlling it (a
/// MachineSet's controller is its MachineDeployment, which carries the label), or `""`.
pub(crate) fn group_of(obj: &Value) -> &str {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(DEPLOYMENT_NAME))
        .and_then(Value::as_str)
        .or_else(|| {
            obj.pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)?
                .iter()
                .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
                .and_then(|o| o.get("name"))
                .and_then(Value::as_str)
        })
        .unwrap_or("")
}

/// The annotation `key`, if set.
pub(crate) fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// A node group's kind (`MachineDeployment` when the object does not say).
fn kind_of(group: &Value) -> &str {
    match text(group, "/kind") {
        "" => "MachineDeployment",
        kind => kind,
    }
}

fn replicas(md: &Value) -> i64 {
    md.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn condition_true(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| text(c, "/type") == kind && text(c, "/status") == "True")
        })
}

/// Every invariant that [`Snapshot`] alone decides, broken or not.
#[must_use]
pub fn check(s: &Snapshot, p: &Protected) -> Vec<Violation> {
    let mut out = Vec::new();
    foreign_untouched(s, p, &mut out);
    replicas_match(s, &mut out);
    claimed_or_removed(s, p, &mut out);
    no_node_claim_stuck(s, p, &mut out);
    pods_running(s, &mut out);
    out
}

fn push(out: &mut Vec<Violation>, invariant: Invariant, detail: String) {
    out.push(Violation { invariant, detail });
}

fn foreign_untouched(s: &Snapshot, p: &Protected, out: &mut Vec<Violation>) {
    let machines: BTreeMap<&str, &Value> = s.machines.iter().map(|m| (name(m), m)).collect();
    for (n, before) in &p.machines {
        match machines.get(n.as_str()) {
            None => push(
                out,
                Invariant::ForeignUntouched,
                format!("Machine {n} is gone"),
            ),
            Some(m) if deleting(m) => push(
                out,
                Invariant::ForeignUntouched,
                format!("Machine {n} is being deleted"),
            ),
            Some(m) => {
                let now = guarded_annotations(m);
                if &now != before {
                    push(
                        out,
                        Invariant::ForeignUntouched,
                        format!("Machine {n}: annotations {before:?} became {now:?}"),
                    );
                }
            }
        }
    }
    let record = format!("karpenter.cluster.x-k8s.io/raised-{}", p.cluster_id);
    for md in &s.machine_deployments {
        let n = name(md);
        if let Some(want) = p.unmanaged.get(n) {
            if replicas(md) != *want {
                push(
                    out,
                    Invariant::ForeignUntouched,
                    format!(
                        "{} {n}: replicas {} (was {want})",
                        kind_of(md),
                        replicas(md)
                    ),
                );
            }
            if annotation(md, &record).is_some() {
                push(
                    out,
                    Invariant::ForeignUntouched,
                    format!("{} {n} carries our record {record}", kind_of(md)),
                );
            }
        }
    }
}

fn replicas_match(s: &Snapshot, out: &mut Vec<Violation>) {
    let mut live: BTreeMap<&str, i64> = BTreeMap::new();
    for m in s.machines.iter().filter(|m| !deleting(m)) {
        let md = group_of(m);
        *live.entry(md).or_default() += 1;
    }
    for md in &s.machine_deployments {
        let n = name(md);
        let have = live.get(n).copied().unwrap_or(0);
        if replicas(md) != have {
            push(
                out,
                Invariant::ReplicasMatchMachines,
                format!(
                    "{} {n}: replicas {} but {have} live Machines",
                    kind_of(md),
                    replicas(md)
                ),
            );
        }
    }
}

fn claimed_or_removed(s: &Snapshot, p: &Protected, out: &mut Vec<Violation>) {
    let claims: BTreeMap<&str, &str> = s
        .node_claims
        .iter()
        .filter(|nc| !deleting(nc))
        .map(|nc| (name(nc), text(nc, "/metadata/uid")))
        .collect();
    let mut holders: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in &s.machines {
        let n = name(m);
        let md = group_of(m);
        if p.machines.contains_key(n) || !p.managed.contains(md) || deleting(m) {
            continue;
        }
        let claim = annotation(m, CLAIMED_BY);
        let ok = annotation(m, CLAIMED_BY_CLUSTER) == Some(p.cluster_id.as_str())
            && claim.is_some_and(|c| claims.get(c).copied() == annotation(m, CLAIMED_BY_UID));
        if ok {
            if let Some(c) = claim {
                holders.entry(c).or_default().push(n);
            }
        } else {
            push(
                out,
                Invariant::MachinesClaimedOrRemoved,
                format!("Machine {n} of {md} is not claimed by a live NodeClaim (claim {claim:?})"),
            );
        }
    }
    for (nc, ms) in holders.into_iter().filter(|(_, ms)| ms.len() > 1) {
        push(
            out,
            Invariant::MachinesClaimedOrRemoved,
            format!("NodeClaim {nc} holds {} Machines: {ms:?}", ms.len()),
        );
    }
}

fn no_node_claim_stuck(s: &Snapshot, p: &Protected, out: &mut Vec<Violation>) {
    let claimed: BTreeSet<&str> = s
        .machines
        .iter()
        .filter(|m| annotation(m, CLAIMED_BY_CLUSTER) == Some(p.cluster_id.as_str()))
        .filter_map(|m| annotation(m, CLAIMED_BY))
        .collect();
    for nc in &s.node_claims {
        let n = name(nc);
        if deleting(nc) {
            push(
                out,
                Invariant::NoNodeClaimStuck,
                format!("NodeClaim {n} is deleting"),
            );
        } else if !condition_true(nc, "Ready") {
            push(
                out,
                Invariant::NoNodeClaimStuck,
                format!("NodeClaim {n} is not Ready"),
            );
        } else if !claimed.contains(n) {
            push(
                out,
                Invariant::NoNodeClaimStuck,
                format!("NodeClaim {n} is Ready but no Machine is claimed for it"),
            );
        }
    }
}

fn pods_running(s: &Snapshot, out: &mut Vec<Violation>) {
    let live: Vec<&Value> = s.pods.iter().filter(|p| !deleting(p)).collect();
    let not_running: Vec<&str> = live
        .iter()
        .filter(|p| text(p, "/status/phase") != "Running")
        .map(|p| name(p))
        .collect();
    if live.len() != s.pods_wanted || !not_running.is_empty() {
        let mut shown: Vec<&str> = not_running.iter().take(5).copied().collect();
        if not_running.len() > 5 {
            shown.push("…");
        }
        push(
            out,
            Invariant::PodsRunning,
            format!(
                "{} pods, {} wanted, not Running: {shown:?}",
                live.len(),
                s.pods_wanted
            ),
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use serde_json::json;

    fn md(name: &str, replicas: i64) -> Value {
        json!({"metadata": {"name": name, "annotations": {}}, "spec": {"replicas": replicas}})
    }

    fn machine(name: &str, md: &str, annotations: Value) -> Value {
        json!({"metadata": {"name": name, "labels": {DEPLOYMENT_NAME: md},
            "annotations": annotations}})
    }

    fn claimed(name: &str, md: &str, nc: &str, uid: &str) -> Value {
        machine(
            name,
            md,
            json!({CLAIMED_BY: nc, CLAIMED_BY_UID: uid, CLAIMED_BY_CLUSTER: "us"}),
        )
    }

    fn node_claim(name: &str, uid: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "uid": uid}, "status": {"conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "Unknown" }}]}})
    }

    fn pod(name: &str, phase: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"phase": phase}})
    }

    fn protected() -> Protected {
        Protected {
            cluster_id: "us".into(),
            machines: BTreeMap::from([(
                "legacy-1".to_owned(),
                BTreeMap::from([(CLAIMED_BY_CLUSTER.to_owned(), "them".to_owned())]),
            )]),
            unmanaged: BTreeMap::from([("static".to_owned(), 1)]),
            managed: BTreeSet::from(["m4".to_owned()]),
        }
    }

    fn settled() -> Snapshot {
        Snapshot {
            machine_deployments: vec![md("m4", 2), md("static", 1)],
            machines: vec![
                machine("legacy-1", "m4", json!({CLAIMED_BY_CLUSTER: "them"})),
                claimed("m4-x", "m4", "nc-1", "u1"),
                machine("static-1", "static", json!({})),
            ],
            node_claims: vec![node_claim("nc-1", "u1", true)],
            pods: vec![pod("a", "Running")],
            pods_wanted: 1,
        }
    }

    fn broken(s: &Snapshot) -> Vec<Invariant> {
        check(s, &protected()).iter().map(|v| v.invariant).collect()
    }

    #[test]
    fn a_settled_world_breaks_nothing() {
        assert_eq!(check(&settled(), &protected()), vec![]);
    }

    #[test]
    fn machines_of_a_machine_set_or_pool_count_for_it_and_a_scaled_pool_is_named() {
        let mut s = settled();
        let mut pool = md("bare", 1);
        pool["kind"] = json!("MachinePool");
        s.machine_deployments.push(pool);
        s.machines
            .push(json!({"metadata": {"name": "bare-0", "annotations": {},
            "ownerReferences": [{"kind": "MachinePool", "name": "bare", "controller": true}]}}));
        assert_eq!(group_of(&s.machines[3]), "bare");
        assert_eq!(check(&s, &protected()), vec![]);
        let mut p = protected();
        p.unmanaged.insert("bare".to_owned(), 0);
        let violations = check(&s, &p);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert_eq!(violations[0].invariant, Invariant::ForeignUntouched);
        assert!(
            violations[0]
                .detail
                .starts_with("MachinePool bare: replicas 1 (was 0)"),
            "{}",
            violations[0].detail
        );
    }

    #[test]
    fn a_foreign_machine_claimed_annotated_or_deleted_is_named() {
        let mut s = settled();
        s.machines[0]["metadata"]["annotations"][DELETE_MACHINE] = json!("yes");
        assert_eq!(broken(&s), vec![Invariant::ForeignUntouched]);
        let mut s = settled();
        s.machines[0]["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(broken(&s).contains(&Invariant::ForeignUntouched));
        let mut s = settled();
        s.machines.remove(0);
        assert!(broken(&s).contains(&Invariant::ForeignUntouched));
    }

    #[test]
    fn an_unmanaged_group_scaled_or_recorded_is_named() {
        let mut s = settled();
        s.machine_deployments[1]["spec"]["replicas"] = json!(0);
        assert!(broken(&s).contains(&Invariant::ForeignUntouched));
        let mut s = settled();
        s.machine_deployments[1]["metadata"]["annotations"]["karpenter.cluster.x-k8s.io/raised-us"] =
            json!("{}");
        assert_eq!(broken(&s), vec![Invariant::ForeignUntouched]);
    }

    #[test]
    fn a_leaked_replica_is_named() {
        let mut s = settled();
        s.machine_deployments[0]["spec"]["replicas"] = json!(3);
        assert_eq!(broken(&s), vec![Invariant::ReplicasMatchMachines]);
    }

    #[test]
    fn an_unclaimed_or_stale_claimed_machine_is_named() {
        let mut s = settled();
        s.machines.push(machine("m4-y", "m4", json!({})));
        s.machine_deployments[0]["spec"]["replicas"] = json!(3);
        assert_eq!(broken(&s), vec![Invariant::MachinesClaimedOrRemoved]);
        // A claim naming a NodeClaim that was deleted and recreated under the same name.
        let mut s = settled();
        s.node_claims[0]["metadata"]["uid"] = json!("u2");
        assert_eq!(broken(&s), vec![Invariant::MachinesClaimedOrRemoved]);
        // Two Machines for one NodeClaim.
        let mut s = settled();
        s.machines.push(claimed("m4-y", "m4", "nc-1", "u1"));
        s.machine_deployments[0]["spec"]["replicas"] = json!(3);
        assert_eq!(broken(&s), vec![Invariant::MachinesClaimedOrRemoved]);
    }

    #[test]
    fn a_deleting_unready_or_machineless_node_claim_is_stuck() {
        let mut s = settled();
        s.node_claims[0]["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert!(broken(&s).contains(&Invariant::NoNodeClaimStuck));
        let mut s = settled();
        s.node_claims.push(node_claim("nc-2", "u2", false));
        assert_eq!(broken(&s), vec![Invariant::NoNodeClaimStuck]);
        let mut s = settled();
        s.node_claims.push(node_claim("nc-2", "u2", true));
        assert_eq!(broken(&s), vec![Invariant::NoNodeClaimStuck]);
    }

    #[test]
    fn pending_or_missing_pods_are_named() {
        let mut s = settled();
        s.pods.push(pod("b", "Pending"));
        s.pods_wanted = 2;
        assert_eq!(broken(&s), vec![Invariant::PodsRunning]);
        let mut s = settled();
        s.pods_wanted = 2;
        assert_eq!(broken(&s), vec![Invariant::PodsRunning]);
    }
}
