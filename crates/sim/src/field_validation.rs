//! Field validation: unknown fields in written objects (`fieldValidation=Strict|Warn|Ignore`).
//!
//! Responsibility: find the fields of an object its kind's schema does not declare — the
//! built-in kinds' schemas ([`crate::openapi::builtin`]), a custom resource's CRD schema (with
//! `ObjectMeta` for `metadata`); `x-kubernetes-preserve-unknown-fields`, free-form objects and
//! `additionalProperties: true` accept anything — and act as kube-apiserver does for the
//! request's `fieldValidation`:
//! - `Strict`: reject. Creates and updates with a 400 `<Kind> in version "<v>" cannot be
//!   handled as a <Kind>: strict decoding error: unknown field "spec.foo", …`; patches with
//!   kube-apiserver's 422 on the field `patch`; server-side apply with its 500
//!   `failed to create typed patch object (<ns>/<name>; <gvk>): .spec.foo: field not declared
//!   in schema`.
//! - `Warn` (the default): record one `unknown field "spec.foo"` warning each, which the HTTP
//!   layer sends as `Warning` headers.
//! - `Ignore`: nothing.
//!
//! Unless rejected, unknown fields of built-in kinds are dropped here (kube-apiserver's decoder
//! drops them); those of custom resources are pruned later, as always ([`crate::schema`]).
//! The built-in schemas are Kubernetes v1.33's: fields added later are unknown.
//! Inputs: the resource type, the object, the patch body, [`WriteOptions`]. Outputs: an
//! [`ApiError`] or warnings.

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::object;
use crate::openapi::builtin::{builtins, kind_schema, ref_name};
use crate::options::{FieldValidation, WriteOptions};
use crate::registry::ResourceDef;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// What kind of write an object came from.
#[derive(Debug, Clone, Copy)]
pub enum Write<'a> {
    /// A create or update body.
    Decode,
    /// The result of a patch with this body.
    Patch(&'a [u8]),
    /// A server-side apply configuration.
    Apply,
}

/// Check `obj` and act on its unknown fields as `opts.field_validation` says.
/// Unknown fields of built-in kinds are removed (kube-apiserver's decoder drops them).
pub fn check(
    def: &ResourceDef,
    obj: &mut Value,
    opts: &WriteOptions,
    write: Write<'_>,
) -> ApiResult<()> {
    let paths = unknown_paths(def, obj);
    if paths.is_empty() {
        return Ok(());
    }
    let unknown: Vec<String> = paths.iter().map(|p| render(p)).collect();
    if opts.field_validation != FieldValidation::Strict {
        if opts.field_validation == FieldValidation::Warn {
            opts.warn(unknown.iter().map(|f| format!("unknown field \"{f}\"")));
        }
        if !def.custom {
            for p in paths.iter().rev() {
                remove(obj, p);
            }
        }
        return Ok(());
    }
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let strict = format!(
        "strict decoding error: {}",
        unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Err(match write {
        Write::Decode => ApiError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {strict}",
            kind = def.kind
        )),
        Write::Patch(body) => {
            let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            ApiError::invalid(
                "",
                "",
                "",
                format!("patch: Invalid value: \"{}\": {strict}", go_format(&patch)),
            )
        }
        Write::Apply => {
            let first = unknown.first().map(String::as_str).unwrap_or_default();
            ApiError::Unclassified(format!(
                "failed to create typed patch object ({}/{}; {api_version}, Kind={}): .{first}: field not declared in schema",
                object::namespace(obj),
                object::name(obj),
                def.kind
            ))
        }
    })
}

/// A JSON value as Go's `fmt` prints the `map[string]interface{}` it decodes to.
pub fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", m.get(k).map(go_format).unwrap_or_default()))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// One step of a path: a key or an index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// A path as kube-apiserver prints it: `spec.containers[0].bogus`.
pub fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Remove the field at `path` (a path [`unknown_paths`] found).
pub fn remove(obj: &mut Value, path: &[Step]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for step in parents {
        let next = match step {
            Step::Key(k) => cur.get_mut(k.as_str()),
            Step::Index(i) => cur.get_mut(*i),
        };
        let Some(next) = next else {
            return;
        };
        cur = next;
    }
    if let (Step::Key(k), Value::Object(m)) = (last, cur) {
        m.remove(k);
    }
}

/// The paths of the fields of `obj` its schema does not declare (`spec.foo`,
/// `spec.containers[0].bogus`), in order.
pub fn unknown_fields(def: &ResourceDef, obj: &Value) -> Vec<String> {
    unknown_paths(def, obj).iter().map(|p| render(p)).collect()
}

/// [`unknown_fields`] as paths.
pub fn unknown_paths(def: &ResourceDef, obj: &Value) -> Vec<Vec<Step>> {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let mut out = Vec::new();
    if def.custom {
        let Some(schema) = def.schema_for(api_version) else {
            return out;
        };
        let Value::Object(map) = obj else {
            return out;
        };
        let mut rest = map.clone();
        if let Some(meta) = rest.remove("metadata")
            && let Some(meta_schema) = builtins().definitions.get(OBJECT_META)
        {
            walk(
                meta_schema,
                &meta,
                &[Step::Key("metadata".into())],
                &mut out,
            );
        }
        rest.remove("apiVersion");
        rest.remove("kind");
        walk(schema, &Value::Object(rest), &[], &mut out);
    } else if let Some(name) = kind_schema(&def.group, version, &def.kind)
        .or_else(|| kind_schema(&def.group, def.preferred_version(), &def.kind))
        && let Some(schema) = builtins().definitions.get(name)
    {
        walk(schema, obj, &[], &mut out);
    }
    out
}

/// The schema a reference (or an `allOf` of one reference) stands for.
fn resolve(schema: &Value) -> &Value {
    let defs = &builtins().definitions;
    let target = schema.get("$ref").and_then(Value::as_str).or_else(|| {
        match schema
            .get("allOf")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            Some([one]) => one.get("$ref").and_then(Value::as_str),
            _ => None,
        }
    });
    match target.and_then(|r| defs.get(ref_name(r))) {
        Some(s) => s,
        None => schema,
    }
}

fn join(path: &[Step], step: Step) -> Vec<Step> {
    let mut p = path.to_vec();
    p.push(step);
    p
}

fn walk(schema: &Value, v: &Value, path: &[Step], out: &mut Vec<Vec<Step>>) {
    let schema = resolve(schema);
    match v {
        Value::Object(map) => walk_object(schema, map, path, out),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, &join(path, Step::Index(i)), out);
                }
            }
        }
        _ => {}
    }
}

fn walk_object(schema: &Value, map: &Map<String, Value>, path: &[Step], out: &mut Vec<Vec<Step>>) {
    let preserve = schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true);
    let embedded = schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true);
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    for (k, v) in map {
        let here = join(path, Step::Key(k.clone()));
        if let Some(prop) = properties.and_then(|p| p.get(k)) {
            walk(prop, v, &here, out);
        } else if let Some(extra @ Value::Object(_)) = additional {
            walk(extra, v, &here, out);
        } else if properties.is_some()
            && !preserve
            && additional != Some(&Value::Bool(true))
            && !(embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
        {
            out.push(here);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn deployments() -> ResourceDef {
        Registry::with_builtins()
            .find("apps", "v1", "deployments")
            .unwrap()
            .clone()
    }

    #[test]
    fn built_in_unknown_fields_have_kube_paths() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"a": "b"}, "bogusMeta": 1},
            "spec": {"foo": 1, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i", "bogus": "x",
                        "resources": {"limits": {"cpu": "1"}}}]}}}});
        assert_eq!(
            unknown_fields(&deployments(), &obj),
            vec![
                "metadata.bogusMeta",
                "spec.foo",
                "spec.template.spec.containers[0].bogus"
            ]
        );
    }

    #[test]
    fn strict_rejects_like_kube_apiserver() {
        let obj = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"foo": 1}});
        let opts = WriteOptions {
            field_validation: FieldValidation::Strict,
            ..WriteOptions::default()
        };
        let e = check(&deployments(), &mut obj.clone(), &opts, Write::Decode).unwrap_err();
        assert_eq!(e.code(), 400);
        assert_eq!(
            e.to_string(),
            "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.foo\""
        );
        let e = check(
            &deployments(),
            &mut obj.clone(),
            &opts,
            Write::Patch(br#"{"spec":{"foo":1}}"#),
        )
        .unwrap_err();
        assert_eq!(e.code(), 422);
        assert!(
            e.to_string()
                .contains("patch: Invalid value: \"map[spec:map[foo:1]]\": strict decoding error"),
            "{e}"
        );
        let e = check(&deployments(), &mut obj.clone(), &opts, Write::Apply).unwrap_err();
        assert_eq!(e.code(), 500);
        assert!(
            e.to_string().ends_with(
                "/d; apps/v1, Kind=Deployment): .spec.foo: field not declared in schema"
            ),
            "{e}"
        );
        let warn = WriteOptions::default();
        let mut kept = obj.clone();
        check(&deployments(), &mut kept, &warn, Write::Decode).unwrap();
        assert_eq!(
            kept["spec"],
            json!({}),
            "unknown fields of built-ins are dropped"
        );
        assert_eq!(warn.warnings(), vec!["unknown field \"spec.foo\""]);
    }

    #[test]
    fn custom_resources_use_their_schema() {
        let crd = json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
        let def = crate::registry::def_from_crd(&crd).unwrap();
        let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 1, "color": "red"}, "status": {"anything": true}, "extra": 1});
        assert_eq!(unknown_fields(&def, &obj), vec!["extra", "spec.color"]);
    }
}
