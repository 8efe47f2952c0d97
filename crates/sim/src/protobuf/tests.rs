//! Tests of the protobuf decoder: bodies kubectl sent, and hand-built ones.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::*;

fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

/// What `kubectl auth can-i list deployments.apps/foo -n kube-system` (v1.32) sends.
const CAN_I_LIST_DEPLOYMENTS: &str = "6b 38 73 00 0a 32 0a 17 61 75 74 68 6f 72 69 7a 61 74 69 6f 6e 2e 6b 38 73 2e 69 6f 2f 76 31 12 17 53 65 6c 66 53 75 62 6a 65 63 74 41 63 63 65 73 73 52 65 76 69 65 77 12 4f 0a 10 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 31 0a 2f 0a 0b 6b 75 62 65 2d 73 79 73 74 65 6d 12 04 6c 69 73 74 1a 04 61 70 70 73 22 00 2a 0b 64 65 70 6c 6f 79 6d 65 6e 74 73 32 00 3a 03 66 6f 6f 1a 08 08 00 12 00 1a 00 20 00 1a 00 22 00";
/// `kubectl auth can-i get /logs`.
const CAN_I_GET_LOGS: &str = "6b 38 73 00 0a 32 0a 17 61 75 74 68 6f 72 69 7a 61 74 69 6f 6e 2e 6b 38 73 2e 69 6f 2f 76 31 12 17 53 65 6c 66 53 75 62 6a 65 63 74 41 63 63 65 73 73 52 65 76 69 65 77 12 2c 0a 10 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 0e 12 0c 0a 05 2f 6c 6f 67 73 12 03 67 65 74 1a 08 08 00 12 00 1a 00 20 00 1a 00 22 00";
/// `kubectl auth can-i --list`.
const CAN_I_LIST: &str = "6b 38 73 00 0a 31 0a 17 61 75 74 68 6f 72 69 7a 61 74 69 6f 6e 2e 6b 38 73 2e 69 6f 2f 76 31 12 16 53 65 6c 66 53 75 62 6a 65 63 74 52 75 6c 65 73 52 65 76 69 65 77 12 23 0a 10 0a 00 12 00 1a 00 22 00 2a 00 32 00 38 00 42 00 12 09 0a 07 64 65 66 61 75 6c 74 1a 04 18 00 22 00 1a 00 22 00";

#[test]
fn decodes_what_kubectl_auth_can_i_sends() {
    assert_eq!(
        decode(&hex(CAN_I_LIST_DEPLOYMENTS)).unwrap(),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {}, "spec": {"resourceAttributes": {"namespace": "kube-system",
            "verb": "list", "group": "apps", "resource": "deployments", "name": "foo"}},
                "status": {}})
    );
    assert_eq!(
        decode(&hex(CAN_I_GET_LOGS)).unwrap()["spec"],
        json!({"nonResourceAttributes": {"path": "/logs", "verb": "get"}})
    );
    assert_eq!(
        decode(&hex(CAN_I_LIST)).unwrap(),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "metadata": {}, "spec": {"namespace": "default"}, "status": {}})
    );
}

/// A length-delimited field.
fn field(n: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(n << 3) | 2, u8::try_from(bytes.len()).unwrap()];
    out.extend_from_slice(bytes);
    out
}

#[test]
fn decodes_subjects_extra_and_selectors() {
    let requirement = [
        field(1, b"k"),
        field(2, b"In"),
        field(3, b"a"),
        field(3, b"b"),
    ]
    .concat();
    let attrs = [field(2, b"list"), field(9, &field(2, &requirement))].concat();
    let extra = [
        field(1, b"scopes"),
        field(2, &[field(1, b"x"), field(1, b"y")].concat()),
    ]
    .concat();
    let spec = [
        field(1, &attrs),
        field(3, b"bob"),
        field(4, b"g1"),
        field(4, b"g2"),
        field(5, &extra),
    ]
    .concat();
    let raw = [field(1, &field(3, b"n")), field(2, &spec)].concat();
    let type_meta = [
        field(1, b"authorization.k8s.io/v1"),
        field(2, b"SubjectAccessReview"),
    ]
    .concat();
    let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
    assert_eq!(
        decode(&body).unwrap(),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "metadata": {"namespace": "n"}, "spec": {
                "resourceAttributes": {"verb": "list", "labelSelector": {"requirements": [
                    {"key": "k", "operator": "In", "values": ["a", "b"]}]}},
                "user": "bob", "groups": ["g1", "g2"], "extra": {"scopes": ["x", "y"]}}})
    );
}

#[test]
fn refuses_what_it_cannot_read() {
    assert!(decode(b"{}").is_err());
    let type_meta = [field(1, b"v1"), field(2, b"PersistentVolume")].concat();
    assert!(matches!(
        decode(&[MAGIC.to_vec(), field(1, &type_meta)].concat()),
        Err(DecodeError::Unsupported(_))
    ));
    assert!(decode(&[MAGIC.to_vec(), vec![0x12, 0x05, 0x01]].concat()).is_err());
}

/// A varint field.
fn varint(n: u8, v: u64) -> Vec<u8> {
    let mut out = vec![n << 3];
    let mut v = v;
    while v >= 0x80 {
        out.push(u8::try_from(v & 0x7f).unwrap() | 0x80);
        v >>= 7;
    }
    out.push(u8::try_from(v).unwrap());
    out
}

/// A body of `kind` holding `raw`.
fn body(api_version: &[u8], kind: &[u8], raw: &[u8]) -> Vec<u8> {
    let type_meta = [field(1, api_version), field(2, kind)].concat();
    [MAGIC.to_vec(), field(1, &type_meta), field(2, raw)].concat()
}

/// An empty string field, as gogo-protobuf writes every non-pointer string.
fn empty(n: u8) -> Vec<u8> {
    vec![(n << 3) | 2, 0]
}

#[test]
fn decodes_a_deployment_with_zero_values_left_out() {
    // metadata: name "web", namespace "", labels {app: web}, creationTimestamp {} (zero).
    let meta = [
        field(1, b"web"),
        empty(3),
        varint(7, 0),
        field(8, &[]),
        field(11, &[field(1, b"app"), field(2, b"web")].concat()),
    ]
    .concat();
    let selector = field(1, &[field(1, b"app"), field(2, b"web")].concat());
    let requests = [field(1, b"cpu"), field(2, &field(1, b"100m"))].concat();
    let resources = field(2, &requests);
    let container = [
        field(1, b"nginx"),
        field(2, b"nginx"),
        field(8, &resources),
        empty(13),
    ]
    .concat();
    let pod_spec = field(2, &container);
    let template = [
        field(
            1,
            &field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ),
        field(2, &pod_spec),
    ]
    .concat();
    let spec = [
        varint(1, 0),
        field(2, &selector),
        field(3, &template),
        field(4, &[]),
        varint(5, 0),
    ]
    .concat();
    let raw = [field(1, &meta), field(2, &spec), field(3, &[])].concat();
    assert_eq!(
        decode(&body(b"apps/v1", b"Deployment", &raw)).unwrap(),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "nginx", "image": "nginx",
                     "resources": {"requests": {"cpu": "100m"}}}]}},
                "strategy": {}},
            "status": {}})
    );
}

#[test]
fn decodes_well_known_encodings() {
    // Secret: data {a: [0xff, 0x00]}, immutable false (a pointer: kept), type.
    let raw = [
        field(
            1,
            &[
                field(1, b"s"),
                field(8, &[varint(1, 1_700_000_000), varint(2, 5)].concat()),
            ]
            .concat(),
        ),
        field(2, &[field(1, b"a"), field(2, &[0xff, 0x00])].concat()),
        field(3, b"Opaque"),
        varint(5, 0),
    ]
    .concat();
    assert_eq!(
        decode(&body(b"v1", b"Secret", &raw)).unwrap(),
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "creationTimestamp": "2023-11-14T22:13:20Z"},
            "data": {"a": "/wA="}, "type": "Opaque", "immutable": false})
    );
    // PodDisruptionBudget: minAvailable 2 (int), maxUnavailable "50%" (string).
    let int = [varint(1, 0), varint(2, 2), empty(3)].concat();
    let string = [varint(1, 1), varint(2, 0), field(3, b"50%")].concat();
    let spec = [field(1, &int), field(3, &string)].concat();
    let pdb = decode(&body(
        b"policy/v1",
        b"PodDisruptionBudget",
        &field(2, &spec),
    ))
    .unwrap();
    assert_eq!(
        pdb["spec"],
        json!({"minAvailable": 2, "maxUnavailable": "50%"})
    );
    // A MicroTime keeps microseconds.
    let event = [
        field(1, &field(1, b"e")),
        field(
            10,
            &[varint(1, 1_700_000_000), varint(2, 123_456_789)].concat(),
        ),
    ]
    .concat();
    let event = decode(&body(b"v1", b"Event", &event)).unwrap();
    assert_eq!(event["eventTime"], "2023-11-14T22:13:20.123456Z");
    // A negative int64 (ten-byte varint): a DeleteOptions' gracePeriodSeconds of -1.
    let opts = decode(&body(b"v1", b"DeleteOptions", &varint(1, u64::MAX))).unwrap();
    assert_eq!(opts["gracePeriodSeconds"], -1);
}

#[test]
fn an_unknown_field_number_is_an_error_naming_kind_and_field() {
    let spec = field(15, b"x");
    let raw = [field(1, &field(1, b"web")), field(2, &spec)].concat();
    let err = decode(&body(b"apps/v1", b"Deployment", &raw)).unwrap_err();
    let DecodeError::Unsupported(message) = err else {
        panic!("{err:?}");
    };
    assert!(message.contains("Deployment"), "{message}");
    assert!(message.contains("field number 15 of spec"), "{message}");
    // A wire type that does not match the field's type is malformed.
    let raw = varint(1, 3);
    assert!(matches!(
        decode(&body(b"v1", b"ConfigMap", &raw)),
        Err(DecodeError::Malformed(_))
    ));
}
