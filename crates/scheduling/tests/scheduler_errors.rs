//! Failures and determinism end to end (spec §3.6, §3.7, §3.18): unschedulable pods carry a
//! readable reason naming the NodePools tried and the cause, failed pods leave no trace
//! (capacity, topology, host ports), every pod gets exactly one outcome, and the same input
//! always produces the same plan.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod scheduler_support;

use scheduler_support::*;
use scheduling::fixtures::{LABEL_INTEGER, pod};
use scheduling::labels::{ARCH, HOSTNAME, INSTANCE_TYPE, TOPOLOGY_ZONE};
use scheduling::pod::Pod;
use scheduling::requirements::Operator;
use scheduling::scheduler::{Cluster, NodePool, Results};
use scheduling::taints::TaintEffect;

#[test]
fn unschedulable_pod_error_names_the_nodepool_and_the_cause() {
    let p = pod("huge").cpu("100").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    assert_eq!(results.errors.len(), 1);
    let error = &results.errors[0];
    assert_eq!(error.uid, p.uid);
    assert_eq!(error.pod, "default/huge");
    assert!(
        error.message.contains("nodepool \"default\""),
        "{}",
        error.message
    );
    assert!(error.message.contains("resources"), "{}", error.message);
    assert!(error.message.contains("cpu"), "{}", error.message);
}

#[test]
fn error_names_every_nodepool_that_was_tried() {
    let pools = [
        pool("arm-only").with_requirement(req(ARCH, Operator::In, &["arm64"])),
        pool("tainted").with_taint(taint("dedicated", "x", TaintEffect::NoSchedule)),
    ];
    let p = pod("p").node_selector(ARCH, "amd64").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("nodepool \"arm-only\""), "{message}");
    assert!(message.contains("nodepool \"tainted\""), "{message}");
    assert!(message.contains("incompatible requirements"), "{message}");
    assert!(message.contains("dedicated"), "{message}");
}

#[test]
fn untolerated_taint_error_names_the_taint() {
    let pools = [pool("tainted").with_taint(taint("dedicated", "gpu", TaintEffect::NoSchedule))];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("taint"), "{message}");
    assert!(message.contains("dedicated=gpu:NoSchedule"), "{message}");
}

#[test]
fn incompatible_requirement_error_names_the_label() {
    let p = pod("p")
        .node_selector(INSTANCE_TYPE, "no-such-type")
        .build()
        .unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains(INSTANCE_TYPE), "{message}");
}

#[test]
fn host_name_selector_is_not_schedulable() {
    let p = pod("p").node_selector(HOSTNAME, "my-node").build().unwrap();
    let results = solve_default(std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains(HOSTNAME), "{message}");
}

#[test]
fn all_nodepools_dropped_error_explains_each_one() {
    let pools = [pool("empty").with_requirement(req(INSTANCE_TYPE, Operator::In, &["none"]))];
    let p = pod("p").build().unwrap();
    let results = solve(&pools, &Cluster::default(), std::slice::from_ref(&p));
    let message = expect_error(&results, &p);
    assert!(message.contains("nodepool \"empty\""), "{message}");
    assert!(message.contains("filtered out"), "{message}");
}

#[test]
fn pod_with_invalid_requirements_gets_an_error_and_others_still_schedule() {
    let bad = pod("bad")
        .require(LABEL_INTEGER, Operator::Gt, &["not-a-number"])
        .build()
        .unwrap();
    let good = pod("good").build().unwrap();
    let results = solve_default(&[bad.clone(), good.clone()]);
    let message = expect_error(&results, &bad);
    assert!(message.contains("invalid"), "{message}");
    expect_claim(&results, &good);
}

#[test]
fn failed_pods_do_not_consume_existing_node_capacity() {
    // `doomed` sorts first (more memory) and would fit the node, but its selector is
    // unsatisfiable everywhere; `fits` must still find the node's 3 free cores.
    let nodes = vec![node(
        "node-a",
        &[("cpu", "3"), ("memory", "8Gi"), ("pods", "10")],
    )];
    let doomed = pod("doomed")
        .cpu("2500m")
        .memory("2Gi")
        .node_selector("team", "nobody")
        .build()
        .unwrap();
    let fits = pod("fits").cpu("2500m").memory("1Gi").build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        &[doomed.clone(), fits.clone()],
    );
    expect_error(&results, &doomed);
    assert_eq!(node_of(&results, &fits), Some("node-a"));
    assert!(results.new_node_claims.is_empty());
}

#[test]
fn failed_pods_do_not_open_or_join_node_claims() {
    let doomed = pod("doomed")
        .cpu("3")
        .node_selector("team", "nobody")
        .build()
        .unwrap();
    let ok = pod("ok").cpu("1").build().unwrap();
    let results = solve_default(&[doomed.clone(), ok.clone()]);
    assert_eq!(results.new_node_claims.len(), 1);
    assert_eq!(results.new_node_claims[0].pods, vec![ok.uid.clone()]);
    assert_eq!(quantity(&results.new_node_claims[0].requests, "cpu"), "1");
}

#[test]
fn failed_pods_do_not_count_in_topology() {
    // The doomed pod carries the same label as the spread pods: had it been counted in a zone,
    // the others could not be spread one per zone.
    let doomed = pod("doomed")
        .cpu("2")
        .label("app", "web")
        .zone_spread(1)
        .node_selector("team", "nobody")
        .build()
        .unwrap();
    let web: Vec<Pod> = (0..3)
        .map(|i| {
            pod(&format!("web-{i}"))
                .cpu("1")
                .label("app", "web")
                .zone_spread(1)
                .build()
                .unwrap()
        })
        .collect();
    let mut pods = vec![doomed.clone()];
    pods.extend(web.iter().cloned());
    let results = solve_default(&pods);
    expect_error(&results, &doomed);
    let counts = zone_counts(&results, &web);
    assert_eq!(counts.values().copied().collect::<Vec<_>>(), [1, 1, 1]);
}

#[test]
fn failed_pods_do_not_hold_host_ports() {
    let nodes = vec![node(
        "node-a",
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")],
    )];
    let doomed = pod("doomed")
        .cpu("2")
        .host_port(80)
        .node_selector("team", "nobody")
        .build()
        .unwrap();
    let web = pod("web").cpu("1").host_port(80).build().unwrap();
    let results = solve(
        &[pool("default")],
        &cluster(nodes, vec![]),
        &[doomed.clone(), web.clone()],
    );
    expect_error(&results, &doomed);
    assert_eq!(node_of(&results, &web), Some("node-a"));
}

#[test]
fn pods_that_cannot_fit_fail_while_the_rest_schedule() {
    let mut pods: Vec<Pod> = (0..4)
        .map(|i| pod(&format!("ok-{i}")).cpu("1").build().unwrap())
        .collect();
    pods.push(pod("huge").cpu("64").build().unwrap());
    let results = solve_default(&pods);
    assert_eq!(results.errors.len(), 1);
    assert_eq!(results.errors[0].pod, "default/huge");
    assert_eq!(results.pods_on_new_node_claims(), 4);
}

#[test]
fn errors_are_reported_in_queue_order() {
    let small = pod("small").cpu("100").build().unwrap();
    let big = pod("big").cpu("200").build().unwrap();
    let heavy = pod("heavy").cpu("100").memory("1Ti").build().unwrap();
    let results = solve_default(&[small, big, heavy]);
    let order: Vec<&str> = results.errors.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(order, ["default/big", "default/heavy", "default/small"]);
}

/// A mixed workload touching most of the scheduler: existing nodes with bound pods, a
/// DaemonSet, two NodePools, spreads, affinities, host ports, preferences and failures.
fn mixed_input() -> (Vec<NodePool>, Cluster, Vec<Pod>) {
    let pools = vec![
        pool("general"),
        pool("arm")
            .with_weight(10)
            .with_requirement(req(ARCH, Operator::In, &["arm64"])),
    ];
    let nodes = vec![
        node(
            "existing-a",
            &[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")],
        )
        .in_zone(ZONE_1)
        .owned_by("general"),
        node(
            "existing-b",
            &[("cpu", "2"), ("memory", "4Gi"), ("pods", "10")],
        )
        .in_zone(ZONE_2)
        .uninitialized(),
    ];
    let running = vec![bound(
        pod("old-web").cpu("1").label("app", "web").build().unwrap(),
        "existing-a",
    )];
    let mut c = cluster(nodes, running);
    c.daemonset_pods = vec![daemon(
        pod("ds").cpu("100m").memory("64Mi").build().unwrap(),
    )];
    let mut pods = Vec::new();
    for i in 0..6 {
        pods.push(
            pod(&format!("web-{i}"))
                .cpu("700m")
                .memory("512Mi")
                .label("app", "web")
                .zone_spread(1)
                .build()
                .unwrap(),
        );
    }
    for i in 0..4 {
        pods.push(
            pod(&format!("db-{i}"))
                .cpu("1500m")
                .memory("2Gi")
                .label("app", "db")
                .anti_affinity(HOSTNAME, &[("app", "db")])
                .build()
                .unwrap(),
        );
    }
    for i in 0..3 {
        pods.push(
            pod(&format!("cache-{i}"))
                .cpu("300m")
                .label("app", "cache")
                .affinity(TOPOLOGY_ZONE, &[("app", "cache")])
                .prefer(5, TOPOLOGY_ZONE, Operator::In, &[ZONE_3])
                .build()
                .unwrap(),
        );
    }
    for i in 0..3 {
        pods.push(
            pod(&format!("port-{i}"))
                .cpu("200m")
                .host_port(8080)
                .build()
                .unwrap(),
        );
    }
    pods.push(
        pod("amd")
            .cpu("1")
            .node_selector(ARCH, "amd64")
            .build()
            .unwrap(),
    );
    pods.push(pod("huge").cpu("100").build().unwrap());
    pods.push(
        pod("nobody")
            .node_selector("team", "nobody")
            .build()
            .unwrap(),
    );
    (pools, c, pods)
}

fn fingerprint(results: &Results) -> String {
    format!("{results:#?}")
}

#[test]
fn every_pod_gets_exactly_one_outcome() {
    let (pools, cluster, pods) = mixed_input();
    let results = solve(&pools, &cluster, &pods);
    for p in &pods {
        let on_claims = results
            .new_node_claims
            .iter()
            .filter(|c| c.pods.contains(&p.uid))
            .count();
        let on_nodes = results
            .existing_nodes
            .iter()
            .filter(|b| b.pods.contains(&p.uid))
            .count();
        let errors = results.errors.iter().filter(|e| e.uid == p.uid).count();
        assert_eq!(on_claims + on_nodes + errors, 1, "pod {}", p.name);
    }
    assert_eq!(results.errors.len(), 2, "{:?}", results.errors);
}

#[test]
fn the_same_input_twice_gives_identical_results() {
    let (pools, cluster, pods) = mixed_input();
    let first = solve(&pools, &cluster, &pods);
    let second = solve(&pools, &cluster, &pods);
    assert!(!first.new_node_claims.is_empty());
    assert!(!first.existing_nodes.is_empty());
    assert_eq!(fingerprint(&first), fingerprint(&second));
}

#[test]
fn the_order_pods_are_given_in_does_not_change_the_results() {
    let (pools, cluster, pods) = mixed_input();
    let forward = solve(&pools, &cluster, &pods);
    let mut reversed = pods.clone();
    reversed.reverse();
    let backward = solve(&pools, &cluster, &reversed);
    assert_eq!(fingerprint(&forward), fingerprint(&backward));
}

#[test]
fn the_order_nodepools_and_nodes_are_given_in_does_not_change_the_results() {
    let (mut pools, mut cluster, pods) = mixed_input();
    let before = solve(&pools, &cluster, &pods);
    pools.reverse();
    cluster.nodes.reverse();
    let after = solve(&pools, &cluster, &pods);
    assert_eq!(fingerprint(&before), fingerprint(&after));
}
