//! Unit tests of the NodeClass status controller's pure parts.
#![allow(clippy::indexing_slicing)]
use super::*;

fn cond(status: ConditionStatus, reason: &str, t: i64) -> Condition {
    Condition {
        last_transition_time: Time(Timestamp::from_second(t).unwrap_or_default()),
        message: String::new(),
        observed_generation: Some(1),
        reason: reason.into(),
        status,
        type_: READY.into(),
    }
}

fn observed(status: ConditionStatus, reason: &str) -> Observed {
    Observed {
        status,
        reason: reason.into(),
        message: String::new(),
        instance_types: Vec::new(),
        problems: Vec::new(),
        pricing: None,
    }
}

#[test]
fn transition_time_kept_without_change_and_moved_on_change() {
    let old = vec![cond(ConditionStatus::True, REASON_READY, 100)];
    let now = Timestamp::from_second(200).unwrap_or_default();
    let same = conditions(
        &old,
        &observed(ConditionStatus::True, REASON_READY),
        Some(2),
        now,
    );
    assert_eq!(same.len(), 1);
    assert_eq!(same[0].last_transition_time, old[0].last_transition_time);
    assert_eq!(same[0].observed_generation, Some(2));
    let changed = conditions(
        &old,
        &observed(
            ConditionStatus::False,
            REASON_NO_MACHINE_DEPLOYMENTS_SELECTED,
        ),
        Some(2),
        now,
    );
    assert_eq!(changed[0].last_transition_time, Time(now));
}

#[test]
fn other_conditions_are_kept() {
    let mut other = cond(ConditionStatus::True, "X", 5);
    other.type_ = "Other".into();
    let out = conditions(
        &[other.clone()],
        &observed(ConditionStatus::True, REASON_READY),
        None,
        Timestamp::from_second(9).unwrap_or_default(),
    );
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], other);
}

#[test]
fn truncate_respects_char_boundaries() {
    let mut s = "ééé".to_owned();
    truncate(&mut s, 3);
    assert_eq!(s, "é");
}
