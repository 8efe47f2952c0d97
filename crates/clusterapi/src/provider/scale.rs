//! Replica writes: every change of a MachineDeployment's `spec.replicas` together with this
//! cluster's ownership record, in one compare-and-set write.
//!
//! Responsibility: read the MachineDeployment fresh, let the caller decide (from the object and
//! its [`Record`]) what to write, and write it as one JSON merge patch carrying the
//! resourceVersion it was decided on — `spec.replicas` and the record annotation together, so
//! they can never disagree after a crash. A 409 means someone else wrote in between: read again
//! and decide again, a bounded number of times. The size annotations are read here too.
//! Inputs: a MachineDeployment reference, the cluster identity, a decision function.
//! Outputs: the decision's value, or a typed error (Transient after too many conflicts).

use api::MachineDeployment;
use api::well_known::capi::{MAX_SIZE, MIN_SIZE};
use cloudprovider::CloudProviderError;
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};

use crate::annotations::parse_size;
use crate::instance_types::MachineDeploymentRef;

use super::ownership::{Record, record_key};
use super::{ClusterApiProvider, SCALE_ATTEMPTS, annotation, status_code, transient};

/// What to write back; `None` fields stay as they are.
#[derive(Debug, Default)]
pub(super) struct MdWrite {
    /// The new `spec.replicas`.
    pub replicas: Option<i32>,
    /// The new record.
    pub record: Option<Record>,
}

/// `md`'s max-size annotation.
pub(super) fn max_size(md: &MachineDeployment) -> Result<Option<i32>, CloudProviderError> {
    parse_size(MAX_SIZE, annotation(&md.metadata, MAX_SIZE))
        .map_err(|e| CloudProviderError::Transient(format!("MachineDeployment: {e}")))
}

/// `md`'s min-size annotation (absent or invalid: 0).
pub(super) fn min_size(md: &MachineDeployment) -> i32 {
    parse_size(MIN_SIZE, annotation(&md.metadata, MIN_SIZE))
        .ok()
        .flatten()
        .unwrap_or(0)
        .max(0)
}

impl ClusterApiProvider {
    /// `md` and `cluster`'s record on it, read fresh.
    pub(super) async fn read_md(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
    ) -> Result<(MachineDeployment, Record), CloudProviderError> {
        let current = self
            .mds_api(&md.namespace)
            .get(&md.name)
            .await
            .map_err(|e| transient("get MachineDeployment", e))?;
        let record = Record::of(&current, cluster)
            .map_err(|e| CloudProviderError::Transient(e.to_string()))?;
        Ok((current, record))
    }

    /// Apply `write` to `current` (as read) with its resourceVersion as precondition; `false`
    /// when someone else wrote in between (409: read again and decide again).
    pub(super) async fn write_md(
        &self,
        current: &MachineDeployment,
        cluster: &str,
        write: &MdWrite,
    ) -> Result<bool, CloudProviderError> {
        if write.replicas.is_none() && write.record.is_none() {
            return Ok(true);
        }
        let md = MachineDeploymentRef::of(current);
        let mut metadata = Map::new();
        metadata.insert(
            "resourceVersion".into(),
            json!(current.metadata.resource_version),
        );
        if let Some(record) = &write.record {
            metadata.insert(
                "annotations".into(),
                json!({record_key(cluster): record.to_annotation()}),
            );
        }
        let mut patch = Map::new();
        patch.insert("metadata".into(), Value::Object(metadata));
        if let Some(replicas) = write.replicas {
            patch.insert("spec".into(), json!({"replicas": replicas}));
        }
        match self
            .mds_api(&md.namespace)
            .patch(
                &md.name,
                &PatchParams::default(),
                &Patch::Merge(Value::Object(patch)),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if status_code(&e) == Some(409) => Ok(false),
            Err(e) => Err(transient("write MachineDeployment replicas", e)),
        }
    }

    /// Read `md` and `cluster`'s record fresh, let `decide` choose a write, and apply it with
    /// the resourceVersion precondition; on 409 start over (bounded).
    pub(super) async fn update_md<T>(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
        mut decide: impl FnMut(&MachineDeployment, &Record) -> Result<(MdWrite, T), CloudProviderError>,
    ) -> Result<T, CloudProviderError> {
        for _ in 0..SCALE_ATTEMPTS {
            let (current, record) = self.read_md(md, cluster).await?;
            let (write, out) = decide(&current, &record)?;
            if self.write_md(&current, cluster, &write).await? {
                return Ok(out);
            }
        }
        Err(too_many_conflicts(md))
    }
}

/// The error after [`SCALE_ATTEMPTS`] conflicts in a row.
pub(super) fn too_many_conflicts(md: &MachineDeploymentRef) -> CloudProviderError {
    CloudProviderError::Transient(format!(
        "MachineDeployment {md}: too many conflicts writing replicas"
    ))
}
