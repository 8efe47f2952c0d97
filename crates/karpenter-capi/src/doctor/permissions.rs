//! The permissions `run` needs, and asking each cluster whether the caller has them.
//!
//! Responsibility: [`workload`] and [`management`] list every (verb, resource) the controller
//! uses in each cluster — the same rules as the Helm chart's ClusterRoles and Role (a chart
//! test keeps the two equal), a feature gate's only with it on — plus, per infrastructure template kind the selected
//! MachineDeployments name, `list` and `watch`. [`review`] asks the API server with a
//! `SelfSubjectAccessReview` per check, so the answer is the server's own (RBAC, webhooks, any
//! authorizer), for whoever the client is (`--as` impersonates the controller's account).
//! Inputs: the leader-election Lease's namespace and name; clients. Outputs: [`Check`]s and
//! [`Outcome`]s.

use futures::StreamExt as _;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde::Serialize;

use crate::feature_gates::FeatureGates;
use crate::probes::Cluster;

/// One verb on one resource that must be allowed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// Where.
    #[serde(serialize_with = "cluster_name")]
    pub cluster: Cluster,
    /// The verb.
    pub verb: String,
    /// API group (`""`: core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`""`: none).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    /// Namespace (`None`: every namespace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name (`None`: any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

fn cluster_name<S: serde::Serializer>(c: &Cluster, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match c {
        Cluster::Workload => "workload",
        Cluster::Management => "management",
    })
}

impl std::fmt::Display for Check {
    /// As `kubectl auth can-i` takes it: `patch nodeclaims.karpenter.sh/status`, then the
    /// name and namespace.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        if !self.group.is_empty() {
            write!(f, ".{}", self.group)?;
        }
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if let Some(name) = &self.name {
            write!(f, " named {name:?}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}"),
            None => f.write_str(" in every namespace"),
        }
    }
}

/// A rule as the chart writes it: group, resource (with `/subresource`), verbs.
type Rule = (&'static str, &'static str, &'static [&'static str]);

/// The workload-cluster ClusterRole's rules (`charts/karpenter-capi/templates/clusterrole.yaml`).
pub const WORKLOAD_RULES: &[Rule] = &[
    ("karpenter.sh", "nodepools", &["list", "watch", "patch"]),
    ("karpenter.sh", "nodepools/status", &["patch"]),
    (
        "karpenter.sh",
        "nodeclaims",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    ("karpenter.sh", "nodeclaims/status", &["patch"]),
    (
        "karpenter.cluster.x-k8s.io",
        "clusterapinodeclasses",
        &["get", "list", "watch"],
    ),
    (
        "karpenter.cluster.x-k8s.io",
        "clusterapinodeclasses/status",
        &["patch"],
    ),
    ("", "nodes", &["get", "list", "watch", "patch", "delete"]),
    ("", "pods", &["get", "list", "watch", "delete"]),
    ("", "pods/eviction", &["create"]),
    ("", "namespaces", &["get", "list", "watch"]),
    ("apps", "daemonsets", &["list", "watch"]),
    ("policy", "poddisruptionbudgets", &["list", "watch"]),
    ("events.k8s.io", "events", &["create"]),
];

/// With the `NodeOverlay` gate: the workload ClusterRole's NodeOverlay rules.
pub const NODE_OVERLAY_RULES: &[Rule] = &[
    ("karpenter.sh", "nodeoverlays", &["list", "watch"]),
    ("karpenter.sh", "nodeoverlays/status", &["patch"]),
];

/// With the `CapacityBuffer` gate: the workload ClusterRole's CapacityBuffer rules.
pub const CAPACITY_BUFFER_RULES: &[Rule] = &[
    (
        "autoscaling.x-k8s.io",
        "capacitybuffers",
        &["list", "watch"],
    ),
    ("", "podtemplates", &["list", "watch"]),
    ("autoscaling.x-k8s.io", "capacitybuffers/status", &["patch"]),
    ("apps", "deployments", &["get"]),
    ("apps", "statefulsets", &["get"]),
    ("apps", "replicasets", &["get"]),
];

/// With the `NodeRepair` gate: the management ClusterRole's MachineHealthCheck rule.
pub const NODE_REPAIR_RULES: &[Rule] = &[("cluster.x-k8s.io", "machinehealthchecks", &["list"])];

/// The management-cluster ClusterRole's rules
/// (`charts/karpenter-capi/templates/clusterrole-cluster-api.yaml`), without the
/// infrastructure templates (see [`template_checks`]).
pub const MANAGEMENT_RULES: &[Rule] = &[
    (
        "cluster.x-k8s.io",
        "machinedeployments",
        &["get", "list", "watch", "patch"],
    ),
    (
        "cluster.x-k8s.io",
        "machinesets",
        &["get", "list", "watch", "patch"],
    ),
    (
        "cluster.x-k8s.io",
        "machinepools",
        &["get", "list", "watch", "patch"],
    ),
    (
        "cluster.x-k8s.io",
        "machines",
        &["get", "list", "watch", "patch", "delete"],
    ),
];

/// The verbs on infrastructure machine templates.
pub const TEMPLATE_VERBS: &[&str] = &["list", "watch"];

fn expand(cluster: Cluster, rules: &[Rule]) -> Vec<Check> {
    rules
        .iter()
        .flat_map(|(group, resource, verbs)| {
            let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
            verbs.iter().map(move |verb| Check {
                cluster,
                verb: (*verb).to_owned(),
                group: (*group).to_owned(),
                resource: resource.to_owned(),
                subresource: subresource.to_owned(),
                namespace: None,
                name: None,
            })
        })
        .collect()
}

/// Every check of the workload cluster for the controller's feature `gates` (the NodeOverlay
/// and CapacityBuffer rules only with their gates, as the chart grants them); with the
/// leader-election Lease (`namespace`, `name`) when leader election is on.
#[must_use]
pub fn workload(lease: Option<(&str, &str)>, gates: &FeatureGates) -> Vec<Check> {
    let mut checks = expand(Cluster::Workload, WORKLOAD_RULES);
    if gates.node_overlay {
        checks.extend(expand(Cluster::Workload, NODE_OVERLAY_RULES));
    }
    if gates.capacity_buffer {
        checks.extend(expand(Cluster::Workload, CAPACITY_BUFFER_RULES));
    }
    if let Some((namespace, name)) = lease {
        let lease = |verb: &str, name: Option<&str>| Check {
            cluster: Cluster::Workload,
            verb: verb.to_owned(),
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            subresource: String::new(),
            namespace: Some(namespace.to_owned()),
            name: name.map(str::to_owned),
        };
        checks.push(lease("create", None));
        checks.push(lease("get", Some(name)));
        checks.push(lease("patch", Some(name)));
    }
    checks
}

/// Every check of the management cluster, with `list`/`watch` of each infrastructure template
/// resource (group, plural) given and, with the `NodeRepair` gate, `list` of
/// MachineHealthChecks; in `namespace` only when `run` is scoped to one
/// (`--cluster-api-namespace`: its watches are namespaced then).
#[must_use]
pub fn management(
    templates: &[(String, String)],
    namespace: Option<&str>,
    gates: &FeatureGates,
) -> Vec<Check> {
    let mut checks = expand(Cluster::Management, MANAGEMENT_RULES);
    if gates.node_repair {
        checks.extend(expand(Cluster::Management, NODE_REPAIR_RULES));
    }
    checks.extend(template_checks(templates));
    for c in &mut checks {
        c.namespace = namespace.map(str::to_owned);
    }
    checks
}

/// `list` and `watch` of each infrastructure template resource (group, plural).
#[must_use]
pub fn template_checks(templates: &[(String, String)]) -> Vec<Check> {
    templates
        .iter()
        .flat_map(|(group, plural)| {
            TEMPLATE_VERBS.iter().map(move |verb| Check {
                cluster: Cluster::Management,
                verb: (*verb).to_owned(),
                group: group.clone(),
                resource: plural.clone(),
                subresource: String::new(),
                namespace: None,
                name: None,
            })
        })
        .collect()
}

/// The server's answer to one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome", content = "detail")]
pub enum Outcome {
    /// Allowed.
    Allowed,
    /// Denied, with the authorizer's reason when it gave one.
    Denied(String),
    /// The review itself failed (e.g. the server does not serve access reviews).
    Unknown(String),
}

/// Asks `client` about each check (8 at a time); answers in input order.
pub async fn review(client: &kube::Client, checks: &[Check]) -> Vec<Outcome> {
    futures::stream::iter(checks.iter().map(|c| review_one(client, c)))
        .buffered(8)
        .collect()
        .await
}

async fn review_one(client: &kube::Client, check: &Check) -> Outcome {
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(check.group.clone()),
                resource: Some(check.resource.clone()),
                subresource: (!check.subresource.is_empty()).then(|| check.subresource.clone()),
                verb: Some(check.verb.clone()),
                namespace: check.namespace.clone(),
                name: check.name.clone(),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    match api.create(&PostParams::default(), &review).await {
        Ok(answer) => match answer.status {
            Some(s) if s.allowed => Outcome::Allowed,
            Some(s) => Outcome::Denied(
                s.reason
                    .filter(|r| !r.is_empty())
                    .or(s.evaluation_error)
                    .unwrap_or_default(),
            ),
            None => Outcome::Unknown("the review came back without a status".into()),
        },
        Err(kube::Error::Api(s)) => Outcome::Unknown(format!(
            "the access review was refused: {} ({} {})",
            s.message, s.code, s.reason
        )),
        Err(e) => Outcome::Unknown(format!("the access review failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_read_like_kubectl_auth_can_i() {
        let off = FeatureGates::default();
        let checks = workload(Some(("karpenter", "karpenter-leader-election")), &off);
        let text: Vec<String> = checks.iter().map(ToString::to_string).collect();
        assert!(text.contains(&"patch nodeclaims.karpenter.sh/status in every namespace".into()));
        assert!(text.contains(&"create pods/eviction in every namespace".into()));
        assert!(text.contains(
            &"patch leases.coordination.k8s.io named \"karpenter-leader-election\" in namespace karpenter"
                .into()
        ));
        assert_eq!(workload(None, &off).len() + 3, checks.len());
        let m = management(
            &[(
                "infrastructure.cluster.x-k8s.io".into(),
                "dockermachinetemplates".into(),
            )],
            None,
            &off,
        );
        assert_eq!(
            m.iter()
                .filter(|c| c.resource == "dockermachinetemplates")
                .count(),
            2
        );
        assert!(
            m.iter()
                .all(|c| c.cluster == Cluster::Management && c.namespace.is_none())
        );
        assert!(
            management(&[], Some("capi"), &off)
                .iter()
                .all(|c| c.namespace.as_deref() == Some("capi"))
        );
    }

    #[test]
    fn each_gate_adds_the_permissions_its_controller_uses_and_only_it() {
        let off = FeatureGates::default();
        let names =
            |checks: &[Check]| -> Vec<String> { checks.iter().map(ToString::to_string).collect() };
        let plain = names(&workload(None, &off));
        let overlay = names(&workload(None, &"NodeOverlay=true".parse().unwrap()));
        let buffer = names(&workload(None, &"CapacityBuffer=true".parse().unwrap()));
        let list_overlays = "list nodeoverlays.karpenter.sh in every namespace".to_owned();
        let patch_buffers =
            "patch capacitybuffers.autoscaling.x-k8s.io/status in every namespace".to_owned();
        assert!(!plain.contains(&list_overlays) && !plain.contains(&patch_buffers));
        assert!(overlay.contains(&list_overlays) && !overlay.contains(&patch_buffers));
        assert!(buffer.contains(&patch_buffers) && !buffer.contains(&list_overlays));
        assert!(buffer.contains(&"get deployments.apps in every namespace".to_owned()));
        assert_eq!(overlay.len(), plain.len() + 3);
        assert_eq!(buffer.len(), plain.len() + 8);
        let repair: FeatureGates = "NodeRepair=true".parse().unwrap();
        let mhc = |checks: Vec<Check>| {
            checks
                .iter()
                .filter(|c| c.resource == "machinehealthchecks")
                .map(|c| (c.verb.clone(), c.namespace.clone()))
                .collect::<Vec<_>>()
        };
        assert!(mhc(management(&[], None, &off)).is_empty());
        assert_eq!(
            mhc(management(&[], Some("capi"), &repair)),
            [("list".to_owned(), Some("capi".to_owned()))]
        );
    }
}
