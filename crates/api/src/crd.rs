//! CustomResourceDefinition generation.
//!
//! Responsibility: turn our NodePool, NodeClaim and ClusterAPINodeClass types into the CRDs we
//! install, and render them as YAML. The committed copies in `charts/karpenter-capi/crds/` must
//! equal [`render_all`] (a test checks it).
//! Inputs: the derived schemas. Outputs: `CustomResourceDefinition`s and YAML text.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{CapacityBuffer, ClusterAPINodeClass, NodeClaim, NodeOverlay, NodePool};

/// Why CRDs could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// Serializing a CRD to JSON or YAML failed.
    #[error("cannot render the {name} CRD: {source}")]
    Render {
        /// The CRD's name.
        name: String,
        /// The serializer's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Our CRDs, in a stable order: NodePool, NodeClaim, ClusterAPINodeClass, NodeOverlay,
/// CapacityBuffer.
pub fn all() -> Vec<CustomResourceDefinition> {
    [
        NodePool::crd(),
        NodeClaim::crd(),
        ClusterAPINodeClass::crd(),
        NodeOverlay::crd(),
        CapacityBuffer::crd(),
    ]
    .into_iter()
    .map(finish)
    .collect()
}

/// The file name each CRD is committed under: `<group>_<plural>.yaml`, as controller-gen names
/// them.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document (starting with `---`).
pub fn render(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let yaml = serde_norway::to_string(crd).map_err(|e| CrdError::Render {
        name: name.clone(),
        source: Box::new(e),
    })?;
    Ok(format!("---\n{yaml}"))
}

/// All CRDs as one multi-document YAML stream.
pub fn render_all() -> Result<String, CrdError> {
    all().iter().map(render).collect()
}

/// What each kind's root schema says of itself.
fn root_description(kind: &str) -> String {
    match kind {
        "NodePool" => "NodePool describes a class of nodes Karpenter may launch and how it may \
                       disrupt them."
            .into(),
        "NodeOverlay" => "NodeOverlay changes the price or the extended resources of the \
                          instance types its requirements select."
            .into(),
        "CapacityBuffer" => "CapacityBuffer is the configuration that an autoscaler can use to \
                             provision buffer capacity within a cluster: placeholder pods that \
                             make it add nodes in advance."
            .into(),
        "NodeClaim" => {
            "NodeClaim is a request for one node and the record of its lifecycle.".into()
        }
        _ => format!(
            "{kind} is the Cluster API node class: which MachineDeployments Karpenter may \
                      scale."
        ),
    }
}

/// The finishing touches kube's generator leaves to us, so the CRDs read like controller-gen's:
/// - `listKind` is set (`<Kind>List`);
/// - the root lists `apiVersion`, `kind` and `metadata`, and a ClusterAPINodeClass may omit `spec`;
/// - the root schema gets a real description;
/// - optional fields are not `nullable` (upstream's aren't, and `nullable` would let `null` be
///   stored where Karpenter expects absence);
/// - int-or-string quantities keep `anyOf: [{type: integer}, {type: string}]`, which kube's
///   structural rewriter empties.
fn finish(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let kind = crd.spec.names.kind.clone();
    crd.spec.names.list_kind = Some(format!("{kind}List"));
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            let mut value = serde_json::to_value(&*schema).unwrap_or_default();
            tidy(&mut value);
            if let Some(root) = value.as_object_mut() {
                root.insert("description".into(), root_description(&kind).into());
                if let Some(props) = root.get_mut("properties").and_then(|p| p.as_object_mut()) {
                    props.insert("apiVersion".into(), serde_json::json!({"type": "string"}));
                    props.insert("kind".into(), serde_json::json!({"type": "string"}));
                    props.insert("metadata".into(), serde_json::json!({"type": "object"}));
                }
                if kind == "ClusterAPINodeClass" {
                    // `spec` may be omitted: an empty class selects every member MachineDeployment.
                    root.remove("required");
                }
            }
            if let Ok(clean) = serde_json::from_value(value) {
                *schema = clean;
            }
        }
    }
    crd
}

fn tidy(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("nullable");
            if map.get("x-kubernetes-int-or-string") == Some(&serde_json::Value::Bool(true)) {
                map.insert(
                    "anyOf".into(),
                    serde_json::json!([{"type": "integer"}, {"type": "string"}]),
                );
            }
            map.values_mut().for_each(tidy);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}
