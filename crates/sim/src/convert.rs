//! Conversion between a resource's stored form and the version a client asked for.
//!
//! Responsibility: present stored objects in the requested `group/version` and turn request
//! bodies into the stored form. Custom resources and most built-ins only change `apiVersion`
//! (CRD conversion strategy `None`); `events.k8s.io/v1` Events are stored as core v1 Events and
//! renamed field by field as kube-apiserver converts them.
//! Inputs: a [`ResourceDef`], a version, an object. Outputs: the converted object.

use serde_json::{Value, json};

use crate::object::as_map;
use crate::registry::{Conversion, ResourceDef};

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

/// A stored object as served in `version` of `def`.
pub fn to_served(def: &ResourceDef, version: &str, mut obj: Value) -> Value {
    if def.conversion == Conversion::EventsV1 {
        rename(&mut obj, EVENT_RENAMES.iter().copied());
    }
    let map = as_map(&mut obj);
    map.insert("apiVersion".into(), json!(def.api_version(version)));
    map.insert("kind".into(), json!(def.kind));
    obj
}

/// A request body (already in `def`'s served form) as stored.
pub fn to_stored(def: &ResourceDef, mut obj: Value) -> Value {
    if def.conversion == Conversion::EventsV1 {
        rename(&mut obj, EVENT_RENAMES.iter().map(|(a, b)| (*b, *a)));
        as_map(&mut obj).insert("apiVersion".into(), json!("v1"));
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
