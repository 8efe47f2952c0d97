//! The simulated Cluster API: MachineDeployment, MachineSet and Machine controllers plus the
//! infrastructure that turns Machines into Nodes of the workload cluster.
//!
//! Responsibility: start the three controllers ([`deployments`], [`sets`], [`machines`]), each
//! woken by watches of what it reads.
//! Inputs: management and workload clients, [`CapiConfig`]. Outputs: running tasks.

pub mod deployments;
pub mod machines;
pub mod phases;
pub mod rollout;
pub mod sets;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::config::CapiConfig;
use super::driver::{Health, Tasks, watch};
use super::objects::{self as o};

/// Start the Cluster API controllers.
pub fn start(
    tasks: &mut Tasks,
    health: &Health,
    management: &kube::Client,
    workload: &kube::Client,
    config: &CapiConfig,
) {
    let mds = o::all(management, &o::machine_deployments());
    let sets = o::all(management, &o::machine_sets());
    let machines = o::all(management, &o::machines());
    let nodes: Api<Node> = Api::all(workload.clone());
    tasks.start(
        deployments::Deployments::new(management.clone()),
        config.resync,
        health,
        |wake| {
            vec![
                watch(mds.clone(), wake.clone()),
                watch(sets.clone(), wake.clone()),
            ]
        },
    );
    tasks.start(
        sets::Sets::new(management.clone()),
        config.resync,
        health,
        |wake| {
            vec![
                watch(sets.clone(), wake.clone()),
                watch(machines.clone(), wake.clone()),
            ]
        },
    );
    tasks.start(
        machines::Machines::new(management.clone(), workload.clone(), config.clone()),
        config.resync,
        health,
        |wake| {
            vec![
                watch(machines, wake.clone()),
                watch(mds, wake.clone()),
                watch(nodes, wake.clone()),
            ]
        },
    );
}
