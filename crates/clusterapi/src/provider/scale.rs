//! Replica writes: every change of a MachineDeployment's `spec.replicas` together with this
//! cluster's ownership record, in one compare-and-set write.
//!
//! Responsibility: read the MachineDeployment fresh, let the caller decide (from the object and
//! its [`Record`]) what to write, and write it as one JSON merge patch carrying the
//! resourceVersion it was decided on — `spec.replicas` and the record annotation together, so
//! they can never disagree after a crash. A 409 means someone else wrote in between: read again
//! and decide again, a bounded number of times with an exponential backoff ([`Attempts`]:
//! 8 attempts, 100 ms doubling to 3.2 s). The size annotations are read here too; a malformed
//! min or max size is an error naming the annotation, never read as 0 or as no limit.
//! Inputs: a MachineDeployment reference, the cluster identity, a decision function.
//! Outputs: the decision's value, or a typed error (Transient after too many conflicts).

use std::time::Duration;

use api::MachineDeployment;
use api::well_known::capi::{MAX_SIZE, MIN_SIZE};
use cloudprovider::CloudProviderError;
use serde_json::{Map, Value, json};

use crate::annotations::parse_size;
use crate::instance_types::MachineDeploymentRef;

use super::ownership::{Record, record_key};
use super::{ClusterApiProvider, annotation, status_code, transient};

/// What to write back; `None` fields stay as they are.
#[derive(Debug, Default)]
pub(super) struct MdWrite {
    /// The new `spec.replicas`.
    pub replicas: Option<i32>,
    /// The new record.
    pub record: Option<Record>,
}

/// Attempts of a compare-and-set loop before giving up (Transient).
const ATTEMPTS: u32 = 8;
/// The first delay between attempts; it doubles up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest delay between attempts (the whole loop waits at most about 10 s).
const MAX_DELAY: Duration = Duration::from_millis(3200);

/// The attempts of one compare-and-set loop: [`ATTEMPTS`] at most, with an exponential
/// backoff between them, so a conflict storm (another writer, the MachineDeployment
/// controller's status writes) is not answered with a storm of retries.
#[derive(Debug, Default)]
pub(super) struct Attempts {
    made: u32,
}

impl Attempts {
    /// Whether another attempt may be made; waits the backoff before every attempt but the
    /// first.
    pub(super) async fn next(&mut self) -> bool {
        if self.made >= ATTEMPTS {
            return false;
        }
        if self.made > 0 {
            let delay = FIRST_DELAY
                .saturating_mul(1 << (self.made - 1).min(16))
                .min(MAX_DELAY);
            tokio::time::sleep(delay).await;
        }
        self.made += 1;
        true
    }
}

/// `md`'s max-size annotation.
pub(super) fn max_size(md: &MachineDeployment) -> Result<Option<i32>, CloudProviderError> {
    size(md, MAX_SIZE)
}

/// `md`'s min-size annotation (absent: 0). Malformed is an error, as for the max size: a
/// removal never guesses the user's floor.
pub(super) fn min_size(md: &MachineDeployment) -> Result<i32, CloudProviderError> {
    Ok(size(md, MIN_SIZE)?.unwrap_or(0).max(0))
}

fn size(md: &MachineDeployment, key: &'static str) -> Result<Option<i32>, CloudProviderError> {
    parse_size(key, annotation(&md.metadata, key)).map_err(|e| {
        CloudProviderError::Transient(format!("{:#}: {e}", MachineDeploymentRef::of(md)))
    })
}

impl ClusterApiProvider {
    /// `md` and `cluster`'s record on it, read fresh.
    pub(super) async fn read_md(
        &self,
        md: &MachineDeploymentRef,
        cluster: &str,
    ) -> Result<(MachineDeployment, Record), CloudProviderError> {
        let current = self.read_group(md).await?.ok_or_else(|| {
            CloudProviderError::Transient(format!("{md:#} is gone (or no longer stand-alone)"))
        })?;
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
        match self.patch_group(&md, &Value::Object(patch)).await {
            Ok(()) => Ok(true),
            Err(e) if status_code(&e) == Some(409) => Ok(false),
            Err(e) => Err(transient(&format!("write {md:#} replicas"), e)),
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
        let mut attempts = Attempts::default();
        while attempts.next().await {
            let (current, record) = self.read_md(md, cluster).await?;
            let (write, out) = decide(&current, &record)?;
            if self.write_md(&current, cluster, &write).await? {
                return Ok(out);
            }
        }
        Err(too_many_conflicts(md))
    }
}

/// The error after [`ATTEMPTS`] conflicts in a row.
pub(super) fn too_many_conflicts(md: &MachineDeploymentRef) -> CloudProviderError {
    CloudProviderError::Transient(format!("{md:#}: too many conflicts writing replicas"))
}
