//! The resource types the server serves.
//!
//! Responsibility: describe each resource type (group, versions, names, scope, subresources,
//! which semantics apply) — the built-in ones and those made from CustomResourceDefinitions —
//! and look them up by URL segments.
//! Inputs: [`crate::builtins`] and CRD objects. Outputs: [`ResourceDef`]s and [`Registry`]
//! lookups.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::convert::capi::{CapiKind, CapiVersion};
use crate::error::GroupResource;

/// Where a resource's objects are stored: `(group, plural)`.
pub type StoreKey = GroupResource;

/// How to read `Scale` out of an object and write it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// e.g. `.status.replicas`.
    pub status_replicas: String,
    /// A path to a selector string (`.status.selector`), if any.
    pub label_selector: Option<String>,
    /// Built-in workloads: the selector is the `metav1.LabelSelector` at `.spec.selector`.
    pub selector_from_spec: bool,
}

/// A column of `kubectl get` output (`additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// OpenAPI type (`string`, `integer`, `date`, …).
    pub type_: String,
    /// JSONPath of the value.
    pub json_path: String,
    /// Priority; 0 columns show in the default view.
    pub priority: i64,
}

/// How the objects of one served resource are converted from their stored form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversion {
    /// Same schema; only `apiVersion` changes.
    None,
    /// `events.k8s.io/v1` Events, stored as core v1 Events.
    EventsV1,
    /// Cluster API MachineDeployments, MachineSets and Machines between `v1beta1` and
    /// `v1beta2`, converted natively where CAPI's conversion webhook would
    /// ([`crate::convert::capi`]).
    ClusterApi(CapiConversion),
}

/// `(group, kind)` → the version a v1beta2 reference to it names when served as v1beta1.
pub type RefVersions = BTreeMap<(String, String), String>;

/// How sim stands in for Cluster API's conversion webhook for one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapiConversion {
    /// The kind.
    pub kind: CapiKind,
    /// The version objects are stored in (the CRD's storage version).
    pub storage: CapiVersion,
    /// The versions of the kinds served, as CAPI reads them from each CRD's contract labels
    /// (kept current by [`crate::state::State`] as CRDs come and go).
    pub ref_versions: Arc<RefVersions>,
}

impl CapiConversion {
    /// The `apiVersion` a v1beta2 reference to `group`/`kind` gets in v1beta1: the version
    /// [`Self::ref_versions`] names; for a kind not served, `v1` for the core group and
    /// `<group>/v1beta1` otherwise (CAPI's webhook fails the conversion then).
    pub fn api_version_of(&self, group: &str, kind: &str) -> String {
        let version = self
            .ref_versions
            .get(&(group.to_owned(), kind.to_owned()))
            .map_or(
                if group.is_empty() { "v1" } else { "v1beta1" },
                String::as_str,
            );
        if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        }
    }
}

/// The conversion a CRD asks for: sim's own for Cluster API's kinds when the CRD names a
/// conversion webhook (`spec.conversion.strategy: Webhook`) and serves only `v1beta1` and
/// `v1beta2`; otherwise none (only `apiVersion` changes, whatever the strategy says).
fn crd_conversion(
    spec: &Value,
    group: &str,
    kind: &str,
    served: &[String],
    storage: &str,
) -> Conversion {
    let webhook = crate::object::get_path(spec, ".conversion.strategy").and_then(Value::as_str)
        == Some("Webhook");
    let kind = CapiKind::from_kind(kind).filter(|_| group == crate::convert::capi::GROUP);
    let storage = CapiVersion::parse(storage);
    match (webhook, kind, storage) {
        (true, Some(kind), Some(storage))
            if served.iter().all(|v| CapiVersion::parse(v).is_some()) =>
        {
            Conversion::ClusterApi(CapiConversion {
                kind,
                storage,
                ref_versions: Arc::default(),
            })
        }
        _ => Conversion::None,
    }
}

/// Extra semantics some built-in resources have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// Nothing beyond the generic semantics.
    None,
    /// Namespaces: lifecycle, contents deleted with them.
    Namespace,
    /// Pods: defaults, `binding` subresource.
    Pod,
    /// CRDs: register the custom resources.
    Crd,
    /// `authorization.k8s.io` access reviews: create-only, answered and never stored
    /// ([`crate::access_review`]).
    AccessReview,
}

/// One served resource type.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceDef {
    /// API group, `""` for core.
    pub group: String,
    /// Served versions, most preferred first.
    pub versions: Vec<String>,
    /// Plural, the URL segment.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// `kubectl` short names.
    pub short_names: Vec<String>,
    /// Categories (`all`, …).
    pub categories: Vec<String>,
    /// Whether there is a `status` subresource.
    pub status: bool,
    /// The `scale` subresource, if any.
    pub scale: Option<ScalePaths>,
    /// Whether `metadata.generation` tracks spec changes.
    pub generation: bool,
    /// Whether a PUT of a missing object creates it.
    pub create_on_update: bool,
    /// Whether the status is dropped on create (status is written by controllers).
    pub reset_status_on_create: bool,
    /// A custom resource (no strategic merge patch; deletes return the object).
    pub custom: bool,
    /// Field labels usable in field selectors besides `metadata.name`/`metadata.namespace`.
    pub field_labels: Vec<String>,
    /// Printer columns (a custom resource's: its storage version's).
    pub columns: Vec<PrinterColumn>,
    /// A custom resource's printer columns by served version (Tables of a version print its
    /// own).
    pub version_columns: BTreeMap<String, Vec<PrinterColumn>>,
    /// Structural schemas (`openAPIV3Schema`) by version, for custom resources.
    pub schemas: BTreeMap<String, Value>,
    /// Where the objects are stored.
    pub store: StoreKey,
    /// How they are converted from storage.
    pub conversion: Conversion,
    /// Extra semantics.
    pub special: Special,
}

impl ResourceDef {
    /// The `(group, plural)` of this resource as served (not necessarily as stored).
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(self.group.clone(), self.plural.clone())
    }

    /// `group/version` (or `version` for core) for a version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The preferred version.
    pub fn preferred_version(&self) -> &str {
        self.versions.first().map_or("v1", String::as_str)
    }

    /// The schema for an object's `apiVersion` (or any version's, if that one has none).
    pub fn schema_for(&self, api_version: &str) -> Option<&Value> {
        let version = api_version.rsplit('/').next().unwrap_or_default();
        self.schemas
            .get(version)
            .or_else(|| self.schemas.values().next())
    }

    /// Every field label usable in a field selector.
    pub fn all_field_labels(&self) -> Vec<&str> {
        let mut v = vec!["metadata.name"];
        if self.namespaced {
            v.push("metadata.namespace");
        }
        v.extend(self.field_labels.iter().map(String::as_str));
        v
    }
}

/// kube-aware version ordering: GA before beta before alpha, higher numbers first, then others
/// alphabetically.
pub fn version_priority(v: &str) -> (u8, i64, u8, i64, String) {
    let parsed = v.strip_prefix('v').and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: i64 = digits.parse().ok()?;
        let tail = rest.get(digits.len()..).unwrap_or_default();
        if tail.is_empty() {
            return Some((0, -major, 0, 0));
        }
        for (stage, rank) in [("beta", 1_u8), ("alpha", 2)] {
            if let Some(n) = tail.strip_prefix(stage) {
                let minor: i64 = n.parse().ok()?;
                return Some((0, -major, rank, -minor));
            }
        }
        None
    });
    match parsed {
        Some((a, b, c, d)) => (a, b, c, d, String::new()),
        None => (1, 0, 0, 0, v.to_owned()),
    }
}

/// All served resource types.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// By `(group, plural)`. Shared: a request holds its type's definition (with a custom
    /// resource's schemas) without copying it; a change replaces it (copy on write).
    defs: BTreeMap<GroupResource, Arc<ResourceDef>>,
}

impl Registry {
    /// The built-in resources.
    pub fn with_builtins() -> Self {
        let mut r = Self::default();
        for def in crate::builtins::all() {
            r.insert(def);
        }
        r
    }

    /// Add or replace a resource type.
    pub fn insert(&mut self, def: ResourceDef) {
        self.defs.insert(def.group_resource(), Arc::new(def));
    }

    /// Remove a resource type.
    pub fn remove(&mut self, gr: &GroupResource) -> Option<Arc<ResourceDef>> {
        self.defs.remove(gr)
    }

    /// The resource type served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceDef>> {
        self.defs
            .get(&GroupResource::new(group, plural))
            .filter(|d| d.versions.iter().any(|v| v == version))
    }

    /// A resource type by group and plural, whatever the version.
    pub fn get(&self, gr: &GroupResource) -> Option<&ResourceDef> {
        self.defs.get(gr).map(Arc::as_ref)
    }

    /// Every resource type.
    pub fn iter(&self) -> impl Iterator<Item = &ResourceDef> {
        self.defs.values().map(Arc::as_ref)
    }

    /// Every resource type, shared.
    pub fn iter_shared(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.defs.values()
    }

    /// Every resource type, to change.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut ResourceDef> {
        self.defs.values_mut().map(Arc::make_mut)
    }

    /// Groups with their served versions, preferred first; the core group is not included.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for d in self.defs.values().filter(|d| !d.group.is_empty()) {
            let versions = groups.entry(&d.group).or_default();
            for v in &d.versions {
                if !versions.contains(v) {
                    versions.push(v.clone());
                }
            }
        }
        groups
            .into_iter()
            .map(|(g, mut vs)| {
                vs.sort_by_key(|v| version_priority(v));
                (g.to_owned(), vs)
            })
            .collect()
    }

    /// The resource types served in `group/version`.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<&ResourceDef> {
        self.defs
            .values()
            .filter(|d| d.group == group && d.versions.iter().any(|v| v == version))
            .map(Arc::as_ref)
            .collect()
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn text(v: &Value, path: &str) -> String {
    crate::object::get_path(v, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The resource type a CustomResourceDefinition declares. Subresources and printer columns are
/// taken from the storage version (the first served one if none is marked storage).
pub fn def_from_crd(crd: &Value) -> Option<ResourceDef> {
    let spec = crd.get("spec")?;
    let group = text(spec, "group");
    let plural = text(spec, "names.plural");
    let kind = text(spec, "names.kind");
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return None;
    }
    let versions_json = spec.get("versions").and_then(Value::as_array)?;
    let served: Vec<&Value> = versions_json
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false))
        .collect();
    let mut versions: Vec<String> = served
        .iter()
        .map(|v| text(v, "name"))
        .filter(|v| !v.is_empty())
        .collect();
    versions.sort_by_key(|v| version_priority(v));
    let main = versions_json
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool).unwrap_or(false))
        .or_else(|| served.first().copied())?;
    let sub = main.get("subresources");
    let scale = sub.and_then(|s| s.get("scale")).map(|s| ScalePaths {
        spec_replicas: text(s, "specReplicasPath"),
        status_replicas: text(s, "statusReplicasPath"),
        label_selector: s
            .get("labelSelectorPath")
            .and_then(Value::as_str)
            .map(str::to_owned),
        selector_from_spec: false,
    });
    let columns_of = |version: &Value| -> Vec<PrinterColumn> {
        version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: text(c, "name"),
                        type_: text(c, "type"),
                        json_path: text(c, "jsonPath"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let columns = columns_of(main);
    let version_columns = served
        .iter()
        .map(|v| (text(v, "name"), columns_of(v)))
        .collect();
    let schemas = served
        .iter()
        .filter_map(|v| {
            let schema = v.get("schema")?.get("openAPIV3Schema")?;
            Some((text(v, "name"), schema.clone()))
        })
        .collect();
    let conversion = crd_conversion(spec, &group, &kind, &versions, &text(main, "name"));
    let singular = match text(spec, "names.singular") {
        s if s.is_empty() => kind.to_lowercase(),
        s => s,
    };
    Some(ResourceDef {
        store: GroupResource::new(group.clone(), plural.clone()),
        group,
        versions,
        plural,
        singular,
        kind,
        namespaced: text(spec, "scope") != "Cluster",
        short_names: strings(spec.get("names").and_then(|n| n.get("shortNames"))),
        categories: strings(spec.get("names").and_then(|n| n.get("categories"))),
        status: sub.and_then(|s| s.get("status")).is_some(),
        scale,
        generation: true,
        create_on_update: false,
        reset_status_on_create: sub.and_then(|s| s.get("status")).is_some(),
        custom: true,
        field_labels: Vec::new(),
        columns,
        version_columns,
        schemas,
        conversion,
        special: Special::None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut vs = vec!["v1alpha1", "foo", "v2", "v1beta2", "v1", "v1beta1", "v10"];
        vs.sort_by_key(|v| version_priority(v));
        assert_eq!(
            vs,
            vec!["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn crd_becomes_a_resource() {
        let crd = json!({"spec": {
            "group": "example.com", "scope": "Cluster",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]},
                {"name": "v0", "served": false}
            ]
        }});
        let def = def_from_crd(&crd).unwrap();
        assert_eq!(def.versions, vec!["v1", "v1alpha1"]);
        assert!(!def.namespaced);
        assert!(def.status);
        assert_eq!(def.singular, "widget");
        assert_eq!(def.scale.unwrap().spec_replicas, ".spec.replicas");
        assert_eq!(def.columns.len(), 1);
        assert_eq!(def.short_names, vec!["wd"]);
    }

    #[test]
    fn cluster_apis_webhook_crds_are_converted_natively() {
        let crd = |group: &str, kind: &str, strategy: &str| {
            json!({"spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": "things", "kind": kind},
                "conversion": {"strategy": strategy},
                "versions": [{"name": "v1beta2", "served": true, "storage": true},
                    {"name": "v1beta1", "served": true, "storage": false}]}})
        };
        let def = def_from_crd(&crd("cluster.x-k8s.io", "Machine", "Webhook")).unwrap();
        let Conversion::ClusterApi(c) = &def.conversion else {
            panic!("{:?}", def.conversion)
        };
        assert_eq!(
            (c.kind, c.storage),
            (CapiKind::Machine, CapiVersion::V1beta2)
        );
        assert_eq!(
            c.api_version_of("infrastructure.cluster.x-k8s.io", "DockerMachine"),
            "infrastructure.cluster.x-k8s.io/v1beta1"
        );
        for (group, kind, strategy) in [
            ("cluster.x-k8s.io", "Machine", "None"),
            ("cluster.x-k8s.io", "Cluster", "Webhook"),
            ("example.com", "Machine", "Webhook"),
        ] {
            let def = def_from_crd(&crd(group, kind, strategy)).unwrap();
            assert_eq!(
                def.conversion,
                Conversion::None,
                "{group} {kind} {strategy}"
            );
        }
    }

    #[test]
    fn builtins_are_found_by_version() {
        let r = Registry::with_builtins();
        assert!(r.find("apps", "v1", "deployments").is_some());
        assert!(r.find("apps", "v2", "deployments").is_none());
        assert!(r.find("", "v1", "pods").is_some());
        assert!(r.groups().iter().any(|(g, _)| g == "apps"));
    }
}
