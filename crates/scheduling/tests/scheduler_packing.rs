//! Packing end to end (spec §3.4 steps 10–11, §3.7, §3.10, §3.13, §3.14): pods share a NodeClaim
//! while they fit, the `pods` resource and DaemonSet overhead count, existing nodes come first,
//! host ports conflict, and NodePool limits stop or narrow new NodeClaims.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod scheduler_support;

use std::sync::Arc;

use scheduler_support::*;
use scheduling::fixtures::{FakeInstanceType, fake_instance_types, pod};
use scheduling::instance_type::InstanceType;
use scheduling::labels::{ARCH, NODE_POOL, TOPOLOGY_ZONE};
use scheduling::pod::Pod;
use scheduling::quantity::Quantity;
use scheduling::resources::Resources;
use scheduling::scheduler::Cluster;
use scheduling::taints::TaintEffect;

/// One instance type: `cpu` cores, 16Gi, `pods` pods; allocatable cpu is `cpu` − 100m.
fn only(cpu: i64, pods: i64) -> Vec<Arc<InstanceType>> {
    vec![Arc::new(
        FakeInstanceType::new("only")
            .resource("cpu", Quantity::from_value(cpu))
            .resource("memory", Quantity::from_bytes(16 << 30))
            .resource("pods", Quantity::from_value(pods))
            .build()
            .unwrap(),
    )]
}

fn pods_of(prefix: &str, n: usize, cpu: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| pod(&format!("{prefix}-{i}")).cpu(cpu).build().unwrap())
        .collect()
}

#[test]
fn pods_pack_onto_one_node_claim_while_they_fit() {
    let pods = pods_of("p", 3, "1");
    let results = solve_default(&pods);
    assert_assigned_once(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 1);
    let claim = &results.new_node_claims[0];
    assert_eq!(claim.pods.len(), 3);
    assert_eq!(names(claim)[0], "default-instance-type");
}

#[test]
fn a_new_node_claim_is_planned_when_the_first_is_full() {
    let pools = [pool("default").with_instance_types(only(4, 110))];
    let pods = pods_of("p", 5, "1500m");
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_all_placed(&results, &pods);
    let mut sizes: Vec<usize> = results
        .new_node_claims
        .iter()
        .map(|c| c.pods.len())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 2, 2]);
}

#[test]
fn small_and_large_pods_pack_together() {
    let pools = [pool("default").with_instance_types(only(4, 110))];
    let mut pods = pods_of("large", 2, "2500m");
    pods.extend(pods_of("small", 2, "1"));
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 2);
    for claim in &results.new_node_claims {
        assert_eq!(claim.pods.len(), 2);
    }
}

#[test]
fn pods_are_packed_in_descending_cpu_order() {
    // 1, 2, 3 cores on 4-core nodes: 3 opens the first claim, 2 the second, 1 joins the one
    // with fewer pods that still has room — the first (both hold one pod, older first).
    let pools = [pool("default").with_instance_types(only(4, 110))];
    let one = pod("one").cpu("800m").build().unwrap();
    let two = pod("two").cpu("2").build().unwrap();
    let three = pod("three").cpu("3").build().unwrap();
    let pods = [one.clone(), two.clone(), three.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(results.new_node_claims.len(), 2);
    assert_eq!(claim_index(&results, &three), Some(0));
    assert_eq!(claim_index(&results, &two), Some(1));
    assert_eq!(claim_index(&results, &one), Some(0));
}

#[test]
fn the_pods_resource_limits_pods_per_node_claim() {
    let pools = [pool("default").with_instance_types(only(64, 2))];
    let pods = pods_of("p", 5, "100m");
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 3);
}

#[test]
fn single_pod_instance_type_is_dropped_once_a_second_pod_joins() {
    let pods = pods_of("p", 2, "100m");
    let results = solve_default(&pods);
    assert_eq!(results.new_node_claims.len(), 1);
    let listed = names(&results.new_node_claims[0]);
    assert!(!listed.contains(&"single-pod-instance-type"), "{listed:?}");
    let lone = pods_of("lone", 1, "100m");
    let results = solve_default(&lone);
    assert!(names(&results.new_node_claims[0]).contains(&"single-pod-instance-type"));
}

#[test]
fn plan_requests_sum_the_pods_requests_including_the_pods_count() {
    let pods = pods_of("p", 3, "500m");
    let results = solve_default(&pods);
    let claim = &results.new_node_claims[0];
    assert_eq!(quantity(&claim.requests, "cpu"), "1500m");
    assert_eq!(quantity(&claim.requests, "pods"), "3");
}

#[test]
fn daemonset_overhead_is_added_to_the_plan_requests() {
    let ds = daemon(pod("ds").cpu("250m").memory("128Mi").build().unwrap());
    let pods = pods_of("p", 2, "500m");
    let results = solve(&[pool("default")], &with_daemonsets(vec![ds]), &pods);
    let claim = &results.new_node_claims[0];
    assert_eq!(quantity(&claim.requests, "cpu"), "1250m");
    assert_eq!(quantity(&claim.requests, "memory"), "128Mi");
    assert_eq!(quantity(&claim.requests, "pods"), "3");
}

#[test]
fn daemonset_overhead_reduces_the_room_for_pods() {
    // 3.9 allocatable cores: a 3-core pod fits alone but not beside a 1-core DaemonSet.
    let pools = [pool("default").with_instance_types(only(4, 110))];
    let p = pod("p").cpu("3").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    expect_claim(&results, &p);
    let ds = daemon(pod("ds").cpu("1").build().unwrap());
    let results = solve(&pools, &with_daemonsets(vec![ds]), std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("resources"), "{message}");
}

#[test]
fn daemonset_that_does_not_tolerate_the_nodepool_taints_adds_no_overhead() {
    let pools = [pool("tainted").with_taint(taint("dedicated", "x", TaintEffect::NoSchedule))];
    let ds = daemon(pod("ds").cpu("1").build().unwrap());
    let p = pod("p")
        .cpu("1")
        .toleration(tolerate("dedicated"))
        .build()
        .unwrap();
    let results = solve(&pools, &with_daemonsets(vec![ds]), std::slice::from_ref(&p));
    assert_eq!(quantity(&expect_claim(&results, &p).requests, "cpu"), "1");
}

#[test]
fn daemonset_that_tolerates_the_nodepool_taints_adds_overhead() {
    let pools = [pool("tainted").with_taint(taint("dedicated", "x", TaintEffect::NoSchedule))];
    let ds = daemon(
        pod("ds")
            .cpu("1")
            .toleration(tolerate("dedicated"))
            .build()
            .unwrap(),
    );
    let p = pod("p")
        .cpu("1")
        .toleration(tolerate("dedicated"))
        .build()
        .unwrap();
    let results = solve(&pools, &with_daemonsets(vec![ds]), std::slice::from_ref(&p));
    assert_eq!(quantity(&expect_claim(&results, &p).requests, "cpu"), "2");
}

#[test]
fn daemonset_is_assumed_to_tolerate_prefer_no_schedule_taints() {
    let pools = [pool("soft").with_taint(taint("dedicated", "x", TaintEffect::PreferNoSchedule))];
    let ds = daemon(pod("ds").cpu("1").build().unwrap());
    let p = pod("p")
        .cpu("1")
        .toleration(tolerate("dedicated"))
        .build()
        .unwrap();
    let results = solve(&pools, &with_daemonsets(vec![ds]), std::slice::from_ref(&p));
    assert_eq!(quantity(&expect_claim(&results, &p).requests, "cpu"), "2");
}

#[test]
fn daemonset_selecting_another_nodepool_adds_no_overhead() {
    let ds = daemon(
        pod("ds")
            .cpu("1")
            .node_selector(NODE_POOL, "other")
            .build()
            .unwrap(),
    );
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve(
        &[pool("default")],
        &with_daemonsets(vec![ds]),
        std::slice::from_ref(&p),
    );
    assert_eq!(quantity(&expect_claim(&results, &p).requests, "cpu"), "1");
}

#[test]
fn daemonset_selecting_some_instance_types_counts_only_on_them() {
    let ds = daemon(
        pod("ds")
            .cpu("1")
            .node_selector(ARCH, "arm64")
            .build()
            .unwrap(),
    );
    let cluster = with_daemonsets(vec![ds]);
    let arm = pod("arm")
        .cpu("1")
        .node_selector(ARCH, "arm64")
        .build()
        .unwrap();
    let results = solve(&[pool("default")], &cluster, std::slice::from_ref(&arm));
    assert_eq!(quantity(&expect_claim(&results, &arm).requests, "cpu"), "2");
    let amd = pod("amd")
        .cpu("1")
        .node_selector(ARCH, "amd64")
        .build()
        .unwrap();
    let results = solve(&[pool("default")], &cluster, std::slice::from_ref(&amd));
    assert_eq!(quantity(&expect_claim(&results, &amd).requests, "cpu"), "1");
}

#[test]
fn daemonset_requiring_registered_and_initialized_nodes_is_counted_on_new_node_claims() {
    let ds = daemon(
        pod("ds")
            .cpu("1")
            .node_selector(scheduling::labels::NODE_INITIALIZED, "true")
            .require(
                scheduling::labels::NODE_REGISTERED,
                scheduling::requirements::Operator::In,
                &["true"],
            )
            .build()
            .unwrap(),
    );
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve(
        &[pool("default")],
        &with_daemonsets(vec![ds]),
        std::slice::from_ref(&p),
    );
    assert_eq!(quantity(&expect_claim(&results, &p).requests, "cpu"), "2");
}

#[test]
fn plan_adds_the_smallest_daemonset_overhead_among_its_remaining_options() {
    // The DaemonSet only runs on arm; an unconstrained pod keeps amd and arm options, so the
    // plan adds the amd group's (empty) overhead.
    let ds = daemon(
        pod("ds")
            .cpu("1")
            .node_selector(ARCH, "arm64")
            .build()
            .unwrap(),
    );
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve(
        &[pool("default")],
        &with_daemonsets(vec![ds]),
        std::slice::from_ref(&p),
    );
    let claim = expect_claim(&results, &p);
    assert!(names(claim).contains(&"arm-instance-type"));
    assert_eq!(quantity(&claim.requests, "cpu"), "1");
}

#[test]
fn daemonset_host_port_blocks_a_pod_using_the_same_port() {
    let ds = daemon(pod("ds").host_port(8080).build().unwrap());
    let cluster = with_daemonsets(vec![ds]);
    let clash = pod("clash").host_port(8080).build().unwrap();
    let other = pod("other").host_port(9090).build().unwrap();
    let pods = [clash.clone(), other.clone()];
    let results = solve(&[pool("default")], &cluster, &pods);
    expect_error(&results, &clash);
    expect_claim(&results, &other);
}

#[test]
fn pods_using_the_same_host_port_go_to_different_node_claims() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| pod(&format!("p{i}")).host_port(80).build().unwrap())
        .collect();
    let results = solve_default(&pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 3);
}

#[test]
fn pods_using_different_host_ports_share_a_node_claim() {
    let a = pod("a").host_port(80).build().unwrap();
    let b = pod("b").host_port(443).build().unwrap();
    let results = solve_default(&[a, b]);
    assert_eq!(results.new_node_claims.len(), 1);
}

#[test]
fn existing_node_is_used_before_a_new_node_claim() {
    let cluster = cluster(
        vec![node(
            "node-a",
            &[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")],
        )],
        vec![],
    );
    let pods = pods_of("p", 2, "1");
    let results = solve(&[pool("default")], &cluster, &pods);
    assert!(results.new_node_claims.is_empty());
    assert_eq!(results.existing_nodes.len(), 1);
    assert_eq!(&*results.existing_nodes[0].node, "node-a");
    assert_eq!(results.existing_nodes[0].pods.len(), 2);
}

#[test]
fn existing_node_bindings_list_pods_in_placement_order() {
    let cluster = cluster(
        vec![node("node-a", &[("cpu", "4"), ("pods", "10")])],
        vec![],
    );
    let small = pod("small").cpu("1").build().unwrap();
    let big = pod("big").cpu("2").build().unwrap();
    let results = solve(&[pool("default")], &cluster, &[small.clone(), big.clone()]);
    assert_eq!(
        results.existing_nodes[0].pods,
        vec![big.uid.clone(), small.uid.clone()]
    );
}

#[test]
fn pods_overflow_from_a_full_existing_node_to_a_new_node_claim() {
    let cluster = cluster(
        vec![node("node-a", &[("cpu", "2"), ("pods", "10")])],
        vec![],
    );
    let pods = pods_of("p", 3, "1");
    let results = solve(&[pool("default")], &cluster, &pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.existing_nodes[0].pods.len(), 2);
    assert_eq!(results.pods_on_new_node_claims(), 1);
}

#[test]
fn initialized_existing_nodes_are_used_before_uninitialized_ones() {
    let nodes = vec![
        node("a-uninitialized", &[("cpu", "4"), ("pods", "10")]).uninitialized(),
        node("b-initialized", &[("cpu", "4"), ("pods", "10")]),
    ];
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("b-initialized"));
}

#[test]
fn uninitialized_existing_nodes_are_used_before_new_node_claims() {
    let nodes = vec![node("starting", &[("cpu", "4"), ("pods", "10")]).uninitialized()];
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("starting"));
}

#[test]
fn existing_nodes_are_tried_in_name_order() {
    let nodes = vec![
        node("node-b", &[("cpu", "4"), ("pods", "10")]),
        node("node-a", &[("cpu", "4"), ("pods", "10")]),
    ];
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("node-a"));
}

#[test]
fn bound_pods_consume_existing_node_capacity() {
    let nodes = vec![node("node-a", &[("cpu", "4"), ("pods", "10")])];
    let running = bound(pod("running").cpu("3").build().unwrap(), "node-a");
    let p = pod("p").cpu("2").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![running]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), None);
    expect_claim(&results, &p);
}

#[test]
fn terminating_bound_pods_do_not_consume_existing_node_capacity() {
    let nodes = vec![node("node-a", &[("cpu", "4"), ("pods", "10")])];
    let mut leaving = bound(pod("leaving").cpu("3").build().unwrap(), "node-a");
    leaving.terminal_or_terminating = true;
    let p = pod("p").cpu("2").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![leaving]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("node-a"));
}

#[test]
fn daemonset_overhead_still_to_come_reserves_existing_node_capacity() {
    let nodes = vec![node("node-a", &[("cpu", "4"), ("pods", "10")])];
    let ds = daemon(pod("ds").cpu("2").build().unwrap());
    let p = pod("p").cpu("3").build().unwrap();
    let mut c = cluster(nodes.clone(), vec![]);
    c.daemonset_pods = vec![ds.clone()];
    let results = solve(&[pool("default")], &c, std::slice::from_ref(&p));
    assert_eq!(
        node_of(&results, &p),
        None,
        "the DaemonSet pod will need 2 cores"
    );
    // Once the DaemonSet's pod runs there, only the pod itself counts.
    let mut c = cluster(nodes, vec![bound(ds.clone(), "node-a")]);
    c.daemonset_pods = vec![ds];
    let small = pod("small").cpu("1500m").build().unwrap();
    let results = solve(&[pool("default")], &c, std::slice::from_ref(&small));
    assert_eq!(node_of(&results, &small), Some("node-a"));
}

#[test]
fn existing_node_with_an_untolerated_taint_is_skipped() {
    let nodes = vec![
        node("tainted", &[("cpu", "4"), ("pods", "10")]).with_taint(taint(
            "dedicated",
            "x",
            TaintEffect::NoSchedule,
        )),
    ];
    let plain = pod("plain").build().unwrap();
    let tolerant = pod("tolerant")
        .toleration(tolerate("dedicated"))
        .build()
        .unwrap();
    let pods = [plain.clone(), tolerant.clone()];
    let results = solve(&[pool("default")], &cluster(nodes, vec![]), &pods);
    assert_eq!(node_of(&results, &plain), None);
    assert_eq!(node_of(&results, &tolerant), Some("tainted"));
}

#[test]
fn existing_node_labels_are_checked_strictly() {
    // The node has no zone label: a zone selector cannot be proven, so a new claim is planned.
    let nodes = vec![node("unlabelled", &[("cpu", "4"), ("pods", "10")])];
    let zonal = pod("zonal")
        .node_selector(TOPOLOGY_ZONE, ZONE_1)
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&zonal),
    );
    assert_eq!(node_of(&results, &zonal), None);
    assert_eq!(zone(expect_claim(&results, &zonal)), ZONE_1);
}

#[test]
fn existing_node_with_matching_labels_takes_a_selecting_pod() {
    let nodes = vec![node("zonal", &[("cpu", "4"), ("pods", "10")]).in_zone(ZONE_1)];
    let p = pod("p")
        .node_selector(TOPOLOGY_ZONE, ZONE_1)
        .build()
        .unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), Some("zonal"));
}

#[test]
fn host_port_of_a_bound_pod_blocks_the_existing_node() {
    let nodes = vec![node("node-a", &[("cpu", "4"), ("pods", "10")])];
    let running = bound(pod("running").host_port(80).build().unwrap(), "node-a");
    let p = pod("p").host_port(80).build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![running]),
        std::slice::from_ref(&p),
    );
    assert_eq!(node_of(&results, &p), None);
    expect_claim(&results, &p);
}

#[test]
fn cpu_limit_stops_new_node_claims() {
    // Each claim counts the 4 cores of its only instance type against the limit of 8.
    let pools = [pool("limited")
        .with_instance_types(only(4, 110))
        .with_limits(&[("cpu", "8")])];
    let pods = pods_of("p", 3, "3");
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(results.new_node_claims.len(), 2);
    assert_eq!(results.errors.len(), 1);
    let message = &results.errors[0].message;
    assert!(message.contains("limits"), "{message}");
    assert!(message.contains("limited"), "{message}");
}

#[test]
fn cpu_limit_already_exceeded_by_existing_nodes_stops_new_node_claims() {
    let pools = [pool("limited").with_limits(&[("cpu", "2")])];
    let nodes = vec![node("big", &[("cpu", "4"), ("pods", "1")]).owned_by("limited")];
    let running = vec![bound(pod("x").build().unwrap(), "big")];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &cluster(nodes, running), std::slice::from_ref(&p));
    assert!(results.new_node_claims.is_empty());
    expect_error(&results, &p);
}

#[test]
fn pods_join_the_in_flight_node_claim_with_the_fewest_pods() {
    // Host ports force `first` and `second` apart; `third` ties on pod count and joins the older
    // claim, so `fourth` then prefers the claim holding only one pod.
    let pools = [pool("default").with_instance_types(only(16, 110))];
    let first = pod("first").cpu("3").host_port(80).build().unwrap();
    let second = pod("second").cpu("2").host_port(80).build().unwrap();
    let third = pod("third").cpu("1").host_port(81).build().unwrap();
    let fourth = pod("fourth").cpu("500m").host_port(82).build().unwrap();
    let pods = [first.clone(), second.clone(), third.clone(), fourth.clone()];
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_eq!(results.new_node_claims.len(), 2);
    assert_eq!(claim_index(&results, &third), claim_index(&results, &first));
    assert_eq!(
        claim_index(&results, &fourth),
        claim_index(&results, &second)
    );
}

#[test]
fn instance_types_exceeding_the_remaining_limit_are_not_options() {
    let pools = [pool("limited").with_limits(&[("cpu", "3")])];
    let p = pod("p").cpu("1").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    assert_eq!(names(expect_claim(&results, &p)), ["small-instance-type"]);
}

#[test]
fn a_limited_resource_missing_from_instance_types_counts_as_zero() {
    let pools = [pool("limited").with_limits(&[("example.com/widgets", "0")])];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    expect_claim(&results, &p);
}

#[test]
fn existing_nodes_of_the_nodepool_count_against_its_limits() {
    let pools = [pool("limited")
        .with_instance_types(only(4, 110))
        .with_limits(&[("cpu", "6")])];
    let full = node("full", &[("cpu", "4"), ("pods", "1")]).owned_by("limited");
    let foreign = node("foreign", &[("cpu", "4"), ("pods", "1")]).owned_by("other");
    let p = pod("p").cpu("1").build().unwrap();
    let blocked = solve(
        &pools,
        &cluster(
            vec![full.clone()],
            vec![bound(pod("x").build().unwrap(), "full")],
        ),
        std::slice::from_ref(&p),
    );
    let message = expect_error(&blocked, &p);
    assert!(message.contains("limits"), "{message}");
    let free = solve(
        &pools,
        &cluster(
            vec![foreign],
            vec![bound(pod("y").build().unwrap(), "foreign")],
        ),
        std::slice::from_ref(&p),
    );
    expect_claim(&free, &p);
}

/// Issue 11 item 11: a node being deleted or disrupted is not offered to pods but its capacity
/// still counts against its pool's limits, so replacements cannot exceed them during a drain.
#[test]
fn nodes_leaving_the_pool_still_count_against_its_limits() {
    let pools = [pool("limited")
        .with_instance_types(only(4, 110))
        .with_limits(&[("cpu", "6")])];
    let p = pod("p").cpu("1").build().unwrap();
    let mut draining = Cluster::default();
    draining.limit_usage.insert(
        std::sync::Arc::from("limited"),
        Resources::parse([("cpu", "4"), ("nodes", "1")]).unwrap(),
    );
    let blocked = solve(&pools, &draining, std::slice::from_ref(&p));
    let message = expect_error(&blocked, &p);
    assert!(message.contains("limits"), "{message}");
    let mut elsewhere = Cluster::default();
    elsewhere.limit_usage.insert(
        std::sync::Arc::from("other"),
        Resources::parse([("cpu", "4"), ("nodes", "1")]).unwrap(),
    );
    expect_claim(&solve(&pools, &elsewhere, std::slice::from_ref(&p)), &p);
}

#[test]
fn nodes_limit_exhausted_by_existing_nodes_stops_new_node_claims() {
    let pools = [pool("limited").with_limits(&[("nodes", "1")])];
    let full = node("full", &[("cpu", "1"), ("pods", "10")]).owned_by("limited");
    let p = pod("p").cpu("2").build().unwrap();
    let results = solve(
        &pools,
        &cluster(vec![full], vec![]),
        std::slice::from_ref(&p),
    );
    let message = expect_error(&results, &p);
    assert!(
        message.contains("node limits have been exhausted"),
        "{message}"
    );
}

#[test]
fn nodes_limit_already_exceeded_by_existing_nodes_stops_new_node_claims() {
    // Two nodes of a pool whose `nodes` limit is 1 leave -1 nodes: the `nodes` resource is
    // absent from instance-type capacity, so it counts as 0 > -1 and every type exceeds it.
    let pools = [pool("limited").with_limits(&[("nodes", "1")])];
    let nodes = vec![
        node("full-a", &[("cpu", "1"), ("pods", "10")]).owned_by("limited"),
        node("full-b", &[("cpu", "1"), ("pods", "10")]).owned_by("limited"),
    ];
    let p = pod("p").cpu("2").build().unwrap();
    let results = solve(&pools, &cluster(nodes, vec![]), std::slice::from_ref(&p));
    assert!(results.new_node_claims.is_empty());
    let message = expect_error(&results, &p);
    assert!(message.contains("limits"), "{message}");
}

#[test]
fn nodes_limit_is_not_decremented_by_node_claims_of_the_same_batch() {
    // Quirk (spec §3.13): a single batch may overshoot the `nodes` limit.
    let pools = [pool("limited")
        .with_instance_types(only(4, 110))
        .with_limits(&[("nodes", "1")])];
    let pods = pods_of("p", 3, "3");
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_all_placed(&results, &pods);
    assert_eq!(results.new_node_claims.len(), 3);
}

#[test]
fn limited_nodepool_overflows_into_the_next_nodepool() {
    let pools = [
        pool("limited")
            .with_weight(10)
            .with_instance_types(only(4, 110))
            .with_limits(&[("cpu", "4")]),
        pool("overflow").with_instance_types(only(4, 110)),
    ];
    let pods = pods_of("p", 2, "3");
    let results = solve(&pools, &Cluster::default(), &pods);
    let mut used: Vec<&str> = results
        .new_node_claims
        .iter()
        .map(|c| &*c.node_pool)
        .collect();
    used.sort_unstable();
    assert_eq!(used, ["limited", "overflow"]);
}

#[test]
fn benchmark_catalogue_packs_many_pods_onto_large_instance_types() {
    let pools = [pool("default").with_instance_types(fake_instance_types(50).unwrap())];
    let pods = pods_of("p", 100, "1");
    let results = solve(&pools, &Cluster::default(), &pods);
    assert_all_placed(&results, &pods);
    for claim in &results.new_node_claims {
        let total = requests_of(&pods, &claim.pods);
        for it in &claim.instance_types {
            assert!(it.fits(&total), "{} cannot hold {total}", it.name());
        }
    }
    assert!(results.new_node_claims.len() < 10);
}

fn assert_assigned_once(results: &scheduling::scheduler::Results, pods: &[Pod]) {
    for p in pods {
        let on_claims = results
            .new_node_claims
            .iter()
            .filter(|c| c.pods.contains(&p.uid))
            .count();
        assert_eq!(on_claims, 1, "{}", p.name);
    }
}
