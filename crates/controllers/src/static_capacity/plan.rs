//! What a static NodePool needs now (spec §4.10, upstream's `static.provisioning` and
//! `static.deprovisioning`): how many NodeClaims to create and which to delete so that
//! `spec.replicas` of them run.
//!
//! Responsibility: count the pool's NodeClaims — *running* (not deleting, not being disrupted)
//! and *pending disruption* (marked by a disruption command, whose replacement is on its
//! way); below `replicas`, create `replicas − running`, bounded by `limits.nodes` counted
//! over running and pending ones; above, delete the surplus of running ones in upstream's
//! order: not launched yet, then empty (no pod that must move, none with do-not-disrupt),
//! then the rest with those that hold a do-not-disrupt pod last and the cheapest to disrupt
//! first. Deletions go through the ordinary termination path (drain with PDBs).
//! Inputs: the pool's `replicas` and node limit, its [`Member`]s. Outputs: a [`Plan`]. Pure.

/// One NodeClaim of the pool, as far as the plan cares.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The NodeClaim.
    pub name: String,
    /// It has a deletion timestamp.
    pub deleting: bool,
    /// A disruption command marked it (its replacement comes first).
    pub pending_disruption: bool,
    /// It has a providerID.
    pub launched: bool,
    /// Pods that would have to move (reschedulable pods on its Node).
    pub pods: usize,
    /// One of those pods has `karpenter.sh/do-not-disrupt: "true"`.
    pub do_not_disrupt: bool,
    /// The summed eviction cost of those pods.
    pub disruption_cost: f64,
}

/// How a pool's live NodeClaims split: what static capacity and static drift count against
/// `replicas` and `limits.nodes`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCount {
    /// Not deleting and not being disrupted.
    pub running: usize,
    /// Marked by a disruption command, not deleting yet.
    pub pending_disruption: usize,
}

/// The split of `members` (deleting ones do not count).
#[must_use]
pub fn count(members: &[Member]) -> PoolCount {
    let live = members.iter().filter(|m| !m.deleting);
    let pending_disruption = live.clone().filter(|m| m.pending_disruption).count();
    PoolCount {
        running: live.count() - pending_disruption,
        pending_disruption,
    }
}

/// What to do for one pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// NodeClaims to create.
    pub create: usize,
    /// NodeClaims to delete, in order.
    pub delete: Vec<String>,
    /// The node limit held creations back (`limits.nodes`).
    pub limited: bool,
}

/// The plan for a pool of `replicas` with `node_limit` (`limits.nodes`) and `members`.
#[must_use]
pub fn plan(replicas: i64, node_limit: Option<i64>, members: &[Member]) -> Plan {
    let replicas = usize::try_from(replicas).unwrap_or(0);
    let running: Vec<&Member> = members
        .iter()
        .filter(|m| !m.deleting && !m.pending_disruption)
        .collect();
    let pending = count(members).pending_disruption;
    let mut out = Plan::default();
    if running.len() + pending < replicas {
        let wanted = replicas - running.len();
        let room = node_limit.map_or(usize::MAX, |limit| {
            usize::try_from(limit)
                .unwrap_or(0)
                .saturating_sub(running.len() + pending)
        });
        out.create = wanted.min(room);
        out.limited = out.create < wanted;
    } else if running.len() > replicas {
        let surplus = running.len() - replicas;
        let mut order = running;
        order.sort_by(|a, b| {
            let rank = |m: &Member| {
                if !m.launched {
                    0
                } else if m.pods == 0 {
                    1
                } else if !m.do_not_disrupt {
                    2
                } else {
                    3
                }
            };
            rank(a)
                .cmp(&rank(b))
                .then_with(|| a.disruption_cost.total_cmp(&b.disruption_cost))
                .then_with(|| a.name.cmp(&b.name))
        });
        out.delete = order
            .into_iter()
            .take(surplus)
            .map(|m| m.name.clone())
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(name: &str) -> Member {
        Member {
            name: name.into(),
            deleting: false,
            pending_disruption: false,
            launched: true,
            pods: 1,
            do_not_disrupt: false,
            disruption_cost: 1.0,
        }
    }

    #[test]
    fn creates_up_to_replicas() {
        let p = plan(3, None, &[member("a")]);
        assert_eq!(p.create, 2);
        assert!(p.delete.is_empty());
        assert!(!p.limited);
    }

    #[test]
    fn deleting_nodeclaims_do_not_count() {
        let gone = Member {
            deleting: true,
            ..member("b")
        };
        assert_eq!(plan(2, None, &[member("a"), gone]).create, 1);
    }

    #[test]
    fn a_replacement_on_its_way_is_not_doubled() {
        // Drift marked `a`; its replacement `b` runs: nothing to create, nothing to delete.
        let marked = Member {
            pending_disruption: true,
            ..member("a")
        };
        assert_eq!(
            plan(1, None, &[marked.clone(), member("b")]),
            Plan::default()
        );
        // Marked, but the replacement is not there yet: the pending one still holds the place.
        assert_eq!(
            plan(1, None, std::slice::from_ref(&marked)),
            Plan::default()
        );
        // Two wanted, one marked: one more (the marked one goes later).
        assert_eq!(plan(2, None, &[marked]).create, 2);
    }

    #[test]
    fn the_node_limit_bounds_creation() {
        let p = plan(5, Some(3), &[member("a")]);
        assert_eq!(p.create, 2);
        assert!(p.limited);
        let full = plan(5, Some(1), &[member("a")]);
        assert_eq!(full.create, 0);
        assert!(full.limited);
    }

    #[test]
    fn surplus_goes_unlaunched_then_empty_then_cheapest_and_do_not_disrupt_last() {
        let members = [
            Member {
                do_not_disrupt: true,
                disruption_cost: 0.5,
                ..member("guarded")
            },
            Member {
                disruption_cost: 3.0,
                ..member("costly")
            },
            Member {
                disruption_cost: 2.0,
                ..member("cheap")
            },
            Member {
                pods: 0,
                disruption_cost: 0.0,
                ..member("empty")
            },
            Member {
                launched: false,
                pods: 0,
                disruption_cost: 0.0,
                ..member("unlaunched")
            },
        ];
        assert_eq!(plan(4, None, &members).delete, ["unlaunched"]);
        assert_eq!(
            plan(2, None, &members).delete,
            ["unlaunched", "empty", "cheap"]
        );
        assert_eq!(
            plan(0, None, &members).delete,
            ["unlaunched", "empty", "cheap", "costly", "guarded"]
        );
    }

    #[test]
    fn pending_disruption_is_never_deleted_as_surplus() {
        let marked = Member {
            pending_disruption: true,
            ..member("a")
        };
        let p = plan(1, None, &[marked, member("b"), member("c")]);
        assert_eq!(p.delete, ["b"]);
    }

    #[test]
    fn zero_replicas_deletes_everything_running() {
        let p = plan(0, None, &[member("a"), member("b")]);
        assert_eq!(p.delete.len(), 2);
        assert_eq!(p.create, 0);
    }
}
