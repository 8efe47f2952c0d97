//! The timeline of `simulate`: each [`Step`] of a scenario carried out against the clusters.
//!
//! Responsibility: scale Deployments, wait for pods, Ready nodes or a settled disruption loop,
//! let time pass; after each step, the peak node count and cost so far, and the step's
//! [`StepSummary`]. A wait that times out is an error naming what it still waited for.
//! Inputs: the workload and management clients, the running [`Operator`]. Outputs: step
//! summaries; errors.

use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tokio::time::Instant;
use world::objects::machines;

use super::{StepSummary, nodes_and_cost, pods, settle};
use crate::operator::Operator;
use crate::scenario::Step;

pub(super) async fn run_steps(
    clients: (&kube::Client, &kube::Client),
    operator: &Operator,
    steps: &[Step],
    start: Instant,
    out: &mut Vec<StepSummary>,
    peak: &mut (usize, f64),
    after_step: &mut (dyn FnMut(&Step) + Send),
) -> anyhow::Result<()> {
    let (workload, management) = clients;
    for step in steps {
        let began = Instant::now();
        match step {
            Step::Scale {
                deployment,
                replicas,
            } => {
                let (ns, name) = deployment
                    .split_once('/')
                    .unwrap_or(("default", deployment));
                let api: Api<Deployment> = Api::namespaced(workload.clone(), ns);
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                )
                .await
                .with_context(|| format!("cannot scale Deployment {deployment}"))?;
            }
            Step::WaitForPods { timeout } => {
                let timeout = api::common::parse_duration(timeout)?;
                pods::wait_all_running(workload, timeout, &step.to_string()).await?;
            }
            Step::WaitForConsolidation { timeout } => {
                let timeout = api::common::parse_duration(timeout)?;
                let deadline = Instant::now() + timeout;
                // Three idle passes in a row, all begun after this step began.
                let (start_passes, _) = operator.disruption_passes();
                loop {
                    let (passes, idle) = operator.disruption_passes();
                    let loose = settle::settled(workload, management, &machines()).await?;
                    if passes >= start_passes + 4 && idle >= 3 && loose.is_empty() {
                        break;
                    }
                    if Instant::now() >= deadline {
                        let running: Vec<String> = operator
                            .disruptions()
                            .iter()
                            .filter(|r| r.outcome.is_none())
                            .map(|r| {
                                format!(
                                    "command {:?} {} of {:?} (replacements {:?})",
                                    r.method, r.decision, r.nodes, r.replacements
                                )
                            })
                            .collect();
                        bail!(
                            "step `{step}`: after {timeout:?}, the disruption loop is still busy \
                             ({passes} passes, {idle} idle in a row); commands in flight: {}; \
                             not settled: {}",
                            if running.is_empty() {
                                "none".to_owned()
                            } else {
                                running.join("; ")
                            },
                            if loose.is_empty() {
                                "nothing".to_owned()
                            } else {
                                loose.join("; ")
                            }
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
            Step::WaitForNodes { count, timeout } => {
                let timeout = api::common::parse_duration(timeout)?;
                let deadline = Instant::now() + timeout;
                loop {
                    let ready = ready_nodes(workload).await?;
                    if ready >= *count {
                        break;
                    }
                    if Instant::now() >= deadline {
                        bail!(
                            "step `{step}`: after {timeout:?}, {ready} of {count} nodes are Ready"
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
            Step::Sleep(d) => tokio::time::sleep(api::common::parse_duration(d)?).await,
        }
        after_step(step);
        if let Ok((nodes, cost)) = nodes_and_cost(workload, management, operator).await
            && cost > peak.1
        {
            *peak = (nodes, cost);
        }
        out.push(StepSummary {
            step: step.to_string(),
            started_seconds: (began - start).as_secs_f64(),
            took_seconds: began.elapsed().as_secs_f64(),
        });
    }
    Ok(())
}

/// Nodes whose `Ready` condition is True.
async fn ready_nodes(workload: &kube::Client) -> anyhow::Result<usize> {
    let nodes: Api<Node> = Api::all(workload.clone());
    Ok(nodes
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count())
}
