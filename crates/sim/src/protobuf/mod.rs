//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`).
//!
//! Responsibility: decode the bodies Kubernetes' Go clients send for built-in kinds — `kubectl
//! create deployment|namespace|configmap|job …`, `kubectl drain`'s evictions, `kubectl auth
//! can-i`'s reviews — into the JSON object the rest of the server works on. A body is the magic
//! `k8s\0` followed by a `runtime.Unknown` whose `typeMeta` names the kind and whose `raw` is
//! the object's message; the message type is found from the group, version and kind in the
//! embedded Kubernetes v1.33 schema ([`schema`]) and converted as Go's JSON would encode the
//! same value ([`json`]). Answers stay JSON (clients that send protobuf accept JSON too).
//! Inputs: body bytes. Outputs: a JSON object with `apiVersion` and `kind`, or a
//! [`DecodeError`].

pub mod json;
pub mod schema;
pub mod wire;

use serde_json::Value;

pub use json::DecodeError;
use json::Decoder;
use wire::Raw;

/// The prefix of every Kubernetes protobuf object.
pub const MAGIC: &[u8] = b"k8s\0";

/// Whether a `Content-Type` is Kubernetes protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|t| t.trim() == "application/vnd.kubernetes.protobuf")
}

/// The package of a group's messages.
fn package(group: &str) -> String {
    match group {
        "" => "k8s.io.api.core".into(),
        "apiextensions.k8s.io" => "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions".into(),
        "meta.k8s.io" => "k8s.io.apimachinery.pkg.apis.meta".into(),
        g => format!("k8s.io.api.{}", g.split('.').next().unwrap_or(g)),
    }
}

/// The message type of `apiVersion`/`kind`: the group's, else `meta/v1`'s (`DeleteOptions`,
/// `Status` are sent under any group).
fn message_name(api_version: &str, kind: &str) -> Option<String> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let schema = schema::schema();
    [
        format!("{}.{version}.{kind}", package(group)),
        format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"),
    ]
    .into_iter()
    .find(|n| schema.message(n).is_some())
}

/// Decode an enveloped object (`k8s\0` + `runtime.Unknown`) into JSON.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad_envelope("the body does not start with the protobuf magic"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for f in wire::fields(body)? {
        match (f.number, f.raw) {
            (1, Raw::Bytes(type_meta)) => {
                for t in wire::fields(type_meta)? {
                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    match (t.number, t.raw) {
                        (1, Raw::Bytes(b)) => api_version = text(b),
                        (2, Raw::Bytes(b)) => kind = text(b),
                        _ => {}
                    }
                }
            }
            (2, Raw::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    if kind.is_empty() {
        return Err(bad_envelope("the object has no kind"));
    }
    let name = message_name(&api_version, &kind).ok_or_else(|| {
        DecodeError::UnknownMessage(format!("{kind} in {api_version} (no protobuf schema)"))
    })?;
    let decoder = Decoder {
        schema: schema::schema(),
        embedded: &decode,
    };
    let mut v = decoder.message(&name, raw)?;
    if let Value::Object(m) = &mut v {
        m.insert("apiVersion".into(), Value::String(api_version));
        m.insert("kind".into(), Value::String(kind));
    }
    Ok(v)
}

fn bad_envelope(why: &str) -> DecodeError {
    DecodeError::BadValue {
        field: "runtime.Unknown".into(),
        why: why.into(),
    }
}

#[cfg(test)]
mod tests;
