//! The NodePool template hash (spec §1.6, static drift).
//!
//! Responsibility: [`pool_hash`], a stable 64-bit FNV-1a hash of the drift-relevant part of
//! `spec.template` — metadata labels and annotations, taints, startupTaints, nodeClassRef,
//! terminationGracePeriod, expireAfter — printed as a decimal string, and [`HASH_VERSION`], the
//! version of this algorithm (our own: the Go value cannot be reproduced, so NodeClaims stamped
//! by upstream are re-stamped rather than all appearing drifted).
//!
//! Rules, mirroring upstream's hashstructure options: `requirements` and `resources` are
//! excluded; taint lists are sets (order and duplicates do not matter); absent and empty maps or
//! lists are equivalent; durations hash by their meaning (`60m` = `1h`), an absent
//! `expireAfter` as its default `720h`. The encoding is length-prefixed per field, so it never
//! depends on `std`'s unstable hashers and is the same on every platform and release.
//!
//! [`restamp_patch`] is the hash controller's NodeClaim rewrite after a version change: the
//! version annotation := [`HASH_VERSION`], and the hash annotation := the pool's hash unless
//! the NodeClaim is already `Drifted` (it stays drifted).
//!
//! Inputs: a NodePool (a NodeClaim). Outputs: the hash string (a merge patch). Pure.

use std::collections::BTreeMap;

use api::common::{Conditions, NillableDuration, Taint, parse_duration};
use api::well_known::annotations::{NODEPOOL_HASH, NODEPOOL_HASH_VERSION};
use api::well_known::conditions::DRIFTED;
use api::{NodeClaim, NodePool};
use serde_json::{Value, json};

/// The version of [`pool_hash`], written to `karpenter.sh/nodepool-hash-version`.
pub const HASH_VERSION: &str = "v1-rs";

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of `pool.spec.template` as a decimal string.
#[must_use]
pub fn pool_hash(pool: &NodePool) -> String {
    let template = &pool.spec.template;
    let spec = &template.spec;
    let mut enc = Encoder::default();
    if let Some(metadata) = &template.metadata {
        enc.map("labels", metadata.labels.as_ref());
        enc.map("annotations", metadata.annotations.as_ref());
    }
    enc.taints("taints", spec.taints.as_deref());
    enc.taints("startupTaints", spec.startup_taints.as_deref());
    let reference = &spec.node_class_ref;
    for (field, value) in [
        ("nodeClassRef.group", &reference.group),
        ("nodeClassRef.kind", &reference.kind),
        ("nodeClassRef.name", &reference.name),
    ] {
        if !value.is_empty() {
            enc.field(field);
            enc.str(value);
        }
    }
    if let Some(tgp) = &spec.termination_grace_period {
        enc.field("terminationGracePeriod");
        enc.duration(tgp);
    }
    enc.field("expireAfter");
    let expire_after: NillableDuration = spec.expire_after_or_default();
    if expire_after.0 == NillableDuration::NEVER {
        enc.str(NillableDuration::NEVER);
    } else {
        enc.duration(&expire_after.0);
    }
    fnv1a(&enc.bytes).to_string()
}

/// The merge patch (with the NodeClaim's resourceVersion as precondition) that re-stamps `nc`
/// after a hash version change, or `None` when it already carries the current version and the
/// hash it should have.
#[must_use]
pub fn restamp_patch(nc: &NodeClaim, pool_hash: &str) -> Option<Value> {
    let annotations = nc.metadata.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
    let drifted = nc
        .status
        .as_ref()
        .and_then(|s| s.conditions.condition(DRIFTED))
        .is_some();
    let mut wanted = serde_json::Map::new();
    if get(NODEPOOL_HASH_VERSION) != Some(HASH_VERSION) {
        wanted.insert(NODEPOOL_HASH_VERSION.into(), json!(HASH_VERSION));
    }
    if !drifted && get(NODEPOOL_HASH) != Some(pool_hash) {
        wanted.insert(NODEPOOL_HASH.into(), json!(pool_hash));
    }
    if wanted.is_empty() {
        return None;
    }
    Some(json!({"metadata": {
        "resourceVersion": nc.metadata.resource_version,
        "annotations": wanted,
    }}))
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// A canonical, length-prefixed byte encoding.
#[derive(Default)]
struct Encoder {
    bytes: Vec<u8>,
}

impl Encoder {
    fn len(&mut self, n: usize) {
        self.bytes
            .extend_from_slice(&u64::try_from(n).unwrap_or(u64::MAX).to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.bytes.extend_from_slice(s.as_bytes());
    }

    fn field(&mut self, name: &str) {
        self.bytes.push(0xff);
        self.str(name);
    }

    /// A duration by its value in seconds; an unparsable one by its text.
    fn duration(&mut self, text: &str) {
        match parse_duration(text) {
            Ok(d) => {
                self.bytes.push(b'd');
                self.bytes.extend_from_slice(&d.as_secs().to_le_bytes());
            }
            Err(_) => {
                self.bytes.push(b's');
                self.str(text);
            }
        }
    }

    /// A map, skipped when absent or empty (already sorted: `BTreeMap`).
    fn map(&mut self, name: &str, map: Option<&BTreeMap<String, String>>) {
        let Some(map) = map.filter(|m| !m.is_empty()) else {
            return;
        };
        self.field(name);
        self.len(map.len());
        for (k, v) in map {
            self.str(k);
            self.str(v);
        }
    }

    /// A list of taints as a set, skipped when absent or empty.
    fn taints(&mut self, name: &str, taints: Option<&[Taint]>) {
        let mut items: Vec<Vec<u8>> = taints
            .unwrap_or_default()
            .iter()
            .map(|t| {
                let mut e = Encoder::default();
                e.str(&t.key);
                e.str(t.value_or_empty());
                e.str(t.effect.as_str());
                if let Some(added) = &t.time_added {
                    e.str(&added.0.to_string());
                }
                e.bytes
            })
            .collect();
        items.sort();
        items.dedup();
        if items.is_empty() {
            return;
        }
        self.field(name);
        self.len(items.len());
        for item in items {
            self.len(item.len());
            self.bytes.extend_from_slice(&item);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn pool(template: Value) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "p"},
            "spec": {"template": template},
        }))
        .unwrap()
    }

    fn base() -> Value {
        json!({
            "metadata": {"labels": {"team": "a", "tier": "web"}, "annotations": {"x": "y"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
                    "kind": "ClusterAPINodeClass", "name": "default"},
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In",
                    "values": ["amd64"]}],
                "taints": [
                    {"key": "a", "value": "1", "effect": "NoSchedule"},
                    {"key": "b", "effect": "NoExecute"},
                ],
                "startupTaints": [{"key": "s", "effect": "NoSchedule"}],
                "expireAfter": "720h",
                "terminationGracePeriod": "1h",
            },
        })
    }

    fn hash_of(edit: impl FnOnce(&mut Value)) -> String {
        let mut t = base();
        edit(&mut t);
        pool_hash(&pool(t))
    }

    #[test]
    fn is_stable_across_releases() {
        assert_eq!(hash_of(|_| {}), "4430093717676416568");
    }

    fn claim(annotations: Value, drifted: bool) -> NodeClaim {
        let conditions = if drifted {
            json!([{"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "resourceVersion": "7", "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                "requirements": []},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn restamping_keeps_drifted_claims_drifted() {
        let old = json!({NODEPOOL_HASH: "1", NODEPOOL_HASH_VERSION: "v3"});
        let p = restamp_patch(&claim(old.clone(), false), "42").unwrap();
        assert_eq!(p["metadata"]["resourceVersion"], json!("7"));
        assert_eq!(p["metadata"]["annotations"][NODEPOOL_HASH], json!("42"));
        assert_eq!(
            p["metadata"]["annotations"][NODEPOOL_HASH_VERSION],
            json!(HASH_VERSION)
        );
        let p = restamp_patch(&claim(old, true), "42").unwrap();
        assert_eq!(p["metadata"]["annotations"].get(NODEPOOL_HASH), None);
        let current = json!({NODEPOOL_HASH: "42", NODEPOOL_HASH_VERSION: HASH_VERSION});
        assert_eq!(restamp_patch(&claim(current, false), "42"), None);
    }

    #[test]
    fn taint_order_and_duplicates_do_not_matter() {
        let reordered = hash_of(|t| {
            t["spec"]["taints"] = json!([
                {"key": "b", "effect": "NoExecute"},
                {"key": "a", "value": "1", "effect": "NoSchedule"},
                {"key": "b", "effect": "NoExecute"},
            ]);
        });
        assert_eq!(reordered, hash_of(|_| {}));
    }

    #[test]
    fn requirements_are_excluded() {
        let other = hash_of(|t| {
            t["spec"]["requirements"] =
                json!([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z"]}]);
        });
        assert_eq!(other, hash_of(|_| {}));
    }

    #[test]
    fn hashed_fields_change_it() {
        let base = hash_of(|_| {});
        let edits: [fn(&mut Value); 7] = [
            |t| t["metadata"]["labels"]["team"] = json!("b"),
            |t| t["metadata"]["annotations"]["x"] = json!("z"),
            |t| t["spec"]["taints"][0]["value"] = json!("2"),
            |t| t["spec"]["startupTaints"] = json!([]),
            |t| t["spec"]["nodeClassRef"]["name"] = json!("other"),
            |t| t["spec"]["expireAfter"] = json!("Never"),
            |t| t["spec"]["terminationGracePeriod"] = json!("2h"),
        ];
        for (i, edit) in edits.iter().enumerate() {
            assert_ne!(hash_of(edit), base, "edit {i}");
        }
    }

    #[test]
    fn absent_equals_empty_and_durations_hash_by_value() {
        let base = hash_of(|_| {});
        // Unparsable values still hash (by their text), distinctly.
        assert_ne!(hash_of(|t| t["spec"]["expireAfter"] = json!("30d")), base);
        assert_eq!(
            hash_of(|t| t["spec"]["terminationGracePeriod"] = json!("60m")),
            base
        );
        let no_expiry = hash_of(|t| {
            t["spec"].as_object_mut().unwrap().remove("expireAfter");
        });
        assert_eq!(no_expiry, base, "absent expireAfter is its default 720h");
        let without = hash_of(|t| {
            t["metadata"]["annotations"] = json!({});
            t["spec"]["startupTaints"] = json!([]);
        });
        let absent = hash_of(|t| {
            t["metadata"].as_object_mut().unwrap().remove("annotations");
            t["spec"].as_object_mut().unwrap().remove("startupTaints");
        });
        assert_eq!(without, absent);
    }
}
