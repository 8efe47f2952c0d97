//! The OpenAPI v2 document as protobuf.
//!
//! Responsibility: encode the v2 document the way client-go's discovery client asks for it
//! (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`, decoded into
//! gnostic's `openapi_v2.Document`): `swagger`, `info`, empty `paths`, and every definition as
//! a `NamedSchema` — `$ref`, `format`, `title`, `description`, `type`, `required`, `enum`,
//! `items`, `allOf`, `properties`, `additionalProperties`, bounds and lengths, `pattern`,
//! `default`/`example`, and `x-…` vendor extensions (values as YAML, as gnostic keeps them).
//! Keywords OpenAPI v2 has not (`anyOf`, `oneOf`, `not`, `nullable`) are left out, as
//! kube-apiserver leaves them out of its v2 document.
//! Inputs: the JSON v2 document ([`super::v2`]). Outputs: bytes.

use serde_json::Value;

/// A protobuf message being written.
#[derive(Debug, Default)]
struct Msg {
    buf: Vec<u8>,
}

impl Msg {
    fn varint(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.buf.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        self.buf.push(n as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn message(&mut self, field: u32, m: &Msg) {
        self.bytes(field, &m.buf);
    }

    fn boolean(&mut self, field: u32, b: bool) {
        if b {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int64(&mut self, field: u32, n: i64) {
        if n != 0 {
            self.key(field, 0);
            self.varint(n as u64);
        }
    }

    fn double(&mut self, field: u32, f: f64) {
        if f != 0.0 {
            self.key(field, 1);
            self.buf.extend_from_slice(&f.to_bits().to_le_bytes());
        }
    }
}

/// gnostic's `Any`: the value as YAML.
fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    let yaml = serde_norway::to_string(v).unwrap_or_default();
    m.string(2, &yaml);
    m
}

fn named_schemas(map: &serde_json::Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    for (name, schema) in map {
        let mut named = Msg::default();
        named.string(1, name);
        named.message(2, &schema_msg(schema));
        m.message(1, &named);
    }
    m
}

fn schema_msg(s: &Value) -> Msg {
    let mut m = Msg::default();
    let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or_default();
    let num = |k: &str| s.get(k).and_then(Value::as_f64).unwrap_or_default();
    let int = |k: &str| s.get(k).and_then(Value::as_i64).unwrap_or_default();
    let flag = |k: &str| s.get(k).and_then(Value::as_bool).unwrap_or_default();
    m.string(1, text("$ref"));
    m.string(2, text("format"));
    m.string(3, text("title"));
    m.string(4, text("description"));
    if let Some(d) = s.get("default") {
        m.message(5, &any(d));
    }
    m.double(6, num("multipleOf"));
    m.double(7, num("maximum"));
    m.boolean(8, flag("exclusiveMaximum"));
    m.double(9, num("minimum"));
    m.boolean(10, flag("exclusiveMinimum"));
    m.int64(11, int("maxLength"));
    m.int64(12, int("minLength"));
    m.string(13, text("pattern"));
    m.int64(14, int("maxItems"));
    m.int64(15, int("minItems"));
    m.boolean(16, flag("uniqueItems"));
    m.int64(17, int("maxProperties"));
    m.int64(18, int("minProperties"));
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.string(19, r.as_str().unwrap_or_default());
    }
    for e in s
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(20, &any(e));
    }
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut item = Msg::default();
            item.key(2, 0);
            item.varint(u64::from(*b));
            m.message(21, &item);
        }
        Some(schema @ Value::Object(_)) => {
            let mut item = Msg::default();
            item.message(1, &schema_msg(schema));
            m.message(21, &item);
        }
        _ => {}
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let mut item = Msg::default();
        item.string(1, t);
        m.message(22, &item);
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        let mut item = Msg::default();
        item.message(1, &schema_msg(items));
        m.message(23, &item);
    }
    for a in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, &schema_msg(a));
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        m.message(25, &named_schemas(props));
    }
    m.boolean(27, flag("readOnly"));
    if let Some(e) = s.get("example") {
        m.message(30, &any(e));
    }
    for (k, v) in s.as_object().into_iter().flatten() {
        if k.starts_with("x-") {
            let mut named = Msg::default();
            named.string(1, k);
            named.message(2, &any(v));
            m.message(31, &named);
        }
    }
    m
}

/// The JSON v2 document as gnostic's `openapi_v2.Document`.
pub fn encode(doc: &Value) -> Vec<u8> {
    let mut m = Msg::default();
    m.string(
        1,
        doc.get("swagger").and_then(Value::as_str).unwrap_or("2.0"),
    );
    let mut info = Msg::default();
    let info_text = |k: &str| {
        doc.get("info")
            .and_then(|i| i.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    info.string(1, &info_text("title"));
    info.string(2, &info_text("version"));
    m.message(2, &info);
    m.message(8, &Msg::default());
    if let Some(defs) = doc.get("definitions").and_then(Value::as_object) {
        m.message(9, &named_schemas(defs));
    }
    m.buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::wire::{self, Raw};
    use serde_json::json;

    fn field<'a>(bytes: &'a [u8], number: u32) -> Vec<Raw<'a>> {
        wire::fields(bytes)
            .unwrap()
            .into_iter()
            .filter(|f| f.number == number)
            .map(|f| f.raw)
            .collect()
    }

    #[test]
    fn definitions_are_named_schemas() {
        let doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1"},
            "definitions": {"a.B": {"type": "object", "description": "d",
                "properties": {"x": {"type": "integer", "format": "int32"}},
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "B", "version": "v1"}]}}});
        let bytes = encode(&doc);
        assert_eq!(field(&bytes, 1), vec![Raw::Bytes(b"2.0")]);
        let Raw::Bytes(defs) = field(&bytes, 9)[0] else {
            panic!()
        };
        let Raw::Bytes(named) = field(defs, 1)[0] else {
            panic!()
        };
        assert_eq!(field(named, 1), vec![Raw::Bytes(b"a.B")]);
        let Raw::Bytes(schema) = field(named, 2)[0] else {
            panic!()
        };
        assert_eq!(field(schema, 4), vec![Raw::Bytes(b"d")]);
        let Raw::Bytes(ext) = field(schema, 31)[0] else {
            panic!()
        };
        assert_eq!(
            field(ext, 1),
            vec![Raw::Bytes(b"x-kubernetes-group-version-kind")]
        );
        let Raw::Bytes(any) = field(ext, 2)[0] else {
            panic!()
        };
        let Raw::Bytes(yaml) = field(any, 2)[0] else {
            panic!()
        };
        assert!(String::from_utf8_lossy(yaml).contains("kind: B"));
    }
}
