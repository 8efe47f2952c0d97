//! Safe on real clusters: what the provider and the Machine collector must leave alone, and
//! what they must finish — against the simulated world with fault injection.
//!
//! - Machines that existed before we raised replicas (the cluster-autoscaler migration path)
//!   are never claimed and never collected.
//! - Two workload clusters sharing one management cluster never touch each other's Machines.
//! - A scale-down that failed after `delete-machine` was written is finished by the next
//!   delete, or by the collector after a restart.
//! - Machines that never appear raise replicas once, not once per retry.
//! - A Machine watch that keeps failing fails creates and deletes with a clear error.
//! - Malformed min sizes are errors; replica-write conflicts back off and give up.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use api::well_known::capi::{KARPENTER_MEMBER, MIN_SIZE};
use api::{ClusterAPINodeClass, NodeClaim};
use cloudprovider::{CloudProvider, CloudProviderError};
use clusterapi::gc::{GcConfig, MachineGc};
use clusterapi::{ClusterApiProvider, ProviderConfig};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use sim::fault::{FaultConfig, FaultError, FaultRule, Verb};
use sim::{Sim, SimConfig};
use support::{
    label, machines, marked, md, node_claim, pause_sets, replicas, wait_machines, wait_sets,
};
use world::{World, WorldConfig};

/// Past the collector's default grace period (10 min).
const PAST_GRACE: Duration = Duration::from_secs(11 * 60);

fn provider_over(management: kube::Client, workload: kube::Client) -> Arc<ClusterApiProvider> {
    Arc::new(ClusterApiProvider::new(
        management,
        workload,
        ProviderConfig {
            claim_timeout: Duration::from_secs(30),
            ..ProviderConfig::default()
        },
    ))
}

fn provider(world: &World) -> Arc<ClusterApiProvider> {
    provider_over(world.management_client(), world.workload_client())
}

/// [`provider`] without the unavailable-offering TTL: every create tries the MachineDeployment
/// again (for what the replica accounting does across retries).
fn provider_without_ttl(world: &World) -> Arc<ClusterApiProvider> {
    Arc::new(ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig {
            claim_timeout: Duration::from_secs(30),
            unavailable_offering_ttl: Duration::ZERO,
            ..ProviderConfig::default()
        },
    ))
}

/// A create of `nc` that raised its replica and is then dropped while it waits for a Machine
/// (a restart, or the NodeClaim deleted meanwhile): nothing releases the replica.
async fn cut_short(p: &ClusterApiProvider, nc: &NodeClaim) {
    let waited = tokio::time::timeout(Duration::from_secs(5), p.create(nc)).await;
    assert!(waited.is_err(), "still waiting for a Machine: {waited:?}");
}

fn collector(p: &Arc<ClusterApiProvider>) -> MachineGc {
    MachineGc::new(Arc::clone(p), GcConfig::default())
}

async fn fresh(client: &kube::Client, name: &str) -> NodeClaim {
    Api::<NodeClaim>::all(client.clone())
        .get(name)
        .await
        .unwrap()
}

async fn delete_node_claim(client: &kube::Client, name: &str) {
    Api::<NodeClaim>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
}

async fn select_cluster(workload: &kube::Client, cluster: &str) {
    Api::<ClusterAPINodeClass>::all(workload.clone())
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"scalableResourceSelector": {
                "matchLabels": {"cluster.x-k8s.io/cluster-name": cluster}}}})),
        )
        .await
        .unwrap();
}

fn names(ms: &[api::Machine]) -> Vec<String> {
    ms.iter().filter_map(|m| m.metadata.name.clone()).collect()
}

// ---- 1. pre-existing Machines are not ours ------------------------------------------------

#[tokio::test(start_paused = true)]
async fn labelling_a_running_machine_deployment_collects_none_of_its_machines() {
    let world = support::world(WorldConfig::default()).await;
    md("md").member(false).replicas(2).create(&world).await;
    let before = wait_machines(&world, "md", 2).await;
    // The cluster-autoscaler migration: the user opts the running MachineDeployment in.
    support::patch_md(
        &world,
        "md",
        json!({"metadata": {"labels": {KARPENTER_MEMBER: ""}}}),
    )
    .await;
    let p = provider(&world);
    let gc = collector(&p);
    for _ in 0..3 {
        let report = gc.collect().await.unwrap();
        assert!(report.surplus.is_empty(), "{report:?}");
        tokio::time::sleep(PAST_GRACE).await;
    }
    assert_eq!(replicas(&world, "md").await, 2);
    let after = machines(&world, "md").await;
    assert_eq!(names(&after), names(&before), "the same Machines run");
    assert!(after.iter().all(|m| !marked(m)), "{after:?}");
}

#[tokio::test(start_paused = true)]
async fn a_node_claim_never_claims_a_machine_that_was_there_before() {
    let world = support::world(WorldConfig::default()).await;
    md("md").replicas(1).create(&world).await;
    let before = wait_machines(&world, "md", 1).await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc", json!([])).await;

    let launch = p.create(&nc).await.unwrap();
    assert_ne!(
        Some(launch.machine.name.clone()),
        before[0].metadata.name,
        "the running Machine is the user's"
    );
    assert_eq!(replicas(&world, "md").await, 2, "a replica of our own");
    let old = support::machine(&world, before[0].metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(label(&old, KARPENTER_MEMBER), None);
    assert!(
        old.metadata
            .annotations
            .unwrap_or_default()
            .keys()
            .all(|k| !k.starts_with("karpenter."))
    );
}

#[tokio::test(start_paused = true)]
async fn only_a_replica_we_raised_and_nobody_claimed_is_surplus() {
    let world = support::world(WorldConfig::default()).await;
    md("md").replicas(1).create(&world).await;
    let before = wait_machines(&world, "md", 1).await;
    wait_sets(&world, "md").await;
    let p = provider(&world);
    let gc = collector(&p);
    // The MachineSet is paused: our replica's Machine does not come, and the create is cut
    // short after raising it (a restart, or the NodeClaim deleted meanwhile).
    pause_sets(&world, "md", true).await;
    let nc = node_claim(&world, "nc", json!([])).await;
    cut_short(&p, &nc).await;
    assert_eq!(replicas(&world, "md").await, 2);
    delete_node_claim(&world.workload_client(), "nc").await;
    // It comes later, when nobody wants it any more.
    pause_sets(&world, "md", false).await;
    let both = wait_machines(&world, "md", 2).await;
    let ours: Vec<String> = names(&both)
        .into_iter()
        .filter(|n| Some(n) != before[0].metadata.name.as_ref())
        .collect();
    assert_eq!(ours.len(), 1);

    let report = gc.collect().await.unwrap();
    assert!(report.surplus.is_empty(), "young: {report:?}");
    tokio::time::sleep(PAST_GRACE).await;
    let report = gc.collect().await.unwrap();
    let removed: Vec<String> = report.surplus.iter().map(|r| r.name.clone()).collect();
    assert_eq!(removed, ours, "{report:?}");
    assert_eq!(replicas(&world, "md").await, 1);
    let old = support::machine(&world, before[0].metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert!(!marked(&old), "the user's Machine stays");
    tokio::time::sleep(PAST_GRACE).await;
    let report = gc.collect().await.unwrap();
    assert!(report.surplus.is_empty(), "{report:?}");
    assert_eq!(replicas(&world, "md").await, 1);
}

#[tokio::test(start_paused = true)]
async fn every_unclaimed_replica_we_raised_goes_in_one_pass() {
    let world = support::world(WorldConfig::default()).await;
    md("md").replicas(1).create(&world).await;
    wait_machines(&world, "md", 1).await;
    wait_sets(&world, "md").await;
    let p = provider(&world);
    let gc = collector(&p);
    pause_sets(&world, "md", true).await;
    let a = node_claim(&world, "a", json!([])).await;
    let b = node_claim(&world, "b", json!([])).await;
    tokio::join!(cut_short(&p, &a), cut_short(&p, &b));
    assert_eq!(replicas(&world, "md").await, 3);
    delete_node_claim(&world.workload_client(), "a").await;
    delete_node_claim(&world.workload_client(), "b").await;
    pause_sets(&world, "md", false).await;
    wait_machines(&world, "md", 3).await;
    gc.collect().await.unwrap();
    tokio::time::sleep(PAST_GRACE).await;
    let report = gc.collect().await.unwrap();
    assert_eq!(report.surplus.len(), 2, "{report:?}");
    assert_eq!(replicas(&world, "md").await, 1);
}

// ---- 2. one management cluster, two workload clusters -------------------------------------

struct TwoClusters {
    world: World,
    _w2: Sim,
    w2: kube::Client,
    a: Arc<ClusterApiProvider>,
    b: Arc<ClusterApiProvider>,
}

/// Workload cluster 1 (the world's) uses MachineDeployment `a` of Cluster `c1`; workload
/// cluster 2 uses `b` of Cluster `c2`; both in one management cluster.
async fn two_clusters() -> TwoClusters {
    let world = support::world(WorldConfig::default()).await;
    let w2_sim = Sim::new(SimConfig::default());
    let w2 = kube::Client::new(w2_sim.router(), "default");
    support::prepare_workload(&w2).await;
    select_cluster(&world.workload_client(), "c1").await;
    select_cluster(&w2, "c2").await;
    md("a").cluster("c1").create(&world).await;
    md("b").cluster("c2").create(&world).await;
    let a = provider(&world);
    let b = provider_over(world.management_client(), w2.clone());
    TwoClusters {
        world,
        _w2: w2_sim,
        w2,
        a,
        b,
    }
}

#[tokio::test(start_paused = true)]
async fn a_collector_never_takes_the_machines_of_another_workload_cluster() {
    let t = two_clusters().await;
    let wl1 = t.world.workload_client();
    // The same NodeClaim name in both clusters, and one only the second cluster has.
    let la =
        t.a.create(&support::node_claim_in(&wl1, "nc", json!([])).await)
            .await
            .unwrap();
    let lb =
        t.b.create(&support::node_claim_in(&t.w2, "nc", json!([])).await)
            .await
            .unwrap();
    let lb2 =
        t.b.create(&support::node_claim_in(&t.w2, "only-in-2", json!([])).await)
            .await
            .unwrap();
    assert_eq!(la.instance_type, "a");
    assert_eq!(lb.instance_type, "b");
    let gc = collector(&t.a);
    for _ in 0..2 {
        let report = gc.collect().await.unwrap();
        assert!(
            report.orphaned.is_empty() && report.surplus.is_empty(),
            "{report:?}"
        );
        tokio::time::sleep(PAST_GRACE).await;
    }
    assert_eq!(replicas(&t.world, "a").await, 1);
    assert_eq!(replicas(&t.world, "b").await, 2);
    for l in [&la, &lb, &lb2] {
        let m = support::machine(&t.world, &l.machine.name).await.unwrap();
        assert!(!marked(&m), "{} was touched", l.machine);
    }
    // The second cluster's own collector still collects its own orphans.
    delete_node_claim(&t.w2, "only-in-2").await;
    let report = collector(&t.b).collect().await.unwrap();
    assert_eq!(report.orphaned, vec![lb2.machine.clone()], "{report:?}");
    assert_eq!(replicas(&t.world, "b").await, 1);
    assert_eq!(replicas(&t.world, "a").await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_replica_raised_for_another_workload_cluster_is_not_our_surplus() {
    let t = two_clusters().await;
    // Cluster 2 raises `b`, but its Machine comes only after its create was cut short.
    t.b.create(&support::node_claim_in(&t.w2, "warm", json!([])).await)
        .await
        .unwrap();
    wait_sets(&t.world, "b").await;
    pause_sets(&t.world, "b", true).await;
    cut_short(
        &t.b,
        &support::node_claim_in(&t.w2, "late", json!([])).await,
    )
    .await;
    delete_node_claim(&t.w2, "late").await;
    pause_sets(&t.world, "b", false).await;
    wait_machines(&t.world, "b", 2).await;
    let (gc_a, gc_b) = (collector(&t.a), collector(&t.b));
    gc_a.collect().await.unwrap();
    gc_b.collect().await.unwrap();

    tokio::time::sleep(PAST_GRACE).await;
    let report = gc_a.collect().await.unwrap();
    assert!(report.surplus.is_empty(), "cluster 1 took {report:?}");
    assert_eq!(replicas(&t.world, "b").await, 2);
    assert!(machines(&t.world, "b").await.iter().all(|m| !marked(m)));
    let report = gc_b.collect().await.unwrap();
    assert_eq!(
        report.surplus.len(),
        1,
        "cluster 2 collects its own: {report:?}"
    );
    assert_eq!(replicas(&t.world, "b").await, 1);
}

// ---- 3. a removal that failed half-way is finished ----------------------------------------

fn failing_md_writes(error: FaultError) -> FaultConfig {
    FaultConfig {
        seed: 1,
        rules: vec![FaultRule {
            verbs: vec![Verb::Patch, Verb::Update],
            resources: vec![
                "machinedeployments.cluster.x-k8s.io".into(),
                "machinedeployments.cluster.x-k8s.io/scale".into(),
            ],
            error_rate: 1.0,
            error,
            ..FaultRule::default()
        }],
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_scale_down_is_finished_by_the_next_delete() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    let p = provider(&world);
    let a = node_claim(&world, "a", json!([])).await;
    let b = node_claim(&world, "b", json!([])).await;
    let la = p.create(&a).await.unwrap();
    let lb = p.create(&b).await.unwrap();
    assert_eq!(replicas(&world, "md").await, 2);
    let a = fresh(&world.workload_client(), "a").await;

    world
        .management()
        .unwrap()
        .set_faults(failing_md_writes(FaultError::Internal));
    assert!(p.delete(&a).await.is_err(), "the scale-down failed");
    world
        .management()
        .unwrap()
        .set_faults(FaultConfig::default());
    assert_eq!(replicas(&world, "md").await, 2);

    p.delete(&a).await.unwrap();
    assert_eq!(
        replicas(&world, "md").await,
        1,
        "the retry finished the job"
    );
    support::wait_machine_gone(&world, &la.machine.name, Duration::from_secs(120)).await;
    match p.delete(&a).await {
        Err(e) if e.is_not_found() => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(replicas(&world, "md").await, 1, "lowered once");
    let kept = support::machine(&world, &lb.machine.name).await.unwrap();
    assert!(!marked(&kept), "the other Machine stays");
}

#[tokio::test(start_paused = true)]
async fn a_removal_interrupted_by_a_restart_is_finished_by_the_collector() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    let first = provider(&world);
    let a = node_claim(&world, "a", json!([])).await;
    let b = node_claim(&world, "b", json!([])).await;
    let la = first.create(&a).await.unwrap();
    let lb = first.create(&b).await.unwrap();
    world
        .management()
        .unwrap()
        .set_faults(failing_md_writes(FaultError::Internal));
    let a = fresh(&world.workload_client(), "a").await;
    assert!(first.delete(&a).await.is_err());
    drop(first);
    world
        .management()
        .unwrap()
        .set_faults(FaultConfig::default());
    // The NodeClaim went away meanwhile (its finalizer was removed by hand).
    delete_node_claim(&world.workload_client(), "a").await;

    let second = provider(&world);
    let report = collector(&second).collect().await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(replicas(&world, "md").await, 1, "{report:?}");
    support::wait_machine_gone(&world, &la.machine.name, Duration::from_secs(120)).await;
    collector(&second).collect().await.unwrap();
    assert_eq!(replicas(&world, "md").await, 1, "lowered once");
    assert!(!marked(
        &support::machine(&world, &lb.machine.name).await.unwrap()
    ));
}

// ---- 4. Machines that never appear --------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn machines_that_never_appear_fail_the_launch_and_their_replicas_are_released() {
    let mut config = WorldConfig::default();
    config.capi.enabled = false;
    let world = support::world(config).await;
    md("md").max_size(Some("10")).create(&world).await;
    let p = provider_without_ttl(&world);
    let gc = collector(&p);
    let wl = world.workload_client();

    let nc = node_claim(&world, "nc-1", json!([])).await;
    for _ in 0..3 {
        let err = p.create(&nc).await.unwrap_err();
        assert!(
            matches!(err, CloudProviderError::InsufficientCapacity(_)),
            "{err}"
        );
        assert_eq!(
            replicas(&world, "md").await,
            0,
            "the replica no Machine filled is released with the failed launch"
        );
    }
    // Two NodeClaims at once raise two replicas, and both are released.
    let nc2 = node_claim(&world, "nc-2", json!([])).await;
    let (r1, r2) = tokio::join!(p.create(&nc), p.create(&nc2));
    assert!(r1.is_err() && r2.is_err());
    assert_eq!(replicas(&world, "md").await, 0);
    delete_node_claim(&wl, "nc-1").await;
    delete_node_claim(&wl, "nc-2").await;
    tokio::time::sleep(PAST_GRACE).await;
    let report = gc.collect().await.unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    assert_eq!(replicas(&world, "md").await, 0, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn a_replica_raised_for_a_failed_launch_is_kept_while_another_create_waits_for_it() {
    // One create gives up while another of the same MachineDeployment still waits: the
    // replicas it needs are not released under it.
    let mut config = WorldConfig::default();
    config.capi.enabled = false;
    let world = support::world(config).await;
    md("md").max_size(Some("10")).create(&world).await;
    let short = Arc::new(ClusterApiProvider::new(
        world.management_client(),
        world.workload_client(),
        ProviderConfig {
            claim_timeout: Duration::from_secs(10),
            unavailable_offering_ttl: Duration::ZERO,
            ..ProviderConfig::default()
        },
    ));
    let a = node_claim(&world, "a", json!([])).await;
    let b = node_claim(&world, "b", json!([])).await;
    let first = {
        let p = Arc::clone(&short);
        tokio::spawn(async move { p.create(&a).await })
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let second = {
        let p = Arc::clone(&short);
        tokio::spawn(async move { p.create(&b).await })
    };
    assert!(first.await.unwrap().is_err());
    assert!(
        replicas(&world, "md").await >= 1,
        "b's replica stays while b waits"
    );
    assert!(second.await.unwrap().is_err());
    assert_eq!(
        replicas(&world, "md").await,
        0,
        "released once nobody waits"
    );
}

/// The management cluster answers every list and watch of `resource` with 403, as a missing
/// RBAC rule does.
fn forbid_list_and_watch(world: &World, resource: &str) {
    world.management().unwrap().set_faults(FaultConfig {
        seed: 1,
        rules: vec![FaultRule {
            verbs: vec![Verb::List, Verb::Watch],
            resources: vec![resource.into()],
            error_rate: 1.0,
            error: FaultError::Forbidden,
            ..FaultRule::default()
        }],
    });
}

// ---- 5. a Machine watch that keeps failing ------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_forbidden_machine_watch_fails_creates_and_deletes_with_a_clear_error() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    forbid_list_and_watch(&world, "machines.cluster.x-k8s.io");
    let p = provider(&world);
    let nc = node_claim(&world, "nc", json!([])).await;
    let created = tokio::time::timeout(Duration::from_secs(600), p.create(&nc))
        .await
        .expect("create hung on the Machine cache");
    let err = created.unwrap_err();
    assert!(
        matches!(&err, CloudProviderError::CacheNotSynced { cache, .. } if cache == "Machine"),
        "{err:?}"
    );
    assert!(
        err.to_string().to_lowercase().contains("forbidden"),
        "{err}"
    );
    let deleted = tokio::time::timeout(Duration::from_secs(600), p.delete(&nc))
        .await
        .expect("delete hung on the Machine cache");
    let err = deleted.unwrap_err();
    assert!(!err.is_not_found(), "{err}");
    assert!(
        err.to_string().to_lowercase().contains("forbidden"),
        "{err}"
    );
    assert_eq!(replicas(&world, "md").await, 0, "nothing raised blind");
}

#[tokio::test(start_paused = true)]
async fn a_forbidden_machine_deployment_watch_is_named_by_caches_synced_and_instance_types() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    forbid_list_and_watch(&world, "machinedeployments.cluster.x-k8s.io");
    let p = provider(&world);
    // What `/readyz` of the leader reports.
    let err = tokio::time::timeout(Duration::from_secs(600), p.caches_synced())
        .await
        .expect("caches_synced hung")
        .unwrap_err();
    assert!(
        matches!(&err, CloudProviderError::CacheNotSynced { cache, .. } if cache == "MachineDeployment"),
        "{err:?}"
    );
    assert!(
        err.to_string().to_lowercase().contains("forbidden"),
        "{err}"
    );
    // The provisioner's instance types fail with the same cause instead of offering nothing.
    let pool: api::NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": "default"}, "requirements": []}}}}))
    .unwrap();
    let err = p.get_instance_types(&pool).await.unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("forbidden"),
        "{err}"
    );
    // Once allowed, the same provider answers.
    world
        .management()
        .unwrap()
        .set_faults(FaultConfig::default());
    tokio::time::timeout(Duration::from_secs(600), p.caches_synced())
        .await
        .expect("caches_synced hung")
        .unwrap();
    assert!(!p.get_instance_types(&pool).await.unwrap().is_empty());
}

// ---- 6. malformed sizes, conflicts --------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_malformed_min_size_stops_removals_with_a_clear_error() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc", json!([])).await;
    let launch = p.create(&nc).await.unwrap();
    support::patch_md(
        &world,
        "md",
        json!({"metadata": {"annotations": {MIN_SIZE: "three"}}}),
    )
    .await;
    let err = p
        .delete(&fresh(&world.workload_client(), "nc").await)
        .await
        .unwrap_err();
    assert!(err.to_string().contains(MIN_SIZE), "{err}");
    assert_eq!(replicas(&world, "md").await, 1, "not read as 0");
    let m = support::machine(&world, &launch.machine.name)
        .await
        .unwrap();
    assert!(
        !marked(&m),
        "nothing is annotated before the floor is known"
    );
    // The collector reports it too, rather than guessing.
    delete_node_claim(&world.workload_client(), "nc").await;
    let report = collector(&p).collect().await.unwrap();
    assert!(report.orphaned.is_empty(), "{report:?}");
    assert!(
        report.errors.iter().any(|e| e.contains(MIN_SIZE)),
        "{report:?}"
    );
    assert_eq!(replicas(&world, "md").await, 1);
}

#[tokio::test(start_paused = true)]
async fn scale_conflicts_back_off_then_give_up() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    let p = provider(&world);
    let nc = node_claim(&world, "nc", json!([])).await;
    world
        .management()
        .unwrap()
        .set_faults(failing_md_writes(FaultError::Conflict));
    let started = tokio::time::Instant::now();
    let err = p.create(&nc).await.unwrap_err();
    assert!(matches!(err, CloudProviderError::Transient(_)), "{err}");
    assert!(err.to_string().contains("conflict"), "{err}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retried without backing off ({:?})",
        started.elapsed()
    );
    world
        .management()
        .unwrap()
        .set_faults(FaultConfig::default());
    assert_eq!(replicas(&world, "md").await, 0);
}

// ---- 9. a Machine that outlives its scale-down ---------------------------------------------

/// Issue 11 item 9: when the MachineDeployment shrinks another MachineSet than the annotated
/// Machine's (a rollout; here: its MachineSet is paused), the Machine never goes. The delete
/// keeps answering "requested" until the escalation time, then deletes exactly that Machine
/// directly — and never lowers replicas a second time, nor touches the other Machine.
#[tokio::test(start_paused = true)]
async fn a_machine_that_outlives_its_scale_down_is_deleted_directly() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    let p = provider(&world);
    let a = node_claim(&world, "a", json!([])).await;
    let b = node_claim(&world, "b", json!([])).await;
    let la = p.create(&a).await.unwrap();
    let lb = p.create(&b).await.unwrap();
    let a = fresh(&world.workload_client(), "a").await;
    wait_sets(&world, "md").await;
    pause_sets(&world, "md", true).await;

    p.delete(&a).await.unwrap();
    assert_eq!(replicas(&world, "md").await, 1);
    tokio::time::sleep(Duration::from_secs(5 * 60)).await;
    p.delete(&a).await.unwrap();
    let still = support::machine(&world, &la.machine.name).await.unwrap();
    assert!(
        still.metadata.deletion_timestamp.is_none(),
        "not escalated before the time"
    );
    tokio::time::sleep(Duration::from_secs(6 * 60)).await;
    p.delete(&a).await.unwrap();
    let gone = support::machine(&world, &la.machine.name).await;
    assert!(
        gone.is_none_or(|m| m.metadata.deletion_timestamp.is_some()),
        "deleted directly after the escalation time"
    );
    assert_eq!(replicas(&world, "md").await, 1, "replicas lowered once");
    let kept = support::machine(&world, &lb.machine.name).await.unwrap();
    assert!(!marked(&kept), "the other Machine stays");
    assert!(kept.metadata.deletion_timestamp.is_none());
}

/// A raise that comes before Cluster API carried out our scale-down would cancel it (desired
/// and present Machines match again) and leave the Machine we chose running with nobody to
/// remove it but the 10-minute escalation. The raise deletes exactly that Machine first; the
/// other Machine is left alone and the new NodeClaim gets a new Machine.
#[tokio::test(start_paused = true)]
async fn a_raise_never_cancels_a_scale_down_cluster_api_has_not_carried_out() {
    let world = support::world(WorldConfig::default()).await;
    md("md").create(&world).await;
    wait_sets(&world, "md").await;
    let p = provider(&world);
    let a = node_claim(&world, "a", json!([])).await;
    let b = node_claim(&world, "b", json!([])).await;
    let la = p.create(&a).await.unwrap();
    let lb = p.create(&b).await.unwrap();
    let a = fresh(&world.workload_client(), "a").await;

    // The MachineSet does nothing meanwhile: the scale-down is requested, not carried out.
    pause_sets(&world, "md", true).await;
    p.delete(&a).await.unwrap();
    assert_eq!(replicas(&world, "md").await, 1);
    let c = node_claim(&world, "c", json!([])).await;
    let create = tokio::spawn({
        let p = Arc::clone(&p);
        async move { p.create(&c).await }
    });
    support::wait_for("the raise", Duration::from_secs(30), || async {
        (replicas(&world, "md").await == 2).then_some(())
    })
    .await;
    pause_sets(&world, "md", false).await;

    let lc = create.await.unwrap().unwrap();
    support::wait_machine_gone(&world, &la.machine.name, Duration::from_secs(120)).await;
    assert_ne!(lc.machine.name, la.machine.name);
    assert_ne!(lc.machine.name, lb.machine.name);
    let kept = support::machine(&world, &lb.machine.name).await.unwrap();
    assert!(!marked(&kept), "b's Machine stays");
    assert!(kept.metadata.deletion_timestamp.is_none());
    assert_eq!(replicas(&world, "md").await, 2);
    assert_eq!(wait_machines(&world, "md", 2).await.len(), 2);
}
