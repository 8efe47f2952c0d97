//! The world's Cluster API client: MachineDeployments, MachineSets and Machines read and
//! written as `cluster.x-k8s.io/v1beta2` JSON, whichever version the management cluster serves.
//!
//! Responsibility: find out once, by discovery, whether the management cluster serves
//! `v1beta2`. If it does (CAPI v1.11+, or v1beta2 alone on a real kube-apiserver), every call
//! goes straight to it. If it serves `v1beta1` alone (CAPI ≤ v1.10), objects listed or read are
//! converted up to v1beta2 ([`sim::convert::capi`]), creates are converted down whole, and a
//! patch is sent as the merge patch between the v1beta1 forms of the object before and after
//! it (its `resourceVersion` precondition kept); a v1beta2 reference going down gets the
//! `apiVersion` last seen on a v1beta1 reference to its group and kind (`<group>/v1beta1` if
//! none was seen, `v1` for the core group). So the controllers speak v1beta2 only.
//! Inputs: a management client. Outputs: v1beta2 JSON; API requests.

use std::collections::BTreeMap;
use std::sync::Mutex;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::WorldError;
use crate::objects::{capi_resource, code, ignore_not_found, list_json, merge_diff};
use sim::convert::capi::{self, CapiKind, CapiVersion, GROUP};
use sim::object;

/// The management cluster's Cluster API, as v1beta2 JSON.
pub struct Capi {
    client: kube::Client,
    served: OnceCell<CapiVersion>,
    /// `(group, kind)` → `apiVersion` of the references on the v1beta1 objects read.
    ref_versions: Mutex<BTreeMap<(String, String), String>>,
}

impl std::fmt::Debug for Capi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capi")
            .field("served", &self.served.get())
            .finish_non_exhaustive()
    }
}

/// The version the world talks to a management cluster: `v1beta2` if served, else `v1beta1`.
pub async fn served_version(client: &kube::Client) -> Result<CapiVersion, WorldError> {
    let groups = client.list_api_groups().await?;
    let served: Vec<CapiVersion> = groups
        .groups
        .iter()
        .filter(|g| g.name == GROUP)
        .flat_map(|g| &g.versions)
        .filter_map(|v| CapiVersion::parse(&v.version))
        .collect();
    served
        .iter()
        .copied()
        .max()
        .ok_or(WorldError::CapiNotServed)
}

/// Every reference of a v1beta1 object: `(group, kind)` → `apiVersion`.
fn references(kind: CapiKind, obj: &Value) -> Vec<((String, String), String)> {
    let spec = if kind == CapiKind::Machine {
        "/spec"
    } else {
        "/spec/template/spec"
    };
    ["/infrastructureRef", "/bootstrap/configRef"]
        .iter()
        .filter_map(|r| {
            let r = obj.pointer(&format!("{spec}{r}"))?;
            let api_version = r.get("apiVersion")?.as_str()?;
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let kind = r.get("kind")?.as_str()?;
            Some(((group.to_owned(), kind.to_owned()), api_version.to_owned()))
        })
        .collect()
}

impl Capi {
    /// Over a management cluster.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            served: OnceCell::new(),
            ref_versions: Mutex::default(),
        }
    }

    /// The management client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The version the world talks ([`served_version`], asked once).
    pub async fn version(&self) -> Result<CapiVersion, WorldError> {
        self.served
            .get_or_try_init(|| served_version(&self.client))
            .await
            .copied()
    }

    /// The resource of `kind` in the version the world talks.
    pub async fn resource(&self, kind: CapiKind) -> Result<ApiResource, WorldError> {
        Ok(capi_resource(kind, self.version().await?))
    }

    async fn api(&self, kind: CapiKind, ns: &str) -> Result<Api<DynamicObject>, WorldError> {
        Ok(Api::namespaced_with(
            self.client.clone(),
            ns,
            &self.resource(kind).await?,
        ))
    }

    fn versions(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), String>> {
        self.ref_versions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// An object as read in `version`, as v1beta2.
    fn up(&self, kind: CapiKind, version: CapiVersion, obj: Value) -> Value {
        if version == CapiVersion::V1beta2 {
            return obj;
        }
        self.versions().extend(references(kind, &obj));
        capi::to_v1beta2(kind, obj)
    }

    /// A v1beta2 object as v1beta1.
    fn down(&self, kind: CapiKind, obj: Value) -> Value {
        let versions = self.versions().clone();
        let api_version_of = |group: &str, kind: &str| {
            versions
                .get(&(group.to_owned(), kind.to_owned()))
                .cloned()
                .unwrap_or_else(|| {
                    if group.is_empty() {
                        "v1".to_owned()
                    } else {
                        format!("{group}/v1beta1")
                    }
                })
        };
        capi::to_v1beta1(kind, obj, &api_version_of)
    }

    /// Every object of `kind`, all namespaces.
    pub async fn list(&self, kind: CapiKind) -> Result<Vec<Value>, WorldError> {
        let version = self.version().await?;
        let items = list_json(&self.client, &capi_resource(kind, version)).await?;
        Ok(items
            .into_iter()
            .map(|i| self.up(kind, version, i))
            .collect())
    }

    /// One object, `None` if it does not exist.
    pub async fn get(
        &self,
        kind: CapiKind,
        ns: &str,
        name: &str,
    ) -> Result<Option<Value>, WorldError> {
        let version = self.version().await?;
        match self.api(kind, ns).await?.get(name).await {
            Ok(o) => Ok(Some(self.up(kind, version, serde_json::to_value(o)?))),
            Err(e) if code(&e) == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Create a v1beta2 object (in its namespace).
    pub async fn create(&self, kind: CapiKind, obj: Value) -> Result<(), WorldError> {
        let ns = object::namespace(&obj).to_owned();
        let obj = match self.version().await? {
            CapiVersion::V1beta2 => obj,
            CapiVersion::V1beta1 => self.down(kind, obj),
        };
        let obj: DynamicObject = serde_json::from_value(obj)?;
        self.api(kind, &ns)
            .await?
            .create(&PostParams::default(), &obj)
            .await?;
        Ok(())
    }

    /// The merge patch to send for a v1beta2 merge patch of `current`.
    async fn patch_for(
        &self,
        kind: CapiKind,
        current: &Value,
        patch: &Value,
    ) -> Result<Value, WorldError> {
        if self.version().await? == CapiVersion::V1beta2 {
            return Ok(patch.clone());
        }
        let mut desired = current.clone();
        json_patch::merge(&mut desired, patch);
        let before = self.down(kind, current.clone());
        let after = self.down(kind, desired);
        let mut sent = merge_diff(&before, &after).unwrap_or_else(|| serde_json::json!({}));
        if let Some(rv) = patch.pointer("/metadata/resourceVersion") {
            object::set_path(&mut sent, ".metadata.resourceVersion", rv.clone());
        }
        Ok(sent)
    }

    /// Merge-patch `current` (v1beta2, as read) with a v1beta2 patch.
    pub async fn patch(
        &self,
        kind: CapiKind,
        current: &Value,
        patch: &Value,
    ) -> Result<(), WorldError> {
        let sent = self.patch_for(kind, current, patch).await?;
        self.api(kind, object::namespace(current))
            .await?
            .patch(
                object::name(current),
                &PatchParams::default(),
                &Patch::Merge(&sent),
            )
            .await?;
        Ok(())
    }

    /// Merge-patch the `status` subresource of `current` with `desired` (an object of status
    /// fields) unless every one of those fields already has that value.
    pub async fn patch_status_if_changed(
        &self,
        kind: CapiKind,
        current: &Value,
        desired: Value,
    ) -> Result<(), WorldError> {
        if !crate::objects::status_changed(current, &desired) {
            return Ok(());
        }
        let patch = serde_json::json!({"status": desired});
        let sent = self.patch_for(kind, current, &patch).await?;
        self.api(kind, object::namespace(current))
            .await?
            .patch_status(
                object::name(current),
                &PatchParams::default(),
                &Patch::Merge(&sent),
            )
            .await?;
        Ok(())
    }

    /// Delete an object (gone already is fine).
    pub async fn delete(&self, kind: CapiKind, ns: &str, name: &str) -> Result<(), WorldError> {
        ignore_not_found(
            self.api(kind, ns)
                .await?
                .delete(name, &DeleteParams::default())
                .await,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_of_v1beta1_objects_are_remembered_by_group_and_kind() {
        let md = json!({"spec": {"template": {"spec": {
            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "DockerMachineTemplate", "name": "t"},
            "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2",
                "kind": "KubeadmConfigTemplate", "name": "b"}}}}}});
        let refs = references(CapiKind::MachineDeployment, &md);
        assert_eq!(
            refs,
            [
                (
                    (
                        "infrastructure.cluster.x-k8s.io".to_owned(),
                        "DockerMachineTemplate".to_owned()
                    ),
                    "infrastructure.cluster.x-k8s.io/v1beta1".to_owned()
                ),
                (
                    (
                        "bootstrap.cluster.x-k8s.io".to_owned(),
                        "KubeadmConfigTemplate".to_owned()
                    ),
                    "bootstrap.cluster.x-k8s.io/v1beta2".to_owned()
                ),
            ]
        );
        assert!(references(CapiKind::Machine, &md).is_empty());
    }
}
