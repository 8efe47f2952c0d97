//! Property tests for `scheduling::resources`: the merge-based list operations agree with naive
//! per-name definitions, and the fit check agrees with Karpenter's definition.

use proptest::prelude::*;
use scheduling::quantity::Quantity;
use scheduling::resources::{ResourceName, Resources, fits};

const NAMES: [&str; 9] = [
    "cpu",
    "memory",
    "pods",
    "ephemeral-storage",
    "nodes",
    "nvidia.com/gpu",
    "hugepages-2Mi",
    "a",
    "zzz",
];

fn resources(min_milli: i64) -> impl Strategy<Value = Resources> {
    proptest::collection::vec(
        (proptest::sample::select(&NAMES[..]), min_milli..=4000_i64),
        0..7,
    )
    .prop_map(|entries| {
        entries
            .into_iter()
            .map(|(name, milli)| (ResourceName::new(name), Quantity::from_milli(milli)))
            .collect()
    })
}

fn all_names() -> impl Iterator<Item = ResourceName> {
    NAMES.iter().map(|name| ResourceName::new(name))
}

fn is_sorted_unique(list: &Resources) -> bool {
    let names: Vec<&ResourceName> = list.names().collect();
    names.windows(2).all(|pair| matches!(pair, [a, b] if a < b))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn fits_matches_karpenters_definition(requests in resources(-10), allocatable in resources(-10)) {
        let expected = allocatable.iter().all(|(_, q)| !q.is_negative())
            && requests.iter().all(|(name, q)| q <= allocatable.get_or_zero(name));
        prop_assert_eq!(fits(&requests, &allocatable), expected);
    }

    #[test]
    fn a_list_fits_in_itself_and_in_anything_larger(base in resources(0), extra in resources(0)) {
        prop_assert!(fits(&base, &base));
        prop_assert!(fits(&base, &base.merged(&extra)));
        for (name, _) in &base {
            let mut more = base.clone();
            more.merge(&Resources::from_iter([(name.clone(), Quantity::from_milli(1))]));
            prop_assert!(!fits(&more, &base), "{} grew", name);
        }
    }

    #[test]
    fn list_operations_match_per_name_definitions(a in resources(-4000), b in resources(-4000)) {
        let merged = a.merged(&b);
        let mut merged_in_place = a.clone();
        merged_in_place.merge(&b);
        let mut subtracted = a.clone();
        subtracted.subtract(&b);
        let (difference, max, min) = (a.difference(&b), a.max_with(&b), a.min_with(&b));
        for list in [&merged, &merged_in_place, &subtracted, &difference, &max, &min] {
            prop_assert!(is_sorted_unique(list));
        }
        prop_assert_eq!(&merged, &merged_in_place);
        prop_assert_eq!(&merged, &b.merged(&a));
        for name in all_names() {
            let (x, y) = (a.get(&name), b.get(&name));
            let (x0, y0) = (a.get_or_zero(&name), b.get_or_zero(&name));
            let either = x.is_some() || y.is_some();
            prop_assert_eq!(merged.get(&name), either.then(|| x0.saturating_add(y0)));
            prop_assert_eq!(subtracted.get(&name), either.then(|| x0.saturating_sub(y0)));
            prop_assert_eq!(difference.get(&name), x.map(|x| x.saturating_sub(y0)));
            prop_assert_eq!(max.get(&name), either.then(|| x.into_iter().chain(y).max().unwrap_or_default()));
            prop_assert_eq!(min.get(&name), x.zip(y).map(|(x, y)| x.min(y)));
        }
    }

    #[test]
    fn subtract_undoes_merge(a in resources(-4000), b in resources(-4000)) {
        let mut round_trip = a.merged(&b);
        round_trip.subtract(&b);
        for name in all_names() {
            prop_assert_eq!(round_trip.get_or_zero(&name), a.get_or_zero(&name));
        }
    }
}
