//! Disruption budgets (spec §1.7, §5.4): how many of a NodePool's nodes may be disrupting at
//! once, for one disruption reason, at one moment.
//!
//! Responsibility:
//! - [`is_active`]: a budget without `schedule` and `duration` is always active; otherwise its
//!   cron schedule (5 fields or `@yearly|@annually|@monthly|@weekly|@daily|@midnight|@hourly`,
//!   always UTC) must have fired within `(now − duration, now]`;
//! - [`allowed`]: an inactive budget allows everything (`i32::MAX`); an active one its `nodes`,
//!   a count or a percentage of the pool's nodes rounded **up**;
//! - [`allowed_for_reason`]: the least over the pool's budgets that name the reason (or name
//!   none), upstream's default of one 10 % budget when the pool sets none; a malformed budget
//!   allows **0** (fail closed) and is returned as a [`BudgetError`] naming the budget and
//!   field, for the caller to log and report;
//! - [`remaining`]: the budget map's value for a pool, `max(allowed − disrupting, 0)`, where
//!   nodes that are not Ready or are being deleted count as disrupting.
//!
//! Inputs: NodePools (their `spec.disruption.budgets`), node counts, the time. Outputs: allowed
//! disruptions and errors. Pure.

use std::time::Duration;

use api::NodePool;
use api::common::parse_duration;
use api::nodepool::{Budget, DisruptionReason};
use chrono::{DateTime, Utc};
use croner::Cron;
use k8s_openapi::jiff::Timestamp;

/// A budget that cannot be evaluated (it then allows no disruption).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.disruption.budgets[{index}].{field}: {message}")]
pub struct BudgetError {
    /// The budget's index in `spec.disruption.budgets`.
    pub index: usize,
    /// The field at fault (`nodes`, `schedule`, `duration`).
    pub field: &'static str,
    /// Why.
    pub message: String,
}

/// The cron nicknames upstream accepts that the cron parser does not know itself.
fn pattern(schedule: &str) -> &str {
    match schedule.trim() {
        s if s.eq_ignore_ascii_case("@midnight") => "0 0 * * *",
        s => s,
    }
}

fn utc(t: Timestamp) -> Result<DateTime<Utc>, String> {
    DateTime::from_timestamp(
        t.as_second(),
        u32::try_from(t.subsec_nanosecond()).unwrap_or(0),
    )
    .ok_or_else(|| format!("time {t} is out of range"))
}

/// Whether budget `index` of a pool is active at `now` (see the module docs).
///
/// # Errors
/// Only one of `schedule` and `duration` set, a malformed cron schedule, or a malformed
/// duration.
pub fn is_active(budget: &Budget, index: usize, now: Timestamp) -> Result<bool, BudgetError> {
    let err = |field: &'static str, message: String| BudgetError {
        index,
        field,
        message,
    };
    let (schedule, duration) = match (&budget.schedule, &budget.duration) {
        (None, None) => return Ok(true),
        (Some(s), Some(d)) => (s, d),
        (Some(_), None) => {
            return Err(err("duration", "must be set when schedule is".into()));
        }
        (None, Some(_)) => {
            return Err(err("schedule", "must be set when duration is".into()));
        }
    };
    let duration: Duration =
        parse_duration(duration).map_err(|e| err("duration", e.to_string()))?;
    let cron = Cron::new(pattern(schedule)).parse().map_err(|e| {
        err(
            "schedule",
            format!("{schedule:?} is not a cron schedule: {e}"),
        )
    })?;
    let now = utc(now).map_err(|e| err("schedule", e))?;
    let since = chrono::Duration::from_std(duration)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .ok_or_else(|| err("duration", "is too long".into()))?;
    // The first firing strictly after `now − duration`: active iff it is not in the future.
    match cron.find_next_occurrence(&since, false) {
        Ok(next) => Ok(next <= now),
        // A schedule that never fires again is never active.
        Err(_) => Ok(false),
    }
}

/// How many nodes budget `index` lets be disrupting in a pool of `nodes` nodes at `now`:
/// `i32::MAX` when inactive.
///
/// # Errors
/// A malformed `nodes`, `schedule` or `duration`.
pub fn allowed(
    budget: &Budget,
    index: usize,
    now: Timestamp,
    nodes: usize,
) -> Result<i32, BudgetError> {
    if !is_active(budget, index, now)? {
        return Ok(i32::MAX);
    }
    let err = |message: String| BudgetError {
        index,
        field: "nodes",
        message,
    };
    let value = budget.nodes.trim();
    if let Some(percent) = value.strip_suffix('%') {
        let percent: u64 = percent
            .parse()
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| err(format!("{value:?} is not a percentage of 0 to 100")))?;
        let nodes = u64::try_from(nodes).unwrap_or(u64::MAX);
        // Rounded up, like a PodDisruptionBudget's maxUnavailable.
        let count = nodes.saturating_mul(percent).div_ceil(100);
        return Ok(i32::try_from(count).unwrap_or(i32::MAX));
    }
    value
        .parse::<u32>()
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX))
        .map_err(|_| {
            err(format!(
                "{value:?} is neither a node count nor a percentage"
            ))
        })
}

/// The disruptions `pool` allows for `reason` with `nodes` nodes at `now`, and the budgets
/// that could not be evaluated (each allows 0: fail closed).
#[must_use]
pub fn allowed_for_reason(
    pool: &NodePool,
    reason: DisruptionReason,
    now: Timestamp,
    nodes: usize,
) -> (i32, Vec<BudgetError>) {
    let budgets = pool.spec.disruption.as_ref().map_or_else(
        Budget::defaults,
        api::nodepool::Disruption::budgets_or_default,
    );
    let mut least = i32::MAX;
    let mut errors = Vec::new();
    for (index, budget) in budgets.iter().enumerate() {
        if budget
            .reasons
            .as_ref()
            .is_some_and(|reasons| !reasons.contains(&reason))
        {
            continue;
        }
        let value = allowed(budget, index, now, nodes).unwrap_or_else(|e| {
            errors.push(e);
            0
        });
        least = least.min(value);
    }
    (least, errors)
}

/// The budget map's value for a pool (spec §5.4): what `allowed` leaves once the nodes already
/// disrupting (not Ready, or being deleted) are counted, never below 0.
#[must_use]
pub fn remaining(allowed: i32, disrupting: usize) -> usize {
    let allowed = usize::try_from(allowed.max(0)).unwrap_or(0);
    allowed.saturating_sub(disrupting)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn budget(nodes: &str, schedule: Option<&str>, duration: Option<&str>) -> Budget {
        Budget {
            nodes: nodes.into(),
            schedule: schedule.map(Into::into),
            duration: duration.map(Into::into),
            reasons: None,
        }
    }

    fn pool(budgets: serde_json::Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"disruption": {"budgets": budgets, "consolidateAfter": "0s"},
                "template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                    "requirements": []}}},
        }))
        .unwrap()
    }

    #[test]
    fn a_budget_without_a_schedule_is_always_active() {
        let b = budget("3", None, None);
        assert_eq!(allowed(&b, 0, at("2026-01-01T12:00:00Z"), 100), Ok(3));
    }

    #[test]
    fn percentages_round_up_like_max_unavailable() {
        let now = at("2026-01-01T12:00:00Z");
        assert_eq!(allowed(&budget("10%", None, None), 0, now, 5), Ok(1));
        assert_eq!(allowed(&budget("10%", None, None), 0, now, 10), Ok(1));
        assert_eq!(allowed(&budget("10%", None, None), 0, now, 11), Ok(2));
        assert_eq!(allowed(&budget("0%", None, None), 0, now, 11), Ok(0));
        assert_eq!(allowed(&budget("100%", None, None), 0, now, 7), Ok(7));
        assert_eq!(allowed(&budget("20%", None, None), 0, now, 0), Ok(0));
    }

    #[test]
    fn a_schedule_is_active_for_its_duration_after_each_firing() {
        // Every day at 09:00 UTC for 8 hours.
        let b = budget("0", Some("0 9 * * *"), Some("8h"));
        let allowed_at = |t: &str| allowed(&b, 0, at(t), 10).unwrap();
        assert_eq!(allowed_at("2026-03-02T08:59:59Z"), i32::MAX, "before");
        assert_eq!(allowed_at("2026-03-02T09:00:00Z"), 0, "as it fires");
        assert_eq!(allowed_at("2026-03-02T16:59:59Z"), 0, "within the duration");
        assert_eq!(
            allowed_at("2026-03-02T17:00:00Z"),
            i32::MAX,
            "the window is half-open"
        );
        assert_eq!(allowed_at("2026-03-02T23:00:00Z"), i32::MAX, "after");
    }

    #[test]
    fn nicknames_and_weekdays_follow_standard_cron() {
        let daily = budget("0", Some("@midnight"), Some("1h"));
        assert_eq!(allowed(&daily, 0, at("2026-03-02T00:30:00Z"), 10), Ok(0));
        assert_eq!(
            allowed(&daily, 0, at("2026-03-02T01:30:00Z"), 10),
            Ok(i32::MAX)
        );
        // Weekends only (2026-03-07 is a Saturday), all day.
        let weekend = budget("0", Some("0 0 * * sat,sun"), Some("24h"));
        assert_eq!(allowed(&weekend, 0, at("2026-03-07T15:00:00Z"), 10), Ok(0));
        assert_eq!(
            allowed(&weekend, 0, at("2026-03-06T15:00:00Z"), 10),
            Ok(i32::MAX)
        );
        let hourly = budget("1", Some("@hourly"), Some("10m"));
        assert_eq!(allowed(&hourly, 0, at("2026-03-06T15:05:00Z"), 10), Ok(1));
        assert_eq!(
            allowed(&hourly, 0, at("2026-03-06T15:15:00Z"), 10),
            Ok(i32::MAX)
        );
    }

    #[test]
    fn the_least_of_the_budgets_naming_the_reason_wins() {
        let p = pool(json!([
            {"nodes": "50%"},
            {"nodes": "1", "reasons": ["Drifted"]},
            {"nodes": "0", "reasons": ["Underutilized"], "schedule": "0 9 * * *",
                "duration": "8h"},
        ]));
        let noon = at("2026-03-02T12:00:00Z");
        let night = at("2026-03-02T22:00:00Z");
        assert_eq!(
            allowed_for_reason(&p, DisruptionReason::Empty, noon, 10),
            (5, vec![])
        );
        assert_eq!(
            allowed_for_reason(&p, DisruptionReason::Drifted, noon, 10),
            (1, vec![])
        );
        assert_eq!(
            allowed_for_reason(&p, DisruptionReason::Underutilized, noon, 10),
            (0, vec![])
        );
        assert_eq!(
            allowed_for_reason(&p, DisruptionReason::Underutilized, night, 10),
            (5, vec![])
        );
    }

    #[test]
    fn a_pool_without_budgets_gets_upstreams_ten_percent() {
        let mut p = pool(json!([]));
        p.spec.disruption = None;
        let now = at("2026-03-02T12:00:00Z");
        assert_eq!(
            allowed_for_reason(&p, DisruptionReason::Empty, now, 30),
            (3, vec![])
        );
    }

    #[test]
    fn malformed_budgets_allow_nothing_and_name_the_field() {
        let p = pool(json!([
            {"nodes": "5"},
            {"nodes": "lots"},
        ]));
        let now = at("2026-03-02T12:00:00Z");
        let (n, errors) = allowed_for_reason(&p, DisruptionReason::Empty, now, 10);
        assert_eq!(n, 0, "fail closed");
        assert_eq!(errors.len(), 1);
        assert_eq!((errors[0].index, errors[0].field), (1, "nodes"));
        assert!(
            errors[0]
                .to_string()
                .starts_with("spec.disruption.budgets[1].nodes")
        );

        for (b, field) in [
            (budget("1", Some("0 9 * *"), Some("1h")), "schedule"),
            (budget("1", Some("not cron"), Some("1h")), "schedule"),
            (budget("1", Some("0 9 * * *"), Some("1d")), "duration"),
            (budget("1", Some("0 9 * * *"), None), "duration"),
            (budget("1", None, Some("1h")), "schedule"),
            (budget("101%", None, None), "nodes"),
            (budget("-1", None, None), "nodes"),
        ] {
            let e = allowed(&b, 0, now, 10).unwrap_err();
            assert_eq!(e.field, field, "{b:?}: {e}");
        }
    }

    #[test]
    fn disrupting_nodes_use_up_the_budget() {
        assert_eq!(remaining(3, 1), 2);
        assert_eq!(remaining(3, 5), 0);
        assert_eq!(
            remaining(i32::MAX, 5),
            usize::try_from(i32::MAX).unwrap() - 5
        );
        assert_eq!(remaining(0, 0), 0);
    }
}
