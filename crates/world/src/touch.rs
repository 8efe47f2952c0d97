//! What a wake-up watch decodes of an object: only where it is and its version.
//!
//! Responsibility: [`Touch<K>`], a kube [`Resource`] of `K`'s kind whose decoder keeps
//! `metadata.name`, `namespace`, `uid` and `resourceVersion` and skips everything else (spec,
//! status, labels, `managedFields`) without building it. The world's watches only say *when*
//! a controller should look again ([`crate::driver`]); the passes read fresh lists. Decoding
//! every watched Pod, Node or Cluster API object whole, to drop it at once, was about a
//! twentieth of the simulated world's CPU time at a thousand pods.
//! Inputs: watch events (JSON). Outputs: `Touch<K>` values; nothing is written back.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};

/// An object of kind `K` of which only the identity and `resourceVersion` were decoded.
pub struct Touch<K> {
    meta: ObjectMeta,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Touch<K> {
    fn clone(&self) -> Self {
        Self {
            meta: self.meta.clone(),
            kind: PhantomData,
        }
    }
}

impl<K> fmt::Debug for Touch<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Touch").field("meta", &self.meta).finish()
    }
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    metadata: RawMeta,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMeta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

impl<'de, K> Deserialize<'de> for Touch<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let RawMeta {
            name,
            namespace,
            uid,
            resource_version,
        } = Raw::deserialize(d)?.metadata;
        Ok(Self {
            meta: ObjectMeta {
                name,
                namespace,
                uid,
                resource_version,
                ..ObjectMeta::default()
            },
            kind: PhantomData,
        })
    }
}

impl<K: Resource> Resource for Touch<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind, WatchEvent};

    #[test]
    fn a_touched_object_keeps_its_identity_and_version_only() {
        let event = r#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod",
            "metadata":{"name":"p","namespace":"default","uid":"u1","resourceVersion":"42",
                "labels":{"app":"a"},"managedFields":[{"manager":"m","fieldsV1":{"f:x":{}}}]},
            "spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Pending"}}}"#;
        let WatchEvent::Modified(t) =
            serde_json::from_str::<WatchEvent<Touch<Pod>>>(event).unwrap()
        else {
            panic!("not a modification");
        };
        assert_eq!(
            t.meta(),
            &ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                resource_version: Some("42".into()),
                ..ObjectMeta::default()
            }
        );
    }

    #[test]
    fn a_touch_is_of_its_kinds_resource() {
        assert_eq!(Touch::<Pod>::plural(&()), "pods");
        assert_eq!(Touch::<Pod>::api_version(&()), "v1");
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "Machine"),
            "machines",
        );
        assert_eq!(Touch::<DynamicObject>::plural(&ar), "machines");
        assert_eq!(
            Touch::<DynamicObject>::api_version(&ar),
            "cluster.x-k8s.io/v1beta2"
        );
        assert_eq!(Touch::<DynamicObject>::kind(&ar), "Machine");
    }
}
