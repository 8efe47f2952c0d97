//! Protobuf request bodies of built-in kinds.
//!
//! Responsibility: decode Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`:
//! the `k8s\0` magic, then a `runtime.Unknown` holding the type and the raw message) into the
//! JSON form kube-apiserver would have decoded, because client-go's typed clients — `kubectl
//! create deployment|configmap|secret|…`, `kubectl drain`'s evictions, `kubectl auth can-i` —
//! send built-in kinds so. The kinds decoded are those of `root` (the built-in kinds sim
//! serves, `DeleteOptions` and the access reviews), with the field tables of `tables`.
//! Kubernetes' well-known encodings: a `Quantity` becomes its string, a `metav1.Time` an RFC 3339
//! string, an `IntOrString` a number or a string, `bytes` base64, a `map` (repeated entries,
//! key 1 and value 2) an object, a `RawExtension`/`FieldsV1` the JSON it holds. Zero values are
//! left out as Go's JSON `omitempty` does, but for fields that are Go pointers (`Card::Ptr`),
//! whose presence is their meaning; sub-messages that are present stay, even empty.
//! A field number the table does not know is an error naming the kind and the field, never
//! dropped silently. Pure logic, no I/O.
//! Inputs: the request body. Outputs: a JSON object, or a [`DecodeError`].

mod tables;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

/// The prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8] = b"k8s\0";

/// How a field's value is decoded.
#[derive(Clone, Copy)]
pub(crate) enum Ty {
    Str,
    /// `int32`/`int64` (negative numbers are ten-byte varints).
    Int,
    Bool,
    /// `bytes`: base64 in JSON.
    Bytes,
    /// `resource.Quantity`: `string string = 1`.
    Quantity,
    /// `metav1.Time`: `int64 seconds = 1; int32 nanos = 2`, RFC 3339 in seconds.
    Time,
    /// `metav1.MicroTime`: as `Time`, RFC 3339 in microseconds.
    MicroTime,
    /// `intstr.IntOrString`: `int64 type = 1; int32 intVal = 2; string strVal = 3`.
    IntOrStr,
    /// `runtime.RawExtension`/`metav1.FieldsV1`: `bytes raw = 1`, holding JSON.
    Raw,
    /// A message of only `repeated string items = 1` (`ExtraValue`, `Verbs`): a JSON array.
    Items,
    Msg(&'static [Field]),
}

/// How often a field occurs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Card {
    /// Once; its zero value left out.
    One,
    /// Once, a Go pointer: kept whatever its value.
    Ptr,
    /// Repeated: a JSON array.
    Many,
    /// `map<string, T>`: a JSON object.
    Map,
    /// An embedded Go struct whose JSON is inline (`json:""`): its fields merge into the parent's.
    Inline,
}

/// A field: its number, its JSON name, its type, its cardinality.
pub(crate) type Field = (u64, &'static str, Ty, Card);

/// Why a body cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The body is not well-formed protobuf (400).
    Malformed(String),
    /// A kind or a field this decoder does not know (415: the body cannot be read as sent).
    Unsupported(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Malformed(m) | Self::Unsupported(m) => f.write_str(m),
        }
    }
}

/// The message table of a kind, by its `apiVersion` and `kind`.
fn root(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    use tables::*;
    Some(match (api_version, kind) {
        ("v1", "Namespace") => CORE_NAMESPACE,
        ("v1", "ConfigMap") => CORE_CONFIG_MAP,
        ("v1", "Secret") => CORE_SECRET,
        ("v1", "ServiceAccount") => CORE_SERVICE_ACCOUNT,
        ("v1", "Pod") => CORE_POD,
        ("v1", "Node") => CORE_NODE,
        ("v1", "Event") => CORE_EVENT,
        ("apps/v1", "Deployment") => APPS_DEPLOYMENT,
        ("apps/v1", "ReplicaSet") => APPS_REPLICA_SET,
        ("apps/v1", "StatefulSet") => APPS_STATEFUL_SET,
        ("apps/v1", "DaemonSet") => APPS_DAEMON_SET,
        ("v1", "Service") => CORE_SERVICE,
        ("v1", "ResourceQuota") => CORE_RESOURCE_QUOTA,
        ("batch/v1", "Job") => BATCH_JOB,
        ("batch/v1", "CronJob") => BATCH_CRON_JOB,
        ("networking.k8s.io/v1", "Ingress") => NET_INGRESS,
        ("scheduling.k8s.io/v1", "PriorityClass") => SCHED_PRIORITY_CLASS,
        ("rbac.authorization.k8s.io/v1", "Role") => RBAC_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => RBAC_ROLE_BINDING,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => RBAC_CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => RBAC_CLUSTER_ROLE_BINDING,
        ("policy/v1", "PodDisruptionBudget") => POLICY_POD_DISRUPTION_BUDGET,
        ("policy/v1", "Eviction") => POLICY_EVICTION,
        (_, "DeleteOptions") => META_DELETE_OPTIONS,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => AUTHZ_SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "SubjectAccessReview") => AUTHZ_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => {
            AUTHZ_LOCAL_SUBJECT_ACCESS_REVIEW
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => AUTHZ_SELF_SUBJECT_RULES_REVIEW,
        _ => return None,
    })
}

/// A protobuf message being read.
struct Reader<'a> {
    bytes: &'a [u8],
}

/// One field's value on the wire.
#[derive(Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// A fixed32/fixed64 value (no Kubernetes field has one).
    Fixed,
}

fn malformed(m: &str) -> DecodeError {
    DecodeError::Malformed(m.to_owned())
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut out = 0_u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .bytes
                .split_first()
                .ok_or_else(|| malformed("truncated varint"))?;
            self.bytes = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(malformed("varint too long"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.bytes.len() {
            return Err(malformed("truncated field"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    /// The next `(field number, value)`, or `None` at the end.
    fn next(&mut self) -> Result<Option<(u64, Wire<'a>)>, DecodeError> {
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
                let n = usize::try_from(self.varint()?)
                    .map_err(|_| malformed("length out of range"))?;
                Wire::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            other => {
                return Err(DecodeError::Malformed(format!(
                    "unsupported wire type {other}"
                )));
            }
        };
        Ok(Some((key >> 3, wire)))
    }
}

/// Where in the object a field is, for errors: the kind, then the JSON path.
struct Path<'a> {
    kind: &'a str,
    at: String,
}

impl Path<'_> {
    fn child(&self, name: &str) -> Path<'_> {
        Path {
            kind: self.kind,
            at: if self.at.is_empty() {
                name.to_owned()
            } else {
                format!("{}.{name}", self.at)
            },
        }
    }

    fn wrong(&self, what: &str) -> DecodeError {
        DecodeError::Malformed(format!("{} {}: {what}", self.kind, self.at))
    }
}

fn text(bytes: &[u8], path: &Path<'_>) -> Result<String, DecodeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| path.wrong("a string is not UTF-8"))
}

/// A signed integer from its varint (negative `int32`s are sign-extended to 64 bits).
fn signed(v: u64) -> i64 {
    i64::from_ne_bytes(v.to_ne_bytes())
}

/// Go's JSON of a `metav1.Time` (or, `micro`, a `MicroTime`); `None` for the zero time (Go
/// writes `null`, left out here).
fn time(bytes: &[u8], micro: bool, path: &Path<'_>) -> Result<Option<String>, DecodeError> {
    let (mut seconds, mut nanos) = (0_i64, 0_i64);
    let mut r = Reader { bytes };
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Varint(v)) => seconds = signed(v),
            (2, Wire::Varint(v)) => nanos = signed(v),
            (n, _) => return Err(unknown(path, n)),
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(None);
    }
    let nanos = if micro {
        i32::try_from(nanos / 1000 * 1000).map_err(|_| path.wrong("nanoseconds out of range"))?
    } else {
        0
    };
    let ts = jiff::Timestamp::new(seconds, nanos).map_err(|_| path.wrong("time out of range"))?;
    let format = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Some(ts.strftime(format).to_string()))
}

fn unknown(path: &Path<'_>, n: u64) -> DecodeError {
    DecodeError::Unsupported(format!(
        "{}: field number {n} of {} is not known to sim's protobuf decoder",
        path.kind,
        if path.at.is_empty() {
            "the object"
        } else {
            &path.at
        }
    ))
}

/// One value of type `ty`; `None` when it is a zero value to leave out (`keep` keeps it).
fn value(
    ty: Ty,
    wire: Wire<'_>,
    keep: bool,
    path: &Path<'_>,
) -> Result<Option<Value>, DecodeError> {
    let v = match (ty, wire) {
        (Ty::Str, Wire::Bytes(b)) => {
            let s = text(b, path)?;
            (keep || !s.is_empty()).then(|| json!(s))
        }
        (Ty::Int, Wire::Varint(v)) => (keep || v != 0).then(|| json!(signed(v))),
        (Ty::Bool, Wire::Varint(v)) => (keep || v != 0).then(|| json!(v != 0)),
        (Ty::Bytes, Wire::Bytes(b)) => (keep || !b.is_empty()).then(|| json!(STANDARD.encode(b))),
        (Ty::Quantity, Wire::Bytes(b)) => {
            let mut s = String::new();
            let mut r = Reader { bytes: b };
            while let Some((n, w)) = r.next()? {
                match (n, w) {
                    (1, Wire::Bytes(b)) => s = text(b, path)?,
                    (n, _) => return Err(unknown(path, n)),
                }
            }
            Some(json!(s))
        }
        (Ty::Time, Wire::Bytes(b)) => time(b, false, path)?.map(Value::String),
        (Ty::MicroTime, Wire::Bytes(b)) => time(b, true, path)?.map(Value::String),
        (Ty::IntOrStr, Wire::Bytes(b)) => {
            let (mut kind, mut int, mut string) = (0, 0, String::new());
            let mut r = Reader { bytes: b };
            while let Some((n, w)) = r.next()? {
                match (n, w) {
                    (1, Wire::Varint(v)) => kind = v,
                    (2, Wire::Varint(v)) => int = signed(v),
                    (3, Wire::Bytes(b)) => string = text(b, path)?,
                    (n, _) => return Err(unknown(path, n)),
                }
            }
            Some(if kind == 1 { json!(string) } else { json!(int) })
        }
        (Ty::Raw, Wire::Bytes(b)) => {
            let mut raw: &[u8] = &[];
            let mut r = Reader { bytes: b };
            while let Some((n, w)) = r.next()? {
                match (n, w) {
                    (1, Wire::Bytes(b)) => raw = b,
                    (n, _) => return Err(unknown(path, n)),
                }
            }
            if raw.is_empty() {
                None
            } else {
                Some(
                    serde_json::from_slice(raw)
                        .map_err(|_| path.wrong("a raw extension is not JSON"))?,
                )
            }
        }
        (Ty::Items, Wire::Bytes(b)) => {
            let mut items = Vec::new();
            let mut r = Reader { bytes: b };
            while let Some((n, w)) = r.next()? {
                match (n, w) {
                    (1, Wire::Bytes(b)) => items.push(json!(text(b, path)?)),
                    (n, _) => return Err(unknown(path, n)),
                }
            }
            Some(Value::Array(items))
        }
        (Ty::Msg(fields), Wire::Bytes(b)) => Some(Value::Object(message(b, fields, path)?)),
        _ => return Err(path.wrong("the wire type does not match the field's type")),
    };
    Ok(v)
}

/// A `map` entry: `key = 1`, `value = 2` (a missing value is the zero value).
fn entry(bytes: &[u8], ty: Ty, path: &Path<'_>) -> Result<(String, Value), DecodeError> {
    let mut r = Reader { bytes };
    let (mut key, mut val) = (String::new(), None);
    while let Some((n, w)) = r.next()? {
        match n {
            1 => match w {
                Wire::Bytes(b) => key = text(b, path)?,
                _ => return Err(path.wrong("a map key is not a string")),
            },
            2 => val = value(ty, w, true, path)?,
            n => return Err(unknown(path, n)),
        }
    }
    let val = match (val, ty) {
        (Some(v), _) => v,
        (None, Ty::Str | Ty::Bytes | Ty::Quantity) => json!(""),
        (None, Ty::Items) => json!([]),
        (None, _) => Value::Null,
    };
    Ok((key, val))
}

/// Decode one message with its fields' table.
fn message(
    bytes: &[u8],
    fields: &[Field],
    path: &Path<'_>,
) -> Result<Map<String, Value>, DecodeError> {
    let mut out = Map::new();
    let mut r = Reader { bytes };
    while let Some((n, wire)) = r.next()? {
        let Some(&(_, name, ty, card)) = fields.iter().find(|f| f.0 == n) else {
            return Err(unknown(path, n));
        };
        let here = path.child(name);
        match card {
            Card::One | Card::Ptr => {
                if let Some(v) = value(ty, wire, card == Card::Ptr, &here)? {
                    out.insert(name.to_owned(), v);
                }
            }
            Card::Inline => {
                if let Some(Value::Object(inner)) = value(ty, wire, true, &here)? {
                    out.extend(inner);
                }
            }
            Card::Many => {
                let list = out.entry(name).or_insert_with(|| json!([]));
                let Value::Array(list) = list else {
                    return Err(here.wrong("a repeated field"));
                };
                match (ty, wire) {
                    // A packed repeated number.
                    (Ty::Int | Ty::Bool, Wire::Bytes(b)) => {
                        let mut packed = Reader { bytes: b };
                        while !packed.bytes.is_empty() {
                            let v = packed.varint()?;
                            list.push(if matches!(ty, Ty::Bool) {
                                json!(v != 0)
                            } else {
                                json!(signed(v))
                            });
                        }
                    }
                    _ => list.push(value(ty, wire, true, &here)?.unwrap_or(Value::Null)),
                }
            }
            Card::Map => {
                let Wire::Bytes(b) = wire else {
                    return Err(here.wrong("a map entry is not a message"));
                };
                let (key, val) = entry(b, ty, &here)?;
                if let Value::Object(map) = out.entry(name).or_insert_with(|| json!({})) {
                    map.insert(key, val);
                }
            }
        }
    }
    Ok(out)
}

/// The JSON form of a protobuf body: its `apiVersion`, `kind` and fields.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("the body does not start with the Kubernetes protobuf prefix"))?;
    // `runtime.Unknown`: typeMeta (1: apiVersion 1, kind 2), raw (2), contentEncoding (3),
    // contentType (4).
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let envelope = Path {
        kind: "runtime.Unknown",
        at: String::new(),
    };
    let mut r = Reader { bytes: body };
    while let Some((n, w)) = r.next()? {
        match (n, w) {
            (1, Wire::Bytes(b)) => {
                let mut t = Reader { bytes: b };
                while let Some((n, w)) = t.next()? {
                    match (n, w) {
                        (1, Wire::Bytes(b)) => api_version = text(b, &envelope)?,
                        (2, Wire::Bytes(b)) => kind = text(b, &envelope)?,
                        (n, _) => return Err(unknown(&envelope, n)),
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            (3, Wire::Bytes(b)) if !b.is_empty() => {
                return Err(DecodeError::Unsupported(
                    "content encodings are not supported".into(),
                ));
            }
            (3 | 4, Wire::Bytes(_)) => {}
            (n, _) => return Err(unknown(&envelope, n)),
        }
    }
    let fields = root(&api_version, &kind).ok_or_else(|| {
        DecodeError::Unsupported(format!(
            "sim cannot decode {api_version}/{kind} from protobuf"
        ))
    })?;
    let path = Path {
        kind: &kind,
        at: String::new(),
    };
    let mut obj = message(raw, fields, &path)?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests;
