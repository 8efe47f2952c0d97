//! Benchmark workloads (spec §8.2): the recorded seed-42 table, the diverse and preference
//! generators, and the pod builder.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use scheduling::fixtures::{
    AFFINITY_LABEL_KEY, BenchPod, FixtureError, LABEL_KEY, PodKind, Rng, TSV_HEADER, diverse_kinds,
    diverse_pods, pod, preference_pods, read_bench_pods_tsv, read_pods_tsv,
};
use scheduling::labels::{HOSTNAME, TOPOLOGY_ZONE};
use scheduling::pod::{LabelSelector, Pod, WhenUnsatisfiable};
use scheduling::quantity::Quantity;
use scheduling::requirements::Operator;
use scheduling::resources::ResourceName;

fn seed_42_table() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/bench/diverse-1000-seed42.tsv");
    std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "cannot read the seed-42 pod table at {}: {error}",
            path.display()
        )
    })
}

fn total(pods: &[Pod], name: &ResourceName) -> Quantity {
    pods.iter()
        .map(|p| p.requests.get_or_zero(name))
        .fold(Quantity::ZERO, Quantity::saturating_add)
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.labels.get(key).map(|v| &**v)
}

fn selector(labels: &[(&str, &str)]) -> Option<LabelSelector> {
    Some(LabelSelector::from_labels(labels.iter().copied()))
}

#[test]
fn seed_42_table_has_upstreams_1000_pods_and_totals() {
    let pods = read_pods_tsv(&seed_42_table()).unwrap();
    assert_eq!(pods.len(), 1000);
    assert_eq!(
        total(&pods, &ResourceName::CPU),
        Quantity::from_milli(663_350)
    );
    assert_eq!(
        total(&pods, &ResourceName::MEMORY),
        Quantity::from_bytes(1_341_084 << 20)
    );
    assert_eq!(
        total(&pods, &ResourceName::PODS),
        Quantity::from_value(1000)
    );
    let uids: BTreeSet<&str> = pods.iter().map(|p| &*p.uid).collect();
    assert_eq!(uids.len(), 1000);
    let mut kinds = BTreeMap::new();
    for spec in read_bench_pods_tsv(&seed_42_table()).unwrap() {
        *kinds.entry(spec.kind).or_insert(0) += 1;
    }
    assert_eq!(kinds.values().copied().collect::<Vec<_>>(), [200; 5]);
}

#[test]
fn seed_42_table_rows_become_the_pods_of_their_kind() {
    let pods = read_pods_tsv(&seed_42_table()).unwrap();
    // 0  generic  f  -  500m  512Mi
    let generic = &pods[0];
    assert_eq!(label(generic, LABEL_KEY), Some("f"));
    assert_eq!(label(generic, "testing/cluster"), Some("unspecified"));
    assert_eq!(
        generic.requests.get(&ResourceName::CPU),
        Some(Quantity::from_milli(500))
    );
    assert_eq!(
        generic.requests.get(&ResourceName::MEMORY),
        Some(Quantity::from_bytes(512 << 20))
    );
    assert_eq!(
        generic.requests.get(&ResourceName::PODS),
        Some(Quantity::from_value(1))
    );
    assert_eq!(&*generic.namespace, "default");
    assert!(generic.topology_spread_constraints.is_empty() && generic.pod_affinity.is_empty());
    // 200  zone-spread  d  e  1500m  4096Mi
    let spread = &pods[200];
    assert_eq!(label(spread, LABEL_KEY), Some("d"));
    let tsc = &spread.topology_spread_constraints[0];
    assert_eq!((tsc.max_skew, &*tsc.topology_key), (1, TOPOLOGY_ZONE));
    assert_eq!(tsc.when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
    assert_eq!(tsc.label_selector, selector(&[(LABEL_KEY, "e")]));
    assert_eq!(
        &*pods[400].topology_spread_constraints[0].topology_key,
        HOSTNAME
    );
    // 600.. zone-self-affinity: label and selector share the misspelt key.
    let affinity = &pods[600];
    let value = label(affinity, AFFINITY_LABEL_KEY).unwrap();
    assert_eq!(label(affinity, LABEL_KEY), None);
    let term = &affinity.pod_affinity.required[0];
    assert_eq!(
        (&*term.topology_key, &term.label_selector),
        (TOPOLOGY_ZONE, &selector(&[(AFFINITY_LABEL_KEY, value)]))
    );
    // 800  hostname-anti-affinity  -  -  250m  4096Mi
    let anti = &pods[800];
    assert_eq!(label(anti, "app"), Some("nginx"));
    let term = &anti.pod_anti_affinity.required[0];
    assert_eq!(
        (&*term.topology_key, &term.label_selector),
        (HOSTNAME, &selector(&[("app", "nginx")]))
    );
    assert_eq!(
        anti.requests.get(&ResourceName::CPU),
        Some(Quantity::from_milli(250))
    );
    assert!(
        pods.windows(2)
            .all(|w| w[0].creation_timestamp < w[1].creation_timestamp)
    );
}

#[test]
fn reading_the_table_twice_gives_identical_pods() {
    let text = seed_42_table();
    assert_eq!(read_pods_tsv(&text).unwrap(), read_pods_tsv(&text).unwrap());
}

#[test]
fn malformed_tables_name_the_line() {
    let row = |r: &str| format!("{TSV_HEADER}\n0\tgeneric\ta\t\t100m\t100Mi\n{r}\n");
    let line_of = |text: &str| match read_bench_pods_tsv(text).unwrap_err() {
        FixtureError::Tsv { line, .. } => line,
        other => panic!("unexpected error {other}"),
    };
    assert_eq!(line_of("index\tkind\n"), 1);
    assert_eq!(line_of(&row("1\tgeneric\ta\t\t100m")), 3);
    assert_eq!(line_of(&row("2\tgeneric\ta\t\t100m\t100Mi")), 3);
    assert_eq!(line_of(&row("1\tsideways\ta\t\t100m\t100Mi")), 3);
    assert_eq!(line_of(&row("1\tzone-spread\ta\t\t100m\t100Mi")), 3);
    assert_eq!(
        line_of(&row("1\thostname-anti-affinity\ta\t\t100m\t100Mi")),
        3
    );
    assert_eq!(line_of(&row("1\tgeneric\ta\t\t100x\t100Mi")), 3);
    assert_eq!(
        read_bench_pods_tsv(&row("1\tgeneric\tb\t\t1\t1Gi\r"))
            .unwrap()
            .len(),
        2
    );
    assert_eq!(read_pods_tsv(TSV_HEADER).unwrap(), Vec::<Pod>::new());
}

#[test]
fn diverse_kinds_are_n_over_5_of_each_then_the_remainder_generic() {
    assert_eq!(diverse_kinds(1), [PodKind::Generic]);
    let kinds = diverse_kinds(52);
    assert_eq!(kinds.len(), 52);
    let order = [
        PodKind::Generic,
        PodKind::ZoneSpread,
        PodKind::HostnameSpread,
        PodKind::ZoneSelfAffinity,
        PodKind::HostnameAntiAffinity,
    ];
    for (block, kind) in order.iter().enumerate() {
        assert!(kinds[block * 10..block * 10 + 10].iter().all(|k| k == kind));
    }
    assert_eq!(kinds[50..], [PodKind::Generic, PodKind::Generic]);
}

#[test]
fn diverse_pods_are_deterministic_per_seed_and_use_upstreams_value_sets() {
    let pods = diverse_pods(500, &mut Rng::new(42));
    assert_eq!(pods, diverse_pods(500, &mut Rng::new(42)));
    assert_ne!(pods, diverse_pods(500, &mut Rng::new(43)));
    let cpus: BTreeSet<i64> = pods
        .iter()
        .map(|p| p.requests.get_or_zero(&ResourceName::CPU).milli_value())
        .collect();
    assert_eq!(
        cpus.into_iter().collect::<Vec<_>>(),
        [100, 250, 500, 1000, 1500]
    );
    let memory: BTreeSet<i64> = pods
        .iter()
        .map(|p| p.requests.get_or_zero(&ResourceName::MEMORY).value() >> 20)
        .collect();
    assert_eq!(
        memory.into_iter().collect::<Vec<_>>(),
        [100, 256, 512, 1024, 2048, 4096]
    );
    let labels: BTreeSet<&str> = pods.iter().filter_map(|p| label(p, LABEL_KEY)).collect();
    assert_eq!(labels.len(), 7);
    let uids: BTreeSet<&str> = pods.iter().map(|p| &*p.uid).collect();
    assert_eq!(uids.len(), 500);
    assert_eq!(
        pods.iter()
            .filter(|p| !p.pod_anti_affinity.required.is_empty())
            .count(),
        100
    );
    // A second call continues the stream: new uids, no collision.
    let mut rng = Rng::new(42);
    let first = diverse_pods(10, &mut rng);
    let second = diverse_pods(10, &mut rng);
    assert!(first.iter().all(|a| second.iter().all(|b| a.uid != b.uid)));
}

#[test]
fn bench_pod_draws_label_selector_cpu_then_memory() {
    let mut rng = Rng::new(9);
    let mut replay = rng.clone();
    let drawn = BenchPod::draw(PodKind::ZoneSpread, &mut rng);
    let label_index = replay.below(7);
    let selector_index = replay.below(7);
    let cpu_index = replay.below(5);
    let memory_index = replay.below(6);
    assert_eq!(
        drawn.label_value.as_deref(),
        Some(["a", "b", "c", "d", "e", "f", "g"][label_index])
    );
    assert_eq!(
        drawn.selector_value.as_deref(),
        Some(["a", "b", "c", "d", "e", "f", "g"][selector_index])
    );
    assert_eq!(
        drawn.cpu.milli_value(),
        [100, 250, 500, 1000, 1500][cpu_index]
    );
    assert_eq!(
        drawn.memory.value() >> 20,
        [100, 256, 512, 1024, 2048, 4096][memory_index]
    );
    assert_eq!(rng, replay);
    let anti = BenchPod::draw(PodKind::HostnameAntiAffinity, &mut rng);
    assert_eq!((anti.label_value, anti.selector_value), (None, None));
}

#[test]
fn preference_pods_share_one_request_and_prefer_zone_one_and_spreading() {
    let pods = preference_pods(40, &mut Rng::new(42));
    assert_eq!(pods.len(), 40);
    assert!(pods.iter().all(|p| p.requests == pods[0].requests));
    let p = &pods[0];
    assert_eq!(label(p, "app"), Some("nginx"));
    let preferred = &p.preferred_node_affinity[0];
    assert_eq!(preferred.weight, 1);
    assert_eq!(preferred.term[0].key, TOPOLOGY_ZONE);
    assert_eq!(preferred.term[0].operator, Operator::In);
    assert_eq!(preferred.term[0].values, ["test-zone-1"]);
    let anti: Vec<(i32, &str)> = p
        .pod_anti_affinity
        .preferred
        .iter()
        .map(|t| (t.weight, &*t.term.topology_key))
        .collect();
    assert_eq!(anti, [(10, TOPOLOGY_ZONE), (1, HOSTNAME)]);
    assert!(p.pod_anti_affinity.required.is_empty() && p.topology_spread_constraints.is_empty());
    let uids: BTreeSet<&str> = pods.iter().map(|p| &*p.uid).collect();
    assert_eq!(uids.len(), 40);
}

#[test]
fn pod_builder_reads_like_a_sentence() {
    let web = pod("web")
        .cpu("500m")
        .memory("1Gi")
        .label("app", "web")
        .zone_spread(1)
        .node_selector("team", "a")
        .require("kubernetes.io/arch", Operator::In, &["arm64"])
        .prefer(10, TOPOLOGY_ZONE, Operator::In, &["test-zone-2"])
        .anti_affinity(HOSTNAME, &[("app", "web")])
        .host_port(8080)
        .build()
        .unwrap();
    assert_eq!(
        web.requests.get(&ResourceName::PODS),
        Some(Quantity::from_value(1))
    );
    assert_eq!(
        web.requests.get(&ResourceName::CPU),
        Some(Quantity::from_milli(500))
    );
    let tsc = &web.topology_spread_constraints[0];
    assert_eq!(&*tsc.topology_key, TOPOLOGY_ZONE);
    assert!(tsc.label_selector.as_ref().unwrap().matches(&web.labels));
    assert_eq!(tsc.label_selector.as_ref().unwrap().match_labels.len(), 2);
    let requirements = web.requirements(true).unwrap();
    assert!(requirements.get("team").unwrap().has("a"));
    assert!(requirements.get(TOPOLOGY_ZONE).unwrap().has("test-zone-2"));
    assert_eq!(web.host_ports[0].port, 8080);
}

#[test]
fn built_pods_get_unique_increasing_identities_unless_given() {
    let a = pod("a").build().unwrap();
    let b = pod("a").build().unwrap();
    assert_ne!(a.uid, b.uid);
    assert!(a.creation_timestamp < b.creation_timestamp);
    let fixed = pod("c").uid("u-1").created_at(5).build().unwrap();
    assert_eq!((&*fixed.uid, fixed.creation_timestamp), ("u-1", 5));
    let template = pod("same").cpu("1");
    assert_ne!(
        template.clone().build().unwrap().uid,
        template.build().unwrap().uid
    );
}

#[test]
fn pod_builder_reports_invalid_quantities() {
    let error = pod("bad").cpu("1x").memory("1Gi").build().unwrap_err();
    assert!(matches!(error, FixtureError::InvalidQuantity { .. }));
    assert!(error.to_string().starts_with("pod bad cpu:"), "{error}");
}
