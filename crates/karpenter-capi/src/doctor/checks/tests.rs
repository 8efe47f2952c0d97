#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use serde_json::{Value, json};

use super::*;
use crate::doctor::permissions;

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn md(name: &str, annotations: Value) -> Value {
    let mut a = json!({
        "capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
        "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi",
        "capacity.cluster-autoscaler.kubernetes.io/labels": format!("node.kubernetes.io/instance-type={name},topology.kubernetes.io/zone=z1"),
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "10",
        "karpenter.cluster.x-k8s.io/price": "0.2",
    });
    for (k, v) in annotations.as_object().unwrap() {
        if v.is_null() {
            a.as_object_mut().unwrap().remove(k);
        } else {
            a[k] = v.clone();
        }
    }
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
        "metadata": {"name": name, "namespace": "capi",
            "labels": {"node.cluster.x-k8s.io/karpenter-member": "", "cluster.x-k8s.io/cluster-name": "c1"},
            "annotations": a},
        "spec": {"clusterName": "c1", "replicas": 1,
            "selector": {"matchLabels": {"pool": name}},
            "template": {"metadata": {"labels": {"pool": name}},
                "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "b"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate", "name": name}}}}
    })
}

fn pool(name: &str, class: &str, requirements: Value) -> NodePool {
    from(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io",
            "kind": "ClusterAPINodeClass", "name": class}, "requirements": requirements}}}
    }))
}

/// No feature gate on, as `run` starts by default.
fn karpenter_capi_gates() -> crate::feature_gates::FeatureGates {
    crate::feature_gates::FeatureGates::default()
}

/// A working installation: one NodeClass selecting one priced MD, one NodePool, every
/// permission allowed.
fn good() -> Facts {
    let gates = karpenter_capi_gates();
    let mut checks = permissions::workload(Some(("karpenter", "lease")), &gates);
    checks.extend(permissions::management(&[], None, &gates));
    Facts {
        capi: Some(api::CapiVersion::v1beta2()),
        separate_management: true,
        scope: Scope::default(),
        crds_missing: Vec::new(),
        discovery_errors: Vec::new(),
        crd_drift: Vec::new(),
        crd_definitions_unreadable: None,
        permissions: checks.into_iter().map(|c| (c, Outcome::Allowed)).collect(),
        node_classes: Ok(vec![from(json!({
            "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
            "metadata": {"name": "default"}, "spec": {}}))]),
        node_pools: Ok(vec![pool("default", "default", json!([]))]),
        machine_sets: Vec::new(),
        machine_deployments: Ok(vec![from(md("small", json!({})))]),
        templates: Vec::new(),
        template_errors: BTreeMap::new(),
        autoscalers: Ok(Vec::new()),
        node_overlays: Ok(Vec::new()),
        node_overlay_gate: false,
    }
}

fn codes(report: &Report) -> Vec<(Severity, &'static str)> {
    report
        .findings
        .iter()
        .map(|f| (f.severity, f.code))
        .collect()
}

#[test]
fn a_working_installation_has_no_findings_and_an_inventory() {
    let report = examine(&good());
    assert!(report.ok, "{}", report.render());
    assert!(report.findings.is_empty(), "{}", report.render());
    // 33 workload rules' verbs (Events: create only) + 3 for the Lease; 17 management verbs.
    assert_eq!(report.permissions_checked, 33 + 3 + 17);
    let md = &report.node_classes[0].machine_deployments[0];
    assert_eq!(md.name, "capi/small");
    assert_eq!(md.instance_type.as_deref(), Some("small"));
    assert_eq!(md.name_source.as_deref(), Some("label"));
    assert_eq!(md.capacity_source, "annotations");
    assert_eq!(md.price_source.as_deref(), Some("annotation"));
    assert_eq!((md.zone.as_str(), md.zone_source.as_str()), ("z1", "label"));
    assert_eq!(md.max_size.as_deref(), Some("10"));
    assert_eq!(report.node_pools[0].available_instance_types, ["small"]);
    assert!(
        report
            .render()
            .contains("instance type small (label), cpu=4"),
        "{}",
        report.render()
    );
}

#[test]
fn missing_crds_name_the_cluster_and_how_to_install() {
    let mut f = good();
    f.crds_missing = crate::probes::required(&api::CapiVersion::v1beta2());
    let report = examine(&f);
    let missing: Vec<&Finding> = report.with_code("crd-missing").collect();
    assert_eq!(missing.len(), 6);
    assert!(missing[0].subject.starts_with("workload cluster nodepools"));
    assert!(
        missing[0]
            .hint
            .as_deref()
            .unwrap()
            .contains("karpenter-capi crds")
    );
    assert!(
        missing[5]
            .hint
            .as_deref()
            .unwrap()
            .contains("clusterctl init")
    );
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn a_denied_permission_is_a_blocker_naming_the_verb_and_resource() {
    let mut f = good();
    let (_, outcome) = f
        .permissions
        .iter_mut()
        .find(|(c, _)| c.verb == "create" && c.subresource == "eviction")
        .unwrap();
    *outcome = Outcome::Denied(String::new());
    for (_, o) in f
        .permissions
        .iter_mut()
        .filter(|(c, _)| c.cluster == Cluster::Management)
    {
        *o = Outcome::Unknown("the access review was refused: not found (404 NotFound)".into());
    }
    let report = examine(&f);
    assert_eq!(
        codes(&report),
        [
            (Severity::Blocker, "permission-denied"),
            (Severity::Warning, "permission-unknown")
        ]
    );
    assert_eq!(
        report.findings[0].message,
        "cannot create pods/eviction in every namespace"
    );
    assert!(
        report.findings[1]
            .message
            .starts_with("17 permission(s) could not be checked"),
        "{}",
        report.findings[1].message
    );
}

/// Issue 26 item 1: the opted-in MachineDeployments are named with what of the selector
/// their labels lack.
#[test]
fn a_selector_no_machine_deployment_meets_names_what_each_lacks() {
    let mut f = good();
    f.node_classes = Ok(vec![from(json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
        "metadata": {"name": "default"}, "spec": {"scalableResourceSelector": {
            "matchLabels": {"cluster.x-k8s.io/cluster-name": "my-cluster", "tier": "web"},
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}}}))]);
    let report = examine(&f);
    let finding = report
        .with_code("nodeclass-selects-nothing")
        .next()
        .unwrap();
    let hint = finding.hint.as_deref().unwrap();
    assert!(
        hint.contains(
            "capi/small has cluster.x-k8s.io/cluster-name=c1, not my-cluster, lacks tier=web, \
             does not satisfy zone In a,b"
        ),
        "{hint}"
    );
}

#[test]
fn a_machine_deployment_without_the_opt_in_label_is_named() {
    let mut f = good();
    let mut unlabelled: MachineDeployment = from(md("small", json!({})));
    unlabelled
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove(KARPENTER_MEMBER);
    f.machine_deployments = Ok(vec![unlabelled]);
    let report = examine(&f);
    let finding = report
        .with_code("nodeclass-selects-nothing")
        .next()
        .unwrap();
    assert_eq!(finding.severity, Severity::Blocker, "the NodePool uses it");
    assert!(
        finding
            .hint
            .as_deref()
            .unwrap()
            .contains("lack the opt-in label node.cluster.x-k8s.io/karpenter-member: capi/small"),
        "{finding:?}"
    );

    // Opted in but outside the configured cluster.
    let mut f = good();
    f.scope.cluster_name = Some("other".into());
    let report = examine(&f);
    let finding = report
        .with_code("nodeclass-selects-nothing")
        .next()
        .unwrap();
    assert!(
        finding
            .hint
            .as_deref()
            .unwrap()
            .contains("outside --cluster-name \"other\""),
        "{finding:?}"
    );
}

#[test]
fn a_machine_deployment_without_a_shape_is_left_out_and_says_why() {
    let mut f = good();
    f.machine_deployments = Ok(vec![from(md(
        "small",
        json!({"capacity.cluster-autoscaler.kubernetes.io/cpu": null}),
    ))]);
    f.template_errors.insert(
        "capi/small".into(),
        "cannot read DockerMachineTemplate capi/small: forbidden".into(),
    );
    let report = examine(&f);
    assert_eq!(
        codes(&report),
        [
            (Severity::Blocker, "nodeclass-no-instance-types"),
            (Severity::Warning, "machine-deployment-excluded")
        ],
        "{}",
        report.render()
    );
    let excluded = report
        .with_code("machine-deployment-excluded")
        .next()
        .unwrap();
    assert!(excluded.message.contains("cpu"), "{excluded:?}");
    assert!(excluded.hint.as_deref().unwrap().contains("forbidden"));
    assert_eq!(
        report.node_classes[0].machine_deployments[0].capacity_source,
        "missing"
    );
}

#[test]
fn unpriced_paused_and_autoscaler_groups_are_warnings() {
    let mut f = good();
    let mut m: MachineDeployment = from(md(
        "small",
        json!({"karpenter.cluster.x-k8s.io/price": null,
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
            "cluster.x-k8s.io/paused": ""}),
    ));
    m.spec.replicas = Some(2);
    f.machine_deployments = Ok(vec![m]);
    f.autoscalers = Ok(vec![
        "management cluster: kube-system/cluster-autoscaler".into(),
    ]);
    let report = examine(&f);
    let found = codes(&report);
    assert!(
        found.contains(&(Severity::Warning, "machine-deployment-unpriced")),
        "{found:?}"
    );
    assert!(
        found.contains(&(Severity::Warning, "machine-deployment-unavailable")),
        "{found:?}"
    );
    assert!(
        found.contains(&(Severity::Blocker, "nodepool-nothing-available")),
        "{found:?}"
    );
    let cas = report.with_code("autoscaler-node-group").next().unwrap();
    assert_eq!(cas.severity, Severity::Warning, "a cluster-autoscaler runs");
    assert!(
        cas.message.contains("kube-system/cluster-autoscaler"),
        "{cas:?}"
    );
    f.autoscalers = Ok(Vec::new());
    let cas = examine(&f)
        .with_code("autoscaler-node-group")
        .next()
        .cloned()
        .unwrap();
    assert_eq!(
        cas.severity,
        Severity::Info,
        "none runs: the annotations are ours too"
    );
}

#[test]
fn node_pools_that_can_never_launch_are_blockers() {
    let mut f = good();
    f.node_pools = Ok(vec![
        pool(
            "wrong-zone",
            "default",
            json!([{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z9"]}]),
        ),
        pool("no-class", "missing", json!([])),
        pool(
            "bad",
            "default",
            json!([{"key": "karpenter.sh/capacity-type", "operator": "Gt", "values": ["x"]}]),
        ),
    ]);
    let mut limited = pool("limited", "default", json!([]));
    limited.spec.limits = Some(from(json!({"cpu": "8"})));
    limited.status = Some(from(json!({"resources": {"cpu": "8", "nodes": "2"}})));
    f.node_pools.as_mut().unwrap().push(limited);
    let report = examine(&f);
    let by_subject = |s: &str| -> Vec<&'static str> {
        report
            .findings
            .iter()
            .filter(|x| x.subject == s)
            .map(|x| x.code)
            .collect()
    };
    assert_eq!(
        by_subject("NodePool wrong-zone"),
        ["nodepool-no-compatible-instance-types"]
    );
    assert_eq!(
        by_subject("NodePool no-class"),
        ["nodepool-nodeclass-missing"]
    );
    assert_eq!(by_subject("NodePool bad"), ["nodepool-invalid"]);
    assert_eq!(by_subject("NodePool limited"), ["nodepool-limits-reached"]);
    assert!(
        report
            .with_code("nodepool-limits-reached")
            .next()
            .unwrap()
            .message
            .contains("cpu 8 of 8")
    );
    assert!(!report.ok);

    let mut none = good();
    none.node_pools = Ok(Vec::new());
    assert_eq!(
        codes(&examine(&none)),
        [(Severity::Blocker, "no-nodepools")]
    );
}

#[test]
fn outdated_crds_and_list_failures_are_reported() {
    let mut f = good();
    f.crd_drift = vec![(
        "nodepools.karpenter.sh".into(),
        vec!["spec.replicas".into()],
    )];
    f.node_classes = Err("cannot list clusterapinodeclasses: forbidden".into());
    let report = examine(&f);
    assert_eq!(
        codes(&report),
        [
            (Severity::Blocker, "cannot-list"),
            (Severity::Blocker, "nodepool-nodeclass-missing"),
            (Severity::Warning, "crd-outdated")
        ]
    );
    assert!(report.findings[2].message.contains("spec.replicas"));
}

#[test]
fn schema_fields_walk_properties_and_items() {
    let schema = json!({"properties": {"spec": {"properties": {
        "a": {"type": "string"},
        "list": {"items": {"properties": {"key": {}}}}}}}});
    let mut out = std::collections::BTreeSet::new();
    crate::doctor::gather::schema_fields(&schema, "", &mut out);
    assert_eq!(
        out.into_iter().collect::<Vec<_>>(),
        ["spec", "spec.a", "spec.list", "spec.list[].key"]
    );
}

/// Every finding code `checks.rs` and `checks/machine_deployment.rs` can emit has its row in
/// docs/troubleshooting.md.
#[test]
fn the_troubleshooting_guide_explains_every_finding_code() {
    let source = [
        include_str!("../checks.rs"),
        include_str!("machine_deployment.rs"),
    ]
    .concat();
    let guide = include_str!("../../../../../docs/troubleshooting.md");
    let codes: Vec<&str> = source
        .split("Finding::new(")
        .skip(1)
        .filter_map(|rest| rest.split('"').nth(1))
        .collect();
    assert!(codes.len() >= 26, "{codes:?}");
    for new in [
        "machine-deployment-failed",
        "machine-deployment-topology-managed",
    ] {
        assert!(codes.contains(&new), "{new} not found in the sources");
    }
    let missing: Vec<&&str> = codes
        .iter()
        .filter(|c| !guide.contains(&format!("| `{c}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "not in docs/troubleshooting.md: {missing:?}"
    );
}

/// A MachineDeployment Cluster API reports Failed is a warning; one a ClusterClass topology
/// owns is named (info: fine when the topology leaves its replicas unset).
#[test]
fn failed_and_topology_managed_machine_deployments_are_named() {
    let mut f = good();
    let mut m = md("small", json!({}));
    m["status"] = json!({"phase": "Failed"});
    m["metadata"]["labels"]["topology.cluster.x-k8s.io/owned"] = json!("");
    f.machine_deployments = Ok(vec![from(m)]);
    let report = examine(&f);
    // A Failed MachineDeployment's offering is unavailable, so the only one leaves the
    // NodePool nothing to launch.
    assert_eq!(
        codes(&report),
        [
            (Severity::Blocker, "nodepool-nothing-available"),
            (Severity::Warning, "machine-deployment-unavailable"),
            (Severity::Warning, "machine-deployment-failed"),
            (Severity::Info, "machine-deployment-topology-managed"),
        ]
    );
    let unavailable = report
        .with_code("machine-deployment-unavailable")
        .next()
        .unwrap();
    assert!(
        unavailable
            .message
            .contains("reports the MachineDeployment Failed"),
        "{}",
        unavailable.message
    );
    let topology = report
        .with_code("machine-deployment-topology-managed")
        .next()
        .unwrap();
    assert!(
        topology.message.contains("topology.cluster.x-k8s.io/owned"),
        "{}",
        topology.message
    );
}

#[test]
fn a_management_cluster_serving_only_v1beta1_is_named() {
    let mut f = good();
    assert_eq!(examine(&f).with_code("capi-v1beta1").count(), 0);
    f.capi = Some(api::CapiVersion::v1beta1());
    let report = examine(&f);
    let found: Vec<&Finding> = report.with_code("capi-v1beta1").collect();
    assert_eq!(found.len(), 1, "{}", report.render());
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(
        found[0].message.contains("cluster.x-k8s.io/v1beta1"),
        "{}",
        found[0].message
    );
}

#[test]
fn a_blocked_scale_up_is_named_with_cluster_apis_reason() {
    let mut f = good();
    f.machine_deployments = Ok(vec![from(md("small", json!({})))]);
    f.machine_sets = vec![from(json!({
        "metadata": {"name": "small-x", "namespace": "capi",
            "labels": {"cluster.x-k8s.io/deployment-name": "small"}},
        "status": {"conditions": [{"type": "ScalingUp", "status": "True",
            "message": "Scaling up from 0 to 1 replicas is blocked because:\n* ControlPlaneIsStable: upgrading"}]}}))];
    let report = examine(&f);
    let found: Vec<&Finding> = report
        .with_code("machine-deployment-scale-up-blocked")
        .collect();
    assert_eq!(found.len(), 1, "{}", report.render());
    assert!(
        found[0].message.contains("ControlPlaneIsStable: upgrading"),
        "{}",
        found[0].message
    );
}

fn overlay(name: &str, weight: i32, spec: Value) -> api::NodeOverlay {
    let mut body = json!({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"weight": weight, "requirements": [{"key": "node.kubernetes.io/instance-type",
            "operator": "In", "values": ["small"]}]}});
    for (k, v) in spec.as_object().unwrap() {
        body["spec"][k] = v.clone();
    }
    from(body)
}

#[test]
fn node_overlays_show_the_price_they_set_and_where_it_came_from() {
    let mut facts = good();
    facts.node_overlays = Ok(vec![
        overlay("discount", 10, json!({"priceAdjustment": "-50%"})),
        overlay("a-rival", 5, json!({"price": "1"})),
        overlay("b-rival", 5, json!({"price": "2"})),
    ]);
    // The gate off: the overlays change nothing, and doctor says so.
    let report = examine(&facts);
    assert_eq!(
        codes(&report),
        [(Severity::Warning, "nodeoverlay-gate-off")]
    );
    assert!(report.node_pools[0].overlaid_prices.is_empty());

    facts.node_overlay_gate = true;
    let report = examine(&facts);
    assert_eq!(
        codes(&report),
        [(Severity::Warning, "nodeoverlay-not-applied")],
        "{}",
        report.render()
    );
    assert_eq!(report.findings[0].subject, "NodeOverlay a-rival");
    let prices = &report.node_pools[0].overlaid_prices;
    assert_eq!(prices.len(), 1, "{prices:?}");
    let p = &prices[0];
    assert_eq!(
        (
            p.instance_type.as_str(),
            p.machine_deployment.as_str(),
            p.zone.as_str()
        ),
        ("small", "capi/small", "z1")
    );
    assert_eq!((p.listed, p.price), (0.2, 0.1));
    assert_eq!(p.listed_source, "annotation");
    assert_eq!(p.overlay, "discount", "the highest weight wins");
    let text = report.render();
    assert!(
        text.contains(
            "price of small via capi/small (z1, on-demand): 0.2000 (annotation) → 0.1000 (NodeOverlay discount)"
        ),
        "{text}"
    );

    facts.node_overlays = Err("forbidden".into());
    assert_eq!(
        codes(&examine(&facts)),
        [(Severity::Info, "nodeoverlays-not-checked")]
    );
}
