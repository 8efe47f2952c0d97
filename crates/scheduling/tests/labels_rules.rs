//! Well-known labels, aliases, restricted domains and label syntax rules.

use scheduling::labels::{
    self, DEFAULT_WELL_KNOWN, LabelError, WellKnownLabels, label_domain, normalize_key,
    validate_label_value, validate_qualified_name,
};

#[test]
fn well_known_keys_have_upstream_spelling() {
    assert_eq!(
        [
            labels::NODE_POOL,
            labels::CAPACITY_TYPE,
            labels::NODE_REGISTERED,
            labels::NODE_INITIALIZED
        ],
        [
            "karpenter.sh/nodepool",
            "karpenter.sh/capacity-type",
            "karpenter.sh/registered",
            "karpenter.sh/initialized"
        ]
    );
    assert_eq!(
        [
            labels::TOPOLOGY_ZONE,
            labels::TOPOLOGY_REGION,
            labels::INSTANCE_TYPE,
            labels::ARCH,
            labels::OS
        ],
        [
            "topology.kubernetes.io/zone",
            "topology.kubernetes.io/region",
            "node.kubernetes.io/instance-type",
            "kubernetes.io/arch",
            "kubernetes.io/os"
        ]
    );
    assert_eq!(
        (labels::WINDOWS_BUILD, labels::HOSTNAME),
        ("node.kubernetes.io/windows-build", "kubernetes.io/hostname")
    );
}

#[test]
fn default_well_known_set_is_core_and_excludes_hostname_and_lifecycle_labels() {
    let wk = WellKnownLabels::default();
    let keys: Vec<&str> = wk.keys().collect();
    let mut expected = DEFAULT_WELL_KNOWN.to_vec();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    for key in [
        labels::HOSTNAME,
        labels::NODE_REGISTERED,
        labels::NODE_INITIALIZED,
    ] {
        assert!(!wk.contains(key), "{key}");
    }
}

#[test]
fn cluster_api_set_adds_provider_keys_without_changing_defaults() {
    let wk = WellKnownLabels::cluster_api();
    for key in [
        labels::CAPI_INSTANCE_SIZE,
        labels::CAPI_INSTANCE_FAMILY,
        labels::CAPI_INSTANCE_MEMORY,
        labels::CAPI_INSTANCE_CPU,
        labels::CAPI_CAPACITY_MEMORY,
        labels::CAPI_CAPACITY_CPU,
    ] {
        assert!(
            wk.contains(key) && !WellKnownLabels::default().contains(key),
            "{key}"
        );
    }
    assert_eq!(wk.keys().count(), DEFAULT_WELL_KNOWN.len() + 6);
    assert!(
        WellKnownLabels::default()
            .with_key("example.com/reservation-id")
            .contains("example.com/reservation-id")
    );
}

#[test]
fn aliases_normalise_to_well_known_keys() {
    assert_eq!(
        normalize_key("failure-domain.beta.kubernetes.io/zone"),
        labels::TOPOLOGY_ZONE
    );
    assert_eq!(
        normalize_key("failure-domain.beta.kubernetes.io/region"),
        labels::TOPOLOGY_REGION
    );
    assert_eq!(normalize_key("beta.kubernetes.io/arch"), labels::ARCH);
    assert_eq!(normalize_key("beta.kubernetes.io/os"), labels::OS);
    assert_eq!(
        normalize_key("beta.kubernetes.io/instance-type"),
        labels::INSTANCE_TYPE
    );
    assert_eq!(normalize_key("example.com/zone"), "example.com/zone");
}

#[test]
fn hostname_and_karpenter_domain_are_restricted_but_well_known_keys_are_not() {
    let wk = WellKnownLabels::default();
    assert!(wk.is_restricted_label(labels::HOSTNAME));
    assert!(wk.is_restricted_label("karpenter.sh/custom"));
    assert!(wk.is_restricted_label("sub.karpenter.sh/custom"));
    assert!(wk.is_restricted_label(labels::NODE_REGISTERED));
    assert!(!wk.is_restricted_label(labels::NODE_POOL));
    assert!(!wk.is_restricted_label(labels::CAPACITY_TYPE));
    assert!(wk.check_restricted(labels::HOSTNAME).is_err() && wk.check_restricted("team").is_ok());
}

#[test]
fn a_domain_merely_ending_with_a_restricted_name_is_not_restricted() {
    let wk = WellKnownLabels::default();
    assert!(!wk.is_restricted_label("notkarpenter.sh/x"));
    assert!(!wk.is_restricted_label("karpenter.sh.example.com/x"));
}

#[test]
fn kubernetes_io_domains_are_not_restricted() {
    let wk = WellKnownLabels::default();
    for key in [
        "node-restriction.kubernetes.io/team",
        "node.kubernetes.io/custom",
        "node-role.kubernetes.io/worker",
        "example.k8s.io/x",
        "kubernetes.io/custom",
    ] {
        assert!(!wk.is_restricted_label(key), "{key}");
    }
}

#[test]
fn domain_exceptions_win_over_a_restricted_parent_domain() {
    let wk = WellKnownLabels::default().with_restricted_domain("kubernetes.io");
    assert!(wk.is_restricted_label("node-role.kubernetes.io/worker"));
    assert!(!wk.is_restricted_label("node-restriction.kubernetes.io/team"));
    assert!(!wk.is_restricted_label("a.node.kubernetes.io/x"));
    assert!(!wk.is_restricted_label(labels::ARCH), "well known");
    let wk = wk.with_domain_exception("example.kubernetes.io");
    assert!(!wk.is_restricted_label("example.kubernetes.io/x"));
}

#[test]
fn provider_domain_is_restricted_except_its_well_known_keys() {
    let wk = WellKnownLabels::cluster_api();
    assert!(wk.is_restricted_label("karpenter.cluster.x-k8s.io/other"));
    assert!(!wk.is_restricted_label(labels::CAPI_INSTANCE_FAMILY));
    assert!(!wk.is_restricted_label(labels::CAPI_CAPACITY_MEMORY));
}

#[test]
fn capacity_type_has_known_values() {
    let wk = WellKnownLabels::default();
    let known: Vec<&str> = wk
        .known_values(labels::CAPACITY_TYPE)
        .unwrap()
        .iter()
        .map(|v| &**v)
        .collect();
    assert_eq!(known, ["on-demand", "reserved", "spot"]);
    assert!(wk.known_values(labels::ARCH).is_none());
}

#[test]
fn label_domain_is_the_prefix_before_the_first_slash() {
    assert_eq!(label_domain("kubernetes.io/arch"), "kubernetes.io");
    assert_eq!(label_domain("arch"), "");
    assert_eq!(label_domain("a/b/c"), "a");
}

#[test]
fn qualified_names_accept_plain_and_prefixed_names() {
    for key in [
        "a",
        "A1",
        "my.name",
        "my_name-2",
        "example.com/MyName",
        "k8s.io/x",
        &"a".repeat(63),
    ] {
        assert_eq!(validate_qualified_name(key), Ok(()), "{key}");
    }
}

#[test]
fn qualified_names_reject_each_kind_of_mistake() {
    let long_prefix = format!("{}/x", "a".repeat(254));
    type Case = (&'static str, fn(String) -> LabelError);
    let cases: [Case; 9] = [
        ("", LabelError::EmptyName),
        ("example.com/", LabelError::EmptyName),
        ("/name", LabelError::EmptyPrefix),
        ("a/b/c", LabelError::TooManySlashes),
        ("Example.com/x", LabelError::InvalidPrefix),
        ("-a.com/x", LabelError::InvalidPrefix),
        ("a..b/x", LabelError::InvalidPrefix),
        ("bad key", LabelError::InvalidName),
        ("_a", LabelError::InvalidName),
    ];
    for (key, variant) in cases {
        assert_eq!(
            validate_qualified_name(key),
            Err(variant(key.to_owned())),
            "{key:?}"
        );
    }
    assert_eq!(
        validate_qualified_name(&long_prefix),
        Err(LabelError::InvalidPrefix(long_prefix.clone()))
    );
    let long = "a".repeat(64);
    assert_eq!(
        validate_qualified_name(&long),
        Err(LabelError::NameTooLong(long.clone()))
    );
}

#[test]
fn label_values_may_be_empty_but_not_malformed() {
    for ok in ["", "a", "on-demand", "1.2_3", &"v".repeat(63)] {
        assert_eq!(validate_label_value(ok), Ok(()), "{ok:?}");
    }
    for bad in ["-a", "a-", "a b", "a/b", "ü"] {
        assert_eq!(
            validate_label_value(bad),
            Err(LabelError::InvalidValue(bad.to_owned())),
            "{bad:?}"
        );
    }
    let long = "v".repeat(64);
    assert_eq!(
        validate_label_value(&long),
        Err(LabelError::ValueTooLong(long.clone()))
    );
}
