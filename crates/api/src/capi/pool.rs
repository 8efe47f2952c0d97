//! The read-only view of a Cluster API MachinePool, in either shape (`v1beta2`, deprecated
//! `v1beta1`), and its node-group view ([`MachineDeployment::from_machine_pool`]).
//!
//! Responsibility: the fields karpenter-capi reads from a MachinePool — replicas, the Machine
//! template (whose `infrastructureRef` names the *InfraMachinePool*, not a template), the
//! failure domains (a list, unlike a MachineDeployment's single template field), and the
//! replica counters and conditions of both versions: `upToDateReplicas` is top-level in
//! v1beta2 and under `status.v1beta2` in v1beta1 ([`MachinePoolStatus::up_to_date_replicas`]).
//! A MachinePool has no label selector: its Machines ("MachinePool Machines", made by Cluster
//! API only when the infrastructure provider supports them) carry the
//! [`crate::well_known::capi::POOL_NAME`] label and a MachinePool owner reference.
//! Inputs: JSON. Outputs: typed objects. Never serialize one and write it back.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};

use super::types::{
    CapiCondition, DeprecatedConditions, GroupKind, MachineDeployment, MachineDeploymentRollout,
    MachineDeploymentSpec, MachineDeploymentStatus, MachineDeploymentStrategy, MachineTemplateSpec,
};

/// A MachinePool: a group of identical instances the infrastructure provider scales itself
/// (a cloud's scale set or managed node group).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachinePool {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: MachinePoolSpec,
    /// The observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MachinePoolStatus>,
}

/// The desired state of a MachinePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    /// The owning Cluster's name.
    #[serde(default)]
    pub cluster_name: String,
    /// Desired instance count; unset until Cluster API's webhook defaults it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The template: its `spec.infrastructureRef` is the InfraMachinePool.
    #[serde(default)]
    pub template: MachineTemplateSpec,
    /// The failure domains the provider spreads instances over (empty: its choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<Vec<String>>,
    /// The instances' provider IDs, as the infrastructure provider reports them.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "providerIDList"
    )]
    pub provider_id_list: Option<Vec<String>>,
}

/// v1beta1 `status.v1beta2` of a MachinePool: the v1beta2 fields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolV1beta2Status {
    /// The v1beta2 conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// Instances at the current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// Ready instances (v1beta2 semantics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
}

/// Observed state of a MachinePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    /// Instances that exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Instances whose Node is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Instances that are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// v1beta2: instances at the current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// Phase, e.g. `Running`, `ScalingUp`, `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The generation Cluster API last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions: v1beta2's in v1beta2, v1beta1's in v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<CapiCondition>>,
    /// v1beta1 only: the v1beta2 fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<MachinePoolV1beta2Status>,
    /// v1beta2 only: the v1beta1 conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedConditions>,
}

impl MachinePoolStatus {
    /// Instances at the current template, in either version (`None`: not reported).
    #[must_use]
    pub fn up_to_date_replicas(&self) -> Option<i32> {
        self.up_to_date_replicas
            .or_else(|| self.v1beta2.as_ref()?.up_to_date_replicas)
    }

    /// The v1beta2 conditions, in either version.
    fn v1beta2_conditions(&self) -> Option<Vec<CapiCondition>> {
        match &self.v1beta2 {
            Some(v) => v.conditions.clone(),
            None => self.conditions.clone(),
        }
    }
}

impl MachinePool {
    /// The failure domain every instance lands in: the template's, else the only one listed
    /// (`None`: none, or several — the provider picks among them per instance).
    #[must_use]
    pub fn single_failure_domain(&self) -> Option<&str> {
        if let Some(fd) = self.spec.template.spec.failure_domain.as_deref() {
            return Some(fd);
        }
        match self.spec.failure_domains.as_deref() {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// Whether the pool lists more than one failure domain (and the template names none), so
    /// which zone a new instance lands in is the provider's choice.
    #[must_use]
    pub fn spans_failure_domains(&self) -> bool {
        self.spec.template.spec.failure_domain.is_none()
            && self
                .spec
                .failure_domains
                .as_ref()
                .is_some_and(|f| f.len() > 1)
    }
}

impl MachineDeployment {
    /// A MachinePool as a node group. The view's selector is the pool-name label its
    /// MachinePool Machines carry; its zone is [`MachinePool::single_failure_domain`]; its
    /// rollout strategy `RollingUpdate` (the infrastructure provider replaces outdated
    /// instances itself); no deletion order (the provider's).
    #[must_use]
    pub fn from_machine_pool(mp: &MachinePool) -> Self {
        let mut template = mp.spec.template.clone();
        template.spec.failure_domain = mp.single_failure_domain().map(str::to_owned);
        let name = mp.metadata.name.clone().unwrap_or_default();
        let status = mp.status.as_ref().map(|s| MachineDeploymentStatus {
            replicas: s.replicas,
            ready_replicas: s.ready_replicas,
            available_replicas: s.available_replicas,
            selector: Some(format!("{}={name}", crate::well_known::capi::POOL_NAME)),
            phase: s.phase.clone(),
            observed_generation: s.observed_generation,
            conditions: s.v1beta2_conditions(),
            v1beta2: None,
        });
        Self {
            metadata: mp.metadata.clone(),
            spec: MachineDeploymentSpec {
                cluster_name: mp.spec.cluster_name.clone(),
                replicas: mp.spec.replicas,
                selector: LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        crate::well_known::capi::POOL_NAME.to_owned(),
                        name,
                    )])),
                    match_expressions: None,
                },
                template,
                paused: None,
                strategy: None,
                rollout: Some(MachineDeploymentRollout {
                    strategy: Some(MachineDeploymentStrategy {
                        type_: Some("RollingUpdate".to_owned()),
                    }),
                }),
                deletion: None,
            },
            status,
            group_kind: GroupKind::MachinePool,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1beta2() -> MachinePool {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "pool", "namespace": "capi"},
            "spec": {"clusterName": "c", "replicas": 3, "failureDomains": ["zone-a"],
                "template": {"spec": {"clusterName": "c", "version": "v1.33.0",
                    "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachinePool", "name": "pool"}}}},
            "status": {"replicas": 3, "readyReplicas": 2, "upToDateReplicas": 2,
                "conditions": [{"type": "ScalingUp", "status": "False"}],
                "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "True"}]}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_pool_reads_the_same_in_both_versions() {
        let v2 = v1beta2();
        let v1: MachinePool = serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachinePool",
            "metadata": {"name": "pool", "namespace": "capi"},
            "spec": {"clusterName": "c", "replicas": 3, "failureDomains": ["zone-a"],
                "minReadySeconds": 5,
                "template": {"spec": {"clusterName": "c", "version": "v1.33.0",
                    "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                        "kind": "DockerMachinePool", "name": "pool", "namespace": "capi"}}}},
            "status": {"replicas": 3, "readyReplicas": 2,
                "conditions": [{"type": "Ready", "status": "True"}],
                "v1beta2": {"upToDateReplicas": 2, "readyReplicas": 2,
                    "conditions": [{"type": "ScalingUp", "status": "False"}]}}
        }))
        .unwrap();
        for mp in [&v2, &v1] {
            let s = mp.status.as_ref().unwrap();
            assert_eq!(s.up_to_date_replicas(), Some(2));
            assert_eq!(mp.single_failure_domain(), Some("zone-a"));
            let view = MachineDeployment::from_machine_pool(mp);
            assert_eq!(view.group_kind, GroupKind::MachinePool);
            assert_eq!(view.spec.replicas, Some(3));
            assert_eq!(
                view.spec.template.spec.failure_domain.as_deref(),
                Some("zone-a")
            );
            assert_eq!(
                view.spec.template.spec.infrastructure_ref.kind.as_deref(),
                Some("DockerMachinePool")
            );
            assert!(!view.spec.is_on_delete());
            let status = view.status.unwrap();
            assert_eq!(
                status
                    .v1beta2_condition("ScalingUp")
                    .map(|c| c.status.as_str()),
                Some("False")
            );
            assert_eq!(
                status.selector.as_deref(),
                Some("cluster.x-k8s.io/pool-name=pool")
            );
        }
    }

    #[test]
    fn a_pool_over_several_failure_domains_has_no_single_zone() {
        let mut mp = v1beta2();
        mp.spec.failure_domains = Some(vec!["zone-a".into(), "zone-b".into()]);
        assert_eq!(mp.single_failure_domain(), None);
        assert!(mp.spans_failure_domains());
        assert_eq!(
            MachineDeployment::from_machine_pool(&mp)
                .spec
                .template
                .spec
                .failure_domain,
            None
        );
        mp.spec.template.spec.failure_domain = Some("zone-b".into());
        assert_eq!(mp.single_failure_domain(), Some("zone-b"));
        assert!(!mp.spans_failure_domains());
        mp.spec.template.spec.failure_domain = None;
        mp.spec.failure_domains = None;
        assert_eq!(mp.single_failure_domain(), None);
        assert!(!mp.spans_failure_domains());
    }
}
