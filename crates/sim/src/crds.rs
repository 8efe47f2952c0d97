//! CustomResourceDefinitions the simulated clusters need, and installing them.
//!
//! Responsibility: CRDs for the Cluster API kinds we simulate — MachineDeployment, MachineSet,
//! Machine and MachinePool (`cluster.x-k8s.io`) — with CAPI's names (short names `md`, `ms`,
//! `ma`, `mp`, category `cluster-api`), printer columns (per version, from CAPI v1.14's CRDs),
//! the `status` subresource and the `scale` subresource on MachineDeployments and MachineSets
//! (`.spec.replicas`, `.status.replicas`, `.status.selector`) and MachinePools (no selector
//! path, as CAPI's), and `spec`/`status` as
//! `x-kubernetes-preserve-unknown-fields: true` objects so nothing any client writes is pruned;
//! served as a management cluster of one CAPI release or another ([`CapiServing`]): v1.11+
//! (v1beta2 stored, v1beta1 served deprecated through CAPI's conversion webhook, which sim
//! stands in for — [`crate::convert::capi`]), v1beta2 alone (what a real kube-apiserver
//! without CAPI's webhook can serve), or ≤ v1.10 (v1beta1 alone). Installing those (or our
//! own Karpenter CRDs) through a client, waiting until each is Established.
//! Inputs: a kube client. Outputs: CRD objects in the cluster.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

mod columns;

use columns::{Column, columns};

use crate::convert::capi::{CapiKind, CapiVersion, GROUP};
use crate::object;
use crate::object::{code, condition_true};

/// Why installing CRDs failed.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// An API request failed.
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    /// An object could not be converted.
    #[error("cannot convert an object: {0}")]
    Json(#[from] serde_json::Error),
    /// A CRD did not become Established.
    #[error("the CustomResourceDefinition {0} did not become Established")]
    NotEstablished(String),
}

/// Which versions of the Cluster API kinds a management cluster serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapiServing {
    /// As CAPI v1.11–v1.14: `v1beta2` served and stored, `v1beta1` served (deprecated) and
    /// converted by CAPI's webhook (`spec.conversion.strategy: Webhook`). Only sim can serve
    /// these: it converts natively; a real kube-apiserver would call the webhook, which is not
    /// there.
    WithConversion,
    /// `v1beta2` alone, served and stored, no conversion: the closest a real kube-apiserver
    /// without CAPI's webhook comes to a v1.11+ management cluster.
    V1beta2Only,
    /// `v1beta1` alone, served and stored: a CAPI ≤ v1.10 management cluster.
    V1beta1Only,
}

impl CapiServing {
    /// The versions served, storage version first.
    fn versions(self) -> &'static [CapiVersion] {
        match self {
            CapiServing::WithConversion => &[CapiVersion::V1beta2, CapiVersion::V1beta1],
            CapiServing::V1beta2Only => &[CapiVersion::V1beta2],
            CapiServing::V1beta1Only => &[CapiVersion::V1beta1],
        }
    }
}

fn column_json(&(name, type_, path, priority, description): &Column) -> Value {
    let mut c = json!({"name": name, "type": type_, "jsonPath": path, "description": description});
    if priority != 0 {
        object::set_path(&mut c, ".priority", json!(priority));
    }
    c
}

/// One version of a permissive CAPI CRD.
fn version(kind: CapiKind, version: CapiVersion, storage: bool, deprecated: bool) -> Value {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut subresources = json!({"status": {}});
    match kind {
        CapiKind::Machine => {}
        // CAPI's MachinePool CRD scales without a label selector path.
        CapiKind::MachinePool => object::set_path(
            &mut subresources,
            ".scale",
            json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}),
        ),
        _ => object::set_path(
            &mut subresources,
            ".scale",
            json!({"specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}),
        ),
    }
    let mut v = json!({
        "name": version.name(),
        "served": true,
        "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": open.clone(),
            "status": open,
        }}},
        "subresources": subresources,
        "additionalPrinterColumns": columns(kind, version).iter().map(column_json).collect::<Vec<_>>(),
    });
    if deprecated {
        object::set_path(&mut v, ".deprecated", json!(true));
    }
    v
}

/// The CRD of one Cluster API kind, served as `serving` says.
fn capi_crd(kind: CapiKind, serving: CapiServing) -> Result<CustomResourceDefinition, CrdError> {
    let (short, singular) = match kind {
        CapiKind::MachineDeployment => ("md", "machinedeployment"),
        CapiKind::MachineSet => ("ms", "machineset"),
        CapiKind::Machine => ("ma", "machine"),
        CapiKind::MachinePool => ("mp", "machinepool"),
    };
    let served = serving.versions();
    let versions: Vec<Value> = served
        .iter()
        .enumerate()
        .map(|(i, v)| version(kind, *v, i == 0, i > 0))
        .collect();
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{GROUP}", kind.plural()),
            "labels": {"cluster.x-k8s.io/provider": "cluster-api"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind.kind(), "listKind": format!("{}List", kind.kind()),
                "plural": kind.plural(), "singular": singular,
                "shortNames": [short], "categories": ["cluster-api"]},
            "scope": "Namespaced",
            "versions": versions,
        },
    });
    if serving == CapiServing::WithConversion {
        // As CAPI's kustomized CRDs: its webhook service, CA injected by cert-manager.
        object::set_path(
            &mut crd,
            ".metadata.annotations",
            json!({"cert-manager.io/inject-ca-from": "capi-system/capi-serving-cert"}),
        );
        let webhook = json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"name": "capi-webhook-service",
                "namespace": "capi-system", "path": "/convert"}},
            "conversionReviewVersions": ["v1", "v1beta1"]}});
        object::set_path(&mut crd, ".spec.conversion", webhook);
    }
    Ok(serde_json::from_value(crd)?)
}

/// The MachineDeployment, MachineSet, Machine and MachinePool CRDs of a CAPI v1.11+ management cluster
/// ([`CapiServing::WithConversion`]; for sim only).
pub fn capi_crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    capi_crds_serving(CapiServing::WithConversion)
}

/// The MachineDeployment, MachineSet, Machine and MachinePool CRDs, served as `serving` says.
pub fn capi_crds_serving(serving: CapiServing) -> Result<Vec<CustomResourceDefinition>, CrdError> {
    CapiKind::ALL
        .into_iter()
        .map(|k| capi_crd(k, serving))
        .collect()
}

/// Create CRDs (an existing one is left as it is) and wait until each is Established.
pub async fn install(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), CrdError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        match api.create(&PostParams::default(), crd).await {
            Ok(_) => {}
            Err(e) if code(&e) == Some(409) => {}
            Err(e) => return Err(e.into()),
        }
    }
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut established = false;
        for _ in 0..300 {
            let current = serde_json::to_value(api.get(&name).await?)?;
            if condition_true(&current, "Established") {
                established = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if !established {
            return Err(CrdError::NotEstablished(name));
        }
    }
    Ok(())
}

/// Whether the server behind `client` is sim (its `/version` answer says so,
/// [`crate::discovery::SIM_HEADER`]).
pub async fn is_sim(client: &kube::Client) -> Result<bool, CrdError> {
    let request = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .map_err(|e| kube::Error::BuildRequest(kube::core::request::Error::BuildRequest(e)))?;
    let response = client.send(request).await?;
    Ok(response
        .headers()
        .contains_key(crate::discovery::SIM_HEADER))
}

/// How [`install_capi_crds`] serves the Cluster API kinds on this server: with conversion
/// on sim, v1beta2 alone on any other (a real kube-apiserver has no CAPI webhook to call).
pub async fn capi_serving_for(client: &kube::Client) -> Result<CapiServing, CrdError> {
    Ok(if is_sim(client).await? {
        CapiServing::WithConversion
    } else {
        CapiServing::V1beta2Only
    })
}

/// Install the Cluster API CRDs into a management cluster, served as CAPI v1.14 serves them as
/// far as the server allows ([`capi_serving_for`]).
pub async fn install_capi_crds(management: &kube::Client) -> Result<(), CrdError> {
    let serving = capi_serving_for(management).await?;
    install_capi_crds_serving(management, serving).await
}

/// Install the Cluster API CRDs into a management cluster, served as `serving` says.
pub async fn install_capi_crds_serving(
    management: &kube::Client,
    serving: CapiServing,
) -> Result<(), CrdError> {
    install(management, &capi_crds_serving(serving)?).await
}

/// The MachineHealthCheck CRD: `v1beta2` alone (the fields node repair reads,
/// `spec.clusterName` and `spec.selector`, are the same in `v1beta1`), `spec` and `status`
/// kept whole, CAPI v1.14's names and printer columns. The world runs no MachineHealthCheck
/// controller: tests install one to see that node repair leaves its Machines to it.
pub fn machine_health_check_crd() -> Result<CustomResourceDefinition, CrdError> {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let column = |name: &str, type_: &str, path: &str, description: &str| json!({"name": name, "type": type_, "jsonPath": path, "description": description});
    let mut paused = column(
        "Paused",
        "string",
        ".status.conditions[?(@.type==\"Paused\")].status",
        "Reconciliation paused",
    );
    object::set_path(&mut paused, ".priority", json!(10));
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("machinehealthchecks.{GROUP}"),
            "labels": {"cluster.x-k8s.io/provider": "cluster-api"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": "MachineHealthCheck", "listKind": "MachineHealthCheckList",
                "plural": "machinehealthchecks", "singular": "machinehealthcheck",
                "shortNames": ["mhc", "mhcs"], "categories": ["cluster-api"]},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1beta2", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": open.clone(),
                    "status": open,
                }}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    column("Cluster", "string", ".spec.clusterName", "Cluster"),
                    column("Replicas", "integer", ".status.expectedMachines",
                        "Number of machines currently monitored"),
                    column("Healthy", "integer", ".status.currentHealthy",
                        "Current observed healthy machines"),
                    paused,
                    column("Age", "date", ".metadata.creationTimestamp",
                        "Time duration since creation of MachineHealthCheck"),
                ],
            }],
        },
    });
    Ok(serde_json::from_value(crd)?)
}

/// Install the MachineHealthCheck CRD ([`machine_health_check_crd`]) into a management
/// cluster.
pub async fn install_machine_health_check_crd(management: &kube::Client) -> Result<(), CrdError> {
    install(management, &[machine_health_check_crd()?]).await
}

/// Install our Karpenter CRDs (NodePool, NodeClaim, ClusterAPINodeClass) into a workload
/// cluster.
pub async fn install_karpenter_crds(workload: &kube::Client) -> Result<(), CrdError> {
    install(workload, &api::crd::all()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crds(serving: CapiServing) -> Vec<Value> {
        capi_crds_serving(serving)
            .unwrap()
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .collect()
    }

    #[test]
    fn capi_crds_keep_everything_and_scale() {
        let crds = crds(CapiServing::WithConversion);
        assert_eq!(crds.len(), 4);
        let md = &crds[0];
        let versions: Vec<(&str, bool, bool)> = md["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap(),
                    v["storage"].as_bool().unwrap(),
                    v["deprecated"].as_bool().unwrap_or(false),
                )
            })
            .collect();
        assert_eq!(
            versions,
            [("v1beta2", true, false), ("v1beta1", false, true)]
        );
        for v in md["spec"]["versions"].as_array().unwrap() {
            let props = &v["schema"]["openAPIV3Schema"]["properties"];
            assert_eq!(props["spec"]["x-kubernetes-preserve-unknown-fields"], true);
            assert_eq!(
                props["status"]["x-kubernetes-preserve-unknown-fields"],
                true
            );
            let scale = &v["subresources"]["scale"];
            assert_eq!(scale["specReplicasPath"], ".spec.replicas");
            assert_eq!(scale["statusReplicasPath"], ".status.replicas");
            assert_eq!(scale["labelSelectorPath"], ".status.selector");
        }
        let conversion = &md["spec"]["conversion"];
        assert_eq!(conversion["strategy"], "Webhook");
        assert_eq!(
            conversion["webhook"]["clientConfig"]["service"]["name"],
            "capi-webhook-service"
        );
        let machine = &crds[2];
        assert!(machine["spec"]["versions"][0]["subresources"]["status"].is_object());
        assert!(machine["spec"]["versions"][0]["subresources"]["scale"].is_null());
        // Cluster API's short names and category: `kubectl get md`, `kubectl get cluster-api`.
        let names: Vec<(&str, &str)> = crds
            .iter()
            .map(|c| {
                let n = &c["spec"]["names"];
                (
                    n["shortNames"][0].as_str().unwrap(),
                    n["categories"][0].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("md", "cluster-api"),
                ("ms", "cluster-api"),
                ("ma", "cluster-api"),
                ("mp", "cluster-api")
            ]
        );
        // CAPI's MachinePool CRD scales without a selector.
        let pool = &crds[3];
        assert_eq!(
            pool["spec"]["versions"][0]["subresources"]["scale"],
            json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"})
        );
    }

    /// Every printer column of every version, as CAPI v1.14's generated CRDs have it
    /// (`../shared/fixtures/cluster-api-v1.14-crds`).
    #[test]
    fn columns_match_capis_crds() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/fixtures/cluster-api-v1.14-crds");
        for crd in crds(CapiServing::WithConversion) {
            let plural = crd["spec"]["names"]["plural"].as_str().unwrap();
            let text = std::fs::read_to_string(dir.join(format!("cluster.x-k8s.io_{plural}.yaml")))
                .unwrap();
            let upstream: Value = serde_norway::from_str(&text).unwrap();
            for version in crd["spec"]["versions"].as_array().unwrap() {
                let name = &version["name"];
                let theirs = upstream["spec"]["versions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|v| v["name"] == *name)
                    .unwrap();
                let normal = |columns: &Value| -> Vec<Value> {
                    columns
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|c| {
                            json!([
                                c["name"],
                                c["type"],
                                c["jsonPath"],
                                c["priority"].as_i64().unwrap_or(0),
                                c["description"]
                            ])
                        })
                        .collect()
                };
                assert_eq!(
                    normal(&version["additionalPrinterColumns"]),
                    normal(&theirs["additionalPrinterColumns"]),
                    "{plural} {name}"
                );
                assert_eq!(
                    version["subresources"]["scale"], theirs["subresources"]["scale"],
                    "{plural} {name}"
                );
            }
        }
    }

    #[test]
    fn columns_are_capis_per_version() {
        let crds = crds(CapiServing::WithConversion);
        let names = |crd: &Value, i: usize| -> Vec<String> {
            crd["spec"]["versions"][i]["additionalPrinterColumns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            names(&crds[0], 0),
            [
                "Cluster",
                "Available",
                "Desired",
                "Current",
                "Ready",
                "Available",
                "Up-to-date",
                "Paused",
                "Phase",
                "Age",
                "Version"
            ]
        );
        assert_eq!(
            names(&crds[0], 1),
            [
                "Cluster",
                "Desired",
                "Replicas",
                "Ready",
                "Updated",
                "Unavailable",
                "Phase",
                "Age",
                "Version"
            ]
        );
        assert_eq!(names(&crds[2], 1)[1], "NodeName");
    }

    #[test]
    fn other_servings_have_one_version_and_no_webhook() {
        for (serving, name) in [
            (CapiServing::V1beta2Only, "v1beta2"),
            (CapiServing::V1beta1Only, "v1beta1"),
        ] {
            for crd in crds(serving) {
                let versions = crd["spec"]["versions"].as_array().unwrap();
                assert_eq!(versions.len(), 1);
                assert_eq!(versions[0]["name"], name);
                assert_eq!(versions[0]["storage"], true);
                assert!(crd["spec"]["conversion"].is_null());
            }
        }
    }
}
