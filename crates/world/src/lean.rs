//! Lists decoded without `metadata.managedFields`, which no world controller reads.
//!
//! Responsibility: list objects (typed Pods and Nodes, or any kind as JSON) so that the
//! decoder skips each object's `metadata.managedFields` instead of building it and dropping it.
//! Every other field decodes exactly as it would whole. On a server that tracks server-side
//! apply (every real one, and `sim`), managedFields are often the biggest part of an object:
//! at a thousand pods, decoding them was a sixth of the simulated world's CPU time, in the
//! passes of kube-scheduler-lite and kubelet-lite that list every Pod and Node.
//! Inputs: a kube client and a list URL. Outputs: objects with `managedFields` unset. Nothing
//! listed here is written back whole (the controllers patch), so nothing is lost.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;
use kube::api::ListParams;
use serde::de::{DeserializeOwned, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::WorldError;

const MANAGED_FIELDS: &str = "managedFields";

/// `ObjectMeta` but `managedFields` (and the long-gone `selfLink`), which the decoder skips.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    uid: Option<String>,
}

impl From<Meta> for ObjectMeta {
    fn from(m: Meta) -> Self {
        Self {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: None,
            uid: m.uid,
        }
    }
}

/// An object of the `metadata` / `spec` / `status` shape, decoded leanly.
#[derive(Deserialize)]
#[serde(bound = "S: Deserialize<'de>, T: Deserialize<'de>")]
struct Object<S, T> {
    #[serde(default)]
    metadata: Meta,
    spec: Option<S>,
    status: Option<T>,
}

/// A kind [`list`] decodes leanly.
pub trait LeanKind: Resource<DynamicType = ()> + Sized {
    /// Its `spec`.
    type Spec: DeserializeOwned;
    /// Its `status`.
    type Status: DeserializeOwned;
    /// The object from its parts.
    fn assemble(
        metadata: ObjectMeta,
        spec: Option<Self::Spec>,
        status: Option<Self::Status>,
    ) -> Self;
}

macro_rules! lean_kind {
    ($($kind:ty: $spec:ty, $status:ty;)*) => {$(
        impl LeanKind for $kind {
            type Spec = $spec;
            type Status = $status;
            fn assemble(metadata: ObjectMeta, spec: Option<$spec>, status: Option<$status>) -> Self {
                Self { metadata, spec, status }
            }
        }
    )*};
}

lean_kind! {
    Pod: PodSpec, PodStatus;
    Node: NodeSpec, NodeStatus;
}

#[derive(Deserialize)]
#[serde(bound = "S: Deserialize<'de>, T: Deserialize<'de>")]
struct List<S, T> {
    #[serde(default = "Vec::new")]
    items: Vec<Object<S, T>>,
}

/// Every `K` (all namespaces), without `managedFields`.
///
/// # Errors
/// The list fails or does not decode.
pub async fn list<K: LeanKind>(client: &kube::Client) -> Result<Vec<K>, WorldError> {
    let request = kube::core::Request::new(K::url_path(&(), None))
        .list(&ListParams::default())
        .map_err(kube::Error::BuildRequest)?;
    let list: List<K::Spec, K::Status> = client.request(request).await?;
    Ok(list
        .items
        .into_iter()
        .map(|o| K::assemble(o.metadata.into(), o.spec, o.status))
        .collect())
}

/// Any object as JSON, decoded without its `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub struct LeanValue(pub Value);

impl<'de> Deserialize<'de> for LeanValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ObjectVisitor { top: true })
            .map(LeanValue)
    }
}

/// Builds a JSON object; at the top, its `metadata` is built by a visitor that skips
/// `managedFields`. Anything but an object is decoded as plain JSON.
struct ObjectVisitor {
    top: bool,
}

/// A `metadata` value without `managedFields`.
struct LeanMeta(Value);

impl<'de> Deserialize<'de> for LeanMeta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ObjectVisitor { top: false })
            .map(LeanMeta)
    }
}

macro_rules! forward_to_value {
    ($($method:ident($ty:ty)),*) => {$(
        fn $method<E: serde::de::Error>(self, v: $ty) -> Result<Value, E> {
            Ok(Value::from(v))
        }
    )*};
}

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    forward_to_value!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_string(String)
    );

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element::<Value>()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = if self.top && key == "metadata" {
                map.next_value::<LeanMeta>()?.0
            } else if !self.top && key == MANAGED_FIELDS {
                map.next_value::<IgnoredAny>()?;
                continue;
            } else {
                map.next_value::<Value>()?
            };
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[derive(Deserialize)]
struct ValueList {
    #[serde(default)]
    items: Vec<LeanValue>,
}

/// Every object at the list URL `url` (all of them, unpaged), as JSON without
/// `managedFields`.
///
/// # Errors
/// The list fails or does not decode.
pub async fn list_values(client: &kube::Client, url: String) -> Result<Vec<Value>, WorldError> {
    let request = kube::core::Request::new(url)
        .list(&ListParams::default())
        .map_err(kube::Error::BuildRequest)?;
    let list: ValueList = client.request(request).await?;
    Ok(list.items.into_iter().map(|v| v.0).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    /// Every field of `ObjectMeta` set, managedFields too.
    fn meta() -> Value {
        json!({"annotations": {"a": "b"}, "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": 30, "deletionTimestamp": "2026-01-02T00:00:00Z",
            "finalizers": ["f"], "generateName": "web-", "generation": 3,
            "labels": {"app": "web"}, "name": "web-1", "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "rs1", "controller": true, "blockOwnerDeletion": true}],
            "resourceVersion": "42", "uid": "u1",
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]})
    }

    fn whole_without_managed_fields<K: DeserializeOwned + Resource>(v: &Value) -> K {
        let mut k: K = serde_json::from_value(v.clone()).unwrap();
        k.meta_mut().managed_fields = None;
        k
    }

    fn decode_lean<K: LeanKind>(v: &Value) -> K {
        let o: Object<K::Spec, K::Status> = serde_json::from_value(v.clone()).unwrap();
        K::assemble(o.metadata.into(), o.spec, o.status)
    }

    #[test]
    fn a_lean_pod_is_the_whole_pod_but_its_managed_fields() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta(),
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "1"}}}],
                "tolerations": [{"key": "k", "operator": "Exists"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [{"type": "Ready", "status": "True"}]}});
        let lean: Pod = decode_lean(&pod);
        assert_eq!(lean, whole_without_managed_fields::<Pod>(&pod));
        assert_eq!(lean.metadata.resource_version.as_deref(), Some("42"));
        assert!(lean.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_lean_node_is_the_whole_node_but_its_managed_fields() {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": meta(),
            "spec": {"providerID": "sim://n1", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4"},
                "conditions": [{"type": "Ready", "status": "True"}]}});
        let lean: Node = decode_lean(&node);
        assert_eq!(lean, whole_without_managed_fields::<Node>(&node));
        let bare: Node = decode_lean(&json!({"metadata": {"name": "n"}}));
        assert_eq!(bare.metadata.name.as_deref(), Some("n"));
        assert!(bare.spec.is_none() && bare.status.is_none());
    }

    #[test]
    fn a_lean_value_is_the_whole_value_but_its_managed_fields() {
        let machine = json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": meta(),
            "spec": {"clusterName": "c", "managedFields": "kept: not metadata",
                "version": 1.5, "n": -3, "flags": [true, null]},
            "status": null});
        let LeanValue(lean) = serde_json::from_value(machine.clone()).unwrap();
        let mut expected = machine;
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(lean, expected);
        let list: ValueList =
            serde_json::from_str(&format!(r#"{{"items": [{}]}}"#, expected)).unwrap();
        assert_eq!(list.items, vec![LeanValue(expected)]);
    }
}
