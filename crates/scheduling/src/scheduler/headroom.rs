//! A planned NodeClaim's headroom: per resource, the most any of its remaining options can
//! hold, and the options that attain it.
//!
//! Responsibility: compute it from a claim's options (the template's precomputed allocatable
//! minus DaemonSet overhead, [`Template::available`]), and remember it per option list in the
//! template ([`Cache`]): the claims started for pods of one shape begin with the same options,
//! and a claim whose options shrink back to a list seen before gets its result again.
//! Inputs: a [`Template`], a claim's [`GroupOptions`]. Outputs: the element-wise maximum
//! ([`Dense`]) and the addresses of its leaders.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use crate::instance_type::{Covered, Dense, InstanceType};
use crate::resources::Resources;

use super::template::{GroupOptions, Template};

/// Option lists remembered per template.
const CACHED: usize = 16;

/// Recent headroom results of one template, by option list.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    entries: RefCell<Vec<Entry>>,
    /// The entry to replace next once full (round robin).
    next: Cell<usize>,
}

#[derive(Debug)]
struct Entry {
    hash: u64,
    /// Per group: its id, its option count, then its options' addresses.
    key: Vec<usize>,
    headroom: Dense,
    leaders: Vec<usize>,
}

/// The identity of an option list: group ids, counts and instance-type addresses.
fn key_of(options: &[GroupOptions]) -> (u64, Vec<usize>) {
    let mut key = Vec::with_capacity(options.iter().map(|g| g.instance_types.len() + 2).sum());
    for group in options {
        key.push(group.group);
        key.push(group.instance_types.len());
        key.extend(group.instance_types.iter().map(|it| Arc::as_ptr(it).addr()));
    }
    // FxHash's mixing step: enough to tell a few lists apart before comparing them whole.
    let hash = key.iter().fold(0_u64, |h, &word| {
        (h.rotate_left(5) ^ word as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
    });
    (hash, key)
}

/// The headroom of `options` (see [`compute`]), from the template's cache when this list
/// was seen before.
pub(crate) fn of(template: &Template, options: &[GroupOptions]) -> (Dense, Vec<usize>) {
    let (hash, key) = key_of(options);
    let cache = &template.headroom;
    if let Some(hit) = cache
        .entries
        .borrow()
        .iter()
        .find(|e| e.hash == hash && e.key == key)
    {
        return (hit.headroom.clone(), hit.leaders.clone());
    }
    let (headroom, leaders) = compute(template, options);
    let entry = Entry {
        hash,
        key,
        headroom: headroom.clone(),
        leaders: leaders.clone(),
    };
    let mut entries = cache.entries.borrow_mut();
    if entries.len() < CACHED {
        entries.push(entry);
    } else {
        let next = cache.next.get() % CACHED;
        if let Some(slot) = entries.get_mut(next) {
            *slot = entry;
        }
        cache.next.set(next + 1);
    }
    (headroom, leaders)
}

/// Per resource, the most any option can hold (allocatable minus its group's overhead), as an
/// element-wise maximum — a necessary condition for any option to hold the requests — and, per
/// component of it, one option that attains it: while they all remain, the maximum is
/// unchanged. (One per component, not every option that attains one: when every instance type
/// has the same quantity of some resource — a NodeOverlay adding one extended resource to all —
/// every option would attain it, and checking that they all remain would cost options² per
/// placed pod.)
fn compute(template: &Template, options: &[GroupOptions]) -> (Dense, Vec<usize>) {
    let mut scratch = Dense::default();
    let mut max = Dense::default();
    for group in options {
        let mut lookup = Available::new(template, group, Direction::Forward);
        for it in &group.instance_types {
            if let Some(a) = lookup.of(it, &mut scratch) {
                max.raise_to(a);
            }
        }
    }
    // The last options first: the largest instance types, the ones a narrowing claim keeps
    // longest, so the maximum is recomputed least often.
    // Once every component has its leader, no option can add one: stop.
    let mut leaders = Vec::new();
    let mut covered = Covered::default();
    let components = max.nonzero_components();
    'scan: for group in options.iter().rev() {
        let mut lookup = Available::new(template, group, Direction::Backward);
        for it in group.instance_types.iter().rev() {
            if covered.count() >= components {
                break 'scan;
            }
            if lookup
                .of(it, &mut scratch)
                .is_some_and(|a| a.attains_uncovered(&max, &mut covered))
            {
                leaders.push(Arc::as_ptr(it).addr());
            }
        }
    }
    (max, leaders)
}

/// The order a claim's options of one group are looked up in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Backward,
}

/// What each option of one of a claim's groups can hold (allocatable minus the group's
/// overhead), read from the template's [`Template::available`]: a claim's options are the
/// template's in the same order with some left out, so a cursor walking the template's list
/// in the direction of the lookups finds each in amortized constant time. An option not found
/// that way (never, while filters keep the order) is computed into a scratch value.
struct Available<'t> {
    template: &'t [Arc<InstanceType>],
    available: Option<&'t [Option<Dense>]>,
    overhead: Option<&'t Resources>,
    direction: Direction,
    /// The next template position to look at (forward), or one past it (backward).
    cursor: usize,
}

impl<'t> Available<'t> {
    fn new(template: &'t Template, group: &GroupOptions, direction: Direction) -> Self {
        let overhead = template
            .overheads
            .get(group.group)
            .map(|o| &o.requests)
            .filter(|o| !o.is_empty());
        let position = template.options.iter().position(|g| g.group == group.group);
        let list = position
            .and_then(|i| template.options.get(i))
            .map_or(&[][..], |g| &g.instance_types[..]);
        let available = position
            .and_then(|i| template.available.get(i))
            .map(Vec::as_slice)
            .filter(|a| a.len() == list.len());
        Self {
            template: list,
            available,
            overhead,
            direction,
            cursor: match direction {
                Direction::Forward => 0,
                Direction::Backward => list.len(),
            },
        }
    }

    /// What `it` can hold, `None` when nothing (a negative remainder).
    fn of<'a>(&mut self, it: &'a InstanceType, scratch: &'a mut Dense) -> Option<&'a Dense>
    where
        't: 'a,
    {
        let Some(overhead) = self.overhead else {
            let own = it.dense_allocatable();
            return (!own.is_negative()).then_some(own);
        };
        if let Some(found) = self.available.and_then(|a| a.get(self.find(it)?)) {
            return found.as_ref();
        }
        scratch.set_minus(it.dense_allocatable(), overhead);
        (!scratch.is_negative()).then_some(&*scratch)
    }

    /// `it`'s position in the template's list, moving the cursor past it.
    fn find(&mut self, it: &InstanceType) -> Option<usize> {
        let same = |i: usize| {
            self.template
                .get(i)
                .is_some_and(|t| std::ptr::eq(Arc::as_ptr(t), it))
        };
        match self.direction {
            Direction::Forward => {
                let found = (self.cursor..self.template.len()).find(|&i| same(i))?;
                self.cursor = found + 1;
                Some(found)
            }
            Direction::Backward => {
                let found = (0..self.cursor).rev().find(|&i| same(i))?;
                self.cursor = found;
                Some(found)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeMap;

    use super::*;
    use crate::fixtures::{FakeInstanceType, pod};
    use crate::instance_type::MinValuesPolicy;
    use crate::labels::WellKnownLabels;
    use crate::quantity::Quantity;
    use crate::requirements::Requirements;
    use crate::scheduler::daemons::DaemonPod;
    use crate::scheduler::input::NodePool;
    use crate::scheduler::template;

    /// Sizes 1..=n CPUs (memory 2 GiB per CPU), each with `n + 1 - size` of an extended
    /// resource, so the largest type does not have the most of everything; a DaemonSet asking
    /// 1500m CPU and 1 of the extended resource leaves the one-CPU type nothing.
    fn template(n: i64) -> Template {
        let types = (1..=n)
            .map(|size| {
                Arc::new(
                    FakeInstanceType::new(&format!("t-{size}"))
                        .resource("cpu", Quantity::from_value(size))
                        .resource(
                            "memory",
                            Quantity::from_bytes(size * 2 * 1024 * 1024 * 1024),
                        )
                        .resource("pods", Quantity::from_value(110))
                        .resource("example.com/widget", Quantity::from_value(n + 1 - size))
                        .build()
                        .unwrap(),
                )
            })
            .collect();
        let pool = NodePool {
            name: Arc::from("pool"),
            weight: 0,
            requirements: Requirements::default(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            limits: None,
            instance_types: types,
        };
        let daemon = pod("daemon")
            .cpu("1500m")
            .request("example.com/widget", "1")
            .build()
            .unwrap();
        let (mut templates, _) = template::build(
            &[pool],
            &[DaemonPod::new(daemon).unwrap()],
            &[],
            &BTreeMap::new(),
            &WellKnownLabels::default(),
            MinValuesPolicy::Strict,
        );
        templates.remove(0)
    }

    /// The headroom the definition asks for, the slow way: the element-wise maximum of every
    /// option's allocatable minus its group's overhead, options left negative left out.
    fn reference(template: &Template, options: &[GroupOptions]) -> Dense {
        let mut max = Dense::default();
        for group in options {
            let overhead = &template.overheads[group.group].requests;
            for it in &group.instance_types {
                let available = it.dense_allocatable().minus(overhead);
                if !available.is_negative() {
                    max.raise_to(&available);
                }
            }
        }
        max
    }

    fn leaders_attain_every_component(template: &Template, options: &[GroupOptions]) {
        let (max, leaders) = of(template, options);
        assert_eq!(max, reference(template, options));
        let mut covered = Covered::default();
        for group in options {
            let overhead = &template.overheads[group.group].requests;
            for it in &group.instance_types {
                if leaders.contains(&Arc::as_ptr(it).addr()) {
                    let available = it.dense_allocatable().minus(overhead);
                    available.attains_uncovered(&max, &mut covered);
                }
            }
        }
        assert_eq!(covered.count(), max.nonzero_components());
    }

    #[test]
    fn the_headroom_is_the_maximum_of_what_each_option_holds_and_its_leaders_attain_it() {
        let template = template(8);
        assert_eq!(template.available.len(), template.options.len());
        // The one-CPU type cannot carry the DaemonSet: it is precomputed as holding nothing.
        assert!(template.available[0].iter().any(Option::is_none));
        leaders_attain_every_component(&template, &template.options);
        // A claim's narrowed options (every other one), and a single one.
        let narrowed: Vec<GroupOptions> = template
            .options
            .iter()
            .map(|g| GroupOptions {
                group: g.group,
                instance_types: g.instance_types.iter().step_by(2).cloned().collect(),
            })
            .collect();
        leaders_attain_every_component(&template, &narrowed);
        let single: Vec<GroupOptions> = template
            .options
            .iter()
            .map(|g| GroupOptions {
                group: g.group,
                instance_types: g.instance_types.iter().skip(4).take(1).cloned().collect(),
            })
            .collect();
        leaders_attain_every_component(&template, &single);
    }

    #[test]
    fn options_out_of_the_templates_order_are_computed_not_misread() {
        let template = template(6);
        // Reversed, so the lookup's cursor misses: each option is computed instead.
        let reversed: Vec<GroupOptions> = template
            .options
            .iter()
            .map(|g| GroupOptions {
                group: g.group,
                instance_types: g.instance_types.iter().rev().cloned().collect(),
            })
            .collect();
        assert_eq!(
            compute(&template, &reversed).0,
            reference(&template, &reversed)
        );
        // An instance type the template does not have at all.
        let stranger = Arc::new(
            FakeInstanceType::new("stranger")
                .resource("cpu", Quantity::from_value(64))
                .build()
                .unwrap(),
        );
        let mut with_stranger = template.options.clone();
        with_stranger[0].instance_types.insert(1, stranger);
        assert_eq!(
            compute(&template, &with_stranger).0,
            reference(&template, &with_stranger)
        );
    }

    #[test]
    fn a_list_seen_before_is_answered_from_the_cache_and_the_cache_stays_bounded() {
        let template = template(8);
        let first = of(&template, &template.options);
        assert_eq!(template.headroom.entries.borrow().len(), 1);
        assert_eq!(of(&template, &template.options), first);
        assert_eq!(template.headroom.entries.borrow().len(), 1);
        // Every prefix of the options is another list.
        let all = &template.options[0].instance_types;
        for n in 1..=all.len() {
            let options = vec![GroupOptions {
                group: template.options[0].group,
                instance_types: all[..n].to_vec(),
            }];
            let answer = of(&template, &options);
            assert_eq!(answer.0, reference(&template, &options));
            assert_eq!(of(&template, &options), answer);
        }
        for _ in 0..3 * CACHED {
            let options = vec![GroupOptions {
                group: template.options[0].group,
                instance_types: all[1..].to_vec(),
            }];
            let _ = of(&template, &options);
        }
        assert!(template.headroom.entries.borrow().len() <= CACHED);
    }
}
