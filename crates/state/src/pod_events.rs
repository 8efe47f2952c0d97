//! Pod events per node: when a pod last arrived on, or left, each node (spec §4.10
//! `nodeclaim.podevents`).
//!
//! Responsibility: from the pod watch's events, remember per node the last time a non-DaemonSet
//! pod was bound to it, became terminal or terminating while bound to it, or was deleted while
//! still active on it. The first list of the watch (and every relist's `InitApply`) only sets the
//! baseline: a restart does not look like a burst of pod events (it would restart every node's
//! `consolidateAfter`). The disruption conditions copy these times into
//! `NodeClaim.status.lastPodEventTime`.
//!
//! Inputs: pods with how they were seen, and "now". Outputs: [`PodEvents::last`]. Pure.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

/// How a pod reached us.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Part of a (re)list: baseline only.
    Listed,
    /// Added or changed.
    Applied,
    /// Deleted.
    Deleted,
}

/// What matters of a pod for its node's events.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    node: String,
    done: bool,
}

/// Per-node pod event times.
#[derive(Debug, Default, Clone)]
pub struct PodEvents {
    pods: HashMap<String, Placement>,
    last: HashMap<String, Timestamp>,
}

fn owned_by_daemon_set(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DaemonSet")
}

fn placement(pod: &Pod) -> Option<Placement> {
    let node = pod.spec.as_ref()?.node_name.as_deref()?;
    if node.is_empty() {
        return None;
    }
    let terminal = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    Some(Placement {
        node: node.to_owned(),
        done: terminal || pod.metadata.deletion_timestamp.is_some(),
    })
}

impl PodEvents {
    /// Records what `pod` seen as `seen` at `now` means for its node.
    pub fn observe(&mut self, pod: &Pod, seen: Seen, now: Timestamp) {
        let Some(uid) = pod.metadata.uid.as_deref() else {
            return;
        };
        if owned_by_daemon_set(pod) {
            return;
        }
        let before = self.pods.get(uid).cloned();
        let event_on = match seen {
            Seen::Listed => None,
            Seen::Deleted => before.as_ref().filter(|b| !b.done).map(|b| b.node.clone()),
            Seen::Applied => match (&before, placement(pod)) {
                (_, None) => None,
                (None, Some(p)) => Some(p.node),
                (Some(b), Some(p)) if b.node != p.node || (p.done && !b.done) => Some(p.node),
                (Some(_), Some(_)) => None,
            },
        };
        if let Some(node) = event_on {
            self.last.insert(node, now);
        }
        match (seen, placement(pod)) {
            (Seen::Deleted, _) | (_, None) => {
                self.pods.remove(uid);
            }
            (_, Some(p)) => {
                self.pods.insert(uid.to_owned(), p);
            }
        }
    }

    /// The last pod event on `node` seen by this process.
    #[must_use]
    pub fn last(&self, node: &str) -> Option<Timestamp> {
        self.last.get(node).copied()
    }

    /// Forgets nodes that no longer exist.
    pub fn retain_nodes(&mut self, exists: impl Fn(&str) -> bool) {
        self.last.retain(|node, _| exists(node));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    fn pod(uid: &str, node: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            node_name: node.map(str::to_owned),
            ..Default::default()
        });
        p
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn binding_terminating_and_deleting_are_events_but_status_updates_and_lists_are_not() {
        let mut e = PodEvents::default();
        e.observe(&pod("a", Some("n1")), Seen::Listed, at(1));
        assert_eq!(e.last("n1"), None, "a list is the baseline");
        e.observe(&pod("a", Some("n1")), Seen::Applied, at(2));
        assert_eq!(
            e.last("n1"),
            None,
            "an update of a known bound pod is no event"
        );
        e.observe(&pod("b", None), Seen::Applied, at(3));
        assert_eq!(e.last("n1"), None);
        e.observe(&pod("b", Some("n1")), Seen::Applied, at(4));
        assert_eq!(e.last("n1"), Some(at(4)), "binding");
        let mut terminating = pod("b", Some("n1"));
        terminating.metadata.deletion_timestamp = Some(Time(at(5)));
        e.observe(&terminating, Seen::Applied, at(5));
        assert_eq!(e.last("n1"), Some(at(5)), "terminating");
        e.observe(&terminating, Seen::Deleted, at(6));
        assert_eq!(
            e.last("n1"),
            Some(at(5)),
            "deleting a done pod is no new event"
        );
        e.observe(&pod("a", Some("n1")), Seen::Deleted, at(7));
        assert_eq!(e.last("n1"), Some(at(7)), "deleting an active pod");
        let mut done = pod("c", Some("n2"));
        e.observe(&done, Seen::Listed, at(8));
        done.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        e.observe(&done, Seen::Applied, at(9));
        assert_eq!(e.last("n2"), Some(at(9)), "terminal");
    }

    #[test]
    fn daemon_set_pods_are_not_events() {
        let mut e = PodEvents::default();
        let mut p = pod("d", Some("n1"));
        p.metadata.owner_references = Some(vec![OwnerReference {
            controller: Some(true),
            kind: "DaemonSet".into(),
            ..Default::default()
        }]);
        e.observe(&p, Seen::Applied, at(1));
        e.observe(&p, Seen::Deleted, at(2));
        assert_eq!(e.last("n1"), None);
        e.observe(&pod("x", Some("n1")), Seen::Applied, at(3));
        e.retain_nodes(|n| n != "n1");
        assert_eq!(e.last("n1"), None, "forgotten with its node");
    }
}
