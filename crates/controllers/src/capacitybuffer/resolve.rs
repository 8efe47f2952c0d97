//! What a CapacityBuffer asks for: its chunk shape, how many chunks, the virtual pods, and the
//! status that says so.
//!
//! Responsibility (pure, upstream Karpenter's rules):
//! - [`chunks`]: `replicas`, and `percentage` of the `scalableRef` workload's replicas
//!   (rounded up, at least 1), whichever is larger; `limits` bound that by
//!   `floor(limit / one chunk's requests)` over every resource both name (a limit on a
//!   resource the chunk does not request binds nothing). With neither `replicas` nor
//!   `percentage`, `limits` alone give the count; limits that name no requested resource are
//!   then an error (upstream silently makes 0 chunks);
//! - [`virtual_pods`]: `capacity-buffer-<name>-<i>` (UID `<buffer UID>-<i>`) in the buffer's
//!   namespace with the template's labels and spec, the `karpenter.sh/capacity-buffer-*`
//!   annotations, no node, the lowest priority, and neither PersistentVolumeClaim nor
//!   ephemeral volumes (nor their mounts): a placeholder never waits for storage;
//! - [`status`]: `ReadyForProvisioning`, `replicas`, `podTemplateRef`,
//!   `podTemplateGeneration`, `provisioningStrategy`, and `Provisioning` from the last
//!   provisioning pass's [`Placement`] — conditions set the way `meta.SetStatusCondition` does
//!   (the transition time moves only with the status).
//!
//! Inputs: the buffer, the resolved template. Outputs: counts, pods, statuses, errors.

use std::collections::BTreeMap;

use api::capacitybuffer::{ACTIVE_CAPACITY, CapacityBuffer, CapacityBufferStatus, LocalObjectRef};
use api::common::{Condition, ConditionStatus};
use api::well_known::capacity_buffer::reasons::{
    BUFFER_EMPTY, FITS_EXISTING_CAPACITY, NOT_READY_FOR_PROVISIONING, REQUIRES_NEW_CAPACITY,
    RESOLVED,
};
use api::well_known::capacity_buffer::{
    FAKE_POD, NAME, NAMESPACE, PROVISIONING, READY_FOR_PROVISIONING,
};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use scheduling::quantity::Quantity;
use scheduling::resources::{ResourceName, Resources};
use state::buffers::Placement;

/// The priority virtual pods carry (upstream's `math.MinInt32`).
pub const VIRTUAL_POD_PRIORITY: i32 = i32::MIN;

/// Why a buffer's chunks could not be resolved (`ReadyForProvisioning` False).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The condition's reason.
    pub reason: &'static str,
    /// What is wrong, naming the object and field.
    pub message: String,
}

/// The chunk shape of a buffer, as resolved from its reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// The pod template of one chunk.
    pub template: PodTemplateSpec,
    /// `podTemplateRef`: the PodTemplate's name and generation (both end up in the status).
    pub pod_template: Option<(String, Option<i64>)>,
    /// `scalableRef`: the workload's replicas.
    pub workload_replicas: Option<i32>,
}

/// How many chunks `buffer` asks for, one chunk requesting `requests`.
///
/// # Errors
/// A message naming the field when `limits` alone cannot bound anything, or a limit is not a
/// quantity.
pub fn chunks(
    buffer: &CapacityBuffer,
    workload_replicas: Option<i32>,
    requests: &Resources,
) -> Result<i32, String> {
    let spec = &buffer.spec;
    let by_percentage = match (
        spec.scalable_ref.as_ref(),
        spec.percentage,
        workload_replicas,
    ) {
        (Some(_), Some(pct), Some(r)) if r > 0 => {
            let n = (i64::from(r) * i64::from(pct.max(0)) + 99) / 100;
            Some(i32::try_from(n).unwrap_or(i32::MAX).max(1))
        }
        _ => None,
    };
    // Either field set makes a count (0 when the workload has no replicas yet).
    let desired = (spec.replicas.is_some() || spec.percentage.is_some()).then(|| {
        [spec.replicas.map(|r| r.max(0)), by_percentage]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(0)
    });
    let Some(limits) = spec.limits.as_ref().filter(|l| !l.is_empty()) else {
        return Ok(desired.unwrap_or(0));
    };
    let mut bound: Option<i64> = None;
    for (name, limit) in limits {
        let limit = Quantity::parse(&limit.0)
            .map_err(|e| format!("spec.limits.{name}: {:?} is not a quantity: {e}", limit.0))?;
        let Some(request) = requests
            .get(&ResourceName::new(name))
            .filter(|q| !q.is_zero())
        else {
            continue;
        };
        let fit = limit.as_nanos().max(0) / request.as_nanos().max(1);
        let fit = i64::try_from(fit).unwrap_or(i64::MAX);
        bound = Some(bound.map_or(fit, |b| b.min(fit)));
    }
    let bound = bound.map(|b| i32::try_from(b).unwrap_or(i32::MAX));
    match (desired, bound) {
        (Some(d), Some(b)) => Ok(d.min(b)),
        (Some(d), None) => Ok(d),
        (None, Some(b)) => Ok(b),
        (None, None) => Err(format!(
            "spec.limits names no resource the pod template requests ({}), and neither \
             spec.replicas nor spec.percentage is set",
            requests
                .names()
                .map(ResourceName::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The buffer's `namespace/name`.
#[must_use]
pub fn key(buffer: &CapacityBuffer) -> String {
    format!(
        "{}/{}",
        buffer.metadata.namespace.as_deref().unwrap_or_default(),
        buffer.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `count` virtual pods of `template` for `buffer`, created "at" `now`.
#[must_use]
pub fn virtual_pods(
    buffer: &CapacityBuffer,
    template: &PodTemplateSpec,
    count: i32,
    now: Timestamp,
) -> Vec<Pod> {
    let name = buffer.metadata.name.clone().unwrap_or_default();
    let namespace = buffer.metadata.namespace.clone().unwrap_or_default();
    let uid = buffer.metadata.uid.clone().unwrap_or_else(|| key(buffer));
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.node_name = None;
    spec.priority = Some(VIRTUAL_POD_PRIORITY);
    spec.priority_class_name = None;
    if let Some(volumes) = spec.volumes.as_mut() {
        let dropped: Vec<String> = volumes
            .iter()
            .filter(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
            .map(|v| v.name.clone())
            .collect();
        volumes.retain(|v| !dropped.contains(&v.name));
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            if let Some(mounts) = c.volume_mounts.as_mut() {
                mounts.retain(|m| !dropped.contains(&m.name));
            }
        }
    }
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .filter(|l| !l.is_empty());
    let annotations = BTreeMap::from([
        (FAKE_POD.to_owned(), "true".to_owned()),
        (NAME.to_owned(), name.clone()),
        (NAMESPACE.to_owned(), namespace.clone()),
    ]);
    (1..=count.max(0))
        .map(|i| Pod {
            metadata: ObjectMeta {
                name: Some(format!("capacity-buffer-{name}-{i}")),
                namespace: Some(namespace.clone()),
                uid: Some(format!("{uid}-{i}")),
                labels: labels.clone(),
                annotations: Some(annotations.clone()),
                creation_timestamp: Some(Time(now)),
                ..ObjectMeta::default()
            },
            spec: Some(spec.clone()),
            status: Some(PodStatus {
                phase: Some("Pending".into()),
                conditions: Some(vec![PodCondition {
                    type_: "PodScheduled".into(),
                    status: "False".into(),
                    reason: Some("Unschedulable".into()),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
        })
        .collect()
}

/// Whether `pod` is a CapacityBuffer's virtual pod.
#[must_use]
pub fn is_virtual(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(FAKE_POD))
        .is_some_and(|v| v == "true")
}

/// The buffer (`namespace/name`) a virtual pod stands for.
#[must_use]
pub fn buffer_of(pod: &Pod) -> Option<String> {
    let a = pod.metadata.annotations.as_ref()?;
    Some(format!("{}/{}", a.get(NAMESPACE)?, a.get(NAME)?))
}

/// What resolving a buffer gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// The shape and the number of chunks.
    Resolved {
        /// The chunk shape.
        shape: Box<Shape>,
        /// The number of chunks.
        replicas: i32,
    },
    /// Why not.
    Failed(Unresolved),
}

/// The status `buffer` gets from `resolution` and the last pass's `placement`, and whether it
/// differs from the one it has.
#[must_use]
pub fn status(
    buffer: &CapacityBuffer,
    resolution: &Resolution,
    placement: Option<Placement>,
    now: Timestamp,
) -> (CapacityBufferStatus, bool) {
    let old = buffer.status.clone().unwrap_or_default();
    let mut new = old.clone();
    let generation = buffer.metadata.generation;
    let mut conditions = old.conditions.clone().unwrap_or_default();
    new.provisioning_strategy = Some(
        buffer
            .spec
            .provisioning_strategy
            .clone()
            .unwrap_or_else(|| ACTIVE_CAPACITY.to_owned()),
    );
    let replicas = match resolution {
        Resolution::Resolved { shape, replicas } => {
            set(
                &mut conditions,
                READY_FOR_PROVISIONING,
                ConditionStatus::True,
                RESOLVED,
                "Pod template resolved successfully",
                generation,
                now,
            );
            new.replicas = Some(*replicas);
            match &shape.pod_template {
                Some((name, template_generation)) => {
                    new.pod_template_ref = Some(LocalObjectRef { name: name.clone() });
                    new.pod_template_generation = *template_generation;
                }
                None => {
                    new.pod_template_ref = None;
                    new.pod_template_generation = None;
                }
            }
            Some(*replicas)
        }
        Resolution::Failed(why) => {
            // The last good count stays (upstream keeps `status.replicas` on failure).
            set(
                &mut conditions,
                READY_FOR_PROVISIONING,
                ConditionStatus::False,
                why.reason,
                &why.message,
                generation,
                now,
            );
            None
        }
    };
    let provisioning = match (replicas, placement) {
        (None, _) => Some((
            ConditionStatus::False,
            NOT_READY_FOR_PROVISIONING,
            "Buffer is not ReadyForProvisioning".to_owned(),
        )),
        (Some(0), _) => Some((
            ConditionStatus::False,
            BUFFER_EMPTY,
            "Buffer has zero desired replicas".to_owned(),
        )),
        (Some(_), Some(p)) if p.new > 0 || p.failed > 0 => Some((
            ConditionStatus::False,
            REQUIRES_NEW_CAPACITY,
            format!(
                "{}/{} virtual pods required new capacity, {} failed",
                p.new + p.failed,
                p.desired,
                p.failed
            ),
        )),
        (Some(r), Some(p))
            if p.desired > 0 && usize::try_from(r).is_ok_and(|r| r == p.existing) =>
        {
            Some((
                ConditionStatus::True,
                FITS_EXISTING_CAPACITY,
                format!("All {} virtual pods fit on existing capacity", p.existing),
            ))
        }
        // Not placed yet with this count: the condition waits for a pass.
        _ => None,
    };
    if let Some((status, reason, message)) = provisioning {
        set(
            &mut conditions,
            PROVISIONING,
            status,
            reason,
            &message,
            generation,
            now,
        );
    }
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
    new.conditions = Some(conditions);
    let changed = new != old;
    (new, changed)
}

/// Sets a condition as `meta.SetStatusCondition` does: the transition time moves only when the
/// status does.
fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    if let Some(c) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if c.status != status {
            c.status = status;
            c.last_transition_time = Time(now);
        }
        reason.clone_into(&mut c.reason);
        message.clone_into(&mut c.message);
        c.observed_generation = generation;
        return;
    }
    conditions.push(Condition {
        last_transition_time: Time(now),
        message: message.to_owned(),
        observed_generation: generation,
        reason: reason.to_owned(),
        status,
        type_: type_.to_owned(),
    });
}

#[cfg(test)]
mod tests;
