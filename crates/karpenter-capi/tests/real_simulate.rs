//! `simulate`'s built-in scenario (scale out, then in) with the simulated world's Cluster API
//! and kubelets, once on `sim` and once on a real kube-apiserver with the real
//! kube-controller-manager and kube-scheduler: the outcome is the same.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::Duration;

use api::common::Conditions as _;

use karpenter_capi::operator::Operator;
use karpenter_capi::scenario;
use karpenter_capi::simulate::{Summary, run_timeline};
use world::{Backend, World, WorldConfig};

/// NodeClaims, Ready NodeClaims, Nodes, Machines and MachineDeployment replicas, once they
/// agree (a NodeClaim launched by the last step may still be on its way).
async fn settled(world: &World) -> (usize, usize, usize, usize, i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    loop {
        let ncs = list::<api::NodeClaim>(world.workload_client()).await;
        let ready = ncs
            .iter()
            .filter(|nc| {
                nc.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .condition("Ready")
                        .is_some_and(|c| c.status == api::common::ConditionStatus::True)
                })
            })
            .count();
        let nodes = list::<k8s_openapi::api::core::v1::Node>(world.workload_client())
            .await
            .len();
        let machines = list_capi::<api::Machine>(world.management_client())
            .await
            .len();
        let replicas: i64 = list_capi::<api::MachineDeployment>(world.management_client())
            .await
            .iter()
            .map(|m| i64::from(m.spec.replicas.unwrap_or(0)))
            .sum();
        let counts = (ncs.len(), ready, nodes, machines, replicas);
        let n = i64::try_from(ncs.len()).unwrap();
        if ready == ncs.len() && nodes == ncs.len() && machines == ncs.len() && replicas == n {
            return counts;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "never settled: (nodeclaims, ready, nodes, machines, replicas) = {counts:?}\n{}",
                describe(world).await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// NodeClaims with their conditions and their Nodes' readiness and taints, for a failure.
async fn describe(world: &World) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let nodes = list::<k8s_openapi::api::core::v1::Node>(world.workload_client()).await;
    for nc in list::<api::NodeClaim>(world.workload_client()).await {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let status = nc.status.clone().unwrap_or_default();
        let _ = writeln!(
            out,
            "NodeClaim {name} providerID={:?} node={:?}",
            status.provider_id, status.node_name
        );
        for c in status.conditions.iter().flatten() {
            let _ = writeln!(
                out,
                "  {}={:?} {} {}",
                c.type_, c.status, c.reason, c.message
            );
        }
        if let Some(node) = nodes
            .iter()
            .find(|n| n.metadata.name.is_some() && n.metadata.name == status.node_name)
        {
            let _ = writeln!(
                out,
                "  node taints={:?} conditions={:?} labels={:?}",
                node.spec.as_ref().and_then(|s| s.taints.clone()),
                node.status.as_ref().and_then(|s| s.conditions.clone()),
                node.metadata.labels
            );
        }
    }
    out
}

/// Every Cluster API `K`, read as v1beta2.
async fn list_capi<K>(client: kube::Client) -> Vec<K>
where
    K: kube::Resource<DynamicType = api::CapiVersion>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    kube::Api::<K>::all_with(client, &api::CapiVersion::v1beta2())
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
}

async fn list<K>(client: kube::Client) -> Vec<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    kube::Api::<K>::all(client)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
}

async fn basic(backend: Backend) -> (Summary, (usize, usize, usize, usize, i64)) {
    let scenario = scenario::parse(scenario::BASIC).unwrap();
    let world = World::start_on(backend, WorldConfig::default())
        .await
        .unwrap();
    world::crds::install_karpenter_crds(&world.workload_client())
        .await
        .unwrap();
    scenario::apply(&world.management_client(), &scenario.management)
        .await
        .unwrap();
    scenario::apply(&world.workload_client(), &scenario.workload)
        .await
        .unwrap();
    let operator = Operator::start(
        world.workload_client(),
        world.management_client(),
        karpenter_capi::simulate::operator_config(),
    );
    operator.wait_ready(Duration::from_secs(30)).await.unwrap();
    let summary = run_timeline(
        &world.workload_client(),
        &world.management_client(),
        &operator,
        &scenario.name,
        &scenario.steps,
    )
    .await
    .unwrap();
    let counts = settled(&world).await;
    (summary, counts)
}

/// What must agree between the backends. Node counts may differ by placement: the real
/// kube-scheduler and kube-scheduler-lite bind pods in their own orders, pods the plan put
/// elsewhere can be left over, and a leftover gets a node of its own (as with upstream
/// Karpenter; consolidation removes the surplus once it exists).
fn outcome(s: &Summary) -> serde_json::Value {
    serde_json::json!({
        "pods": s.pods,
        "allRunning": s.pods_running == s.pods,
        "everyNodeGroupConsistent": s.node_groups.iter()
            .all(|m| usize::try_from(m.replicas).unwrap() == m.nodes),
        "consolidatedToFewerCheaperNodes": s.nodes < s.peak_nodes
            && s.cost_per_hour < s.peak_cost_per_hour
            && !s.disruptions.is_empty()
            && s.disruptions.iter().all(|d| d.outcome == "done"),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_the_basic_scenario_ends_the_same_on_sim_and_a_real_api_server() {
    let (on_sim, sim_counts) = basic(Backend::Sim).await;
    let (on_real, real_counts) = basic(Backend::Real).await;
    assert_eq!(
        outcome(&on_sim),
        outcome(&on_real),
        "sim: {on_sim:#?}\nreal: {on_real:#?}"
    );
    // Agreeing is not enough: both must have ended as the scenario means to.
    let ended = outcome(&on_real);
    for key in [
        "allRunning",
        "everyNodeGroupConsistent",
        "consolidatedToFewerCheaperNodes",
    ] {
        assert_eq!(ended[key], true, "{key}: {on_real:#?}");
    }
    eprintln!(
        "settled (nodeclaims, ready, nodes, machines, replicas): sim {sim_counts:?}, real {real_counts:?}"
    );
    assert!(real_counts.0 > 0);
    assert!(
        real_counts.0 <= sim_counts.0 + 3,
        "no runaway: sim {sim_counts:?} real {real_counts:?}"
    );
}
