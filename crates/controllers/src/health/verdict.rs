//! Node repair decisions (spec §4 `node.health`), pure.
//!
//! Responsibility:
//! - [`condition_verdict`]: a Node's conditions against the repair policies. A policy matches
//!   a condition of its type with exactly its status; among matches the one whose toleration
//!   (from the condition's `lastTransitionTime`) runs out first decides, the first policy on
//!   an exact tie. A condition without a transition time is never old enough.
//! - [`deleted_verdict`]: a registered NodeClaim whose Node is gone, against the
//!   Node-deleted toleration, from the time it was first seen gone.
//! - [`repair_allowed`]: upstream's stop — no repair while more than 20 % (rounded up) of the
//!   pool's nodes are unhealthy, counting a node as unhealthy when any policy matches it,
//!   whatever its toleration.
//! - [`metric_condition`]: the `condition` label (snake case of the type).
//!
//! Inputs: Node conditions, [`RepairPolicies`], "now". Outputs: [`Verdict`]s.

use std::time::Duration;

use cloudprovider::{RepairPolicies, RepairPolicy};
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::jiff::Timestamp;

/// The pseudo-condition of a NodeClaim whose Node was deleted under a live instance (Cluster
/// API's reason for the Machine's `NodeHealthy` condition then).
pub const NODE_DELETED: &str = "NodeDeleted";

/// The share of a pool's nodes that may be unhealthy for repair to go on (rounded up).
pub const MAX_UNHEALTHY_PERCENT: usize = 20;

/// What the policies say about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No policy matches.
    Healthy,
    /// A policy matches; its toleration runs out after this long.
    Wait(Duration),
    /// Repair: this condition has held past its toleration.
    Unhealthy(Unhealthy),
}

/// Why a node is repaired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// The condition type ([`NODE_DELETED`] for a deleted Node).
    pub condition: String,
    /// Its status (`""` for a deleted Node).
    pub status: String,
    /// The toleration that ran out.
    pub toleration: Duration,
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO)
}

fn matching<'a>(
    conditions: &'a [NodeCondition],
    policies: &'a [RepairPolicy],
) -> impl Iterator<Item = (&'a RepairPolicy, &'a NodeCondition)> {
    policies.iter().filter_map(|p| {
        conditions
            .iter()
            .find(|c| c.type_ == p.condition_type)
            .filter(|c| c.status == p.condition_status)
            .map(|c| (p, c))
    })
}

/// The verdict of `policies` on a Node with `conditions` at `now`.
#[must_use]
pub fn condition_verdict(
    conditions: &[NodeCondition],
    policies: &[RepairPolicy],
    now: Timestamp,
) -> Verdict {
    // (time left, policy): the earliest deadline, the first policy on a tie.
    let mut first: Option<(Duration, &RepairPolicy)> = None;
    let mut matched = false;
    for (policy, condition) in matching(conditions, policies) {
        matched = true;
        let Some(since) = condition.last_transition_time.as_ref() else {
            continue;
        };
        let left = policy.toleration.saturating_sub(elapsed(since.0, now));
        if first.is_none_or(|(best, _)| left < best) {
            first = Some((left, policy));
        }
    }
    match first {
        Some((left, policy)) if left.is_zero() => Verdict::Unhealthy(Unhealthy {
            condition: policy.condition_type.clone(),
            status: policy.condition_status.clone(),
            toleration: policy.toleration,
        }),
        Some((left, _)) => Verdict::Wait(left),
        None if matched => Verdict::Wait(Duration::MAX),
        None => Verdict::Healthy,
    }
}

/// Whether any policy matches `conditions`, however long it has held (the 20 % count).
#[must_use]
pub fn matches_any(conditions: &[NodeCondition], policies: &RepairPolicies) -> bool {
    matching(conditions, &policies.conditions).next().is_some()
}

/// The verdict on a registered NodeClaim whose Node has been gone since `since`.
#[must_use]
pub fn deleted_verdict(policies: &RepairPolicies, since: Timestamp, now: Timestamp) -> Verdict {
    let Some(toleration) = policies.node_deleted else {
        return Verdict::Healthy;
    };
    let left = toleration.saturating_sub(elapsed(since, now));
    if left.is_zero() {
        Verdict::Unhealthy(Unhealthy {
            condition: NODE_DELETED.to_owned(),
            status: String::new(),
            toleration,
        })
    } else {
        Verdict::Wait(left)
    }
}

/// How many of `total` nodes may be unhealthy with repair going on: 20 %, rounded up.
#[must_use]
pub fn unhealthy_threshold(total: usize) -> usize {
    (total * MAX_UNHEALTHY_PERCENT).div_ceil(100)
}

/// Whether repair may go on with `unhealthy` of `total` nodes unhealthy.
#[must_use]
pub fn repair_allowed(total: usize, unhealthy: usize) -> bool {
    unhealthy <= unhealthy_threshold(total)
}

/// The metric label of a condition type: snake case (`Ready` → `ready`,
/// `KernelDeadlock` → `kernel_deadlock`, `NodeDeleted` → `node_deleted`; other characters
/// become `_`).
#[must_use]
pub fn metric_condition(condition: &str) -> String {
    let mut out = String::with_capacity(condition.len() + 4);
    let mut prev_lower = false;
    for c in condition.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = true;
        } else {
            out.push('_');
            prev_lower = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    const MIN: u64 = 60;

    fn now() -> Timestamp {
        "2026-11-29T12:00:00Z".parse().unwrap()
    }

    fn ago(secs: u64) -> Timestamp {
        now()
            .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(
                i64::try_from(secs).unwrap(),
            ))
            .unwrap()
    }

    fn condition(type_: &str, status: &str, since: Option<Timestamp>) -> NodeCondition {
        NodeCondition {
            type_: type_.into(),
            status: status.into(),
            last_transition_time: since.map(Time),
            ..NodeCondition::default()
        }
    }

    fn policies() -> RepairPolicies {
        RepairPolicies {
            conditions: "Ready=False:30m,Ready=Unknown:30m,KernelDeadlock=True:10m"
                .parse::<cloudprovider::repair::Conditions>()
                .unwrap()
                .0,
            node_deleted: Some(Duration::from_secs(5 * MIN)),
        }
    }

    fn verdict(conditions: &[NodeCondition]) -> Verdict {
        condition_verdict(conditions, &policies().conditions, now())
    }

    #[test]
    fn a_healthy_node_is_left_alone() {
        assert_eq!(verdict(&[]), Verdict::Healthy);
        assert_eq!(
            verdict(&[
                condition("Ready", "True", Some(ago(99 * MIN))),
                condition("KernelDeadlock", "False", Some(ago(99 * MIN))),
            ]),
            Verdict::Healthy
        );
        // A type no policy names, in a status another policy names for its own type.
        assert_eq!(
            verdict(&[condition("DiskPressure", "True", Some(ago(99 * MIN)))]),
            Verdict::Healthy
        );
    }

    #[test]
    fn a_matching_condition_waits_out_its_toleration() {
        assert_eq!(
            verdict(&[condition("Ready", "False", Some(ago(10 * MIN)))]),
            Verdict::Wait(Duration::from_secs(20 * MIN))
        );
        assert_eq!(
            verdict(&[condition("Ready", "Unknown", Some(ago(30 * MIN)))]),
            Verdict::Unhealthy(Unhealthy {
                condition: "Ready".into(),
                status: "Unknown".into(),
                toleration: Duration::from_secs(30 * MIN),
            })
        );
    }

    #[test]
    fn the_earliest_deadline_decides() {
        // Ready=False for 25 of 30 min (5 left); KernelDeadlock for 8 of 10 min (2 left).
        let conditions = [
            condition("Ready", "False", Some(ago(25 * MIN))),
            condition("KernelDeadlock", "True", Some(ago(8 * MIN))),
        ];
        assert_eq!(
            verdict(&conditions),
            Verdict::Wait(Duration::from_secs(2 * MIN))
        );
        let conditions = [
            condition("Ready", "False", Some(ago(25 * MIN))),
            condition("KernelDeadlock", "True", Some(ago(11 * MIN))),
        ];
        match verdict(&conditions) {
            Verdict::Unhealthy(u) => assert_eq!(u.condition, "KernelDeadlock"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_a_transition_time_a_condition_never_ripens() {
        let conditions = [condition("Ready", "False", None)];
        assert_eq!(verdict(&conditions), Verdict::Wait(Duration::MAX));
        assert!(matches_any(&conditions, &policies()));
    }

    #[test]
    fn a_deleted_node_waits_out_its_toleration() {
        let p = policies();
        assert_eq!(
            deleted_verdict(&p, ago(MIN), now()),
            Verdict::Wait(Duration::from_secs(4 * MIN))
        );
        match deleted_verdict(&p, ago(5 * MIN), now()) {
            Verdict::Unhealthy(u) => assert_eq!(u.condition, NODE_DELETED),
            other => panic!("{other:?}"),
        }
        let off = RepairPolicies {
            node_deleted: None,
            ..p
        };
        assert_eq!(
            deleted_verdict(&off, ago(99 * MIN), now()),
            Verdict::Healthy
        );
    }

    #[test]
    fn twenty_percent_rounded_up_may_be_unhealthy() {
        // Upstream's cases: 1 of 3 allowed (ceil(0.6) = 1), 3 of 10 blocked (ceil(2) = 2).
        assert!(repair_allowed(3, 1));
        assert!(!repair_allowed(3, 2));
        assert!(repair_allowed(10, 2));
        assert!(!repair_allowed(10, 3));
        assert!(repair_allowed(1, 1));
        assert!(repair_allowed(11, 3));
        assert!(!repair_allowed(11, 4));
        assert_eq!(unhealthy_threshold(0), 0);
    }

    #[test]
    fn the_20_percent_count_ignores_the_toleration() {
        let p = policies();
        assert!(matches_any(
            &[condition("Ready", "Unknown", Some(now()))],
            &p
        ));
        assert!(!matches_any(
            &[condition("Ready", "True", Some(ago(99 * MIN)))],
            &p
        ));
    }

    #[test]
    fn metric_labels_are_snake_case() {
        assert_eq!(metric_condition("Ready"), "ready");
        assert_eq!(metric_condition("KernelDeadlock"), "kernel_deadlock");
        assert_eq!(metric_condition(NODE_DELETED), "node_deleted");
        assert_eq!(
            metric_condition("AcceleratedHardwareReady"),
            "accelerated_hardware_ready"
        );
        assert_eq!(metric_condition("example.com/Disk"), "example_com_disk");
    }
}
