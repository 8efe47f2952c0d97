//! CustomResourceDefinitions the simulated clusters need, and installing them.
//!
//! Responsibility: minimal CRDs for the Cluster API kinds we simulate — MachineDeployment,
//! MachineSet and Machine (`cluster.x-k8s.io/v1beta1`), generated from the api crate's types
//! with `spec` and `status` replaced by `x-kubernetes-preserve-unknown-fields: true` objects so
//! nothing any client writes is pruned, the `status` subresource, the `scale` subresource on
//! MachineDeployments and MachineSets (`.spec.replicas`, `.status.replicas`,
//! `.status.selector`), and a few printer columns — and installing those (or our own
//! Karpenter CRDs) through a client, waiting until each is Established.
//! Inputs: a kube client. Outputs: CRD objects in the cluster.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use super::WorldError;
use super::objects::{code, condition_true};

fn column(name: &str, type_: &str, path: &str) -> Value {
    json!({"name": name, "type": type_, "jsonPath": path})
}

/// Turn a generated CRD into the permissive form described above.
fn permissive(
    crd: &CustomResourceDefinition,
    columns: &[Value],
) -> Result<CustomResourceDefinition, WorldError> {
    let mut v = serde_json::to_value(crd)?;
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    if let Some(versions) = v
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    {
        for version in versions {
            if let Some(props) = version
                .pointer_mut("/schema/openAPIV3Schema/properties")
                .and_then(Value::as_object_mut)
            {
                props.insert("spec".into(), open.clone());
                props.insert("status".into(), open.clone());
                props.insert("metadata".into(), json!({"type": "object"}));
            }
            if let Some(root) = version
                .pointer_mut("/schema/openAPIV3Schema")
                .and_then(Value::as_object_mut)
            {
                root.remove("required");
            }
            if let Some(version) = version.as_object_mut() {
                let mut cols = columns.to_vec();
                cols.push(column("Age", "date", ".metadata.creationTimestamp"));
                version.insert("additionalPrinterColumns".into(), json!(cols));
            }
        }
    }
    Ok(serde_json::from_value(v)?)
}

/// The MachineDeployment, MachineSet and Machine CRDs.
pub fn capi_crds() -> Result<Vec<CustomResourceDefinition>, WorldError> {
    let replicas = [
        column("Cluster", "string", ".spec.clusterName"),
        column("Replicas", "integer", ".status.replicas"),
        column("Ready", "integer", ".status.readyReplicas"),
        column("Desired", "integer", ".spec.replicas"),
    ];
    let mut md_columns = replicas.to_vec();
    md_columns.push(column("Phase", "string", ".status.phase"));
    let machine_columns = [
        column("Cluster", "string", ".spec.clusterName"),
        column("NodeName", "string", ".status.nodeRef.name"),
        column("ProviderID", "string", ".spec.providerID"),
        column("Phase", "string", ".status.phase"),
    ];
    Ok(vec![
        permissive(&api::MachineDeployment::crd(), &md_columns)?,
        permissive(&api::MachineSet::crd(), &replicas)?,
        permissive(&api::Machine::crd(), &machine_columns)?,
    ])
}

/// Create CRDs (an existing one is left as it is) and wait until each is Established.
pub async fn install(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<(), WorldError> {
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
            return Err(WorldError::NotEstablished(name));
        }
    }
    Ok(())
}

/// Install the Cluster API CRDs into a management cluster.
pub async fn install_capi_crds(management: &kube::Client) -> Result<(), WorldError> {
    install(management, &capi_crds()?).await
}

/// Install our Karpenter CRDs (NodePool, NodeClaim, ClusterAPINodeClass) into a workload
/// cluster.
pub async fn install_karpenter_crds(workload: &kube::Client) -> Result<(), WorldError> {
    install(workload, &api::crd::all()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capi_crds_keep_everything_and_scale() {
        let crds = capi_crds().unwrap();
        assert_eq!(crds.len(), 3);
        let md = serde_json::to_value(&crds[0]).unwrap();
        let v = &md["spec"]["versions"][0];
        assert_eq!(v["name"], "v1beta1");
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
        let machine = serde_json::to_value(&crds[2]).unwrap();
        assert!(machine["spec"]["versions"][0]["subresources"]["status"].is_object());
        // Cluster API's short names and category: `kubectl get md`, `kubectl get cluster-api`.
        let names: Vec<(&str, &str)> = crds
            .iter()
            .map(|c| {
                let n = &c.spec.names;
                (
                    n.short_names.as_ref().unwrap()[0].as_str(),
                    n.categories.as_ref().unwrap()[0].as_str(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("md", "cluster-api"),
                ("ms", "cluster-api"),
                ("ma", "cluster-api")
            ]
        );
    }
}
