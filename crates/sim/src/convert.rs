//! Conversion between a resource's stored form and the version a client asked for.
//!
//! Responsibility: present stored objects in the requested `group/version` and turn request
//! bodies into the stored form. Custom resources and most built-ins only change `apiVersion`
//! (CRD conversion strategy `None`); `events.k8s.io/v1` Events are stored as core v1 Events and
//! renamed field by field as kube-apiserver converts them; Cluster API's MachineDeployments,
//! MachineSets and Machines whose CRDs name a conversion webhook are converted between `v1beta1`
//! and `v1beta2` as CAPI's webhook would ([`capi`]): stored in the CRD's storage version,
//! served in the one asked for, a `v1beta1` answer carrying the stored object in its
//! conversion-data annotation.
//! Inputs: a [`ResourceDef`], a version, an object. Outputs: the converted object.

pub mod capi;
#[cfg(test)]
mod capi_tests;

use std::borrow::Cow;

use serde_json::{Value, json};

use crate::object::as_map;
use crate::registry::{CapiConversion, Conversion, ResourceDef};

/// `(core v1 field, events.k8s.io/v1 field)` pairs that differ only in name.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename(obj: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    let map = as_map(obj);
    for (from, to) in pairs {
        if let Some(v) = map.remove(from) {
            map.insert(to.to_owned(), v);
        }
    }
}

/// A Cluster API object in version `to`, from the version its `apiVersion` names (`fallback`
/// if none); a `v1beta1` result carries the `v1beta2` object in its conversion-data annotation.
fn capi(c: &CapiConversion, obj: Value, fallback: capi::CapiVersion, to: &str) -> Value {
    let Some(to) = capi::CapiVersion::parse(to) else {
        return obj;
    };
    let from = capi::CapiVersion::of(&obj).unwrap_or(fallback);
    if from == to {
        return obj;
    }
    let api_version_of = |group: &str, kind: &str| c.api_version_of(group, kind);
    match to {
        capi::CapiVersion::V1beta1 => {
            let spoke = capi::to_v1beta1(c.kind, obj.clone(), &api_version_of);
            capi::with_conversion_data(spoke, &obj)
        }
        capi::CapiVersion::V1beta2 => capi::to_v1beta2(c.kind, obj),
    }
}

/// A stored object as served in `version` of `def`.
pub fn to_served(def: &ResourceDef, version: &str, mut obj: Value) -> Value {
    match &def.conversion {
        Conversion::None => {}
        Conversion::EventsV1 => rename(&mut obj, EVENT_RENAMES.iter().copied()),
        Conversion::ClusterApi(c) => obj = capi(c, obj, c.storage, version),
    }
    let map = as_map(&mut obj);
    map.insert("apiVersion".into(), json!(def.api_version(version)));
    map.insert("kind".into(), json!(def.kind));
    obj
}

/// `obj` as served at `version`, borrowed when it already is: no conversion, and the
/// `apiVersion` and `kind` [`to_served`] would set are the ones it has (the same value, without
/// a copy).
pub fn served<'a>(def: &ResourceDef, version: &str, obj: &'a Value) -> Cow<'a, Value> {
    let text = |f: &str| obj.get(f).and_then(Value::as_str);
    let as_served = matches!(def.conversion, Conversion::None)
        && text("kind") == Some(def.kind.as_str())
        && text("apiVersion").is_some_and(|v| {
            if def.group.is_empty() {
                v == version
            } else {
                v.strip_prefix(def.group.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
                    == Some(version)
            }
        });
    if as_served {
        Cow::Borrowed(obj)
    } else {
        Cow::Owned(to_served(def, version, obj.clone()))
    }
}

/// `obj`'s JSON as served at `version` (converted first only if it must be).
pub fn encode_served(def: &ResourceDef, version: &str, obj: &Value) -> Vec<u8> {
    // Encoding a `Value` into memory cannot fail (its keys are strings).
    serde_json::to_vec(&*served(def, version, obj)).unwrap_or_default()
}

/// A request body (already in `def`'s served form) as stored.
pub fn to_stored(def: &ResourceDef, mut obj: Value) -> Value {
    match &def.conversion {
        Conversion::None => {}
        Conversion::EventsV1 => {
            rename(&mut obj, EVENT_RENAMES.iter().map(|(a, b)| (*b, *a)));
            as_map(&mut obj).insert("apiVersion".into(), json!("v1"));
        }
        Conversion::ClusterApi(c) => {
            let from = capi::CapiVersion::of(&obj).unwrap_or(c.storage);
            obj = capi(c, obj, from, c.storage.name());
            as_map(&mut obj).insert(
                "apiVersion".into(),
                json!(def.api_version(c.storage.name())),
            );
        }
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::GroupResource;
    use crate::registry::Registry;

    #[test]
    fn events_round_trip_between_versions() {
        let reg = Registry::with_builtins();
        let v1 = reg
            .get(&GroupResource::new("events.k8s.io", "events"))
            .unwrap();
        let stored = json!({"apiVersion": "v1", "kind": "Event", "involvedObject": {"name": "p"}, "message": "hi", "reason": "R"});
        let served = to_served(v1, "v1", stored.clone());
        assert_eq!(served["apiVersion"], "events.k8s.io/v1");
        assert_eq!(served["regarding"]["name"], "p");
        assert_eq!(served["note"], "hi");
        assert_eq!(served["reason"], "R");
        let back = to_stored(v1, served);
        assert_eq!(back["involvedObject"]["name"], "p");
        assert_eq!(back["message"], "hi");
    }

    #[test]
    fn an_object_already_in_its_served_form_is_borrowed_and_encoded_the_same() {
        let reg = Registry::with_builtins();
        let pods = reg.get(&GroupResource::new("", "pods")).unwrap();
        let deployments = reg.get(&GroupResource::new("apps", "deployments")).unwrap();
        let events = reg
            .get(&GroupResource::new("events.k8s.io", "events"))
            .unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let deployment =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
        let event = json!({"apiVersion": "v1", "kind": "Event", "message": "hi"});
        let cases = [
            (pods, "v1", &pod, true),
            (deployments, "v1", &deployment, true),
            // Another version, a wrong kind, a missing apiVersion, a converted type: copied
            // and converted, exactly as `to_served` does.
            (pods, "v2", &pod, false),
            (
                deployments,
                "v1",
                &json!({"apiVersion": "apps/v1", "kind": "Pod"}),
                false,
            ),
            (pods, "v1", &json!({"kind": "Pod"}), false),
            (
                deployments,
                "v1",
                &json!({"apiVersion": "appsx/v1", "kind": "Deployment"}),
                false,
            ),
            (events, "v1", &event, false),
        ];
        for (def, version, obj, borrowed) in cases {
            let got = served(def, version, obj);
            assert_eq!(matches!(got, Cow::Borrowed(_)), borrowed, "{obj}");
            let expected = to_served(def, version, obj.clone());
            assert_eq!(*got, expected, "{obj}");
            assert_eq!(
                encode_served(def, version, obj),
                expected.to_string().into_bytes(),
                "{obj}"
            );
        }
    }
}
