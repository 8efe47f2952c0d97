//! Validation of custom resources against their CRD's OpenAPI v3 schema.
//!
//! Responsibility: what kube-apiserver's custom resource strategy does after pruning and
//! defaulting: structural validation (`type`, `nullable`, `x-kubernetes-int-or-string`,
//! `required`, `enum`, `pattern`, bounds, lengths, item and property counts, `format:
//! date-time`, `x-kubernetes-list-type: set|map` uniqueness; per string, only the first of
//! the length and pattern errors), then — only when no type, enum, required, too-long or
//! too-many error blocks it — the `x-kubernetes-validations` CEL rules with `self` and, on updates,
//! `oldSelf` (transition rules run only where an old value correlates: object properties,
//! map entries and `x-kubernetes-list-type: map` items). Updates are ratcheted like
//! kube-apiserver's `CRDValidationRatcheting`: a value equal to its correlated old value is not
//! validated again. CEL rules are evaluated with the `cel` crate and kube's Kubernetes extension
//! functions (`kube::core::cel`, the `kube-cel` crate).
//! Also: [`check_crd`] compiles every rule and pattern of a CRD, as the apiextensions
//! validation does, so a CRD with an uncompilable rule is rejected.
//! Inputs: a version's root schema, the new object and the stored one (on updates). Outputs:
//! field errors rendered as kube-apiserver renders them (`field: Invalid value: ...`).
//! `allOf`/`anyOf`/`oneOf`/`not` value validations are checked too (kube-apiserver's messages).
//! String formats follow kube-apiserver's registry (date-time, date, uuid*, ipv4, ipv6, cidr,
//! mac, hostname, email, uri, byte, duration, hexcolor, bsonobjectid; unknown formats pass).
//! Not done:
//! CEL type checking (rules are parsed, not type-checked, so a rule naming an undeclared field
//! fails at evaluation, not at CRD creation), cost limits, `date-time`/`duration` values as
//! CEL timestamps (they are CEL strings here).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kube::core::cel::{KubeCelExt, cel};
use serde_json::Value;

/// The kind of a field error, as `field.ErrorType` in Kubernetes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorType {
    Invalid,
    TypeInvalid,
    Required,
    NotSupported,
    TooLong,
    TooMany,
    Duplicate,
    Forbidden,
}

/// One invalid field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    kind: ErrorType,
    field: String,
    body: String,
}

impl FieldError {
    fn new(kind: ErrorType, field: &str, body: String) -> Self {
        Self {
            kind,
            field: field.to_owned(),
            body,
        }
    }

    /// `field: body`, as `field.Error.Error()`.
    pub fn render(&self) -> String {
        let field = if self.field.is_empty() {
            "<nil>"
        } else {
            &self.field
        };
        format!("{field}: {}", self.body)
    }
}

/// A JSON value as Go's `%#v`-ish rendering in field errors: strings quoted, numbers bare.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => match n.as_f64() {
            // Go prints whole float64 bounds without a fraction.
            Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 1e15 => {
                format!("{f:.0}")
            }
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => "\"null\"".into(),
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(v: &Value) -> bool {
    v.as_i64().is_some()
        || v.as_u64().is_some()
        || v.as_f64()
            .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

thread_local! {
    static REGEXES: RefCell<HashMap<String, Option<Rc<regex::Regex>>>> = RefCell::new(HashMap::new());
    static PROGRAMS: RefCell<HashMap<String, Rc<Result<cel::Program, String>>>> = RefCell::new(HashMap::new());
    static CONTEXT: cel::Context<'static> = cel::Context::default().with_all();
}

fn regex(pattern: &str) -> Option<Rc<regex::Regex>> {
    REGEXES.with(|cache| {
        cache
            .borrow_mut()
            .entry(pattern.to_owned())
            .or_insert_with(|| regex::Regex::new(pattern).ok().map(Rc::new))
            .clone()
    })
}

fn program(rule: &str) -> Rc<Result<cel::Program, String>> {
    PROGRAMS.with(|cache| {
        cache
            .borrow_mut()
            .entry(rule.to_owned())
            .or_insert_with(|| {
                Rc::new(cel::Program::compile(rule).map_err(|e| e.to_string().trim().to_owned()))
            })
            .clone()
    })
}

/// Validate `obj` (a whole custom resource, already pruned and defaulted) with the version's
/// root schema; `old` is the stored object on updates. Empty when valid.
pub fn validate(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    structural(schema, obj, old, "", true, &mut errors);
    let blocked = errors.iter().any(|e| {
        matches!(
            e.kind,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    });
    if blocked {
        errors.push(FieldError::new(
            ErrorType::Invalid,
            "",
            "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        ));
    } else {
        rules(schema, obj, old, "", true, &mut errors);
    }
    errors
}

fn structural(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    root: bool,
    errors: &mut Vec<FieldError>,
) {
    if old == Some(v) {
        return; // ratcheting: unchanged values are not validated again
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    if v.is_null() {
        if !flag(schema, "nullable") && !ty.is_empty() {
            errors.push(FieldError::new(
                ErrorType::TypeInvalid,
                path,
                format!("Invalid value: \"null\": {path} in body must be of type {ty}: \"null\""),
            ));
        }
        return;
    }
    let type_ok = if flag(schema, "x-kubernetes-int-or-string") {
        is_integer(v) || v.is_string()
    } else {
        match ty {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => is_integer(v),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            _ => true,
        }
    };
    if !type_ok {
        let want = if flag(schema, "x-kubernetes-int-or-string") {
            "integer-or-string"
        } else {
            ty
        };
        let got = type_name(v);
        errors.push(FieldError::new(
            ErrorType::TypeInvalid,
            path,
            format!("Invalid value: {got:?}: {path} in body must be of type {want}: {got:?}"),
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(show).collect();
        errors.push(FieldError::new(
            ErrorType::NotSupported,
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                show(v),
                list.join(", ")
            ),
        ));
    }
    let invalid = |errors: &mut Vec<FieldError>, detail: String| {
        errors.push(FieldError::new(
            ErrorType::Invalid,
            path,
            format!("Invalid value: {}: {path} in body {detail}", show(v)),
        ));
    };
    junctors(schema, v, path, root, errors);
    match v {
        Value::String(s) => {
            let len = s.chars().count() as u64;
            // Length and pattern are one validator that stops at its first failure.
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && len > max
            {
                errors.push(FieldError::new(
                    ErrorType::TooLong,
                    path,
                    format!("Too long: may not be more than {max} bytes"),
                ));
            } else if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && len < min
            {
                invalid(errors, format!("should be at least {min} chars long"));
            } else if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
                && regex(pattern).is_some_and(|re| !re.is_match(s))
            {
                invalid(errors, format!("should match '{pattern}'"));
            }
            if let Some(format) = schema.get("format").and_then(Value::as_str)
                && !format_ok(format, s)
            {
                invalid(errors, format!("must be of type {format}: {s:?}"));
            }
        }
        Value::Number(_) => {
            let x = v.as_f64().unwrap_or_default();
            if let Some(max) = schema.get("maximum") {
                let m = max.as_f64().unwrap_or(f64::INFINITY);
                if flag(schema, "exclusiveMaximum") && x >= m {
                    invalid(errors, format!("should be less than {}", show(max)));
                } else if x > m {
                    invalid(
                        errors,
                        format!("should be less than or equal to {}", show(max)),
                    );
                }
            }
            if let Some(min) = schema.get("minimum") {
                let m = min.as_f64().unwrap_or(f64::NEG_INFINITY);
                if flag(schema, "exclusiveMinimum") && x <= m {
                    invalid(errors, format!("should be greater than {}", show(min)));
                } else if x < m {
                    invalid(
                        errors,
                        format!("should be greater than or equal to {}", show(min)),
                    );
                }
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                errors.push(FieldError::new(
                    ErrorType::TooMany,
                    path,
                    format!("Too many: {n}: must have at most {max} items"),
                ));
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                invalid(errors, format!("should have at least {min} items"));
            }
            list_uniqueness(schema, items, path, errors);
            if let Some(item_schema) = schema.get("items") {
                let olds = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = olds.and_then(|o| correlate(schema, item, o));
                    structural(
                        item_schema,
                        item,
                        old_item,
                        &format!("{path}[{i}]"),
                        false,
                        errors,
                    );
                }
            }
        }
        Value::Object(map) => {
            let n = map.len() as u64;
            if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
                && n > max
            {
                invalid(errors, format!("should have at most {max} properties"));
            }
            if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
                && n < min
            {
                invalid(errors, format!("should have at least {min} properties"));
            }
            for req in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !map.contains_key(req) {
                    errors.push(FieldError::new(
                        ErrorType::Required,
                        &join(path, req),
                        "Required value".into(),
                    ));
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                if root && matches!(k.as_str(), "metadata" | "apiVersion" | "kind") {
                    continue;
                }
                let child_schema = props.and_then(|p| p.get(k)).or(additional);
                if let Some(s) = child_schema {
                    let old_child = old.and_then(|o| o.get(k));
                    structural(s, child, old_child, &join(path, k), false, errors);
                }
            }
        }
        _ => {}
    }
}

/// Whether `s` has the string `format` (the formats kube-apiserver's strfmt registry knows;
/// unknown formats pass, as there).
fn format_ok(format: &str, s: &str) -> bool {
    static PATTERNS: &[(&str, &str)] = &[
        (
            "uuid",
            r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
        ),
        (
            "uuid3",
            r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
        ),
        (
            "uuid4",
            r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
        ),
        (
            "uuid5",
            r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$",
        ),
        ("mac", r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$"),
        (
            "hostname",
            r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$",
        ),
        ("email", r"^[^@\s]+@[^@\s]+\.[^@\s]+$"),
        ("uri", r"^[A-Za-z][A-Za-z0-9+.-]*:"),
        ("hexcolor", r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"),
        ("bsonobjectid", r"^[0-9a-fA-F]{24}$"),
        ("duration", r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h|d|w))+$"),
        ("date", r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"),
        (
            "byte",
            r"^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
        ),
    ];
    match format {
        "date-time" | "datetime" => s.parse::<jiff::Timestamp>().is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok(),
        "ipv4" => s.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = if ip.parse::<std::net::Ipv4Addr>().is_ok() {
                32
            } else if ip.parse::<std::net::Ipv6Addr>().is_ok() {
                128
            } else {
                return false;
            };
            bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        _ => PATTERNS
            .iter()
            .find(|(name, _)| *name == format)
            .is_none_or(|(_, pattern)| regex(pattern).is_some_and(|re| re.is_match(s))),
    }
}

/// Whether `v` validates against `schema` with no error (no ratcheting inside junctors).
fn valid_against(schema: &Value, v: &Value, path: &str, root: bool) -> bool {
    let mut errors = Vec::new();
    structural(schema, v, None, path, root, &mut errors);
    errors.is_empty()
}

/// `allOf`, `anyOf`, `oneOf` and `not` (value validations of structural schemas).
fn junctors(schema: &Value, v: &Value, path: &str, root: bool, errors: &mut Vec<FieldError>) {
    let subs = |key: &str| {
        schema
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let invalid = |errors: &mut Vec<FieldError>, detail: String| {
        errors.push(FieldError::new(
            ErrorType::Invalid,
            path,
            format!("Invalid value: {}: {detail}", show(v)),
        ));
    };
    for sub in subs("allOf") {
        structural(sub, v, None, path, root, errors);
    }
    let any = subs("anyOf");
    if !any.is_empty() && !any.iter().any(|sub| valid_against(sub, v, path, root)) {
        invalid(errors, "must validate at least one schema (anyOf)".into());
    }
    let one = subs("oneOf");
    if !one.is_empty() {
        let n = one
            .iter()
            .filter(|sub| valid_against(sub, v, path, root))
            .count();
        if n != 1 {
            invalid(
                errors,
                format!(
                    "must validate one and only one schema (oneOf). Found {n} valid alternatives"
                ),
            );
        }
    }
    if let Some(not) = schema.get("not")
        && valid_against(not, v, path, root)
    {
        invalid(errors, "must not validate the schema (not)".into());
    }
}

/// The map keys of an `x-kubernetes-list-type: map` item.
fn map_keys<'a>(schema: &'a Value, item: &'a Value) -> Vec<(&'a str, Option<&'a Value>)> {
    schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|k| (k, item.get(k)))
        .collect()
}

fn list_type(schema: &Value) -> &str {
    schema
        .get("x-kubernetes-list-type")
        .and_then(Value::as_str)
        .unwrap_or("atomic")
}

/// The old item a new list item correlates with: by map keys in `map` lists, none otherwise.
fn correlate<'a>(schema: &Value, item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    if list_type(schema) != "map" {
        return None;
    }
    let keys = map_keys(schema, item);
    olds.iter().find(|o| map_keys(schema, o) == keys)
}

fn list_uniqueness(schema: &Value, items: &[Value], path: &str, errors: &mut Vec<FieldError>) {
    match list_type(schema) {
        "set" => {
            for (i, item) in items.iter().enumerate() {
                if items.get(..i).is_some_and(|before| before.contains(item)) {
                    errors.push(FieldError::new(
                        ErrorType::Duplicate,
                        &format!("{path}[{i}]"),
                        format!("Duplicate value: {}", show(item)),
                    ));
                }
            }
        }
        "map" => {
            for (i, item) in items.iter().enumerate() {
                let keys = map_keys(schema, item);
                let dup = items
                    .get(..i)
                    .is_some_and(|before| before.iter().any(|b| map_keys(schema, b) == keys));
                if dup {
                    let shown: serde_json::Map<String, Value> = keys
                        .iter()
                        .filter_map(|(k, v)| v.map(|v| ((*k).to_owned(), v.clone())))
                        .collect();
                    errors.push(FieldError::new(
                        ErrorType::Duplicate,
                        &format!("{path}[{i}]"),
                        format!("Duplicate value: {}", Value::Object(shown)),
                    ));
                }
            }
        }
        _ => {}
    }
}

/// A JSON value as a CEL value, typed by its schema (`number` fields are doubles).
fn to_cel(v: &Value, schema: Option<&Value>) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            let number =
                schema.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("number");
            match (n.as_i64(), n.as_u64()) {
                (Some(i), _) if !number => cel::Value::Int(i),
                (None, Some(u)) if !number => cel::Value::UInt(u),
                _ => cel::Value::Float(n.as_f64().unwrap_or_default()),
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.get("items"));
            cel::Value::List(Arc::new(
                items.iter().map(|i| to_cel(i, item_schema)).collect(),
            ))
        }
        Value::Object(map) => {
            let props = schema
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object);
            let additional = schema
                .and_then(|s| s.get("additionalProperties"))
                .filter(|a| a.is_object());
            let out: HashMap<String, cel::Value> = map
                .iter()
                .map(|(k, child)| {
                    let s = props.and_then(|p| p.get(k)).or(additional);
                    (k.clone(), to_cel(child, s))
                })
                .collect();
            cel::Value::from(out)
        }
    }
}

fn rules(
    schema: &Value,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    root: bool,
    errors: &mut Vec<FieldError>,
) {
    if old == Some(v) {
        return; // ratcheting
    }
    if let Some(list) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        && !list.is_empty()
    {
        let this = to_cel(v, Some(schema));
        let before = old.map(|o| to_cel(o, Some(schema)));
        for rule in list {
            evaluate(schema, rule, (v, &this), before.as_ref(), path, errors);
        }
    }
    match v {
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                let olds = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = olds.and_then(|o| correlate(schema, item, o));
                    rules(
                        item_schema,
                        item,
                        old_item,
                        &format!("{path}[{i}]"),
                        false,
                        errors,
                    );
                }
            }
        }
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                if root && matches!(k.as_str(), "metadata" | "apiVersion" | "kind") {
                    continue;
                }
                let old_child = old.and_then(|o| o.get(k));
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    rules(s, child, old_child, &join(path, k), false, errors);
                } else if let Some(s) = additional {
                    rules(s, child, old_child, &format!("{path}[{k}]"), false, errors);
                }
            }
        }
        _ => {}
    }
}

/// How kube-apiserver shows the value a rule failed on: scalars as in other field errors;
/// objects and lists not at all (`Invalid value: <message>`).
fn rule_value(v: &Value) -> String {
    match v {
        Value::Object(_) | Value::Array(_) => String::new(),
        other => format!("{}: ", show(other)),
    }
}

fn evaluate(
    schema: &Value,
    rule: &Value,
    (json, this): (&Value, &cel::Value),
    before: Option<&cel::Value>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(text) = rule.get("rule").and_then(Value::as_str) else {
        return;
    };
    let compiled = program(text);
    let Ok(prog) = compiled.as_ref() else {
        // Rejected when the CRD was written; a CRD stored before cannot reach here.
        return;
    };
    let transition = prog.references().has_variable("oldSelf");
    let optional_old = flag(rule, "optionalOldSelf");
    if transition && before.is_none() && !optional_old {
        return;
    }
    let shown = rule_value(json);
    let ty = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object");
    let field = match rule.get("fieldPath").and_then(Value::as_str) {
        Some(fp) if !fp.is_empty() => {
            let fp = fp.trim_start_matches('.');
            join(path, fp)
        }
        _ => path.to_owned(),
    };
    let outcome = CONTEXT.with(|base| {
        let mut ctx = base.new_inner_scope();
        ctx.add_variable_from_value("self", this.clone());
        match before {
            Some(b) => ctx.add_variable_from_value("oldSelf", b.clone()),
            None if transition => ctx.add_variable_from_value("oldSelf", cel::Value::Null),
            None => {}
        }
        let result = prog.execute(&ctx);
        let message = match &result {
            Ok(cel::Value::Bool(false)) => Some(message(rule, text, &ctx)),
            _ => None,
        };
        (result, message)
    });
    match outcome {
        (Ok(cel::Value::Bool(true)), _) => {}
        (Ok(cel::Value::Bool(false)), message) => {
            let message = message.unwrap_or_else(|| format!("failed rule: {text}"));
            let (kind, body) = match rule.get("reason").and_then(Value::as_str) {
                Some("FieldValueForbidden") => (ErrorType::Forbidden, format!("Forbidden: {message}")),
                Some("FieldValueRequired") => {
                    (ErrorType::Required, format!("Required value: {message}"))
                }
                Some("FieldValueDuplicate") => {
                    (ErrorType::Duplicate, format!("Duplicate value: {ty:?}: {message}"))
                }
                _ => (ErrorType::Invalid, format!("Invalid value: {shown}{message}")),
            };
            errors.push(FieldError::new(kind, &field, body));
        }
        (Ok(other), _) => errors.push(FieldError::new(
            ErrorType::Invalid,
            &field,
            format!("Invalid value: {shown}rule did not evaluate to a bool: {other:?} evaluating rule: {text}"),
        )),
        (Err(e), _) => errors.push(FieldError::new(
            ErrorType::Invalid,
            &field,
            format!("Invalid value: {shown}{e} evaluating rule: {text}"),
        )),
    }
}

/// The message of a failed rule: `messageExpression` if it yields a non-empty string, else
/// `message`, else `failed rule: <rule>`.
fn message(rule: &Value, text: &str, ctx: &cel::Context<'_>) -> String {
    if let Some(expr) = rule.get("messageExpression").and_then(Value::as_str)
        && let Ok(p) = program(expr).as_ref()
        && let Ok(cel::Value::String(s)) = p.execute(ctx)
        && !s.trim().is_empty()
    {
        return s.as_str().to_owned();
    }
    match rule.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => format!("failed rule: {text}"),
    }
}

/// Compile every `x-kubernetes-validations` rule (and `messageExpression`) and every `pattern`
/// of a schema, as the apiextensions validation does when a CRD is written. `path` names the
/// schema (`spec.versions[0].schema.openAPIV3Schema`); returns `field: problem` causes.
pub fn check_crd(schema: &Value, path: &str) -> Vec<String> {
    let mut causes = Vec::new();
    check_schema(schema, path, &mut causes, 0);
    causes
}

fn check_schema(schema: &Value, path: &str, causes: &mut Vec<String>, depth: usize) {
    if depth > 64 || !schema.is_object() {
        return;
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && regex(pattern).is_none()
    {
        causes.push(format!(
            "{path}.pattern: Invalid value: {pattern:?}: must be a valid regular expression"
        ));
    }
    for (i, rule) in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.x-kubernetes-validations[{i}]");
        match rule.get("rule").and_then(Value::as_str) {
            None | Some("") => causes.push(format!("{at}.rule: Required value")),
            Some(text) => {
                if let Err(e) = program(text).as_ref() {
                    causes.push(format!(
                        "{at}.rule: Invalid value: {text:?}: compilation failed: {e}"
                    ));
                }
            }
        }
        if let Some(expr) = rule.get("messageExpression").and_then(Value::as_str)
            && let Err(e) = program(expr).as_ref()
        {
            causes.push(format!(
                "{at}.messageExpression: Invalid value: {expr:?}: messageExpression compilation failed: {e}"
            ));
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            check_schema(s, &format!("{path}.properties[{k}]"), causes, depth + 1);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(s) = schema.get(key) {
            check_schema(s, &format!("{path}.{key}"), causes, depth + 1);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, s) in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            check_schema(s, &format!("{path}.{key}[{i}]"), causes, depth + 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["op"],
        "x-kubernetes-validations": [{"rule": "!has(self.a) || has(self.b)", "message": "a needs b"}],
        "properties": {
            "op": {"type": "string", "enum": ["In", "NotIn"]},
            "n": {"type": "integer", "maximum": 100, "minimum": 1},
            "d": {"type": "string", "pattern": "^[0-9]+s$"},
            "t": {"type": "string", "format": "date-time"},
            "a": {"type": "string"}, "b": {"type": "string"},
            "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ref": {"type": "object", "properties": {"g": {"type": "string"}},
                    "x-kubernetes-validations": [{"rule": "self.g == oldSelf.g", "message": "g is immutable"}]}
        }}}})
    }

    fn rendered(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(FieldError::render).collect()
    }

    #[test]
    fn structural_errors_read_like_the_apiserver() {
        let obj = json!({"spec": {"n": 500, "d": "1x", "t": "yesterday", "s": ["a", "a"]}});
        let errs = rendered(&validate(&schema(), &obj, None));
        assert!(
            errs.contains(&"spec.op: Required value".to_owned()),
            "{errs:?}"
        );
        assert!(
            errs.contains(
                &"spec.n: Invalid value: 500: spec.n in body should be less than or equal to 100"
                    .to_owned()
            )
        );
        assert!(errs.contains(
            &"spec.d: Invalid value: \"1x\": spec.d in body should match '^[0-9]+s$'".to_owned()
        ));
        assert!(errs.iter().any(|e| e.starts_with("spec.t: Invalid value")));
        assert!(errs.contains(&"spec.s[1]: Duplicate value: \"a\"".to_owned()));
    }

    #[test]
    fn enum_errors_block_rules() {
        let obj = json!({"spec": {"op": "Foo", "a": "x"}});
        let errs = rendered(&validate(&schema(), &obj, None));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with(
            "spec.op: Unsupported value: \"Foo\": supported values: \"In\", \"NotIn\""
        ));
        assert!(errs[1].contains("some validation rules were not checked"));
    }

    #[test]
    fn rules_and_transition_rules() {
        let obj = json!({"spec": {"op": "In", "a": "x", "ref": {"g": "new"}}});
        let errs = rendered(&validate(&schema(), &obj, None));
        assert_eq!(errs, vec!["spec: Invalid value: a needs b"]);
        let old = json!({"spec": {"op": "In", "ref": {"g": "old"}}});
        let obj = json!({"spec": {"op": "In", "ref": {"g": "new"}}});
        let errs = rendered(&validate(&schema(), &obj, Some(&old)));
        assert_eq!(errs, vec!["spec.ref: Invalid value: g is immutable"]);
    }

    #[test]
    fn unchanged_values_are_ratcheted() {
        let old = json!({"spec": {"op": "In", "n": 500}});
        let obj = json!({"spec": {"op": "In", "n": 500, "b": "y"}});
        assert!(validate(&schema(), &obj, Some(&old)).is_empty());
    }

    #[test]
    fn junctors_validate_values() {
        let schema = json!({"type": "object", "properties": {
            "size": {"anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": true},
            "mode": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
            "name": {"type": "string", "not": {"pattern": "^kube-"},
                "allOf": [{"minLength": 2}, {"maxLength": 5}]},
            "tier": {"type": "string", "anyOf": [{"enum": ["gold"]}, {"pattern": "^x-"}]},
        }});
        let ok = json!({"size": 3, "mode": "ax", "name": "web", "tier": "x-1"});
        assert!(rendered(&validate(&schema, &ok, None)).is_empty());
        let bad = json!({"size": "3", "mode": "ab", "name": "kube-system", "tier": "silver"});
        let errs = rendered(&validate(&schema, &bad, None));
        assert!(
            errs.iter().any(|e| e == "mode: Invalid value: \"ab\": must validate one and only one schema (oneOf). Found 2 valid alternatives"),
            "{errs:#?}"
        );
        assert!(
            errs.iter()
                .any(|e| e
                    == "name: Invalid value: \"kube-system\": must not validate the schema (not)"),
            "{errs:#?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("name: Too long: may not be more than 5")),
            "{errs:#?}"
        );
        assert!(
            errs.iter().any(|e| e
                == "tier: Invalid value: \"silver\": must validate at least one schema (anyOf)"),
            "{errs:#?}"
        );
        assert!(
            !errs.iter().any(|e| e.starts_with("size")),
            "int-or-string strings pass: {errs:#?}"
        );
    }

    #[test]
    fn string_formats_are_checked() {
        for (format, good, bad) in [
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "nope"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("ipv6", "::1", "1::2::3"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("mac", "aa:bb:cc:dd:ee:ff", "aa:bb"),
            ("hostname", "node-1.example.com", "-bad-"),
            ("date", "2026-11-21", "2026-13-01"),
            ("byte", "aGVsbG8=", "not base64!"),
            ("duration", "1h30m", "soon"),
        ] {
            let schema = json!({"type": "object", "properties": {"v": {"type": "string", "format": format}}});
            assert!(
                validate(&schema, &json!({"v": good}), None).is_empty(),
                "{format} {good}"
            );
            let errs = rendered(&validate(&schema, &json!({"v": bad}), None));
            assert!(
                errs.iter()
                    .any(|e| e.contains(&format!("must be of type {format}"))),
                "{format} {bad}: {errs:?}"
            );
        }
        let schema = json!({"type": "object", "properties": {"v": {"type": "string", "format": "x-unknown"}}});
        assert!(validate(&schema, &json!({"v": "anything"}), None).is_empty());
    }

    #[test]
    fn crd_check_rejects_bad_rules() {
        let bad = json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.all(x, "}]});
        let causes = check_crd(&bad, "spec.versions[0].schema.openAPIV3Schema");
        assert_eq!(causes.len(), 1);
        assert!(causes[0].starts_with("spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value"));
        assert!(check_crd(&schema(), "s").is_empty());
    }
}
