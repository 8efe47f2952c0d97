//! Behaviour of discovery and scoping.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;

use api::MachineDeployment;
use api::well_known::capi::{KARPENTER_MEMBER, PAUSED};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::*;
use crate::testing::md;

fn names(selected: &[&MachineDeployment]) -> Vec<String> {
    selected
        .iter()
        .map(|md| md.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        ),
        match_expressions: None,
    }
}

fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelector {
    LabelSelector {
        match_labels: None,
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }]),
    }
}

fn fleet() -> Vec<MachineDeployment> {
    vec![
        md("default", "member").label("tier", "general").build(),
        md("default", "member-true")
            .label(KARPENTER_MEMBER, "true")
            .label("tier", "batch")
            .build(),
        md("default", "outsider")
            .without_label(KARPENTER_MEMBER)
            .label("tier", "general")
            .build(),
    ]
}

#[test]
fn without_a_selector_every_member_is_selected_whatever_its_label_value() {
    let mds = fleet();
    let selected = select(&mds, None, &Scope::everywhere()).unwrap();
    assert_eq!(names(&selected), ["member", "member-true"]);
}

#[test]
fn an_empty_selector_keeps_the_member_filter() {
    // Upstream bug: `{}` replaced the member filter and selected every MachineDeployment.
    let mds = fleet();
    let selected = select(&mds, Some(&LabelSelector::default()), &Scope::everywhere()).unwrap();
    assert_eq!(names(&selected), ["member", "member-true"]);
}

#[test]
fn a_selector_narrows_the_members_and_never_adds_non_members() {
    // Upstream bug: a non-nil selector dropped the member filter, so `outsider` matched.
    let mds = fleet();
    let selector = match_labels(&[("tier", "general")]);
    let selected = select(&mds, Some(&selector), &Scope::everywhere()).unwrap();
    assert_eq!(names(&selected), ["member"]);
}

#[test]
fn a_selector_on_the_member_label_value_still_needs_the_label() {
    let mds = fleet();
    let selector = expression(KARPENTER_MEMBER, "NotIn", &["true"]);
    let selected = select(&mds, Some(&selector), &Scope::everywhere()).unwrap();
    assert_eq!(names(&selected), ["member"]);
}

#[test]
fn match_expressions_follow_label_selector_semantics() {
    let mds = fleet();
    let pick = |selector: LabelSelector| {
        names(&select(&mds, Some(&selector), &Scope::everywhere()).unwrap())
    };
    assert_eq!(
        pick(expression("tier", "In", &["batch", "x"])),
        ["member-true"]
    );
    assert_eq!(pick(expression("tier", "NotIn", &["batch"])), ["member"]);
    assert_eq!(
        pick(expression("tier", "Exists", &[])),
        ["member", "member-true"]
    );
    assert!(pick(expression("tier", "DoesNotExist", &[])).is_empty());
    assert_eq!(
        pick(expression("zone", "NotIn", &["a"])),
        ["member", "member-true"]
    );
}

#[test]
fn match_labels_and_expressions_are_anded() {
    let mds = fleet();
    let mut selector = match_labels(&[("tier", "general")]);
    selector.match_expressions = expression(KARPENTER_MEMBER, "In", &["true"]).match_expressions;
    assert!(
        select(&mds, Some(&selector), &Scope::everywhere())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn an_invalid_selector_is_an_error_not_everything() {
    let mds = fleet();
    for selector in [
        expression("tier", "Within", &["x"]),
        expression("tier", "In", &[]),
        expression("tier", "Exists", &["x"]),
        expression("bad key", "Exists", &[]),
        match_labels(&[("tier", "not a value")]),
    ] {
        assert!(
            select(&mds, Some(&selector), &Scope::everywhere()).is_err(),
            "{selector:?}"
        );
    }
    let error = select(
        &[],
        Some(&expression("tier", "Within", &["x"])),
        &Scope::everywhere(),
    )
    .unwrap_err();
    assert!(error.to_string().contains("Within"));
}

#[test]
fn the_namespace_scope_keeps_only_that_namespace() {
    let mds = [md("a", "one").build(), md("b", "two").build()];
    let scope = Scope {
        namespace: Some("b".into()),
        cluster_name: None,
    };
    assert_eq!(names(&select(&mds, None, &scope).unwrap()), ["two"]);
}

#[test]
fn the_cluster_scope_uses_the_cluster_name_label_then_spec_cluster_name() {
    let mut by_spec = md("default", "by-spec").build();
    by_spec.spec.cluster_name = "blue".into();
    let mds = [
        md("default", "blue").cluster("blue").build(),
        md("default", "green").cluster("green").build(),
        by_spec,
        md("default", "no-cluster").build(),
    ];
    let scope = Scope {
        namespace: None,
        cluster_name: Some("blue".into()),
    };
    assert_eq!(
        names(&select(&mds, None, &scope).unwrap()),
        ["blue", "by-spec"]
    );
}

#[test]
fn scope_and_selector_apply_together() {
    let mds = [
        md("a", "x").cluster("blue").label("tier", "t").build(),
        md("b", "y").cluster("blue").label("tier", "t").build(),
        md("a", "z").cluster("green").label("tier", "t").build(),
    ];
    let scope = Scope {
        namespace: Some("a".into()),
        cluster_name: Some("blue".into()),
    };
    let selector = match_labels(&[("tier", "t")]);
    assert_eq!(
        names(&select(&mds, Some(&selector), &scope).unwrap()),
        ["x"]
    );
}

#[test]
fn paused_means_spec_paused_or_the_paused_annotation_present() {
    assert!(!is_paused(&md("d", "running").build()));
    assert!(is_paused(&md("d", "spec").paused().build()));
    assert!(is_paused(
        &md("d", "annotated").annotation(PAUSED, "").build()
    ));
    let mut unpaused = md("d", "explicit").build();
    unpaused.spec.paused = Some(false);
    assert!(!is_paused(&unpaused));
}

#[test]
fn paused_members_are_still_selected() {
    let mds = [md("d", "paused").paused().build()];
    assert_eq!(
        names(&select(&mds, None, &Scope::everywhere()).unwrap()),
        ["paused"]
    );
}
