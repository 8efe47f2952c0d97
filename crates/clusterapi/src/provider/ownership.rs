//! The ownership record: which replicas of a MachineDeployment this controller raised, and so
//! which Machines are ours to claim or to collect.
//!
//! A MachineDeployment's Machines are anonymous replicas: nothing on a Machine says why the
//! MachineSet created it. So ownership is written down on the MachineDeployment itself, in the
//! annotation `karpenter.cluster.x-k8s.io/raised-<cluster>` ([`record_key`]; `<cluster>` is
//! this workload cluster's identity, so Karpenters of several workload clusters keep separate
//! records). Its value is a JSON [`Record`]:
//! - `raised`: the replicas this controller added and has not taken away again. It changes
//!   **in the same compare-and-set write as `spec.replicas`** (one JSON merge patch of the
//!   MachineDeployment carrying its resourceVersion), so no crash can separate the two: every
//!   raise is `+n` on both, every removal of one of our Machines `-1` on both;
//! - `baseline`: the names of the MachineDeployment's Machines that were **not** ours when
//!   `raised` last grew from "every raised replica is claimed" (taken from a fresh list, not
//!   the cache). A Machine in the baseline is never claimed and never collected, whatever its
//!   age or labels — that is the cluster-autoscaler migration path: labelling a running
//!   MachineDeployment changes nothing for its running Machines;
//! - `removed`: Machines whose removal is already accounted for — `scaledDown` (replicas and
//!   `raised` were lowered for it) or `deleted` (at the min size: deleted directly, replicas
//!   kept) — until they are gone. A removal first writes `delete-machine` and
//!   [`REMOVED_BY`] on the Machine, then this record; a Machine carrying our [`REMOVED_BY`]
//!   but missing here was interrupted between the two (a failed write, a restart), and the
//!   next delete or the collector finishes it — exactly once, since the finishing write
//!   records it here in the same compare-and-set as the replicas.
//!
//! Derived, not stored: a Machine is **in use** when a NodeClaim of this cluster claimed it or
//! this cluster is removing it, and its removal is not accounted for in `removed` yet;
//! `free = raised - in use` replicas are raised but unclaimed. A Machine is **ours and
//! unclaimed** when it is fresh (no claim, not terminating), of this MachineDeployment and not
//! in the baseline, and only while `free > 0`: creates claim only such Machines, and the
//! collector removes only such Machines (and at most `free` minus the creates waiting). A
//! claimed Machine that someone else deletes gives its replica back to `free` once it is gone,
//! or while it drains if an unclaimed replacement already stands ([`Record::free`]); the
//! MachineSet's replacement is then ours to reuse or collect.
//!
//! Limits (documented, accepted): while `free > 0`, a Machine created by someone else after the
//! baseline was taken (a rollout or remediation replacement) is indistinguishable from ours;
//! at most `free` of them can be taken, and only fresh, unclaimed ones.
//!
//! Responsibility: the record's format and the pure rules above. Inputs: a MachineDeployment,
//! its Machines, the cluster identity. Outputs: [`Record`], counts, predicates, patches.

use std::collections::{BTreeMap, BTreeSet};

use api::{Machine, MachineDeployment};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{annotation, claimed_by, unclaimed};

/// Machine annotation written with `delete-machine`: the identity of the workload cluster
/// removing it.
pub const REMOVED_BY: &str = "karpenter.cluster.x-k8s.io/removed-by";

/// Whether `cluster` is removing `m` (it wrote [`REMOVED_BY`]).
#[must_use]
pub fn removed_by(m: &Machine, cluster: &str) -> bool {
    annotation(&m.metadata, REMOVED_BY) == Some(cluster)
}

/// How a removal was accounted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Removed {
    /// Replicas (and `raised`) were lowered; the MachineSet deletes the Machine.
    ScaledDown,
    /// At the min size: the Machine was deleted directly; replicas stay (the MachineSet
    /// replaces it).
    Deleted,
}

/// The annotation key of `cluster`'s record (on the MachineDeployment).
#[must_use]
pub fn record_key(cluster: &str) -> String {
    format!("karpenter.cluster.x-k8s.io/raised-{cluster}")
}

/// What this controller owns of one MachineDeployment (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Replicas raised and not taken away again.
    #[serde(default)]
    pub raised: i32,
    /// Machines that are not ours (never claimed, never collected).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub baseline: BTreeSet<String>,
    /// Machines whose removal is accounted for, until they are gone.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub removed: BTreeMap<String, Removed>,
}

/// A record that cannot be read: never guessed, reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MachineDeployment annotation {key} is not a valid ownership record ({reason}): {value:?}")]
pub struct RecordError {
    /// The annotation.
    pub key: String,
    /// Its value.
    pub value: String,
    /// Why it is invalid.
    pub reason: String,
}

impl Record {
    /// `cluster`'s record on `md` (absent: empty).
    ///
    /// # Errors
    /// [`RecordError`] when the annotation is not a record.
    pub fn of(md: &MachineDeployment, cluster: &str) -> Result<Self, RecordError> {
        let key = record_key(cluster);
        let Some(text) = annotation(&md.metadata, &key) else {
            return Ok(Self::default());
        };
        let invalid = |reason: String| RecordError {
            key: key.clone(),
            value: text.to_owned(),
            reason,
        };
        let record: Self = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if record.raised < 0 {
            return Err(invalid("raised is negative".into()));
        }
        Ok(record)
    }

    /// The annotation value to write (`null` removes an empty record).
    #[must_use]
    pub fn to_annotation(&self) -> Value {
        if self.is_empty() {
            return Value::Null;
        }
        serde_json::to_string(self).map_or(Value::Null, Value::String)
    }

    /// Nothing raised, nothing being removed: the record can go.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.raised == 0 && self.removed.is_empty()
    }

    /// How `m`'s removal was accounted for, if it was.
    #[must_use]
    pub fn removal_of(&self, m: &Machine) -> Option<Removed> {
        self.removed.get(m.metadata.name.as_deref()?).copied()
    }

    /// Forget removed Machines that no longer exist (`exists` false).
    pub fn prune(&mut self, exists: impl Fn(&str) -> bool) {
        self.removed.retain(|name, _| exists(name));
    }

    /// Whether `m` may be ours: it is not in the baseline.
    #[must_use]
    pub fn newborn(&self, m: &Machine) -> bool {
        m.metadata
            .name
            .as_ref()
            .is_some_and(|n| !self.baseline.contains(n))
    }

    /// Replicas raised and not claimed: `raised` minus the Machines of `machines` (this
    /// MachineDeployment's) in use by `cluster` — claimed by it (or by this process, `local`),
    /// or being removed by it — whose removal is not accounted for yet.
    ///
    /// A claimed Machine someone else deletes (a rollout, a deletion by hand: a
    /// deletionTimestamp and no [`REMOVED_BY`] of ours) still holds its replica, except where a
    /// replacement already stands: as many of them as there are unclaimed newborn Machines
    /// beyond the `waiting` creates' give their replicas back. In a rollout Cluster API makes
    /// the new Machine before it deletes the old one, and a create claims it instead of raising
    /// a second replica; a MachineSet replaces a Machine deleted by hand only once it is gone,
    /// and a create for the pods its drain evicts raises a replica instead of waiting for a
    /// drain that may need those very pods running elsewhere (a PodDisruptionBudget).
    #[must_use]
    pub fn free<'a>(
        &self,
        machines: impl IntoIterator<Item = &'a Machine>,
        cluster: &str,
        local: impl Fn(&Machine) -> bool,
        waiting: usize,
    ) -> usize {
        let (mut held, mut draining, mut fresh) = (0_usize, 0_usize, 0_usize);
        for m in machines {
            let ours = removed_by(m, cluster);
            let claimed = claimed_by(m, cluster) || local(m);
            if (ours || claimed) && self.removal_of(m).is_some() {
                continue;
            }
            if ours || (claimed && m.metadata.deletion_timestamp.is_none()) {
                held += 1;
            } else if claimed {
                draining += 1;
            } else if unclaimed(m) && self.newborn(m) {
                fresh += 1;
            }
        }
        let replaced = draining.min(fresh.saturating_sub(waiting));
        usize::try_from(self.raised)
            .unwrap_or(0)
            .saturating_sub(held + draining - replaced)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::CLAIMED_BY_CLUSTER;
    use serde_json::json;

    fn md(annotations: Value) -> MachineDeployment {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md", "namespace": "ns", "annotations": annotations},
            "spec": {"clusterName": "c", "template": {"spec": {"clusterName": "c",
                "bootstrap": {}, "infrastructureRef": {"kind": "T", "name": "t"}}}},
        }))
        .unwrap_or_else(|e| unreachable!("{e}"))
    }

    fn machine(name: &str, cluster: Option<&str>) -> Machine {
        let annotations = cluster.map_or(json!({}), |c| json!({CLAIMED_BY_CLUSTER: c}));
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"kind": "T", "name": "t"}},
        }))
        .unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn a_missing_record_is_empty_and_a_malformed_one_an_error() {
        assert_eq!(Record::of(&md(json!({})), "c1"), Ok(Record::default()));
        let key = record_key("c1");
        let bad = Record::of(&md(json!({&key: "{raised: 1"})), "c1").unwrap_err();
        assert_eq!(bad.key, key);
        assert!(Record::of(&md(json!({&key: r#"{"raised":-1}"#})), "c1").is_err());
        let other = Record::of(&md(json!({record_key("c2"): r#"{"raised":3}"#})), "c1");
        assert_eq!(
            other,
            Ok(Record::default()),
            "another cluster's record is not ours"
        );
    }

    #[test]
    fn records_round_trip_and_an_empty_one_is_removed() {
        let r = Record {
            raised: 2,
            baseline: ["m-0".to_owned()].into(),
            removed: [("m-1".to_owned(), Removed::ScaledDown)].into(),
        };
        let key = record_key("c1");
        assert_eq!(
            Record::of(&md(json!({&key: r.to_annotation()})), "c1"),
            Ok(r)
        );
        assert_eq!(Record::default().to_annotation(), Value::Null);
    }

    #[test]
    fn free_replicas_are_raised_minus_our_claims() {
        let r = Record {
            raised: 3,
            baseline: ["old".to_owned()].into(),
            removed: BTreeMap::new(),
        };
        let ms = [
            machine("old", None),
            machine("ours", Some("c1")),
            machine("theirs", Some("c2")),
            machine("new", None),
        ];
        assert_eq!(r.free(&ms, "c1", |_| false, 0), 2);
        assert_eq!(
            r.free(&ms, "c1", |m| m.metadata.name.as_deref() == Some("new"), 0),
            1
        );
        assert!(!r.newborn(&ms[0]));
        assert!(r.newborn(&ms[3]));
        let none = Record::default();
        assert_eq!(none.free(&ms, "c1", |_| false, 0), 0);
    }

    #[test]
    fn a_removal_counts_as_in_use_until_it_is_accounted_for() {
        let mut going = machine("going", None);
        going.metadata.annotations = Some([(REMOVED_BY.to_owned(), "c1".to_owned())].into());
        let mut r = Record {
            raised: 2,
            ..Record::default()
        };
        assert_eq!(
            r.free([&going], "c1", |_| false, 0),
            1,
            "interrupted: still ours"
        );
        r.raised = 1;
        r.removed.insert("going".into(), Removed::ScaledDown);
        assert_eq!(
            r.free([&going], "c1", |_| false, 0),
            1,
            "accounted: raised went down"
        );
        assert_eq!(r.removal_of(&going), Some(Removed::ScaledDown));
        r.prune(|_| false);
        assert!(r.removed.is_empty());
    }

    #[test]
    fn a_claimed_machine_someone_else_deletes_holds_its_replica_until_a_replacement_stands() {
        let r = Record {
            raised: 1,
            ..Record::default()
        };
        let mut rolled = machine("rolled", Some("c1"));
        assert_eq!(r.free([&rolled], "c1", |_| false, 0), 0);
        rolled.metadata.deletion_timestamp =
            Some(serde_json::from_value(json!("2026-11-28T12:00:00Z")).unwrap());
        assert_eq!(
            r.free([&rolled], "c1", |_| false, 0),
            0,
            "deleted by hand: no replacement until it is gone"
        );
        let replacement = machine("replacement", None);
        assert_eq!(
            r.free([&rolled, &replacement], "c1", |_| false, 0),
            1,
            "a rollout made the replacement first: it takes the replica"
        );
        assert_eq!(
            r.free([&rolled, &replacement], "c1", |_| false, 1),
            0,
            "a waiting create already counts on that replacement"
        );
        let baseline = Record {
            baseline: ["replacement".to_owned()].into(),
            ..r.clone()
        };
        assert_eq!(
            baseline.free([&rolled, &replacement], "c1", |_| false, 0),
            0,
            "a Machine of the baseline replaces nothing of ours"
        );
        rolled
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(REMOVED_BY.to_owned(), "c1".to_owned());
        assert_eq!(
            r.free([&rolled, &replacement], "c1", |_| false, 0),
            0,
            "our own removal, not accounted for yet, still holds it"
        );
    }
}
