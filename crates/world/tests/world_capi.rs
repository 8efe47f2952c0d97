//! The simulated Cluster API: MachineDeployments scale into Machines that get providerIDs and
//! become Nodes; scale-down honours the delete-machine annotation; failure knobs; serving the
//! whole world over TCP.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod capi_support;

use std::time::Duration;

use api::well_known::capi as keys;
use capi_support::{machines_of, md_json, ready, scale, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use world::config::annotations as knobs;
use world::objects::{machine_deployments, machines};
use world::{World, WorldConfig};

#[tokio::test(start_paused = true)]
async fn machine_deployments_become_ready_nodes_and_scale_down_takes_the_marked_machine() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let mc = world.management_client();
    let mds = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_deployments());
    let ms_api = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machines());
    let nodes: Api<Node> = Api::all(world.workload_client());
    let annotations = json!({
        "capacity.cluster-autoscaler.kubernetes.io/cpu": "8",
        "capacity.cluster-autoscaler.kubernetes.io/memory": "32Gi",
        "capacity.cluster-autoscaler.kubernetes.io/maxPods": "50",
        "capacity.cluster-autoscaler.kubernetes.io/labels":
            "topology.kubernetes.io/zone=z1,node.kubernetes.io/instance-type=m5.large",
        "capacity.cluster-autoscaler.kubernetes.io/taints": "dedicated=gpu:NoSchedule",
    });
    mds.create(&PostParams::default(), &md_json("md-a", annotations))
        .await
        .unwrap();
    scale(&mds, "md-a", 2).await;

    let created = wait_for("two Machines", 400, || async {
        let ms = machines_of(&ms_api, "md-a").await;
        (ms.len() == 2).then_some(ms)
    })
    .await;
    for m in &created {
        let labels = &m["metadata"]["labels"];
        assert_eq!(labels[keys::CLUSTER_NAME], "c1");
        assert_eq!(labels["node-role.kubernetes.io/worker"], "");
        let set = labels[keys::SET_NAME].as_str().unwrap();
        assert!(
            m["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{set}-"))
        );
        assert_eq!(m["metadata"]["ownerReferences"][0]["kind"], "MachineSet");
        assert_eq!(
            m["spec"]["deletion"]["nodeDrainTimeoutSeconds"], 10,
            "the template spec is copied whole"
        );
        assert_eq!(m["apiVersion"], "cluster.x-k8s.io/v1beta2");
        assert!(m["spec"].get("providerID").is_none());
    }

    let provisioned = wait_for("providerIDs", 400, || async {
        let ms = machines_of(&ms_api, "md-a").await;
        ms.iter()
            .all(|m| m["spec"]["providerID"].is_string())
            .then_some(ms)
    })
    .await;
    for m in &provisioned {
        let name = m["metadata"]["name"].as_str().unwrap();
        assert_eq!(m["spec"]["providerID"], format!("sim:///z1/{name}"));
    }

    let ready_nodes = wait_for("two Ready Nodes", 400, || async {
        let list = nodes.list(&ListParams::default()).await.unwrap().items;
        (list.len() == 2 && list.iter().all(ready)).then_some(list)
    })
    .await;
    for n in &ready_nodes {
        let labels = n.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
        assert_eq!(labels["topology.kubernetes.io/zone"], "z1");
        assert_eq!(labels["kubernetes.io/arch"], "amd64");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(
            labels["kubernetes.io/hostname"],
            n.metadata.name.as_deref().unwrap()
        );
        assert_eq!(labels["team.node.cluster.x-k8s.io/owner"], "a");
        assert!(
            !labels.contains_key("pool"),
            "only CAPI's domains propagate"
        );
        let taints: Vec<String> = n
            .spec
            .as_ref()
            .unwrap()
            .taints
            .iter()
            .flatten()
            .map(|t| t.key.clone())
            .collect();
        assert_eq!(
            taints,
            vec![
                "dedicated".to_owned(),
                "karpenter.sh/unregistered".to_owned()
            ]
        );
        let cap = n.status.as_ref().unwrap().allocatable.as_ref().unwrap();
        assert_eq!(cap["cpu"].0, "8");
        assert_eq!(cap["memory"].0, "32Gi");
        assert_eq!(cap["pods"].0, "50");
        let provider_id = n.spec.as_ref().unwrap().provider_id.as_deref().unwrap();
        assert!(provider_id.starts_with("sim:///z1/"));
    }

    let running = wait_for("Running Machines and a ready deployment", 400, || async {
        let ms = machines_of(&ms_api, "md-a").await;
        let md = serde_json::to_value(mds.get("md-a").await.unwrap()).unwrap();
        let all_running = ms.iter().all(|m| {
            m["status"]["phase"] == "Running"
                && m["status"]["nodeRef"]["name"] == m["metadata"]["name"]
        });
        (all_running && md["status"]["readyReplicas"] == 2 && md["status"]["phase"] == "Running")
            .then_some((ms, md))
    })
    .await;
    let md = running.1;
    assert!(
        md["status"]["selector"]
            .as_str()
            .unwrap()
            .contains("pool=md-a")
    );
    assert_eq!(md["status"]["availableReplicas"], 2);
    assert_eq!(md["status"]["upToDateReplicas"], 2);
    assert_eq!(md["status"]["deprecated"]["v1beta1"]["readyReplicas"], 2);
    // The Machines' status is v1beta2-shaped.
    for m in &running.0 {
        let status = &m["status"];
        assert_eq!(
            status["initialization"],
            json!({"bootstrapDataSecretCreated": true, "infrastructureProvisioned": true})
        );
        assert_eq!(status["nodeRef"], json!({"name": m["metadata"]["name"]}));
        let conditions: Vec<(&str, &str)> = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
            .collect();
        assert_eq!(
            conditions,
            [
                ("BootstrapConfigReady", "True"),
                ("InfrastructureReady", "True"),
                ("NodeReady", "True"),
                ("NodeHealthy", "True"),
                ("Ready", "True"),
                ("Available", "True"),
                ("Deleting", "False"),
            ]
        );
        assert_eq!(
            status["deprecated"]["v1beta1"]["conditions"][3]["type"],
            "Ready"
        );
        for v1beta1 in ["bootstrapReady", "infrastructureReady", "failureReason"] {
            assert!(status.get(v1beta1).is_none(), "{v1beta1}");
        }
    }

    // Scale down by one, marking the Machine to go.
    let doomed = running.0[1]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let keep = running.0[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let mark = json!({"metadata": {"annotations": {keys::DELETE_MACHINE: "2024-01-01T00:00:00Z"}}});
    ms_api
        .patch(&doomed, &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .unwrap();
    scale(&mds, "md-a", 1).await;
    wait_for("the marked Machine and its Node to go", 400, || async {
        let ms = machines_of(&ms_api, "md-a").await;
        let node_gone = nodes.get_opt(&doomed).await.unwrap().is_none();
        (ms.len() == 1 && node_gone).then_some(())
    })
    .await;
    let left = machines_of(&ms_api, "md-a").await;
    assert_eq!(left[0]["metadata"]["name"], keep.as_str());
    assert!(nodes.get_opt(&keep).await.unwrap().is_some());
    let health = world.health();
    assert!(health.values().all(|h| h.failures == 0), "{health:?}");
}

#[tokio::test(start_paused = true)]
async fn failure_knobs_and_slow_deletions() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let mc = world.management_client();
    let mds = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_deployments());
    let ms_api = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machines());
    let nodes: Api<Node> = Api::all(world.workload_client());
    mds.create(
        &PostParams::default(),
        &md_json("stuck", json!({knobs::FAILURE: knobs::NO_PROVIDER_ID})),
    )
    .await
    .unwrap();
    mds.create(
        &PostParams::default(),
        &md_json("broken", json!({knobs::FAILURE: knobs::FAILED})),
    )
    .await
    .unwrap();
    mds.create(
        &PostParams::default(),
        &md_json("slow", json!({knobs::DELETION_DELAY: "2m"})),
    )
    .await
    .unwrap();
    for md in ["stuck", "broken", "slow"] {
        scale(&mds, md, 1).await;
    }
    let failed = wait_for("a Failed Machine", 400, || async {
        let ms = machines_of(&ms_api, "broken").await;
        ms.into_iter().find(|m| m["status"]["phase"] == "Failed")
    })
    .await;
    let deprecated = &failed["status"]["deprecated"]["v1beta1"];
    assert_eq!(deprecated["failureReason"], "CreateError");
    assert!(deprecated["failureMessage"].is_string());
    assert_eq!(
        failed["status"]["initialization"]["infrastructureProvisioned"],
        false
    );
    let slow = wait_for("the slow Machine's Node", 400, || async {
        let ms = machines_of(&ms_api, "slow").await;
        let name = ms
            .first()?
            .get("status")?
            .get("nodeRef")?
            .get("name")?
            .as_str()?
            .to_owned();
        Some(name)
    })
    .await;
    // Long after its siblings would have, the stuck Machine has no providerID.
    let stuck = machines_of(&ms_api, "stuck").await;
    assert_eq!(stuck.len(), 1);
    assert!(stuck[0]["spec"]["providerID"].is_null());
    assert_eq!(stuck[0]["status"]["phase"], "Provisioning");

    ms_api
        .delete(&slow, &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let deleting = serde_json::to_value(ms_api.get(&slow).await.unwrap()).unwrap();
    assert_eq!(deleting["status"]["phase"], "Deleting");
    let condition = deleting["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Deleting")
        .unwrap();
    assert_eq!(condition["status"], "True");
    assert!(
        nodes.get_opt(&slow).await.unwrap().is_some(),
        "the Node stays while the Machine deletes"
    );
    wait_for("the slow Machine to go", 400, || async {
        ms_api.get_opt(&slow).await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(nodes.get_opt(&slow).await.unwrap().is_none());
    // The MachineSet replaces it.
    wait_for("a replacement Machine", 400, || async {
        let ms = machines_of(&ms_api, "slow").await;
        (ms.len() == 1 && ms[0]["metadata"]["name"] != slow.as_str()).then_some(())
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn deleting_a_machine_deployment_collects_everything() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let mc = world.management_client();
    let mds = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_deployments());
    let ms_api = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machines());
    let nodes: Api<Node> = Api::all(world.workload_client());
    mds.create(&PostParams::default(), &md_json("md", json!({})))
        .await
        .unwrap();
    scale(&mds, "md", 2).await;
    wait_for("two Nodes", 400, || async {
        (nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            == 2)
            .then_some(())
    })
    .await;
    mds.delete("md", &DeleteParams::default()).await.unwrap();
    wait_for("Machines and Nodes to be collected", 400, || async {
        let left = machines_of(&ms_api, "md").await.len()
            + nodes
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
        (left == 0).then_some(())
    })
    .await;
}

async fn client_for(path: &std::path::Path) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_world_serves_over_tcp_with_kubeconfigs() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = world::ServeWorldConfig {
        management_kubeconfig: Some(dir.path().join("mgmt")),
        workload_kubeconfig: Some(dir.path().join("wl")),
        ..world::ServeWorldConfig::default()
    };
    let fast = Duration::from_millis(50);
    config.world.capi.bootstrap_delay = fast;
    config.world.capi.provider_id_delay = fast;
    config.world.capi.node_join_delay = fast;
    config.world.kubelet.node_ready_delay = fast;
    let running = world::serve_world(config).await.unwrap();
    assert_eq!(running.management_kubeconfig(), dir.path().join("mgmt"));
    let mc = client_for(running.management_kubeconfig()).await;
    let wc = client_for(running.workload_kubeconfig()).await;
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(wc.clone());
    assert!(crds.get("nodepools.karpenter.sh").await.is_ok());
    let mds = Api::<DynamicObject>::namespaced_with(mc, "default", &machine_deployments());
    mds.create(&PostParams::default(), &md_json("tcp", json!({})))
        .await
        .unwrap();
    scale(&mds, "tcp", 1).await;
    let nodes: Api<Node> = Api::all(wc);
    wait_for("a Ready Node over TCP", 400, || async {
        let list = nodes.list(&ListParams::default()).await.unwrap().items;
        (list.len() == 1 && list.iter().all(ready)).then_some(())
    })
    .await;
    running.shutdown().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_world_runs_against_any_pair_of_clients() {
    let management = sim::Sim::default();
    let workload = sim::Sim::default();
    let mc = kube::Client::new(management.router(), "default");
    let wc = kube::Client::new(workload.router(), "default");
    let run = tokio::spawn(world::run_world_against(
        wc.clone(),
        mc.clone(),
        WorldConfig::default(),
    ));
    let mds = Api::<DynamicObject>::namespaced_with(mc, "default", &machine_deployments());
    wait_for("the CAPI CRDs", 400, || async {
        mds.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;
    mds.create(&PostParams::default(), &md_json("any", json!({})))
        .await
        .unwrap();
    scale(&mds, "any", 1).await;
    let nodes: Api<Node> = Api::all(wc);
    wait_for("a Ready Node", 400, || async {
        let list = nodes.list(&ListParams::default()).await.unwrap().items;
        (list.len() == 1 && list.iter().all(ready)).then_some(())
    })
    .await;
    run.abort();
}

/// As Cluster API's webhook and a management cluster with the Docker provider: a
/// MachineDeployment gets the `cluster.x-k8s.io/cluster-name` label of its `spec.clusterName`
/// (a NodeClass selecting by it finds it), and the `DockerMachineTemplate` kind its
/// `infrastructureRef` names is served.
#[tokio::test(start_paused = true)]
async fn a_machine_deployment_is_labelled_with_its_cluster_and_its_template_kind_is_served() {
    let world = World::start(WorldConfig::default()).await.unwrap();
    let mc = world.management_client();
    let mds = Api::<DynamicObject>::namespaced_with(mc.clone(), "default", &machine_deployments());
    mds.create(&PostParams::default(), &md_json("md", json!({})))
        .await
        .unwrap();
    wait_for("the cluster-name label", 40, || async {
        let md = mds.get("md").await.unwrap();
        (md.metadata
            .labels
            .unwrap_or_default()
            .get(keys::CLUSTER_NAME)
            == Some(&"c1".to_owned()))
        .then_some(())
    })
    .await;
    let group = kube::discovery::oneshot::group(&mc, "infrastructure.cluster.x-k8s.io")
        .await
        .unwrap();
    let (resource, _) = group.recommended_kind("DockerMachineTemplate").unwrap();
    assert_eq!(resource.plural, "dockermachinetemplates");
}
