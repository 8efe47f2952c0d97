//! The simulated Cluster API: MachineDeployment, MachineSet, MachinePool and Machine controllers plus the
//! infrastructure that turns Machines into Nodes of the workload cluster.
//!
//! Responsibility: start the controllers ([`deployments`], [`sets`], [`pools`], [`machines`],
//! [`health_checks`]: MachineHealthChecks, when their kind is served) over
//! one [`client::Capi`] (they speak `cluster.x-k8s.io/v1beta2`, whatever the management
//! cluster serves), each woken by watches of what it reads — one watch per kind, shared,
//! started once discovery says which version to watch. With [`CapiConfig::core`] off (the real
//! Cluster API core manager runs), only the provider controller ([`infrastructure`]) starts.
//! Inputs: management and workload clients, [`CapiConfig`]. Outputs: running tasks.

pub mod client;
pub mod deployments;
pub mod drain;
pub mod health_checks;
pub mod infrastructure;
pub mod machines;
pub mod phases;
pub mod pools;
pub mod rollout;
pub mod scaling;
pub mod sets;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DynamicObject;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::config::CapiConfig;
use super::driver::{Health, Tasks, run_watch, watch};
use crate::touch::Touch;
use client::Capi;
use sim::convert::capi::CapiKind;

/// Watch `kind` in the version `capi` talks (asking until discovery answers), waking `wakes`.
fn watch_capi(capi: &Arc<Capi>, kind: CapiKind, wakes: Vec<Arc<Notify>>) -> JoinHandle<()> {
    let capi = Arc::clone(capi);
    tokio::spawn(async move {
        let resource = loop {
            match capi.resource(kind).await {
                Ok(r) => break r,
                Err(e) => {
                    tracing::debug!(error = %e, "Cluster API not discovered yet");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        let api: Api<Touch<DynamicObject>> = Api::all_with(capi.client().clone(), &resource);
        run_watch(api, wakes).await;
    })
}

/// Start the Cluster API controllers.
pub fn start(
    tasks: &mut Tasks,
    health: &Health,
    management: &kube::Client,
    workload: &kube::Client,
    config: &CapiConfig,
) {
    let capi = Arc::new(Capi::new(management.clone()));
    let nodes: Api<Touch<Node>> = Api::all(workload.clone());
    if !config.core {
        start_infrastructure(tasks, health, &capi, nodes, workload, config);
        return;
    }
    let deployments = tasks.start_woken(
        deployments::Deployments::new(Arc::clone(&capi)),
        config.resync,
        health,
    );
    let sets = tasks.start_woken(sets::Sets::new(Arc::clone(&capi)), config.resync, health);
    let pools = tasks.start_woken(pools::Pools::new(Arc::clone(&capi)), config.resync, health);
    let machines = tasks.start_woken(
        machines::Machines::new(Arc::clone(&capi), workload.clone(), config.clone()),
        config.resync,
        health,
    );
    let health_checks = tasks.start_woken(
        health_checks::HealthChecks::new(Arc::clone(&capi), workload.clone()),
        config.resync,
        health,
    );
    tasks.0.extend([
        // MachineSets read their deployment's preflight-hold knob.
        watch_capi(
            &capi,
            CapiKind::MachineDeployment,
            vec![
                Arc::clone(&deployments),
                Arc::clone(&sets),
                Arc::clone(&machines),
            ],
        ),
        watch_capi(
            &capi,
            CapiKind::MachineSet,
            vec![deployments, Arc::clone(&sets)],
        ),
        watch_capi(
            &capi,
            CapiKind::Machine,
            vec![
                sets,
                Arc::clone(&pools),
                Arc::clone(&machines),
                Arc::clone(&health_checks),
            ],
        ),
        // Machines read their pool's shape.
        watch_capi(
            &capi,
            CapiKind::MachinePool,
            vec![Arc::clone(&pools), Arc::clone(&machines)],
        ),
        watch(
            Api::<Touch<DynamicObject>>::all_with(
                capi.client().clone(),
                &pools::docker_machine_pools(),
            ),
            pools,
        ),
        crate::driver::watch_for_all(nodes, vec![machines, health_checks]),
    ]);
}

/// Start the infrastructure provider alone (Cluster API's real core controllers run).
fn start_infrastructure(
    tasks: &mut Tasks,
    health: &Health,
    capi: &Arc<Capi>,
    nodes: Api<Touch<Node>>,
    workload: &kube::Client,
    config: &CapiConfig,
) {
    let infra = tasks.start_woken(
        infrastructure::Infrastructure::new(Arc::clone(capi), workload.clone(), config.clone()),
        config.resync,
        health,
    );
    for kind in [
        infrastructure::SIM_MACHINE,
        infrastructure::SIM_CLUSTER,
        infrastructure::SIM_CONTROL_PLANE,
    ] {
        let api: Api<Touch<DynamicObject>> = Api::all_with(capi.client().clone(), &kind.resource());
        tasks.0.push(watch(api, Arc::clone(&infra)));
    }
    tasks.0.extend([
        watch_capi(capi, CapiKind::Machine, vec![Arc::clone(&infra)]),
        watch(nodes, infra),
    ]);
}
