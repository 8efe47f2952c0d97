//! Protobuf messages to Kubernetes JSON.
//!
//! Responsibility: turn an encoded message of a known type into the JSON object Go's
//! `encoding/json` would produce for the same Go value: fields by their JSON names; scalar
//! zero values of `omitempty` fields left out; int64s as numbers; bytes as base64; maps as
//! objects; and the types with their own JSON form — `Time` (RFC 3339, seconds; the zero time
//! left out), `MicroTime` (microseconds), `Duration` (Go's `1h2m3s`), `Quantity` and
//! `IntOrString` (a string or a number), `RawExtension`, `FieldsV1` and the CRD schema's `JSON`
//! (embedded JSON, or an embedded protobuf object), the CRD schema's `…OrBool`, `…OrArray` and
//! `…OrStringArray` unions, and the slice messages (`Verbs`, `ExtraValue`).
//! Inputs: the [`Schema`], a message name, bytes. Outputs: a `serde_json::Value`.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::schema::{FieldDef, MessageDef, Scalar, Schema, Type};
use super::wire::{self, Raw, WireError};

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1";
const EXT: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1";

/// Messages nested deeper than this are refused (protects the stack).
const MAX_DEPTH: usize = 100;

/// A message that could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not a valid encoding.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The schema has no such message.
    #[error("no protobuf message {0}")]
    UnknownMessage(String),
    /// A value does not fit its declared type.
    #[error("field {field}: {why}")]
    BadValue {
        /// The field's JSON name.
        field: String,
        /// What is wrong.
        why: String,
    },
    /// Nested too deeply.
    #[error("protobuf message nested more than {MAX_DEPTH} levels")]
    TooDeep,
    /// Embedded JSON that does not parse.
    #[error("embedded JSON: {0}")]
    EmbeddedJson(String),
}

/// A decoder of one schema; `embedded` decodes an embedded `k8s\0` object (RawExtension).
pub struct Decoder<'a> {
    /// The schema.
    pub schema: &'a Schema,
    /// How to decode a whole enveloped object found inside a `RawExtension`.
    pub embedded: &'a dyn Fn(&[u8]) -> Result<Value, DecodeError>,
}

impl std::fmt::Debug for Decoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder").finish_non_exhaustive()
    }
}

fn bad(field: &str, why: impl Into<String>) -> DecodeError {
    DecodeError::BadValue {
        field: field.to_owned(),
        why: why.into(),
    }
}

impl Decoder<'_> {
    /// The JSON of message `name` encoded in `bytes` (`Null` for types whose value is absent,
    /// such as the zero `Time`).
    pub fn message(&self, name: &str, bytes: &[u8]) -> Result<Value, DecodeError> {
        self.message_at(name, bytes, 0)
    }

    fn message_at(&self, name: &str, bytes: &[u8], depth: usize) -> Result<Value, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        if let Some(v) = self.special(name, bytes, depth)? {
            return Ok(v);
        }
        let def = self
            .schema
            .message(name)
            .ok_or_else(|| DecodeError::UnknownMessage(name.to_owned()))?;
        let obj = self.fields(def, bytes, depth)?;
        if def.list {
            return Ok(obj.get("items").cloned().unwrap_or_else(|| json!([])));
        }
        Ok(Value::Object(obj))
    }

    fn fields(
        &self,
        def: &MessageDef,
        bytes: &[u8],
        depth: usize,
    ) -> Result<Map<String, Value>, DecodeError> {
        let mut out = Map::new();
        for f in wire::fields(bytes)? {
            // Unknown fields are skipped, as Go's decoder does.
            let Some(field) = def.fields.get(&f.number) else {
                continue;
            };
            match &field.ty {
                Type::Map(key, value) => {
                    let Raw::Bytes(entry) = f.raw else {
                        return Err(bad(&field.name, "a map entry must be length-delimited"));
                    };
                    let (k, v) = self.map_entry(field, *key, value, entry, depth)?;
                    let m = out
                        .entry(field.name.clone())
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(m) = m {
                        m.insert(k, v);
                    }
                }
                _ if field.repeated => {
                    let values = self.repeated(field, f.raw, depth)?;
                    let a = out
                        .entry(field.name.clone())
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(a) = a {
                        a.extend(values);
                    }
                }
                ty => {
                    let v = self.single(&field.name, ty, f.raw, depth)?;
                    out.insert(field.name.clone(), v);
                }
            }
        }
        out.retain(|name, v| {
            let field = def.fields.values().find(|f| f.name == *name);
            !(v.is_null() || field.is_some_and(|f| f.omitempty) && is_zero(v))
        });
        Ok(out)
    }

    fn repeated(
        &self,
        field: &FieldDef,
        raw: Raw<'_>,
        depth: usize,
    ) -> Result<Vec<Value>, DecodeError> {
        match (&field.ty, raw) {
            // Packed numbers.
            (Type::Scalar(s), Raw::Bytes(b)) if !matches!(s, Scalar::String | Scalar::Bytes) => {
                wire::packed_varints(b)?
                    .into_iter()
                    .map(|n| scalar(&field.name, *s, Raw::Varint(n)))
                    .collect()
            }
            (ty, raw) => Ok(vec![self.single(&field.name, ty, raw, depth)?]),
        }
    }

    fn map_entry(
        &self,
        field: &FieldDef,
        key: Scalar,
        value: &Type,
        entry: &[u8],
        depth: usize,
    ) -> Result<(String, Value), DecodeError> {
        let mut k = String::new();
        let mut v = None;
        for f in wire::fields(entry)? {
            match f.number {
                1 => {
                    k = match scalar(&field.name, key, f.raw)? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                }
                2 => v = Some(self.single(&field.name, value, f.raw, depth)?),
                _ => {}
            }
        }
        let v = match v {
            Some(v) => v,
            None => match value {
                Type::Scalar(s) => zero(*s),
                Type::Message(name) => self.message_at(name, &[], depth + 1)?,
                Type::Map(..) => json!({}),
            },
        };
        Ok((k, v))
    }

    fn single(
        &self,
        name: &str,
        ty: &Type,
        raw: Raw<'_>,
        depth: usize,
    ) -> Result<Value, DecodeError> {
        match (ty, raw) {
            (Type::Scalar(s), raw) => scalar(name, *s, raw),
            (Type::Message(m), Raw::Bytes(b)) => self.message_at(m, b, depth + 1),
            _ => Err(bad(name, "a message must be length-delimited")),
        }
    }

    /// Messages with their own JSON form.
    fn special(
        &self,
        name: &str,
        bytes: &[u8],
        depth: usize,
    ) -> Result<Option<Value>, DecodeError> {
        let Some((package, short)) = name.rsplit_once('.') else {
            return Ok(None);
        };
        let ints = |bytes: &[u8]| -> Result<[i64; 3], DecodeError> {
            let mut out = [0_i64; 3];
            for f in wire::fields(bytes)? {
                if let (Raw::Varint(n), Some(slot)) = (f.raw, out.get_mut(f.number as usize - 1)) {
                    *slot = n as i64;
                }
            }
            Ok(out)
        };
        let first_bytes = |bytes: &[u8]| -> Result<Option<Vec<u8>>, DecodeError> {
            Ok(wire::fields(bytes)?.into_iter().find_map(|f| match f.raw {
                Raw::Bytes(b) if f.number == 1 => Some(b.to_vec()),
                _ => None,
            }))
        };
        let v = match (package, short) {
            (META, "Time") => {
                let [seconds, _, _] = ints(bytes)?;
                if bytes.is_empty() {
                    Value::Null
                } else {
                    json!(format_time(seconds, None))
                }
            }
            (META, "MicroTime") => {
                let [seconds, nanos, _] = ints(bytes)?;
                if bytes.is_empty() {
                    Value::Null
                } else {
                    json!(format_time(seconds, Some(nanos)))
                }
            }
            (META, "Duration") => json!(go_duration(ints(bytes)?[0])),
            ("k8s.io.apimachinery.pkg.api.resource", "Quantity") => {
                let s = first_bytes(bytes)?.unwrap_or_default();
                json!(String::from_utf8_lossy(&s))
            }
            ("k8s.io.apimachinery.pkg.util.intstr", "IntOrString") => {
                let mut kind = 0;
                let mut int = 0_i64;
                let mut string = String::new();
                for f in wire::fields(bytes)? {
                    match (f.number, f.raw) {
                        (1, Raw::Varint(n)) => kind = n,
                        (2, Raw::Varint(n)) => int = i64::from(n as i32),
                        (3, Raw::Bytes(b)) => string = String::from_utf8_lossy(b).into_owned(),
                        _ => {}
                    }
                }
                if kind == 1 { json!(string) } else { json!(int) }
            }
            ("k8s.io.apimachinery.pkg.runtime", "RawExtension")
            | (META, "FieldsV1")
            | (EXT, "JSON") => match first_bytes(bytes)? {
                None => Value::Null,
                Some(raw) if raw.starts_with(super::MAGIC) => (self.embedded)(&raw)?,
                Some(raw) => serde_json::from_slice(&raw)
                    .map_err(|e| DecodeError::EmbeddedJson(e.to_string()))?,
            },
            (EXT, "JSONSchemaPropsOrBool") => {
                let props = format!("{EXT}.JSONSchemaProps");
                let mut allows = false;
                let mut schema = None;
                for f in wire::fields(bytes)? {
                    match (f.number, f.raw) {
                        (1, Raw::Varint(n)) => allows = n != 0,
                        (2, Raw::Bytes(b)) => {
                            schema = Some(self.message_at(&props, b, depth + 1)?)
                        }
                        _ => {}
                    }
                }
                schema.unwrap_or(json!(allows))
            }
            (EXT, "JSONSchemaPropsOrArray" | "JSONSchemaPropsOrStringArray") => {
                let props = format!("{EXT}.JSONSchemaProps");
                let mut schema = None;
                let mut items = Vec::new();
                for f in wire::fields(bytes)? {
                    match (f.number, f.raw) {
                        (1, Raw::Bytes(b)) => {
                            schema = Some(self.message_at(&props, b, depth + 1)?)
                        }
                        (2, Raw::Bytes(b)) if short == "JSONSchemaPropsOrArray" => {
                            items.push(self.message_at(&props, b, depth + 1)?);
                        }
                        (2, Raw::Bytes(b)) => items.push(json!(String::from_utf8_lossy(b))),
                        _ => {}
                    }
                }
                schema.unwrap_or(Value::Array(items))
            }
            _ => return Ok(None),
        };
        Ok(Some(v))
    }
}

fn zero(s: Scalar) -> Value {
    match s {
        Scalar::String | Scalar::Bytes => json!(""),
        Scalar::Bool => json!(false),
        _ => json!(0),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn scalar(name: &str, s: Scalar, raw: Raw<'_>) -> Result<Value, DecodeError> {
    Ok(match (s, raw) {
        (Scalar::String, Raw::Bytes(b)) => {
            json!(std::str::from_utf8(b).map_err(|_| bad(name, "a string is not UTF-8"))?)
        }
        (Scalar::Bytes, Raw::Bytes(b)) => {
            json!(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Scalar::Bool, Raw::Varint(n)) => json!(n != 0),
        (Scalar::Int32, Raw::Varint(n)) => json!(n as i32),
        (Scalar::Int64, Raw::Varint(n)) => json!(n as i64),
        (Scalar::Unsigned, Raw::Varint(n)) => json!(n),
        (Scalar::Double, Raw::Fixed64(n)) => json!(f64::from_bits(n)),
        (Scalar::Float, Raw::Fixed32(n)) => json!(f32::from_bits(n)),
        (s, _) => return Err(bad(name, format!("wrong wire type for {s:?}"))),
    })
}

/// RFC 3339 in UTC: whole seconds, or with microseconds (`MicroTime`).
fn format_time(seconds: i64, nanos: Option<i64>) -> String {
    let ts = jiff::Timestamp::new(seconds, i32::try_from(nanos.unwrap_or(0)).unwrap_or(0))
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    match nanos {
        None => ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Some(_) => ts.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
    }
}

/// A duration in nanoseconds as Go's `time.Duration.String` prints it.
pub fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let frac = |value: u64, unit: u64| -> String {
        let whole = value / unit;
        let rest = value % unit;
        if rest == 0 {
            return whole.to_string();
        }
        let digits = unit.to_string().len() - 1;
        let f = format!("{rest:0digits$}");
        format!("{whole}.{}", f.trim_end_matches('0'))
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", frac(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", frac(n, 1_000_000));
    }
    let secs = n / 1_000_000_000;
    let sub = n % 1_000_000_000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let s = frac(s * 1_000_000_000 + sub, 1_000_000_000);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}s")
    } else {
        format!("{sign}{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_go() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
        assert_eq!(go_duration(90_000_000_000), "1m30s");
        assert_eq!(go_duration(1_500_000_000), "1.5s");
        assert_eq!(go_duration(1_500_000), "1.5ms");
        assert_eq!(go_duration(-2_000), "-2µs");
        assert_eq!(go_duration(7), "7ns");
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(format_time(0, None), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(1, Some(5_000)), "1970-01-01T00:00:01.000005Z");
    }
}
