//! Protobuf request bodies of the access reviews.
//!
//! Responsibility: decode Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`:
//! the `k8s\0` magic, then a `runtime.Unknown` holding the type and the raw message) of the four
//! `authorization.k8s.io/v1` review kinds into their JSON form, because client-go's typed
//! clients — `kubectl auth can-i` among them — send them so. Zero values are left out as Go's
//! JSON `omitempty` does; sub-messages that are present stay, even empty (a non-nil pointer).
//! Only these kinds are decoded; of `metadata`, the fields a review could carry (names, labels,
//! annotations, finalizers), not timestamps, owner references or managed fields.
//! Inputs: the request body. Outputs: a JSON object, or why it cannot be decoded.

use serde_json::{Map, Value, json};

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// How a field is decoded.
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Int,
    Msg(&'static [Field]),
    Strs,
    Msgs(&'static [Field]),
    /// `map<string, string>`.
    StrMap,
    /// `map<string, ExtraValue>`, `ExtraValue` being `repeated string items = 1`.
    ExtraMap,
}

/// A field: its number, its JSON name, its type.
type Field = (u64, &'static str, Ty);

const META: &[Field] = &[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::Int),
    (11, "labels", Ty::StrMap),
    (12, "annotations", Ty::StrMap),
    (14, "finalizers", Ty::Strs),
];
const REQUIREMENT: &[Field] = &[
    (1, "key", Ty::Str),
    (2, "operator", Ty::Str),
    (3, "values", Ty::Strs),
];
const SELECTOR: &[Field] = &[
    (1, "rawSelector", Ty::Str),
    (2, "requirements", Ty::Msgs(REQUIREMENT)),
];
const RESOURCE: &[Field] = &[
    (1, "namespace", Ty::Str),
    (2, "verb", Ty::Str),
    (3, "group", Ty::Str),
    (4, "version", Ty::Str),
    (5, "resource", Ty::Str),
    (6, "subresource", Ty::Str),
    (7, "name", Ty::Str),
    (8, "fieldSelector", Ty::Msg(SELECTOR)),
    (9, "labelSelector", Ty::Msg(SELECTOR)),
];
const NON_RESOURCE: &[Field] = &[(1, "path", Ty::Str), (2, "verb", Ty::Str)];
const SELF_SPEC: &[Field] = &[
    (1, "resourceAttributes", Ty::Msg(RESOURCE)),
    (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE)),
];
const SUBJECT_SPEC: &[Field] = &[
    (1, "resourceAttributes", Ty::Msg(RESOURCE)),
    (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE)),
    (3, "user", Ty::Str),
    (4, "groups", Ty::Strs),
    (5, "extra", Ty::ExtraMap),
    (6, "uid", Ty::Str),
];
const RULES_SPEC: &[Field] = &[(1, "namespace", Ty::Str)];
const TYPE_META: &[Field] = &[(1, "apiVersion", Ty::Str), (2, "kind", Ty::Str)];
const UNKNOWN: &[Field] = &[
    (1, "typeMeta", Ty::Msg(TYPE_META)),
    (3, "contentEncoding", Ty::Str),
    (4, "contentType", Ty::Str),
];

/// The fields of a review kind (its `status` is not read: the server sets it).
fn review(kind: &str) -> Option<&'static [Field]> {
    const SELF: &[Field] = &[
        (1, "metadata", Ty::Msg(META)),
        (2, "spec", Ty::Msg(SELF_SPEC)),
    ];
    const SUBJECT: &[Field] = &[
        (1, "metadata", Ty::Msg(META)),
        (2, "spec", Ty::Msg(SUBJECT_SPEC)),
    ];
    const RULES: &[Field] = &[
        (1, "metadata", Ty::Msg(META)),
        (2, "spec", Ty::Msg(RULES_SPEC)),
    ];
    match kind {
        "SelfSubjectAccessReview" => Some(SELF),
        "SubjectAccessReview" | "LocalSubjectAccessReview" => Some(SUBJECT),
        "SelfSubjectRulesReview" => Some(RULES),
        _ => None,
    }
}

/// A protobuf message being read.
struct Reader<'a> {
    bytes: &'a [u8],
}

/// One field's value on the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0_u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .bytes
                .split_first()
                .ok_or("truncated varint".to_owned())?;
            self.bytes = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.bytes.len() {
            return Err("truncated field".into());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// The next `(field number, value)`, or `None` at the end.
    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, String> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|e| e.to_string())?;
                Wire::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            other => return Err(format!("unsupported wire type {other}")),
        };
        Ok(Some((key >> 3, wire)))
    }
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())
}

/// A `map` entry: `key = 1`, `value = 2`.
fn entry(bytes: &[u8]) -> Result<(String, &[u8]), String> {
    let mut r = Reader { bytes };
    let (mut key, mut value): (String, &[u8]) = (String::new(), &[]);
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

fn push(out: &mut Map<String, Value>, name: &str, v: Value) {
    if let Some(Value::Array(list)) = out.get_mut(name) {
        list.push(v);
    } else {
        out.insert(name.to_owned(), json!([v]));
    }
}

/// Decode one message with its fields' table.
fn message(bytes: &[u8], fields: &[Field]) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let mut r = Reader { bytes };
    while let Some((n, wire)) = r.next()? {
        let Some(&(_, name, ty)) = fields.iter().find(|f| f.0 == n) else {
            continue;
        };
        match (ty, wire) {
            (Ty::Str, Wire::Bytes(b)) if !b.is_empty() => {
                out.insert(name.into(), json!(text(b)?));
            }
            (Ty::Int, Wire::Varint(v)) if v != 0 => {
                out.insert(name.into(), json!(v));
            }
            (Ty::Msg(inner), Wire::Bytes(b)) => {
                out.insert(name.into(), Value::Object(message(b, inner)?));
            }
            (Ty::Strs, Wire::Bytes(b)) => push(&mut out, name, json!(text(b)?)),
            (Ty::Msgs(inner), Wire::Bytes(b)) => {
                push(&mut out, name, Value::Object(message(b, inner)?));
            }
            (Ty::StrMap | Ty::ExtraMap, Wire::Bytes(b)) => {
                let (key, value) = entry(b)?;
                let value = match ty {
                    Ty::ExtraMap => message(value, &[(1, "items", Ty::Strs)])?
                        .remove("items")
                        .unwrap_or_else(|| json!([])),
                    _ => json!(text(value)?),
                };
                let map = out.entry(name).or_insert_with(|| json!({}));
                if let Some(m) = map.as_object_mut() {
                    m.insert(key, value);
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// The JSON form of a protobuf review body.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the Kubernetes protobuf prefix")?;
    // `runtime.Unknown`: the type (1) and the raw message (2) read apart, as `raw` has no table.
    let envelope = message(body, UNKNOWN)?;
    if envelope.get("contentEncoding").is_some() {
        return Err("content encodings are not supported".into());
    }
    let mut raw: &[u8] = &[];
    let mut r = Reader { bytes: body };
    while let Some((n, w)) = r.next()? {
        if let (2, Wire::Bytes(b)) = (n, w) {
            raw = b;
        }
    }
    let type_meta = envelope.get("typeMeta").cloned().unwrap_or(json!({}));
    let kind = type_meta
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let fields = review(kind).ok_or_else(|| format!("cannot decode {kind:?} from protobuf"))?;
    let mut obj = message(raw, fields)?;
    for key in ["apiVersion", "kind"] {
        if let Some(v) = type_meta.get(key) {
            obj.insert(key.into(), v.clone());
        }
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
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
                "verb": "list", "group": "apps", "resource": "deployments", "name": "foo"}}})
        );
        assert_eq!(
            decode(&hex(CAN_I_GET_LOGS)).unwrap()["spec"],
            json!({"nonResourceAttributes": {"path": "/logs", "verb": "get"}})
        );
        assert_eq!(
            decode(&hex(CAN_I_LIST)).unwrap(),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                "metadata": {}, "spec": {"namespace": "default"}})
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
        let type_meta = [field(1, b"v1"), field(2, b"Pod")].concat();
        assert!(decode(&[MAGIC.to_vec(), field(1, &type_meta)].concat()).is_err());
        assert!(decode(&[MAGIC.to_vec(), vec![0x12, 0x05, 0x01]].concat()).is_err());
    }
}
