//! The minimum sizes of the scaling groups behind our nodes (for Cluster API: a
//! MachineDeployment's `cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size`).
//!
//! Responsibility: how many more nodes of each group emptiness and consolidation may remove
//! without a replacement. Removing a Machine at its MachineDeployment's minimum size only makes
//! Cluster API create another one, so such a node is no candidate for them, and a command never
//! takes more nodes of a group than its room. Drift and expiration are not bounded here: a
//! drifted node at the minimum is replaced, which is what drift asks for.
//!
//! A node the provider holds ([`RemovalRoom::hold`]: its removal cannot be made exact now, a
//! Cluster API rollout) is no candidate for any method, drift and expiration included.
//!
//! Inputs: the provider's [`RemovalRoom`] per NodeClaim (or why it could not be read) and the
//! NodeClaims already leaving (deleting, tainted `karpenter.sh/disrupted`, or in a command in
//! flight), whose Machines still count in the group's replicas. A NodeClaim whose Machine's
//! replica was already given back is counted again until it is gone, which can only make the
//! room smaller for a moment, never larger. Output: [`Floors`]. Pure.

use std::collections::{BTreeMap, BTreeSet};

use cloudprovider::RemovalRoom;

/// What one NodeClaim's group allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Floor<'a> {
    /// The group and how many more of its nodes may go.
    Group {
        /// The group.
        group: &'a str,
        /// Its minimum size.
        min: u32,
        /// How many more may go.
        room: usize,
    },
    /// The bound exists but could not be read (the node is left alone).
    Unknown(&'a str),
    /// The node must not be disrupted now, for this reason (any method).
    Held(&'a str),
}

/// Per NodeClaim, its group's floor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Floors {
    by_claim: BTreeMap<String, Result<RemovalRoom, String>>,
    room: BTreeMap<String, usize>,
}

impl Floors {
    /// Floors from the provider's answers per NodeClaim name (absent or `Ok(None)`: no bound),
    /// less the NodeClaims in `leaving`.
    #[must_use]
    pub fn new(
        answers: BTreeMap<String, Result<Option<RemovalRoom>, String>>,
        leaving: &BTreeSet<String>,
    ) -> Self {
        let by_claim: BTreeMap<String, Result<RemovalRoom, String>> = answers
            .into_iter()
            .filter_map(|(nc, a)| a.transpose().map(|a| (nc, a)))
            .collect();
        let mut room: BTreeMap<String, usize> = BTreeMap::new();
        for r in by_claim.values().flatten() {
            // A held node's group still has its room: the others may go.
            room.entry(r.group.clone())
                .or_insert(usize::try_from(r.room).unwrap_or(usize::MAX));
        }
        for (nc, r) in &by_claim {
            if let Ok(r) = r
                && leaving.contains(nc)
                && let Some(left) = room.get_mut(&r.group)
            {
                *left = left.saturating_sub(1);
            }
        }
        Self { by_claim, room }
    }

    /// The floor of NodeClaim `nc` (`None`: no bound).
    #[must_use]
    pub fn of(&self, nc: &str) -> Option<Floor<'_>> {
        Some(match self.by_claim.get(nc)? {
            Ok(RemovalRoom {
                hold: Some(why), ..
            }) => Floor::Held(why),
            Ok(r) => Floor::Group {
                group: &r.group,
                min: r.min,
                room: self.room.get(&r.group).copied().unwrap_or(0),
            },
            Err(e) => Floor::Unknown(e),
        })
    }

    /// The room left per group.
    #[must_use]
    pub fn rooms(&self) -> &BTreeMap<String, usize> {
        &self.room
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn room(group: &str, min: u32, room: u32) -> Result<Option<RemovalRoom>, String> {
        Ok(Some(RemovalRoom {
            group: group.into(),
            min,
            room,
            hold: None,
        }))
    }

    #[test]
    fn a_held_node_is_held_and_its_group_keeps_its_room() {
        let held = Ok(Some(RemovalRoom {
            group: "ns/a".into(),
            min: 0,
            room: 3,
            hold: Some("rolling out".into()),
        }));
        let answers = BTreeMap::from([
            ("a1".to_owned(), held),
            ("a2".to_owned(), room("ns/a", 0, 3)),
        ]);
        let floors = Floors::new(answers, &BTreeSet::new());
        assert_eq!(floors.of("a1"), Some(Floor::Held("rolling out")));
        assert_eq!(
            floors.of("a2"),
            Some(Floor::Group {
                group: "ns/a",
                min: 0,
                room: 3
            })
        );
    }

    #[test]
    fn nodes_already_leaving_use_up_their_group_s_room() {
        let answers = BTreeMap::from([
            ("a1".to_owned(), room("ns/a", 1, 2)),
            ("a2".to_owned(), room("ns/a", 1, 2)),
            ("a3".to_owned(), room("ns/a", 1, 2)),
            ("b1".to_owned(), room("ns/b", 0, 1)),
            ("c1".to_owned(), Ok(None)),
            (
                "d1".to_owned(),
                Err("min size \"x\" is not a number".to_owned()),
            ),
        ]);
        let floors = Floors::new(answers, &BTreeSet::from(["a3".to_owned()]));
        assert_eq!(
            floors.of("a1"),
            Some(Floor::Group {
                group: "ns/a",
                min: 1,
                room: 1
            })
        );
        assert_eq!(
            floors.of("b1"),
            Some(Floor::Group {
                group: "ns/b",
                min: 0,
                room: 1
            })
        );
        assert_eq!(floors.of("c1"), None);
        assert_eq!(floors.of("unknown"), None);
        assert_eq!(
            floors.of("d1"),
            Some(Floor::Unknown("min size \"x\" is not a number"))
        );
        let floors = Floors::new(
            BTreeMap::from([
                ("a1".to_owned(), room("ns/a", 1, 1)),
                ("a2".to_owned(), room("ns/a", 1, 1)),
            ]),
            &BTreeSet::from(["a2".to_owned(), "a1".to_owned()]),
        );
        assert_eq!(floors.rooms().get("ns/a"), Some(&0), "never below 0");
    }
}
