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
}
