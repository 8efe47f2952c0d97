//! CapacityBuffers' virtual pods and where the last provisioning pass put them (gate
//! `CapacityBuffer`).
//!
//! Responsibility: the hand-over between the CapacityBuffer controller, which turns buffers
//! into virtual pods ([`Buffers::set_pods`]), the provisioner, which schedules them with the
//! pending pods and records where they went ([`Buffers::placed`]), and disruption, which keeps
//! nodes that host them from being removed as empty ([`Buffers::hosts`]). A placement names,
//! per buffer (`namespace/name`), how many virtual pods fit existing nodes, needed new
//! NodeClaims, or fit nowhere; the controller writes it into the buffer's `Provisioning`
//! condition. Virtual pods exist only in memory: never in an API server.
//! Inputs: virtual pods, placements. Outputs: answers; no I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

/// Where one buffer's virtual pods went in one provisioning pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placement {
    /// Virtual pods the pass considered.
    pub desired: usize,
    /// Placed on existing nodes (or NodeClaims already in flight).
    pub existing: usize,
    /// Placed on NodeClaims the pass created.
    pub new: usize,
    /// Fit nowhere.
    pub failed: usize,
}

/// The buffers' in-memory state.
#[derive(Debug, Clone, Default)]
pub struct Buffers {
    pods: Arc<Vec<Pod>>,
    /// Per buffer (`namespace/name`), the last pass's placement.
    placements: BTreeMap<String, Placement>,
    /// Per node name, the virtual pods the last pass put there.
    hosts: BTreeMap<String, usize>,
}

impl Buffers {
    /// Replaces every virtual pod (the controller's whole view, sorted by the controller);
    /// whether they differ from the ones before.
    pub fn set_pods(&mut self, pods: Vec<Pod>) -> bool {
        if *self.pods == pods {
            return false;
        }
        self.pods = Arc::new(pods);
        true
    }

    /// Every virtual pod.
    #[must_use]
    pub fn pods(&self) -> Arc<Vec<Pod>> {
        Arc::clone(&self.pods)
    }

    /// Records a provisioning pass: per buffer where its virtual pods went, and per node how
    /// many it hosts; whether that differs from the pass before.
    pub fn placed(
        &mut self,
        placements: BTreeMap<String, Placement>,
        hosts: BTreeMap<String, usize>,
    ) -> bool {
        if self.placements == placements && self.hosts == hosts {
            return false;
        }
        self.placements = placements;
        self.hosts = hosts;
        true
    }

    /// The last pass's placement of a buffer's virtual pods (`namespace/name`).
    #[must_use]
    pub fn placement(&self, buffer: &str) -> Option<Placement> {
        self.placements.get(buffer).copied()
    }

    /// How many virtual pods the last pass put on `node`.
    #[must_use]
    pub fn hosts(&self, node: &str) -> usize {
        self.hosts.get(node).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_the_same_pods_is_no_change() {
        let mut b = Buffers::default();
        let pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("capacity-buffer-a-1".into()),
                ..Default::default()
            },
            ..Pod::default()
        };
        assert!(!b.set_pods(Vec::new()));
        assert!(b.set_pods(vec![pod.clone()]));
        assert!(!b.set_pods(vec![pod]));
        assert_eq!(b.pods().len(), 1);
    }

    #[test]
    fn a_pass_replaces_the_previous_placements_and_hosts() {
        let mut b = Buffers::default();
        let first = Placement {
            desired: 2,
            existing: 1,
            new: 1,
            failed: 0,
        };
        let pass = || {
            (
                BTreeMap::from([("ns/a".to_owned(), first)]),
                BTreeMap::from([("node-1".to_owned(), 1)]),
            )
        };
        let (placements, hosts) = pass();
        assert!(b.placed(placements, hosts));
        let (placements, hosts) = pass();
        assert!(!b.placed(placements, hosts), "the same pass again");
        assert_eq!(b.placement("ns/a"), Some(first));
        assert_eq!((b.hosts("node-1"), b.hosts("node-2")), (1, 0));
        assert!(b.placed(BTreeMap::new(), BTreeMap::from([("node-2".to_owned(), 2)])));
        assert_eq!(b.placement("ns/a"), None, "a buffer gone is forgotten");
        assert_eq!((b.hosts("node-1"), b.hosts("node-2")), (0, 2));
    }
}
