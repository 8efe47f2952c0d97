//! The `Consolidatable` condition of a NodeClaim (spec §5.1).
//!
//! Responsibility: decide whether a NodeClaim has been quiet for its NodePool's
//! `consolidateAfter`: `Never` disables it; a NodeClaim that is not Initialized is not; the
//! reference time is the latest of `status.lastPodEventTime`, the pod events this process saw
//! on its node and the `Initialized` transition; before reference + `consolidateAfter` it is
//! not consolidatable yet (and says until when).
//!
//! Inputs: the NodeClaim, its NodePool, the last pod event seen, "now". Output:
//! [`Consolidation`]. Pure.

use std::time::Duration;

use api::common::{ConditionStatus, Conditions};
use api::well_known::conditions::INITIALIZED;
use api::{NodeClaim, NodePool};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Whether a NodeClaim may be consolidated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consolidation {
    /// `consolidateAfter: Never`, or a malformed value (named).
    Disabled(String),
    /// Not Initialized.
    NotInitialized,
    /// Quiet since the reference time, but not long enough; consolidatable at this time.
    NotYet(Timestamp),
    /// Consolidatable.
    Consolidatable,
}

impl Consolidation {
    /// Whether the condition is True.
    #[must_use]
    pub fn is_consolidatable(&self) -> bool {
        matches!(self, Self::Consolidatable)
    }
}

/// The NodePool's `consolidateAfter` (`None`: `Never`).
///
/// # Errors
/// A message naming the field when the value does not parse.
pub fn consolidate_after(pool: &NodePool) -> Result<Option<Duration>, String> {
    pool.spec
        .disruption_or_default()
        .consolidate_after
        .parse()
        .map_err(|e| format!("spec.disruption.consolidateAfter: {e}"))
}

/// When the NodeClaim's node last changed: pod events and initialization.
#[must_use]
pub fn reference_time(nc: &NodeClaim, last_pod_event: Option<Timestamp>) -> Option<Timestamp> {
    let status = nc.status.as_ref()?;
    let initialized = status
        .conditions
        .condition(INITIALIZED)
        .filter(|c| c.status == ConditionStatus::True)
        .map(|c| c.last_transition_time.0);
    [
        initialized,
        status.last_pod_event_time.as_ref().map(|t| t.0),
        last_pod_event,
    ]
    .into_iter()
    .flatten()
    .max()
}

/// Evaluates the condition.
#[must_use]
pub fn evaluate(
    nc: &NodeClaim,
    pool: &NodePool,
    last_pod_event: Option<Timestamp>,
    now: Timestamp,
) -> Consolidation {
    let after = match consolidate_after(pool) {
        Ok(Some(after)) => after,
        Ok(None) => return Consolidation::Disabled("consolidateAfter is Never".into()),
        Err(e) => return Consolidation::Disabled(e),
    };
    let initialized = nc
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.is_true(INITIALIZED));
    if !initialized {
        return Consolidation::NotInitialized;
    }
    let Some(reference) = reference_time(nc, last_pod_event) else {
        return Consolidation::NotInitialized;
    };
    let after = SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX);
    match reference.checked_add(after) {
        Ok(at) if at > now => Consolidation::NotYet(at),
        _ => Consolidation::Consolidatable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::common::{Condition, NillableDuration};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn pool(after: &str) -> NodePool {
        let mut p: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}}}
        }))
        .unwrap();
        let mut d = p.spec.disruption_or_default();
        d.consolidate_after = NillableDuration(after.into());
        p.spec.disruption = Some(d);
        p
    }

    fn claim(initialized_at: Option<i64>, last_pod_event: Option<i64>) -> NodeClaim {
        let mut nc: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"}, "requirements": []}
        }))
        .unwrap();
        let mut status = api::nodeclaim::NodeClaimStatus::default();
        if let Some(t) = initialized_at {
            status.conditions = Some(vec![Condition {
                type_: INITIALIZED.into(),
                status: ConditionStatus::True,
                reason: INITIALIZED.into(),
                message: String::new(),
                last_transition_time: Time(at(t)),
                observed_generation: None,
            }]);
        }
        status.last_pod_event_time = last_pod_event.map(|t| Time(at(t)));
        nc.status = Some(status);
        nc
    }

    #[test]
    fn waits_consolidate_after_from_the_latest_event() {
        let p = pool("30s");
        assert_eq!(
            evaluate(&claim(None, None), &p, None, at(100)),
            Consolidation::NotInitialized
        );
        assert_eq!(
            evaluate(&claim(Some(0), None), &p, None, at(10)),
            Consolidation::NotYet(at(30))
        );
        assert!(evaluate(&claim(Some(0), None), &p, None, at(30)).is_consolidatable());
        assert_eq!(
            evaluate(&claim(Some(0), Some(20)), &p, None, at(30)),
            Consolidation::NotYet(at(50)),
            "status.lastPodEventTime restarts the wait"
        );
        assert_eq!(
            evaluate(&claim(Some(0), Some(20)), &p, Some(at(40)), at(60)),
            Consolidation::NotYet(at(70)),
            "a pod event seen by this process, not yet written, counts too"
        );
        assert!(evaluate(&claim(Some(0), None), &pool("0s"), None, at(0)).is_consolidatable());
    }

    #[test]
    fn never_and_malformed_disable() {
        assert!(matches!(
            evaluate(&claim(Some(0), None), &pool("Never"), None, at(1000)),
            Consolidation::Disabled(_)
        ));
        let Consolidation::Disabled(why) =
            evaluate(&claim(Some(0), None), &pool("soon"), None, at(1000))
        else {
            panic!("malformed must disable")
        };
        assert!(why.contains("spec.disruption.consolidateAfter"), "{why}");
    }
}
