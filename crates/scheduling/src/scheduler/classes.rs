//! Domain classes of planned NodeClaims: the index that lets one scan skip, in O(1) each, the
//! claims whose zone (or other non-hostname domain) topology refuses a pod.
//!
//! Responsibility: give every planned claim a class — its requirement for every key of a
//! topology group not keyed on hostname ([`Topology::domain_keys`]), all that
//! [`Topology::allows_domains`] reads of a claim — and remember, for the scan of one pod, each
//! class's verdict once one claim of it was asked. Claims of one class get the same verdict
//! while the topology is unchanged, which it is during a scan.
//! Inputs: claims, the [`Topology`], invalidations from the scheduler when a claim gains a pod.
//! Outputs: class ids and per-scan verdicts.
//!
//! Why decisions cannot change: a claim is skipped only when `allows_domains` refused another
//! claim of its class with the same inputs during the same scan, and when it refuses,
//! [`super::claim::Claim::can_add`] refuses too.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::requirements::Requirement;
use crate::topology::Topology;

use super::claim::Claim;

/// What topology said of a class in the current scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not asked yet in this scan.
    Unknown,
    /// Topology allows the pod on claims of this class (the rest of the checks still run).
    Allows,
    /// Topology refuses the pod on every claim of this class.
    Refuses,
}

/// A class: the claim's requirement for each of [`Classes::keys`].
type ClassKey = Vec<Option<Requirement>>;

/// The classes of one solve's planned claims. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Classes {
    /// The topology's domain keys the classes were computed for.
    keys: Vec<Arc<str>>,
    ids: HashMap<ClassKey, usize>,
    /// Per claim index, its class; `None` until computed or after an invalidation.
    of_claim: Vec<Option<usize>>,
    /// Per class: the scan its verdict belongs to, and the verdict.
    verdicts: Vec<(u64, Verdict)>,
    scan: u64,
}

impl Classes {
    /// Starts the scan of one pod. When the topology gained a group with a new key since the
    /// classes were computed, every class is recomputed on demand.
    pub(crate) fn begin_scan(&mut self, topology: &Topology) {
        if self.keys != topology.domain_keys() {
            self.keys = topology.domain_keys().to_vec();
            self.ids.clear();
            self.verdicts.clear();
            self.of_claim.fill(None);
        }
        self.scan += 1;
    }

    /// Forgets the class of the claim at `index` (it gained a pod).
    pub(crate) fn invalidate(&mut self, index: usize) {
        if let Some(slot) = self.of_claim.get_mut(index) {
            *slot = None;
        }
    }

    /// The class of the claim at `index`, computed when unknown.
    pub(crate) fn class(&mut self, index: usize, claim: &Claim) -> usize {
        if let Some(Some(class)) = self.of_claim.get(index) {
            return *class;
        }
        let key: ClassKey = self
            .keys
            .iter()
            .map(|k| claim.requirements.get(k).cloned())
            .collect();
        let next = self.ids.len();
        let class = *self.ids.entry(key).or_insert(next);
        if class == next {
            self.verdicts.push((0, Verdict::Unknown));
        }
        if self.of_claim.len() <= index {
            self.of_claim.resize(index + 1, None);
        }
        if let Some(slot) = self.of_claim.get_mut(index) {
            *slot = Some(class);
        }
        class
    }

    /// The class's verdict in the current scan.
    pub(crate) fn verdict(&self, class: usize) -> Verdict {
        match self.verdicts.get(class) {
            Some(&(scan, verdict)) if scan == self.scan => verdict,
            _ => Verdict::Unknown,
        }
    }

    /// Records the class's verdict for the current scan.
    pub(crate) fn set_verdict(&mut self, class: usize, allows: bool) {
        if let Some(slot) = self.verdicts.get_mut(class) {
            *slot = (
                self.scan,
                if allows {
                    Verdict::Allows
                } else {
                    Verdict::Refuses
                },
            );
        }
    }
}
