//! Properties of the instance-type helpers against naive reference implementations: the filter
//! keeps exactly what a per-candidate check keeps (and diagnoses with exactly its flags), the
//! changed-keys fast path agrees with the full check, the cached fit agrees with
//! `resources::fits`, price order is sorted and input-order independent, and the minValues
//! prefix is the shortest satisfying one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;
use scheduling::instance_type::{
    FilterFlags, FilterGroup, FilterInput, InstanceType, InstanceTypeSpec, MinValuesPolicy,
    Offering, Overhead, filter_instance_types, order_by_price, satisfies_min_values,
};
use scheduling::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, TOPOLOGY_ZONE, WellKnownLabels};
use scheduling::quantity::Quantity;
use scheduling::requirements::{Requirement, Requirements};
use scheduling::resources::{ResourceName, Resources, fits};

const ZONES: [&str; 3] = ["z1", "z2", "z3"];
const CAPACITY_TYPES: [&str; 3] = ["spot", "on-demand", "reserved"];
const ARCHES: [&str; 2] = ["amd64", "arm64"];
const FAMILIES: [&str; 3] = ["c", "m", "r"];
const RESERVATION_LABEL: &str = "example.com/reservation-id";

/// The default well-known labels, with or without the provider's reservation label.
fn well_known(with_reservation_label: bool) -> WellKnownLabels {
    let labels = WellKnownLabels::default();
    if with_reservation_label {
        labels.with_key(RESERVATION_LABEL)
    } else {
        labels
    }
}

fn pick<'a>(values: &[&'a str], mask: u8) -> Vec<&'a str> {
    values
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, v)| *v)
        .collect()
}

fn resources(cpu_milli: i64, memory_mi: i64, gpu: i64) -> Resources {
    let mut list: Resources = [
        (ResourceName::CPU, Quantity::from_milli(cpu_milli)),
        (ResourceName::MEMORY, Quantity::from_bytes(memory_mi << 20)),
    ]
    .into_iter()
    .collect();
    if gpu > 0 {
        list.insert(
            ResourceName::new("example.com/gpu"),
            Quantity::from_value(gpu),
        );
    }
    list
}

type OfferingParams = (usize, usize, u8, bool);

fn instance_type() -> impl Strategy<Value = InstanceTypeSpec> {
    (
        (500i64..8_000, 256i64..16_384, 0i64..2),
        (0usize..2, 0u8..8, 0usize..3),
        prop::collection::vec((0usize..3, 0usize..3, 0u8..20, any::<bool>()), 0..5),
        (0i64..1_000, 0i64..600),
    )
        .prop_map(
            |((cpu, memory, gpu), (arch, zones, family), offerings, (oh_cpu, oh_mem))| {
                let offerings = offerings
                    .into_iter()
                    .map(|(ct, zone, price, available): OfferingParams| {
                        let price = f64::from(price) * 0.5;
                        let offering = if CAPACITY_TYPES[ct] == "reserved" {
                            let id = if price < 5.0 { "r-1" } else { "r-2" };
                            Offering::reserved(RESERVATION_LABEL, id, ZONES[zone], price, 1)
                        } else {
                            Offering::new(CAPACITY_TYPES[ct], ZONES[zone], price)
                        };
                        offering.with_available(available)
                    })
                    .collect();
                InstanceTypeSpec {
                    name: Arc::from(""),
                    requirements: [
                        Requirement::in_values(ARCH, [ARCHES[arch]]),
                        Requirement::in_values(TOPOLOGY_ZONE, pick(&ZONES, zones)),
                        Requirement::in_values(CAPACITY_TYPE, ["spot", "on-demand"]),
                        Requirement::in_values("family", [FAMILIES[family]]),
                    ]
                    .into_iter()
                    .collect(),
                    offerings,
                    capacity: resources(cpu, memory, gpu),
                    overhead: Overhead {
                        kube_reserved: resources(oh_cpu, oh_mem, 0),
                        ..Overhead::default()
                    },
                }
            },
        )
}

fn catalogue() -> impl Strategy<Value = Vec<Arc<InstanceType>>> {
    prop::collection::vec(instance_type(), 1..10).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, mut spec)| {
                let name = format!("it-{i}");
                spec.requirements
                    .add(Requirement::in_values(INSTANCE_TYPE, [name.as_str()]));
                spec.name = Arc::from(name);
                Arc::new(InstanceType::new(spec).unwrap())
            })
            .collect()
    })
}

fn node_claim_requirements() -> impl Strategy<Value = Requirements> {
    (
        prop::option::of(0u8..8),
        prop::option::of(0u8..8),
        prop::option::of(0usize..2),
        prop::option::of((0usize..3, any::<bool>())),
        prop::option::of(prop::sample::select(vec!["r-1", "r-2"])),
    )
        .prop_map(|(zones, capacity_types, arch, family, reservation)| {
            let mut reqs = Requirements::new();
            if let Some(mask) = zones {
                reqs.add(Requirement::in_values(TOPOLOGY_ZONE, pick(&ZONES, mask)));
            }
            if let Some(mask) = capacity_types {
                reqs.add(Requirement::in_values(
                    CAPACITY_TYPE,
                    pick(&CAPACITY_TYPES, mask),
                ));
            }
            if let Some(arch) = arch {
                reqs.add(Requirement::in_values(ARCH, [ARCHES[arch]]));
            }
            if let Some((family, negative)) = family {
                let family = [FAMILIES[family]];
                reqs.add(if negative {
                    Requirement::not_in("family", family)
                } else {
                    Requirement::in_values("family", family)
                });
            }
            if let Some(id) = reservation {
                reqs.add(Requirement::in_values(RESERVATION_LABEL, [id]));
            }
            reqs
        })
}

fn gpus() -> impl Strategy<Value = i64> {
    prop_oneof![4 => Just(0i64), 1 => 1i64..3]
}

fn requests() -> impl Strategy<Value = Resources> {
    (0i64..9_000, 0i64..17_000, gpus()).prop_map(|(cpu, memory, gpu)| resources(cpu, memory, gpu))
}

/// Requests most instance types hold, so survivors survive again.
fn small_requests() -> impl Strategy<Value = Resources> {
    (0i64..1_000, 0i64..1_000).prop_map(|(cpu, memory)| resources(cpu, memory, 0))
}

/// Group index per catalogue entry, and each group's overhead.
fn grouping() -> impl Strategy<Value = (Vec<usize>, Vec<Resources>)> {
    (
        prop::collection::vec(0usize..3, 10),
        prop::collection::vec(
            (
                0i64..1_500,
                0i64..2_000,
                prop_oneof![4 => Just(0i64), 1 => Just(1i64)],
            ),
            3,
        ),
    )
        .prop_map(|(assignment, overheads)| {
            let overheads = overheads
                .into_iter()
                .map(|(c, m, g)| resources(c, m, g))
                .collect();
            (assignment, overheads)
        })
}

struct Naive {
    kept: Vec<Vec<String>>,
    flags: FilterFlags,
}

fn naive(
    groups: &[(Resources, Vec<Arc<InstanceType>>)],
    reqs: &Requirements,
    requests: &Resources,
    wk: &WellKnownLabels,
) -> Naive {
    let mut flags = FilterFlags::default();
    let mut kept = Vec::new();
    for (overhead, its) in groups {
        let needed = requests.merged(overhead);
        let mut group = Vec::new();
        for it in its {
            let r = it.requirements().intersects(reqs).is_ok();
            let f = fits(&needed, it.allocatable());
            let o = it
                .offerings()
                .iter()
                .any(|o| o.available && reqs.compatible(&o.requirements, wk).is_ok());
            flags.requirements |= r;
            flags.resources |= f;
            flags.offering |= o;
            flags.requirements_and_resources |= r && f && !o;
            flags.requirements_and_offering |= r && o && !f;
            flags.resources_and_offering |= f && o && !r;
            if r && f && o {
                group.push(it.name().to_owned());
            }
        }
        kept.push(group);
    }
    Naive { kept, flags }
}

fn split(
    its: &[Arc<InstanceType>],
    (assignment, overheads): &(Vec<usize>, Vec<Resources>),
) -> Vec<(Resources, Vec<Arc<InstanceType>>)> {
    let mut groups: Vec<(Resources, Vec<Arc<InstanceType>>)> =
        overheads.iter().map(|o| (o.clone(), Vec::new())).collect();
    for (it, group) in its.iter().zip(assignment) {
        groups[*group].1.push(it.clone());
    }
    groups
}

fn run(
    groups: &[(Resources, Vec<Arc<InstanceType>>)],
    reqs: &Requirements,
    requests: &Resources,
    wk: &WellKnownLabels,
    checked_against: Option<&Requirements>,
) -> Result<Vec<Vec<String>>, FilterFlags> {
    let views: Vec<FilterGroup<'_, Arc<InstanceType>>> = groups
        .iter()
        .map(|(o, its)| FilterGroup::new(o, its))
        .collect();
    let input = FilterInput {
        requests,
        pod_requests: requests,
        well_known: wk,
        min_values_policy: MinValuesPolicy::Strict,
        checked_against,
    };
    let mut reqs = reqs.clone();
    let mut kept = Vec::new();
    match filter_instance_types(&views, &mut reqs, &input, &mut kept) {
        Ok(_) => Ok(kept
            .iter()
            .map(|g| g.iter().map(|it| it.name().to_owned()).collect())
            .collect()),
        Err(error) => Err(error.flags()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn filter_keeps_exactly_what_a_naive_per_instance_type_check_keeps(
        its in catalogue(),
        reqs in node_claim_requirements(),
        requests in requests(),
        grouping in grouping(),
        reservation_label_known in any::<bool>(),
    ) {
        let wk = well_known(reservation_label_known);
        let groups = split(&its, &grouping);
        let expected = naive(&groups, &reqs, &requests, &wk);
        match run(&groups, &reqs, &requests, &wk, None) {
            Ok(kept) => prop_assert_eq!(kept, expected.kept),
            Err(flags) => {
                prop_assert!(expected.kept.iter().all(Vec::is_empty));
                prop_assert_eq!(flags, expected.flags);
            }
        }
    }

    #[test]
    fn checked_against_fast_path_agrees_with_the_full_check(
        its in catalogue(),
        (before, extra) in (node_claim_requirements(), node_claim_requirements()),
        (first, more) in (small_requests(), small_requests()),
        grouping in grouping(),
        hostname in any::<bool>(),
        reservation_label_known in any::<bool>(),
    ) {
        let wk = well_known(reservation_label_known);
        let groups = split(&its, &grouping);
        // The survivors of a full check against `before`...
        let views: Vec<FilterGroup<'_, Arc<InstanceType>>> =
            groups.iter().map(|(o, its)| FilterGroup::new(o, its)).collect();
        let input = FilterInput {
            requests: &first,
            pod_requests: &first,
            well_known: &wk,
            min_values_policy: MinValuesPolicy::Strict,
            checked_against: None,
        };
        let mut kept = Vec::new();
        let mut same = before.clone();
        if filter_instance_types(&views, &mut same, &input, &mut kept).is_err() {
            return Ok(());
        }
        let survivors: Vec<(Resources, Vec<Arc<InstanceType>>)> = groups
            .iter()
            .zip(kept)
            .map(|((o, _), k)| (o.clone(), k))
            .collect();
        // ...filtered again with narrowed requirements and more requests.
        let mut now = before.clone();
        now.add_all(&extra);
        if hostname {
            now.add(Requirement::in_values("kubernetes.io/hostname", ["h-1"]));
        }
        let total = first.merged(&more);
        prop_assert_eq!(
            run(&survivors, &now, &total, &wk, Some(&before)).ok(),
            run(&survivors, &now, &total, &wk, None).ok()
        );
        prop_assert_eq!(
            run(&survivors, &before, &total, &wk, Some(&before)).ok(),
            run(&survivors, &before, &total, &wk, None).ok()
        );
    }

    #[test]
    fn cached_fit_agrees_with_resources_fits(spec in instance_type(), requests in requests()) {
        let mut spec = spec;
        spec.name = Arc::from("it");
        let it = InstanceType::new(spec).unwrap();
        prop_assert_eq!(it.fits(&requests), fits(&requests, it.allocatable()));
    }

    #[test]
    fn order_by_price_is_sorted_and_independent_of_input_order(
        its in catalogue(),
        reqs in node_claim_requirements(),
        rotation in 0usize..10,
    ) {
        let wk = WellKnownLabels::default();
        let price = |it: &InstanceType| it.offerings().cheapest_compatible_price(&reqs, &wk);
        let mut ordered = its.clone();
        order_by_price(&mut ordered, &reqs, &wk);
        for pair in ordered.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let key = |it: &InstanceType| (price(it), it.name().to_owned());
            prop_assert!(key(a).partial_cmp(&key(b)).is_some_and(|o| o.is_le()));
        }
        let mut rotated = its.clone();
        rotated.rotate_left(rotation % its.len());
        rotated.reverse();
        order_by_price(&mut rotated, &reqs, &wk);
        let names = |v: &[Arc<InstanceType>]| v.iter().map(|it| it.name().to_owned()).collect::<Vec<_>>();
        prop_assert_eq!(names(&ordered), names(&rotated));
        let sorted_input: BTreeSet<String> = names(&its).into_iter().collect();
        let sorted_output: BTreeSet<String> = names(&ordered).into_iter().collect();
        prop_assert_eq!(sorted_input, sorted_output);
    }

    #[test]
    fn min_values_prefix_is_the_shortest_satisfying_one(
        its in catalogue(),
        (types, families, zones) in (0usize..6, 0usize..4, 0usize..4),
    ) {
        let reqs: Requirements = [
            Requirement::exists(INSTANCE_TYPE).with_min_values(Some(types)),
            Requirement::exists("family").with_min_values(Some(families)),
            Requirement::exists(TOPOLOGY_ZONE).with_min_values(Some(zones)),
        ]
        .into_iter()
        .collect();
        let satisfied = |prefix: &[Arc<InstanceType>]| {
            let distinct = |key: &str| {
                prefix
                    .iter()
                    .filter_map(|it| it.requirements().get(key))
                    .flat_map(|r| r.values().iter().cloned())
                    .collect::<BTreeSet<_>>()
                    .len()
            };
            distinct(INSTANCE_TYPE) >= types
                && distinct("family") >= families
                && distinct(TOPOLOGY_ZONE) >= zones
        };
        match satisfies_min_values(&its, &reqs) {
            Ok(n) => {
                prop_assert!(satisfied(&its[..n]));
                prop_assert!(n >= 1, "a non-empty list needs at least one instance type");
                prop_assert!((1..n).all(|k| !satisfied(&its[..k])));
            }
            Err(error) => {
                prop_assert!(!satisfied(&its));
                prop_assert!(!error.unsatisfied.is_empty());
            }
        }
    }
}
