//! What the controllers know that the API does not show yet: NodeClaims created but not yet
//! seen in the cache, and nodes nominated for pods.
//!
//! Responsibility: pure bookkeeping with injected time. [`Bookkeeping::unseen`] lists the
//! NodeClaims this process created that the cache has not delivered yet (the synced gate waits
//! for them, so a batch never plans against a state that misses its own previous decisions);
//! entries older than [`UNSEEN_GRACE`] are dropped (the object was deleted before the watch saw
//! it). Nominations remember, per node, until when pods are expected to land on it. Planned
//! pods remember, per NodeClaim this process created, the UIDs of the pods it was created
//! for (so disruption leaves a fresh node alone while those pods are still on their way to
//! it); they are forgotten [`PLANNED_HORIZON`] after creation.
//! Inputs: names and instants. Outputs: answers; no I/O.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

/// How long a created NodeClaim may stay unseen before it is forgotten (upstream checks
/// unlaunched NodeClaim names 15 s after creation).
pub const UNSEEN_GRACE: Duration = Duration::from_secs(15);

/// How long the pods a NodeClaim was created for are remembered: upstream's registration TTL
/// (15 minutes, after which an unregistered NodeClaim is deleted) plus a margin for the pods
/// to bind once the node is up.
pub const PLANNED_HORIZON: Duration = Duration::from_secs(20 * 60);

/// In-memory facts of this process.
#[derive(Debug, Default, Clone)]
pub struct Bookkeeping {
    created: HashMap<String, Instant>,
    nominated: HashMap<String, Instant>,
    planned: HashMap<String, (Vec<String>, Instant)>,
}

impl Bookkeeping {
    /// Remember that NodeClaim `name` was created at `now`.
    pub fn created(&mut self, name: &str, now: Instant) {
        self.created.insert(name.to_owned(), now);
    }

    /// Forget NodeClaims the cache now shows (`seen` answers for a name) or that are older than
    /// [`UNSEEN_GRACE`]; returns the names still unseen.
    pub fn unseen(&mut self, now: Instant, seen: impl Fn(&str) -> bool) -> Vec<String> {
        self.created
            .retain(|name, at| !seen(name) && now.saturating_duration_since(*at) < UNSEEN_GRACE);
        let mut names: Vec<String> = self.created.keys().cloned().collect();
        names.sort();
        names
    }

    /// Nominate `node` for pods until `until` (extends, never shortens).
    pub fn nominate(&mut self, node: &str, until: Instant) {
        let entry = self.nominated.entry(node.to_owned()).or_insert(until);
        if *entry < until {
            *entry = until;
        }
    }

    /// Whether `node` is nominated at `now`.
    #[must_use]
    pub fn is_nominated(&self, node: &str, now: Instant) -> bool {
        self.nominated.get(node).is_some_and(|until| *until > now)
    }

    /// Remember that NodeClaim `claim` was created at `now` for the pods `uids`.
    pub fn planned(&mut self, claim: &str, uids: Vec<String>, now: Instant) {
        if !uids.is_empty() {
            self.planned.insert(claim.to_owned(), (uids, now));
        }
    }

    /// The pods NodeClaim `claim` was created for, while remembered.
    #[must_use]
    pub fn planned_pods(&self, claim: &str, now: Instant) -> &[String] {
        self.planned
            .get(claim)
            .filter(|(_, at)| now.saturating_duration_since(*at) < PLANNED_HORIZON)
            .map_or(&[], |(uids, _)| uids.as_slice())
    }

    /// Drop expired nominations and planned pods.
    pub fn expire(&mut self, now: Instant) {
        self.nominated.retain(|_, until| *until > now);
        self.planned
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < PLANNED_HORIZON);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_claims_stay_unseen_until_the_cache_shows_them_or_the_grace_passes() {
        let t0 = Instant::now();
        let mut b = Bookkeeping::default();
        b.created("a", t0);
        b.created("b", t0);
        assert_eq!(b.unseen(t0, |_| false), vec!["a", "b"]);
        assert_eq!(b.unseen(t0, |n| n == "a"), vec!["b"]);
        assert!(b.unseen(t0 + UNSEEN_GRACE, |_| false).is_empty());
    }

    #[test]
    fn nominations_extend_and_expire() {
        let t0 = Instant::now();
        let mut b = Bookkeeping::default();
        b.nominate("n", t0 + Duration::from_secs(20));
        b.nominate("n", t0 + Duration::from_secs(5));
        assert!(b.is_nominated("n", t0 + Duration::from_secs(19)));
        assert!(!b.is_nominated("n", t0 + Duration::from_secs(20)));
        b.expire(t0 + Duration::from_secs(21));
        assert!(!b.is_nominated("n", t0));
        assert!(!b.is_nominated("other", t0));
    }

    #[test]
    fn planned_pods_are_remembered_until_the_horizon() {
        let t0 = Instant::now();
        let mut b = Bookkeeping::default();
        b.planned("nc", vec!["u1".into(), "u2".into()], t0);
        b.planned("empty", Vec::new(), t0);
        assert_eq!(
            b.planned_pods("nc", t0 + Duration::from_secs(60)),
            ["u1", "u2"]
        );
        assert!(b.planned_pods("empty", t0).is_empty());
        assert!(b.planned_pods("other", t0).is_empty());
        assert!(b.planned_pods("nc", t0 + PLANNED_HORIZON).is_empty());
        b.expire(t0 + Duration::from_secs(60));
        assert_eq!(b.planned_pods("nc", t0).len(), 2);
        b.expire(t0 + PLANNED_HORIZON);
        assert!(b.planned_pods("nc", t0).is_empty());
    }
}
