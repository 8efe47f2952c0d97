//! Status conditions the way upstream's condition library (operatorpkg `status`) writes them.
//!
//! Responsibility (spec §1.2 "Condition-library conventions"): a [`ConditionSet`] over an
//! object's condition list with a root condition (`Ready`) and its dependents:
//! - missing dependents are materialised as Unknown with reason `AwaitingReconciliation`;
//! - `set_true(t)` uses reason = `t` and an empty message;
//! - `lastTransitionTime` changes only when status, reason or message change;
//! - `observedGeneration` = the object's generation at write time;
//! - the root is True iff every dependent is True, False if any is False, else Unknown
//!   (reasons `UnhealthyDependents` / `ReconcilingDependents`, the message naming the
//!   dependents that are not True: `Launched=False, Registered=Unknown`);
//! - conditions are kept sorted by type.
//!
//! Inputs: the old conditions, the generation, "now". Outputs: the new list and whether it
//! changed. Pure.

use api::common::{Condition, ConditionStatus};
use api::well_known::conditions::READY;
use api::well_known::conditions::reasons::{
    AWAITING_RECONCILIATION, RECONCILING_DEPENDENTS, UNHEALTHY_DEPENDENTS,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// A condition list being edited, with its root and dependents.
#[derive(Debug, Clone)]
pub struct ConditionSet {
    conditions: Vec<Condition>,
    dependents: &'static [&'static str],
    generation: Option<i64>,
    now: Timestamp,
    changed: bool,
}

impl ConditionSet {
    /// Starts editing `conditions` of an object at `generation`; materialises missing
    /// dependents and recomputes the root.
    #[must_use]
    pub fn new(
        conditions: Option<&[Condition]>,
        dependents: &'static [&'static str],
        generation: Option<i64>,
        now: Timestamp,
    ) -> Self {
        let mut set = Self {
            conditions: conditions.map(<[Condition]>::to_vec).unwrap_or_default(),
            dependents,
            generation,
            now,
            changed: false,
        };
        for d in dependents {
            if set.get(d).is_none() {
                set.write(d, ConditionStatus::Unknown, AWAITING_RECONCILIATION, "");
            }
        }
        set.recompute_root();
        set
    }

    /// The condition of this type.
    #[must_use]
    pub fn get(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether this condition is True.
    #[must_use]
    pub fn is_true(&self, type_: &str) -> bool {
        self.get(type_)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }

    /// Whether this condition is absent or Unknown.
    #[must_use]
    pub fn is_unknown(&self, type_: &str) -> bool {
        self.get(type_)
            .is_none_or(|c| c.status == ConditionStatus::Unknown)
    }

    /// Sets `type_` True with reason = type and no message.
    pub fn set_true(&mut self, type_: &str) {
        self.set(type_, ConditionStatus::True, type_, "");
    }

    /// Sets `type_` False.
    pub fn set_false(&mut self, type_: &str, reason: &str, message: &str) {
        self.set(type_, ConditionStatus::False, reason, message);
    }

    /// Sets `type_` Unknown.
    pub fn set_unknown(&mut self, type_: &str, reason: &str, message: &str) {
        self.set(type_, ConditionStatus::Unknown, reason, message);
    }

    /// Sets `type_`; the root is recomputed when a dependent changes.
    pub fn set(&mut self, type_: &str, status: ConditionStatus, reason: &str, message: &str) {
        self.write(type_, status, reason, message);
        if self.dependents.contains(&type_) {
            self.recompute_root();
        }
    }

    /// Removes `type_` (a no-op when absent).
    pub fn clear(&mut self, type_: &str) {
        let before = self.conditions.len();
        self.conditions.retain(|c| c.type_ != type_);
        self.changed |= self.conditions.len() != before;
    }

    /// Whether anything changed since [`ConditionSet::new`].
    #[must_use]
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The edited list, sorted by type.
    #[must_use]
    pub fn into_conditions(self) -> Vec<Condition> {
        self.conditions
    }

    /// The edited list, sorted by type.
    #[must_use]
    pub fn conditions(&self) -> &[Condition] {
        &self.conditions
    }

    fn write(&mut self, type_: &str, status: ConditionStatus, reason: &str, message: &str) {
        let generation = self.generation;
        if let Some(c) = self.conditions.iter_mut().find(|c| c.type_ == type_) {
            let transition = c.status != status || c.reason != reason || c.message != message;
            if transition {
                c.status = status;
                c.reason = reason.to_owned();
                c.message = message.to_owned();
                c.last_transition_time = Time(self.now);
            }
            if transition || c.observed_generation != generation {
                c.observed_generation = generation;
                self.changed = true;
            }
            return;
        }
        self.conditions.push(Condition {
            last_transition_time: Time(self.now),
            message: message.to_owned(),
            observed_generation: generation,
            reason: reason.to_owned(),
            status,
            type_: type_.to_owned(),
        });
        self.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
        self.changed = true;
    }

    fn recompute_root(&mut self) {
        if self.dependents.is_empty() {
            return;
        }
        let statuses: Vec<(&str, ConditionStatus)> = self
            .dependents
            .iter()
            .map(|d| {
                (
                    *d,
                    self.get(d).map_or(ConditionStatus::Unknown, |c| c.status),
                )
            })
            .collect();
        // The message names the dependents that are not True, `Type=Status, …`, as
        // operatorpkg writes it (`NodeClassReady=False`).
        let unhealthy = statuses
            .iter()
            .filter(|(_, s)| *s != ConditionStatus::True)
            .map(|(t, s)| format!("{t}={s:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        if unhealthy.is_empty() {
            self.write(READY, ConditionStatus::True, READY, "");
        } else if statuses.iter().any(|(_, s)| *s == ConditionStatus::False) {
            self.write(
                READY,
                ConditionStatus::False,
                UNHEALTHY_DEPENDENTS,
                &unhealthy,
            );
        } else {
            self.write(
                READY,
                ConditionStatus::Unknown,
                RECONCILING_DEPENDENTS,
                &unhealthy,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const DEPS: &[&str] = &["Initialized", "Launched", "Registered"];

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn the_root_names_the_dependents_that_are_not_true() {
        let mut set = ConditionSet::new(None, DEPS, Some(1), at(10));
        set.set_true("Initialized");
        let ready = |set: &ConditionSet| set.get(READY).cloned().unwrap();
        let r = ready(&set);
        assert_eq!(
            (r.reason.as_str(), r.message.as_str()),
            (
                RECONCILING_DEPENDENTS,
                "Launched=Unknown, Registered=Unknown"
            )
        );
        set.set_false("Launched", "LaunchFailed", "no capacity");
        let r = ready(&set);
        assert_eq!(
            (r.reason.as_str(), r.message.as_str()),
            (UNHEALTHY_DEPENDENTS, "Launched=False, Registered=Unknown")
        );
        set.set_true("Launched");
        set.set_true("Registered");
        assert_eq!(ready(&set).message, "");
    }

    #[test]
    fn missing_dependents_are_awaiting_reconciliation_and_the_root_is_reconciling() {
        let set = ConditionSet::new(None, DEPS, Some(1), at(10));
        assert!(set.changed());
        let types: Vec<&str> = set.conditions().iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Initialized", "Launched", "Ready", "Registered"]);
        assert_eq!(set.get("Launched").unwrap().reason, AWAITING_RECONCILIATION);
        assert_eq!(set.get("Ready").unwrap().reason, RECONCILING_DEPENDENTS);
        assert_eq!(set.get("Ready").unwrap().observed_generation, Some(1));
    }

    #[test]
    fn the_root_follows_its_dependents() {
        let mut set = ConditionSet::new(None, DEPS, Some(1), at(10));
        for d in DEPS {
            set.set_true(d);
        }
        assert!(set.is_true("Ready"));
        assert_eq!(set.get("Launched").unwrap().reason, "Launched");
        set.set_false("Registered", "MultipleNodesFound", "two");
        assert_eq!(set.get("Ready").unwrap().status, ConditionStatus::False);
        assert_eq!(set.get("Ready").unwrap().reason, UNHEALTHY_DEPENDENTS);
    }

    #[test]
    fn transition_time_moves_only_on_a_real_change() {
        let mut set = ConditionSet::new(None, DEPS, Some(1), at(10));
        set.set_true("Launched");
        let old = set.into_conditions();
        let mut set = ConditionSet::new(Some(&old), DEPS, Some(1), at(99));
        set.set_true("Launched");
        assert!(!set.changed());
        assert_eq!(
            set.get("Launched").unwrap().last_transition_time,
            Time(at(10))
        );
        set.set_unknown("Launched", "LaunchFailed", "boom");
        assert!(set.changed());
        assert_eq!(
            set.get("Launched").unwrap().last_transition_time,
            Time(at(99))
        );
    }

    #[test]
    fn a_new_generation_is_a_change_without_a_transition() {
        let mut set = ConditionSet::new(None, &[], Some(1), at(10));
        set.set_true("X");
        let old = set.into_conditions();
        let mut set = ConditionSet::new(Some(&old), &[], Some(2), at(20));
        set.set_true("X");
        assert!(set.changed());
        let x = set.get("X").unwrap();
        assert_eq!(x.observed_generation, Some(2));
        assert_eq!(x.last_transition_time, Time(at(10)));
    }

    #[test]
    fn clearing_removes() {
        let mut set = ConditionSet::new(None, &[], None, at(1));
        set.set_true("Drifted");
        let old = set.into_conditions();
        let mut set = ConditionSet::new(Some(&old), &[], None, at(2));
        set.clear("Nope");
        assert!(!set.changed());
        set.clear("Drifted");
        assert!(set.changed());
        assert!(set.conditions().is_empty());
    }
}
