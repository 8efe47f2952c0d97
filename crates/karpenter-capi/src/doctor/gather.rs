//! Reading what `doctor` examines from the two clusters.
//!
//! Responsibility: the only I/O of `doctor`. Discovery for the CRDs `run` needs
//! ([`crate::probes::served`]); our CRDs as installed, compared field by field with this
//! binary's (when the caller may read CRDs); ClusterAPINodeClasses and NodePools (workload
//! cluster); MachineDeployments, MachineSets and MachinePools (management cluster, the scope's
//! namespace or all; MachineSets for blocked scale-ups and stand-alone node groups,
//! MachinePools as node groups, none when they cannot be listed) and the
//! infrastructure template each opted-in one names (resolved through discovery); a
//! `SelfSubjectAccessReview` per permission ([`super::permissions`]); and Deployments running a
//! cluster-autoscaler image in either cluster. Every failure is recorded in the [`Facts`],
//! never returned: a report with what could be read beats none.
//! Inputs: the two clients and [`Options`]. Outputs: [`Facts`].

use std::collections::{BTreeMap, BTreeSet};

use api::{CapiVersion, ClusterAPINodeClass, MachineDeployment, NodePool};
use clusterapi::discovery::CapiSelection;
use clusterapi::{MachineDeploymentRef, Scope};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde::de::DeserializeOwned;

use super::checks::Facts;
use super::permissions;
use crate::feature_gates::FeatureGates;
use crate::probes::Cluster;

/// What to examine besides the clusters themselves.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The MachineDeployments `run` would consider (`--cluster-name`,
    /// `--cluster-api-namespace`).
    pub scope: Scope,
    /// Whether the management client is another cluster than the workload's.
    pub separate_management: bool,
    /// The leader-election Lease (namespace, name), when leader election is on.
    pub lease: Option<(String, String)>,
    /// The Cluster API group and version asked for (`CAPI_GROUP`, `CAPI_VERSION`).
    pub capi: CapiSelection,
    /// The controller's feature gates (`--feature-gates`): the NodeOverlay gate decides
    /// whether NodeOverlays apply; each gate adds the permissions it needs.
    pub feature_gates: FeatureGates,
}

/// Reads everything `doctor` examines.
pub async fn gather(
    workload: &kube::Client,
    management: &kube::Client,
    options: &Options,
) -> Facts {
    let (capi, capi_error) = match clusterapi::discovery::discover(management, &options.capi).await
    {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e.to_string())),
    };
    // Without a version to speak, name what v1beta2 would need (current Cluster API).
    let speak = capi.clone().unwrap_or_else(CapiVersion::v1beta2);
    let (crds_missing, mut discovery_errors) =
        crate::probes::served(workload, management, crate::probes::required(&speak)).await;
    discovery_errors.extend(capi_error);
    let (crd_drift, crd_definitions_unreadable) = crd_drift(workload).await;
    let node_classes = list::<ClusterAPINodeClass>(Api::all(workload.clone())).await;
    let node_pools = list::<NodePool>(Api::all(workload.clone())).await;
    // Not served (the CRD is installed with the gate): none to examine.
    let node_overlays = match Api::<api::NodeOverlay>::all(workload.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(format!("cannot list nodeoverlays.karpenter.sh: {e}")),
    };
    let md_api: Api<MachineDeployment> = match &options.scope.namespace {
        Some(ns) => Api::namespaced_with(management.clone(), ns, &speak),
        None => Api::all_with(management.clone(), &speak),
    };
    let set_api: Api<api::MachineSet> = match &options.scope.namespace {
        Some(ns) => Api::namespaced_with(management.clone(), ns, &speak),
        None => Api::all_with(management.clone(), &speak),
    };
    let machine_sets = set_api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let pool_api: Api<api::MachinePool> = match &options.scope.namespace {
        Some(ns) => Api::namespaced_with(management.clone(), ns, &speak),
        None => Api::all_with(management.clone(), &speak),
    };
    // None when MachinePools are not served (or cannot be listed: the permission check says).
    let machine_pools = pool_api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let machine_deployments = md_api
        .list(&ListParams::default())
        .await
        .map(|l| {
            // The node groups: MachineDeployments, stand-alone MachineSets, MachinePools.
            let mut groups = l.items;
            groups.extend(clusterapi::selection::stand_alone(&machine_sets));
            groups.extend(
                machine_pools
                    .iter()
                    .map(api::MachineDeployment::from_machine_pool),
            );
            groups
        })
        .map_err(|e| format!("cannot list machinedeployments.{speak}: {e}"));
    let (templates, template_errors, template_resources) = match &machine_deployments {
        Ok(mds) => templates(management, mds, &options.scope).await,
        Err(_) => Default::default(),
    };
    let lease = options
        .lease
        .as_ref()
        .map(|(ns, name)| (ns.as_str(), name.as_str()));
    let workload_checks = permissions::workload(lease, &options.feature_gates);
    let management_checks = permissions::management(
        &template_resources,
        options.scope.namespace.as_deref(),
        &options.feature_gates,
    );
    let mut permissions_found = Vec::new();
    let answers = permissions::review(workload, &workload_checks).await;
    permissions_found.extend(workload_checks.into_iter().zip(answers));
    let answers = permissions::review(management, &management_checks).await;
    permissions_found.extend(management_checks.into_iter().zip(answers));
    let mut autoscalers = autoscalers(workload, Cluster::Workload).await;
    if options.separate_management
        && let Ok(found) = &mut autoscalers
    {
        match self::autoscalers(management, Cluster::Management).await {
            Ok(more) => found.extend(more),
            Err(e) => autoscalers = Err(e),
        }
    }
    Facts {
        capi,
        separate_management: options.separate_management,
        scope: options.scope.clone(),
        crds_missing,
        discovery_errors,
        crd_drift,
        crd_definitions_unreadable,
        permissions: permissions_found,
        node_classes,
        node_pools,
        machine_deployments,
        machine_sets,
        templates,
        template_errors,
        autoscalers,
        node_overlays,
        node_overlay_gate: options.feature_gates.node_overlay,
    }
}

async fn list<K>(api: Api<K>) -> Result<Vec<K>, String>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| format!("cannot list {}: {e}", K::plural(&K::DynamicType::default())))
}

/// Our CRDs as installed, each with the schema fields of this binary's version it lacks.
async fn crd_drift(workload: &kube::Client) -> (Vec<(String, Vec<String>)>, Option<String>) {
    let api: Api<CustomResourceDefinition> = Api::all(workload.clone());
    let mut drift = Vec::new();
    for ours in api::crd::all() {
        let name = ours.metadata.name.clone().unwrap_or_default();
        let installed = match api.get_opt(&name).await {
            Ok(Some(crd)) => crd,
            Ok(None) => continue,
            Err(e) => {
                return (
                    drift,
                    Some(format!("cannot read CustomResourceDefinition {name}: {e}")),
                );
            }
        };
        let mut missing = BTreeSet::new();
        for version in &ours.spec.versions {
            let Some(theirs) = installed
                .spec
                .versions
                .iter()
                .find(|v| v.name == version.name)
            else {
                missing.insert(format!("(version {})", version.name));
                continue;
            };
            let fields = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
                let schema = v
                    .schema
                    .as_ref()
                    .and_then(|s| serde_json::to_value(&s.open_api_v3_schema).ok())
                    .unwrap_or_default();
                let mut out = BTreeSet::new();
                schema_fields(&schema, "", &mut out);
                out
            };
            let have = fields(theirs);
            missing.extend(fields(version).into_iter().filter(|f| !have.contains(f)));
        }
        if !missing.is_empty() {
            drift.push((name, missing.into_iter().collect()));
        }
    }
    (drift, None)
}

/// Every property path of an OpenAPI schema (`spec.template.spec.requirements[].key`).
pub fn schema_fields(schema: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
        for (key, sub) in props {
            let path = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            out.insert(path.clone());
            schema_fields(sub, &path, out);
        }
    }
    if let Some(items) = schema.get("items") {
        schema_fields(items, &format!("{prefix}[]"), out);
    }
}

/// The resource of `kind` in `group`: at the version a v1beta1 reference pins, else at the
/// version discovery prefers for that kind (a v1beta2 reference names no version).
async fn resolve(
    management: &kube::Client,
    group: &str,
    pinned: Option<&str>,
    kind: &str,
) -> Result<ApiResource, String> {
    match pinned {
        Some(version) => {
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let api_version = gvk.api_version();
            kube::discovery::pinned_kind(management, &gvk)
                .await
                .map(|(ar, _)| ar)
                .map_err(|e| match e {
                    kube::Error::Api(s) => {
                        format!(
                            "{kind}.{api_version} is not served ({} {})",
                            s.code, s.message
                        )
                    }
                    e => format!("{kind}.{api_version} cannot be resolved: {e}"),
                })
        }
        None => match kube::discovery::oneshot::group(management, group).await {
            Ok(g) => g
                .recommended_kind(kind)
                .map(|(ar, _)| ar)
                .ok_or_else(|| format!("{kind}.{group} is not served by any version of {group}")),
            Err(kube::Error::Api(s)) => Err(format!(
                "{kind}.{group} is not served ({} {})",
                s.code, s.message
            )),
            Err(e) => Err(format!("{kind}.{group} cannot be resolved: {e}")),
        },
    }
}

type Templates = (
    Vec<serde_json::Value>,
    BTreeMap<String, String>,
    Vec<(String, String)>,
);

/// The infrastructure template of every opted-in MachineDeployment in scope, the errors per
/// MachineDeployment, and the template resources (group, plural) seen.
async fn templates(
    management: &kube::Client,
    mds: &[MachineDeployment],
    scope: &Scope,
) -> Templates {
    let mut resolved: BTreeMap<(String, String, String), Result<ApiResource, String>> =
        BTreeMap::new();
    let mut out = Vec::new();
    let mut errors = BTreeMap::new();
    let mut resources = BTreeSet::new();
    let mut fetched = BTreeSet::new();
    for md in mds
        .iter()
        .filter(|md| clusterapi::is_member(md) && scope.contains(md))
    {
        let md_name = MachineDeploymentRef::of(md).key();
        let r = &md.spec.template.spec.infrastructure_ref;
        let (Some(group), Some(kind), Some(name)) =
            (r.group(), r.kind.as_deref(), r.name.as_deref())
        else {
            errors.insert(
                md_name,
                "spec.template.spec.infrastructureRef lacks apiGroup (apiVersion), kind or name"
                    .to_owned(),
            );
            continue;
        };
        let namespace = r
            .namespace_or(md.metadata.namespace.as_deref())
            .unwrap_or_default()
            .to_owned();
        let pinned = r.pinned_version().map(str::to_owned);
        let key = (
            group.to_owned(),
            pinned.clone().unwrap_or_default(),
            kind.to_owned(),
        );
        if !resolved.contains_key(&key) {
            resolved.insert(
                key.clone(),
                resolve(management, group, pinned.as_deref(), kind).await,
            );
        }
        let ar = match resolved.get(&key) {
            Some(Ok(ar)) => ar.clone(),
            Some(Err(e)) => {
                errors.insert(md_name, e.clone());
                continue;
            }
            None => continue,
        };
        resources.insert((ar.group.clone(), ar.plural.clone()));
        if !fetched.insert((kind.to_owned(), namespace.clone(), name.to_owned())) {
            continue;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(management.clone(), &namespace, &ar);
        match api.get(name).await {
            Ok(object) => match serde_json::to_value(&object) {
                Ok(mut value) => {
                    // DynamicObject keeps kind/apiVersion in `types`; make sure both are set.
                    if let Some(map) = value.as_object_mut() {
                        map.insert("kind".into(), kind.into());
                        map.insert("apiVersion".into(), ar.api_version.clone().into());
                    }
                    out.push(value);
                }
                Err(e) => {
                    errors.insert(md_name, format!("{kind} {namespace}/{name}: {e}"));
                }
            },
            Err(e) => {
                errors.insert(
                    md_name,
                    format!("cannot read {kind} {namespace}/{name}: {e}"),
                );
            }
        }
    }
    (out, errors, resources.into_iter().collect())
}

/// Deployments whose containers run a cluster-autoscaler image, as `<cluster>: ns/name`.
async fn autoscalers(client: &kube::Client, cluster: Cluster) -> Result<Vec<String>, String> {
    let api: Api<Deployment> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("cannot list Deployments in the {cluster}: {e}"))?;
    Ok(list
        .items
        .iter()
        .filter(|d| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .is_some_and(|p| {
                    p.containers.iter().any(|c| {
                        c.image
                            .as_deref()
                            .is_some_and(|i| i.contains("cluster-autoscaler"))
                    })
                })
        })
        .map(|d| {
            format!(
                "{cluster}: {}/{}",
                d.metadata.namespace.as_deref().unwrap_or_default(),
                d.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect())
}
