//! Planned NodeClaims a hostname check has refused: the index that lets a scan skip them with
//! one bit test instead of a hostname lookup per check.
//!
//! Responsibility: per [`HostCheck`] (a hostname anti-affinity or spread group with its
//! threshold), the set of claim indices whose hostname it refused. A refusal is permanent
//! within a solve — the check refuses when the group counts more than its threshold at the
//! host, and counts only grow — so a claim found refused once is refused by the same check for
//! every later pod that carries it.
//! Inputs: the checks of a pod's [`crate::topology::HostFilter`], refusals found by the scan.
//! Outputs: whether a claim is known to be refused.

use rustc_hash::FxHashMap as HashMap;

use crate::topology::HostCheck;

/// Known refusals, one bit set per check. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct HostBlocks {
    slots: HashMap<HostCheck, usize>,
    sets: Vec<Vec<u64>>,
}

impl HostBlocks {
    /// The slot of each check (created when new), for [`Self::known_refused`].
    pub(crate) fn slots(&mut self, checks: impl Iterator<Item = HostCheck>) -> Vec<usize> {
        checks
            .map(|check| {
                let next = self.sets.len();
                let slot = *self.slots.entry(check).or_insert(next);
                if slot == next {
                    self.sets.push(Vec::new());
                }
                slot
            })
            .collect()
    }

    /// Whether one of the checks in `slots` is known to refuse the claim at `index`.
    pub(crate) fn known_refused(&self, slots: &[usize], index: usize) -> bool {
        let (word, bit) = (index / 64, index % 64);
        slots.iter().any(|&slot| {
            self.sets
                .get(slot)
                .and_then(|set| set.get(word))
                .is_some_and(|w| w & (1 << bit) != 0)
        })
    }

    /// Records that `check` refused the claim at `index`.
    pub(crate) fn refused(&mut self, check: HostCheck, index: usize) {
        let Some(&slot) = self.slots.get(&check) else {
            return;
        };
        let Some(set) = self.sets.get_mut(slot) else {
            return;
        };
        let (word, bit) = (index / 64, index % 64);
        if set.len() <= word {
            set.resize(word + 1, 0);
        }
        if let Some(w) = set.get_mut(word) {
            *w |= 1 << bit;
        }
    }
}
