//! MachineHealthChecks over our Machines: node repair leaves a Machine to the
//! MachineHealthCheck that targets it, so no Machine is remediated twice.
//!
//! Responsibility: [`targets`] (pure) is Cluster API's choice of an MHC's targets: a Machine
//! in the MHC's namespace, of the MHC's `spec.clusterName` (the Machine's `spec.clusterName`,
//! else its `cluster.x-k8s.io/cluster-name` label), whose labels `spec.selector` matches, and
//! which carries neither `cluster.x-k8s.io/skip-remediation` nor `cluster.x-k8s.io/paused`
//! (Cluster API drops those from the targets). The fields read are the same in `v1beta1` and
//! `v1beta2`. [`ClusterApiProvider::health_check_of`] lists the MHCs of the Machine's
//! namespace when node repair asks (rarely: only for a node already past its toleration).
//! A Machine already being deleted (by a MachineHealthCheck's remediation, a rollout, a
//! scale-down) is reported as remediated by that deletion.
//! Inputs: the NodeClaim's Machine; MachineHealthChecks (management cluster). Outputs: the
//! MHC that remediates the Machine, if any.

use api::well_known::capi::{CLUSTER_NAME, MACHINE_HEALTH_CHECK, PAUSED, SKIP_REMEDIATION};
use api::{Machine, NodeClaim};
use cloudprovider::CloudProviderError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};

use super::{ClusterApiProvider, annotation, status_code, transient};
use crate::selection::Selector;

/// Why an MHC cannot be matched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MachineHealthCheck {name}: {why}")]
pub struct HealthCheckError {
    /// `namespace/name`.
    pub name: String,
    /// What is wrong.
    pub why: String,
}

/// Whether the MachineHealthCheck `mhc` targets `machine`.
///
/// # Errors
/// When its selector is invalid (Cluster API's webhook refuses those; one that got in cannot
/// be told to cover or not).
pub fn targets(mhc: &DynamicObject, machine: &Machine) -> Result<bool, HealthCheckError> {
    let name = format!(
        "{}/{}",
        mhc.metadata.namespace.as_deref().unwrap_or_default(),
        mhc.metadata.name.as_deref().unwrap_or_default()
    );
    if mhc.metadata.namespace != machine.metadata.namespace {
        return Ok(false);
    }
    if annotation(&machine.metadata, SKIP_REMEDIATION).is_some()
        || annotation(&machine.metadata, PAUSED).is_some()
    {
        return Ok(false);
    }
    let spec = mhc.data.get("spec");
    let cluster = spec
        .and_then(|s| s.get("clusterName"))
        .and_then(|v| v.as_str())
        .unwrap_or_default();
    let machine_cluster = Some(machine.spec.fields.cluster_name.as_str())
        .filter(|c| !c.is_empty())
        .or_else(|| {
            machine
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(CLUSTER_NAME))
                .map(String::as_str)
        })
        .unwrap_or_default();
    if cluster != machine_cluster {
        return Ok(false);
    }
    let selector: LabelSelector = match spec.and_then(|s| s.get("selector")) {
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| HealthCheckError {
            name: name.clone(),
            why: format!("spec.selector: {e}"),
        })?,
        None => LabelSelector::default(),
    };
    let selector = Selector::new(&selector).map_err(|e| HealthCheckError {
        name,
        why: format!("spec.selector: {e}"),
    })?;
    Ok(selector.matches(machine.metadata.labels.as_ref()))
}

impl ClusterApiProvider {
    fn health_checks_api(&self, namespace: &str) -> Api<DynamicObject> {
        let capi = &self.config.capi;
        let resource = ApiResource {
            group: capi.group().to_owned(),
            version: capi.version().to_owned(),
            api_version: capi.api_version(),
            kind: MACHINE_HEALTH_CHECK.to_owned(),
            plural: "machinehealthchecks".to_owned(),
        };
        Api::namespaced_with(self.management.clone(), namespace, &resource)
    }

    /// The MachineHealthCheck (`MachineHealthCheck namespace/name`) that remediates the
    /// Machine of `node_claim`, if any. No Machine, or no MachineHealthCheck kind served: none.
    ///
    /// # Errors
    /// Transient when the list fails or an MHC's selector is invalid: node repair then leaves
    /// the node alone rather than risk remediating it twice.
    pub(super) async fn health_check_of(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let Some(machine) = self.find_machine(node_claim).await? else {
            return Ok(None);
        };
        let namespace = machine.metadata.namespace.clone().unwrap_or_default();
        if machine.metadata.deletion_timestamp.is_some() {
            // Its owner removes it already (a MachineHealthCheck's remediation, a rollout, a
            // scale-down): repairing it too would remediate it twice.
            return Ok(Some(format!(
                "the deletion of Machine {namespace}/{} already under way",
                machine.metadata.name.as_deref().unwrap_or_default()
            )));
        }
        let list = match self
            .health_checks_api(&namespace)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list,
            Err(e) if status_code(&e) == Some(404) => return Ok(None),
            Err(e) => return Err(transient("list MachineHealthChecks", e)),
        };
        let mut names: Vec<String> = Vec::new();
        for mhc in &list.items {
            if targets(mhc, &machine).map_err(|e| transient("match MachineHealthCheck", e))? {
                names.push(format!(
                    "{MACHINE_HEALTH_CHECK} {namespace}/{}",
                    mhc.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
        names.sort();
        Ok(names.into_iter().next())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn mhc(namespace: &str, cluster: &str, selector: serde_json::Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "MachineHealthCheck",
            "metadata": {"name": "workers", "namespace": namespace},
            "spec": {"clusterName": cluster, "selector": selector,
                "checks": {"unhealthyNodeConditions": [
                    {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300}]}}
        }))
        .unwrap()
    }

    fn machine(annotations: serde_json::Value) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Machine",
            "metadata": {"name": "m", "namespace": "capi",
                "labels": {"cluster.x-k8s.io/cluster-name": "prod",
                    "cluster.x-k8s.io/deployment-name": "workers", "pool": "a"},
                "annotations": annotations},
            "spec": {"clusterName": "prod", "bootstrap": {}, "infrastructureRef":
                {"kind": "DockerMachine", "name": "m", "apiGroup": "x"}}
        }))
        .unwrap()
    }

    #[test]
    fn a_matching_health_check_targets_the_machine() {
        let m = machine(json!({}));
        let sel = json!({"matchLabels": {"cluster.x-k8s.io/deployment-name": "workers"}});
        assert!(targets(&mhc("capi", "prod", sel.clone()), &m).unwrap());
        let expr =
            json!({"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]});
        assert!(targets(&mhc("capi", "prod", expr), &m).unwrap());
    }

    #[test]
    fn other_namespaces_clusters_and_selectors_do_not() {
        let m = machine(json!({}));
        let sel = json!({"matchLabels": {"cluster.x-k8s.io/deployment-name": "workers"}});
        assert!(!targets(&mhc("other", "prod", sel.clone()), &m).unwrap());
        assert!(!targets(&mhc("capi", "staging", sel), &m).unwrap());
        let other = json!({"matchLabels": {"cluster.x-k8s.io/deployment-name": "gpu"}});
        assert!(!targets(&mhc("capi", "prod", other), &m).unwrap());
    }

    #[test]
    fn skip_remediation_and_paused_machines_are_not_targets() {
        let sel = json!({"matchLabels": {"pool": "a"}});
        for key in [SKIP_REMEDIATION, PAUSED] {
            let m = machine(json!({key: ""}));
            assert!(
                !targets(&mhc("capi", "prod", sel.clone()), &m).unwrap(),
                "{key}"
            );
        }
    }

    #[test]
    fn an_invalid_selector_is_an_error_naming_the_health_check() {
        let m = machine(json!({}));
        let bad = json!({"matchExpressions": [{"key": "pool", "operator": "In"}]});
        let e = targets(&mhc("capi", "prod", bad), &m).unwrap_err();
        assert_eq!(e.name, "capi/workers");
        assert!(e.why.contains("spec.selector"), "{e}");
    }
}
