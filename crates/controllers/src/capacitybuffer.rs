//! The CapacityBuffer controller (feature gate `CapacityBuffer`).
//!
//! Responsibility: turn every CapacityBuffer (`autoscaling.x-k8s.io/v1beta1`) into virtual
//! pods the provisioner schedules with the pending pods, and say in each buffer's status what
//! became of it:
//! - resolves the chunk shape: `spec.podTemplateRef` names a PodTemplate of the buffer's
//!   namespace; `spec.scalableRef` a Deployment, StatefulSet or ReplicaSet (group `apps`, or
//!   empty as upstream accepts), whose pod template is the shape and whose `spec.replicas`
//!   (default 1) the `percentage` applies to; anything else is `ResolutionFailed` naming the
//!   field;
//! - counts the chunks and builds the virtual pods ([`resolve`]); a template the provisioner
//!   would refuse (an invalid selector, a bad quantity) or more than [`MAX_CHUNKS`] chunks is
//!   `ResolutionFailed` too, rather than pods that silently fit nowhere;
//! - hands every virtual pod to the state ([`ClusterState::set_buffer_pods`]): the provisioner
//!   wakes when they change and schedules them after every real pod. A workload that cannot be
//!   read for a reason other than "not found" (a 500, a timeout, a throttled request) keeps
//!   the buffer's last virtual pods and status until it can: a transient error must not look
//!   like a buffer gone empty, which would let emptiness remove its warm nodes;
//! - writes `ReadyForProvisioning`, `replicas`, `podTemplateRef`, `podTemplateGeneration`,
//!   `provisioningStrategy` and `Provisioning` (from the last provisioning pass's placement)
//!   with a resourceVersion precondition, only when they change; a Warning Event with the
//!   condition's reason names the buffer when `ReadyForProvisioning` turns False;
//! - runs when a buffer or PodTemplate changes, when a provisioning pass placed virtual pods,
//!   and at least every [`CapacityBufferConfig::poll`] (a workload's replicas are read, not
//!   watched); at most every 500 ms. When a watch ends the controller ends (so `/healthz`
//!   names it).
//!
//! Every `provisioningStrategy` is served as `buffer.x-k8s.io/active-capacity`, as upstream
//! Karpenter does. Inputs: a workload `kube::Client`, the [`ClusterState`]. Outputs: virtual
//! pods in the state, CapacityBuffer status, Events.

pub mod resolve;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::CapacityBuffer;
use api::common::ConditionStatus;
use api::well_known::capacity_buffer::READY_FOR_PROVISIONING;
use api::well_known::capacity_buffer::reasons::{
    POD_TEMPLATE_NOT_FOUND, RESOLUTION_FAILED, SCALABLE_REF_NOT_FOUND,
};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplate, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use scheduling::labels::WellKnownLabels;
use serde_json::json;
use state::ClusterState;

use crate::events::{Events, Message};
use crate::provisioning::inputs;
use resolve::{Resolution, Shape, Unresolved};

/// The most chunks one buffer may have: each is a pod every provisioning pass schedules.
pub const MAX_CHUNKS: i32 = 1000;

/// The shortest time between two passes.
const MIN_INTERVAL: Duration = Duration::from_millis(500);

/// Settings of the controller.
#[derive(Debug, Clone)]
pub struct CapacityBufferConfig {
    /// The longest time between two passes (upstream requeues every 30 s).
    pub poll: Duration,
}

impl Default for CapacityBufferConfig {
    fn default() -> Self {
        Self {
            poll: Duration::from_secs(30),
        }
    }
}

/// The CapacityBuffer controller.
pub struct CapacityBufferController {
    client: kube::Client,
    state: Arc<ClusterState>,
    events: Events,
    well_known: WellKnownLabels,
    config: CapacityBufferConfig,
    /// Each buffer's virtual pods of its last resolution, kept while its workload cannot be
    /// read.
    last: Mutex<HashMap<String, Vec<Pod>>>,
}

/// Why a buffer's chunk shape is not known.
enum ShapeError {
    /// The buffer is wrong or its reference is gone: its status says so, it has no pods.
    Failed(Unresolved),
    /// Its workload could not be read now (not a 404): retried next pass.
    Unreadable(String),
}

impl From<Unresolved> for ShapeError {
    fn from(why: Unresolved) -> Self {
        Self::Failed(why)
    }
}

impl std::fmt::Debug for CapacityBufferController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapacityBufferController")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl CapacityBufferController {
    /// A controller reading and writing CapacityBuffers through `client`.
    #[must_use]
    pub fn new(
        client: kube::Client,
        state: Arc<ClusterState>,
        events: Events,
        config: CapacityBufferConfig,
    ) -> Self {
        Self {
            client,
            state,
            events,
            well_known: WellKnownLabels::cluster_api(),
            config,
            last: Mutex::default(),
        }
    }

    /// Watches CapacityBuffers and PodTemplates and keeps the virtual pods until dropped.
    /// Returns (an error logged) when a watch ends, so `/healthz` names this controller.
    pub async fn run(self) {
        let (tick, mut changes) = tokio::sync::watch::channel(0_u64);
        let tick = Arc::new(tick);
        let (buffers, (_, buffer_task)) =
            state::watch_store::<CapacityBuffer>(&self.client, Arc::clone(&tick));
        let (templates, (_, template_task)) = state::watch_store::<PodTemplate>(&self.client, tick);
        let tasks = [AbortOnDrop(buffer_task), AbortOnDrop(template_task)];
        let mut placed = self.state.buffer_changes();
        let listed = [
            state::listed::listed(&buffers),
            state::listed::listed(&templates),
        ];
        loop {
            if listed.iter().all(state::listed::is_listed) {
                self.reconcile(&buffers.state(), &templates).await;
            }
            if tasks.iter().any(|t| t.0.is_finished()) {
                tracing::error!(
                    "the CapacityBuffer or PodTemplate watch ended; the CapacityBuffer controller stops"
                );
                return;
            }
            tokio::time::sleep(self.config.poll.min(MIN_INTERVAL)).await;
            tokio::select! {
                _ = changes.changed() => {}
                _ = placed.changed() => {}
                () = tokio::time::sleep(self.config.poll) => {}
            }
        }
    }

    /// One pass over every buffer: the virtual pods are replaced and the statuses written.
    pub async fn reconcile(&self, buffers: &[Arc<CapacityBuffer>], templates: &Store<PodTemplate>) {
        let mut all: Vec<Pod> = Vec::new();
        let mut sorted: Vec<&Arc<CapacityBuffer>> = buffers
            .iter()
            .filter(|b| b.metadata.deletion_timestamp.is_none())
            .collect();
        sorted.sort_by_key(|b| resolve::key(b));
        let now = Timestamp::now();
        let mut last = HashMap::new();
        for buffer in sorted {
            let key = resolve::key(buffer);
            let (resolution, pods) = match self.resolve(buffer, templates, now).await {
                Ok(resolved) => resolved,
                Err(why) => {
                    let kept = self
                        .last
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get(&key)
                        .cloned()
                        .unwrap_or_default();
                    tracing::warn!(capacitybuffer = %key, error = %why, kept = kept.len(),
                        "the buffer's workload cannot be read; its last virtual pods are kept");
                    all.extend(kept.iter().cloned());
                    last.insert(key, kept);
                    continue;
                }
            };
            all.extend(pods.iter().cloned());
            last.insert(key.clone(), pods);
            let placement = self.state.buffer_placement(&key);
            if let Err(e) = self.write_status(buffer, &resolution, placement, now).await {
                tracing::debug!(capacitybuffer = %key, error = %e,
                    "CapacityBuffer status not written (retried next pass)");
            }
        }
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = last;
        self.state.set_buffer_pods(all);
    }

    /// The buffer's resolution and its virtual pods; `Err` (why) when its workload cannot be
    /// read now.
    async fn resolve(
        &self,
        buffer: &CapacityBuffer,
        templates: &Store<PodTemplate>,
        now: Timestamp,
    ) -> Result<(Resolution, Vec<Pod>), String> {
        let shape = match self.shape(buffer, templates).await {
            Ok(shape) => shape,
            Err(ShapeError::Failed(why)) => return Ok((Resolution::Failed(why), Vec::new())),
            Err(ShapeError::Unreadable(why)) => return Err(why),
        };
        let failed = |message: String| {
            Ok((
                Resolution::Failed(Unresolved {
                    reason: RESOLUTION_FAILED,
                    message,
                }),
                Vec::new(),
            ))
        };
        let source = source_field(buffer);
        // One chunk, read the way the provisioner reads it: its requests and its validity.
        let created = buffer
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        let probe = resolve::virtual_pods(buffer, &shape.template, 1, created);
        let Some(first) = probe.first() else {
            return failed(format!("{source}: the pod template is empty"));
        };
        let chunk = match inputs::validate_pod(first, &self.well_known) {
            Ok(p) => p,
            Err(ignored) => {
                return failed(format!(
                    "{source}: the pod template cannot be scheduled: {}",
                    ignored.reason
                ));
            }
        };
        let count = match resolve::chunks(buffer, shape.workload_replicas, &chunk.requests) {
            Ok(n) => n,
            Err(message) => return failed(message),
        };
        if count > MAX_CHUNKS {
            return failed(format!(
                "spec: {count} chunks is more than the {MAX_CHUNKS} a buffer may have (lower spec.replicas, spec.percentage or spec.limits)"
            ));
        }
        let pods = resolve::virtual_pods(buffer, &shape.template, count, created);
        Ok((
            Resolution::Resolved {
                shape: Box::new(shape),
                replicas: count,
            },
            pods,
        ))
    }

    /// The chunk shape of `buffer`, from its PodTemplate or workload.
    async fn shape(
        &self,
        buffer: &CapacityBuffer,
        templates: &Store<PodTemplate>,
    ) -> Result<Shape, ShapeError> {
        let namespace = buffer.namespace().unwrap_or_default();
        let spec = &buffer.spec;
        let failed = |message: String| Unresolved {
            reason: RESOLUTION_FAILED,
            message,
        };
        if let Some(r) = &spec.pod_template_ref {
            let found = templates.get(&ObjectRef::new(&r.name).within(&namespace));
            let Some(pt) = found else {
                return Err(ShapeError::Failed(Unresolved {
                    reason: POD_TEMPLATE_NOT_FOUND,
                    message: format!(
                        "PodTemplate {namespace}/{} (spec.podTemplateRef.name) not found",
                        r.name
                    ),
                }));
            };
            return Ok(Shape {
                template: pt.template.clone().unwrap_or_default(),
                pod_template: Some((r.name.clone(), pt.metadata.generation)),
                workload_replicas: None,
            });
        }
        let Some(r) = &spec.scalable_ref else {
            return Err(failed("Neither podTemplateRef nor scalableRef is set".to_owned()).into());
        };
        let group = r.api_group.as_deref().unwrap_or_default();
        if !matches!(group, "" | "apps") {
            return Err(failed(format!(
                "spec.scalableRef.apiGroup: unsupported scalableRef API group {group:?} (apps)"
            ))
            .into());
        }
        let not_found = |kind: &str| Unresolved {
            reason: SCALABLE_REF_NOT_FOUND,
            message: format!("{kind} {namespace}/{} (spec.scalableRef) not found", r.name),
        };
        let read = |e: kube::Error, kind: &str| {
            if crate::nodeclaim::error::is_not_found(&e) {
                ShapeError::Failed(not_found(kind))
            } else {
                ShapeError::Unreadable(format!(
                    "{kind} {namespace}/{} (spec.scalableRef) cannot be read: {e}",
                    r.name
                ))
            }
        };
        let (template, replicas): (PodTemplateSpec, Option<i32>) = match r.kind.as_str() {
            "Deployment" => {
                let d = Api::<Deployment>::namespaced(self.client.clone(), &namespace)
                    .get(&r.name)
                    .await
                    .map_err(|e| read(e, "Deployment"))?;
                let s = d.spec.unwrap_or_default();
                (s.template, s.replicas)
            }
            "StatefulSet" => {
                let d = Api::<StatefulSet>::namespaced(self.client.clone(), &namespace)
                    .get(&r.name)
                    .await
                    .map_err(|e| read(e, "StatefulSet"))?;
                let s = d.spec.unwrap_or_default();
                (s.template, s.replicas)
            }
            "ReplicaSet" => {
                let d = Api::<ReplicaSet>::namespaced(self.client.clone(), &namespace)
                    .get(&r.name)
                    .await
                    .map_err(|e| read(e, "ReplicaSet"))?;
                let s = d.spec.unwrap_or_default();
                (s.template.unwrap_or_default(), s.replicas)
            }
            other => {
                return Err(failed(format!(
                    "spec.scalableRef.kind: unsupported kind {other:?} (Deployment, StatefulSet, ReplicaSet)"
                ))
                .into());
            }
        };
        Ok(Shape {
            template,
            pod_template: None,
            workload_replicas: Some(replicas.unwrap_or(1)),
        })
    }

    async fn write_status(
        &self,
        buffer: &CapacityBuffer,
        resolution: &Resolution,
        placement: Option<state::buffers::Placement>,
        now: Timestamp,
    ) -> Result<(), kube::Error> {
        let (status, changed) = resolve::status(buffer, resolution, placement, now);
        if !changed {
            return Ok(());
        }
        let was_false = ready_false(buffer.status.as_ref());
        let patch = json!({
            "metadata": {"resourceVersion": buffer.metadata.resource_version},
            "status": status,
        });
        Api::<CapacityBuffer>::namespaced(
            self.client.clone(),
            &buffer.namespace().unwrap_or_default(),
        )
        .patch_status(
            &buffer.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
        if let Resolution::Failed(why) = resolution
            && !was_false
        {
            self.events
                .publish(buffer, Message::warning(why.reason, why.message.clone()));
        }
        Ok(())
    }
}

/// The field a buffer's chunk shape comes from, for messages.
fn source_field(buffer: &CapacityBuffer) -> String {
    match (&buffer.spec.pod_template_ref, &buffer.spec.scalable_ref) {
        (Some(r), _) => format!("spec.podTemplateRef ({})", r.name),
        (None, Some(r)) => format!("spec.scalableRef ({} {})", r.kind, r.name),
        (None, None) => "spec".to_owned(),
    }
}

fn ready_false(status: Option<&api::CapacityBufferStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == READY_FOR_PROVISIONING))
        .is_some_and(|c| c.status == ConditionStatus::False)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
