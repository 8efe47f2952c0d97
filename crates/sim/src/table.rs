//! Server-side printing: the `meta.k8s.io/v1` Table format.
//!
//! Responsibility: when a client asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`
//! (as `kubectl get` does), turn objects, lists and watch events into Tables whose columns are
//! `Name` plus the CRD's `additionalPrinterColumns`, kube-apiserver's columns for the built-in
//! kinds [`crate::printers`] knows, or `Name`, `Age` for the others. Cells are evaluated with a small JSONPath subset (`.a.b`, `[n]`, `[*]`,
//! `[?(@.k=="v")]`); `date` columns print as ages (`5s`, `3m`, `2d`). Rows carry the object as
//! `PartialObjectMetadata`, or whole with `includeObject=Object`, or not with `None`.
//! Inputs: the `Accept` header, the resource type, served JSON. Outputs: Table JSON.

use serde_json::{Value, json};

use crate::object;
use crate::registry::{PrinterColumn, ResourceDef};

/// Whether the client asked for a Table.
pub fn wanted(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let p = part.replace(' ', "");
        p.contains("as=Table")
            && p.contains("g=meta.k8s.io")
            && p.contains("v=v1")
            && !p.contains("v=v1beta1")
    })
}

/// How rows carry their object (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// No object.
    None,
    /// `PartialObjectMetadata`.
    Metadata,
    /// The whole object.
    Object,
}

impl Include {
    /// From the `includeObject` query value.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// The printer columns of the version `v` (an object or list as served) is in.
fn columns(def: &ResourceDef, v: &Value) -> Vec<PrinterColumn> {
    let version = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|av| av.rsplit('/').next())
        .unwrap_or_default();
    let columns = def.version_columns.get(version).unwrap_or(&def.columns);
    if def.custom && !columns.is_empty() {
        return columns.clone();
    }
    vec![PrinterColumn {
        name: "Age".into(),
        type_: "date".into(),
        json_path: ".metadata.creationTimestamp".into(),
        priority: 0,
    }]
}

/// The values a JSONPath selects.
pub fn jsonpath<'a>(v: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut current = vec![v];
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            // A key runs to the next unescaped `.` or `[`; `\.` is a dot in it
            // (`.metadata.labels.node\.kubernetes\.io/instance-type`).
            let (mut key, mut end, mut escaped) = (String::new(), r.len(), false);
            for (i, ch) in r.char_indices() {
                if escaped {
                    key.push(ch);
                    escaped = false;
                } else if ch == '\\' {
                    escaped = true;
                } else if ch == '.' || ch == '[' {
                    end = i;
                    break;
                } else {
                    key.push(ch);
                }
            }
            let tail = r.get(end..).unwrap_or_default();
            if !key.is_empty() {
                current = current
                    .into_iter()
                    .filter_map(|c| c.get(key.as_str()))
                    .collect();
            }
            rest = tail;
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return Vec::new();
            };
            let (inner, tail) = r.split_at(end);
            rest = tail.get(1..).unwrap_or_default();
            let arrays: Vec<&Vec<Value>> =
                current.into_iter().filter_map(Value::as_array).collect();
            let items = arrays.iter().flat_map(|a| a.iter());
            current = if inner == "*" {
                items.collect()
            } else if let Ok(i) = inner.parse::<usize>() {
                arrays.iter().filter_map(|a| a.get(i)).collect()
            } else if let Some(filter) =
                inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
            {
                let Some((key, want)) = filter.split_once("==") else {
                    return Vec::new();
                };
                let want = want.trim().trim_matches(|c| c == '"' || c == '\'');
                items
                    .filter(|item| crate::selectors::field_value(item, key.trim()) == want)
                    .collect()
            } else {
                return Vec::new();
            };
        } else {
            return Vec::new();
        }
    }
    current
}

/// A duration as kubectl prints ages.
pub fn human_age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn cell(obj: &Value, col: &PrinterColumn) -> Value {
    let found = jsonpath(obj, &col.json_path);
    let Some(first) = found.first() else {
        return Value::Null;
    };
    match col.type_.as_str() {
        "date" => first
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| {
                json!(human_age(
                    jiff::Timestamp::now().as_second() - t.as_second()
                ))
            })
            .unwrap_or(Value::Null),
        "integer" | "number" | "boolean" => (*first).clone(),
        _ => json!(
            found
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// A built-in kind with one of kube-apiserver's printers.
fn printed(def: &ResourceDef) -> Option<&'static [crate::printers::Column]> {
    if def.custom {
        return None;
    }
    crate::printers::columns(&def.group, &def.kind)
}

fn age(obj: &Value) -> Value {
    cell(
        obj,
        &PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            json_path: ".metadata.creationTimestamp".into(),
            priority: 0,
        },
    )
}

fn row(def: &ResourceDef, obj: &Value, include: Include) -> Value {
    let mut cells = if crate::printers::name_last(&def.group, &def.kind) {
        Vec::new()
    } else {
        vec![json!(object::name(obj))]
    };
    if printed(def).is_some() {
        cells.extend(crate::printers::cells(&def.group, &def.kind, obj, &age));
    } else {
        cells.extend(columns(def, obj).iter().map(|c| cell(obj, c)));
    }
    let mut r = json!({"cells": cells});
    let carried = match include {
        Include::None => None,
        Include::Object => Some(obj.clone()),
        Include::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
        })),
    };
    if let Some(o) = carried {
        object::as_map(&mut r).insert("object".into(), o);
    }
    r
}

fn definitions(def: &ResourceDef, v: &Value) -> Vec<Value> {
    let mut defs = if crate::printers::name_last(&def.group, &def.kind) {
        Vec::new()
    } else {
        vec![json!({"name": "Name", "type": "string", "format": "name",
            "description": "Name must be unique within a namespace.", "priority": 0})]
    };
    if let Some(printed) = printed(def) {
        defs.extend(printed.iter().map(|c| {
            json!({"name": c.name, "type": c.type_, "format": "", "description": "",
                   "priority": c.priority})
        }));
        return defs;
    }
    defs.extend(columns(def, v).iter().map(|c| {
        json!({"name": c.name, "type": if c.type_ == "date" { "string" } else { c.type_.as_str() },
               "format": if c.type_ == "date" { "date" } else { "" },
               "description": "", "priority": c.priority})
    }));
    defs
}

/// A list or single object as a Table.
pub fn to_table(def: &ResourceDef, v: &Value, include: Include) -> Value {
    let (rows, meta) = match v.get("items").and_then(Value::as_array) {
        Some(items) => (
            items.iter().map(|o| row(def, o, include)).collect(),
            v.get("metadata").cloned().unwrap_or(json!({})),
        ),
        None => (
            vec![row(def, v, include)],
            json!({"resourceVersion": object::resource_version(v)}),
        ),
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": definitions(def, v),
        "rows": rows,
    })
}

/// A watch event with its object as a Table (bookmarks and errors unchanged).
pub fn event_to_table(def: &ResourceDef, ev: Value, include: Include) -> Value {
    match ev.get("type").and_then(Value::as_str) {
        Some("ADDED" | "MODIFIED" | "DELETED") => {
            let kind = ev.get("type").cloned().unwrap_or(Value::Null);
            let obj = ev.get("object").cloned().unwrap_or(Value::Null);
            json!({"type": kind, "object": to_table(def, &obj, include)})
        }
        _ => ev,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
    }

    #[test]
    fn jsonpath_subset() {
        let v = json!({"status": {"nodes": 3, "conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(jsonpath(&v, ".status.nodes"), vec![&json!(3)]);
        assert_eq!(
            jsonpath(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("True")]
        );
        assert_eq!(
            jsonpath(&v, ".status.conditions[0].type"),
            vec![&json!("A")]
        );
        assert_eq!(jsonpath(&v, ".status.conditions[*].type").len(), 2);
        assert!(jsonpath(&v, ".status.missing").is_empty());
        let labelled = json!({"metadata": {"labels": {"node.kubernetes.io/instance-type": "m5",
            "karpenter.sh/nodepool": "default"}}});
        assert_eq!(
            jsonpath(
                &labelled,
                r".metadata.labels.node\.kubernetes\.io/instance-type"
            ),
            vec![&json!("m5")]
        );
        assert_eq!(
            jsonpath(&labelled, r".metadata.labels.karpenter\.sh/nodepool"),
            vec![&json!("default")]
        );
    }

    #[test]
    fn ages() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(300), "5m");
        assert_eq!(human_age(10_800), "3h");
        assert_eq!(human_age(400_000), "4d");
    }
}
