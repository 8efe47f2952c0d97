//! Label and field selectors.
//!
//! Responsibility: parse the `labelSelector` and `fieldSelector` query strings the way
//! apimachinery does and match them against objects.
//! Inputs: selector strings, label maps, field values. Outputs: parsed selectors, match results,
//! [`SelectorError`] for malformed input (served as 400 BadRequest).
//!
//! Label selectors: `a=b`, `a==b`, `a!=b` (also matches objects without `a`), `a in (x,y)`,
//! `a notin (x,y)` (also matches objects without `a`), `a` (exists), `!a` (does not exist),
//! `a>1`, `a<1` (integer comparisons), comma-separated and all required. Field selectors:
//! `f=v`, `f==v`, `f!=v`, comma-separated.

use serde_json::{Map, Value};

/// A malformed selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector cannot be parsed.
    #[error("unable to parse requirement: {0}")]
    Label(String),
    /// The field selector cannot be parsed.
    #[error("invalid field selector: {0}")]
    Field(String),
    /// The field is not supported for this resource.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelReq {
    /// `k=v`, `k==v`, `k in (…)`.
    In(String, Vec<String>),
    /// `k!=v`, `k notin (…)`.
    NotIn(String, Vec<String>),
    /// `k`.
    Exists(String),
    /// `!k`.
    NotExists(String),
    /// `k>n`.
    Gt(String, i64),
    /// `k<n`.
    Lt(String, i64),
}

/// A parsed label selector: all requirements must hold. Empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelReq>);

/// Split at commas that are not inside parentheses.
fn split_top_level(s: &str) -> Result<Vec<String>, SelectorError> {
    let mut parts = Vec::new();
    let mut depth = 0_i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SelectorError::Label(format!("unbalanced ')' in {s:?}")));
                }
                cur.push(c);
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if depth != 0 {
        return Err(SelectorError::Label(format!("unbalanced '(' in {s:?}")));
    }
    parts.push(cur);
    Ok(parts)
}

/// Whether `s` is a valid label key (optional DNS prefix, `/`, name of `[A-Za-z0-9-_.]`).
fn valid_key(s: &str) -> bool {
    let name = s.rsplit_once('/').map_or(s, |(prefix, name)| {
        if prefix.is_empty() || prefix.len() > 253 {
            ""
        } else {
            name
        }
    });
    valid_value(name) && !name.is_empty()
}

/// Whether `s` is a valid label value (may be empty).
fn valid_value(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

fn key(s: &str) -> Result<String, SelectorError> {
    let k = s.trim();
    if valid_key(k) {
        Ok(k.to_owned())
    } else {
        Err(SelectorError::Label(format!("invalid label key {k:?}")))
    }
}

fn value(s: &str) -> Result<String, SelectorError> {
    let v = s.trim();
    if valid_value(v) {
        Ok(v.to_owned())
    } else {
        Err(SelectorError::Label(format!("invalid label value {v:?}")))
    }
}

/// Parse `(a, b)` after `in`/`notin`.
fn value_set(s: &str) -> Result<Vec<String>, SelectorError> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Label(format!("expected '(values)', found {s:?}")))?;
    inner.split(',').map(value).collect()
}

fn parse_term(term: &str) -> Result<LabelReq, SelectorError> {
    let t = term.trim();
    if let Some(rest) = t.strip_prefix('!') {
        return Ok(LabelReq::NotExists(key(rest)?));
    }
    if let Some((k, v)) = t.split_once("!=") {
        return Ok(LabelReq::NotIn(key(k)?, vec![value(v)?]));
    }
    if let Some((k, v)) = t.split_once("==") {
        return Ok(LabelReq::In(key(k)?, vec![value(v)?]));
    }
    if let Some((k, v)) = t.split_once('=') {
        return Ok(LabelReq::In(key(k)?, vec![value(v)?]));
    }
    for (op, gt) in [('>', true), ('<', false)] {
        if let Some((k, v)) = t.split_once(op) {
            let n: i64 = v
                .trim()
                .parse()
                .map_err(|_| SelectorError::Label(format!("{v:?} is not an integer")))?;
            let k = key(k)?;
            return Ok(if gt {
                LabelReq::Gt(k, n)
            } else {
                LabelReq::Lt(k, n)
            });
        }
    }
    // `key in (…)` / `key notin (…)` / `key`
    let mut words = t.splitn(2, char::is_whitespace);
    let k = words.next().unwrap_or_default();
    match words.next().map(str::trim_start) {
        None => Ok(LabelReq::Exists(key(k)?)),
        Some(rest) => {
            if let Some(set) = rest.strip_prefix("notin") {
                Ok(LabelReq::NotIn(key(k)?, value_set(set)?))
            } else if let Some(set) = rest.strip_prefix("in") {
                Ok(LabelReq::In(key(k)?, value_set(set)?))
            } else {
                Err(SelectorError::Label(format!(
                    "expected 'in' or 'notin' in {t:?}"
                )))
            }
        }
    }
}

impl LabelSelector {
    /// Parse a `labelSelector` query value.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        split_top_level(s)?
            .iter()
            .map(|t| parse_term(t))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelReq::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|v| vs.iter().all(|x| x != v)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`) as the string form
/// (`a=b,c in (d)`), as `Scale.status.selector` shows it.
pub fn label_selector_string(sel: &Value) -> String {
    let mut terms = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            terms.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let k = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default()
            {
                "In" => terms.push(format!("{k} in ({})", values.join(","))),
                "NotIn" => terms.push(format!("{k} notin ({})", values.join(","))),
                "Exists" => terms.push(k.to_owned()),
                "DoesNotExist" => terms.push(format!("!{k}")),
                _ => {}
            }
        }
    }
    terms.join(",")
}

/// One field requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldReq {
    /// The field label, e.g. `spec.nodeName`.
    pub field: String,
    /// The value compared against.
    pub value: String,
    /// `true` for `!=`.
    pub negated: bool,
}

/// A parsed field selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldReq>);

impl FieldSelector {
    /// Parse a `fieldSelector` query value.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        if s.trim().is_empty() {
            return Ok(Self::default());
        }
        s.split(',')
            .map(|term| {
                let (field, value, negated) = if let Some((f, v)) = term.split_once("!=") {
                    (f, v, true)
                } else if let Some((f, v)) = term.split_once("==") {
                    (f, v, false)
                } else if let Some((f, v)) = term.split_once('=') {
                    (f, v, false)
                } else {
                    return Err(SelectorError::Field(format!(
                        "{term:?}: expected an operator (=, ==, !=)"
                    )));
                };
                let field = field.trim();
                if field.is_empty() {
                    return Err(SelectorError::Field(format!("{term:?}: empty field")));
                }
                Ok(FieldReq {
                    field: field.to_owned(),
                    value: value.trim().to_owned(),
                    negated,
                })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Check every field is one of `supported`.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), SelectorError> {
        match self
            .0
            .iter()
            .find(|r| !supported.contains(&r.field.as_str()))
        {
            Some(r) => Err(SelectorError::UnsupportedField(r.field.clone())),
            None => Ok(()),
        }
    }

    /// Whether the object's fields satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let actual = field_value(obj, &r.field);
            (actual == r.value) != r.negated
        })
    }
}

/// A field's value as field selectors compare it: strings as is, booleans and numbers printed,
/// anything missing as `""`.
pub fn field_value(obj: &Value, field: &str) -> String {
    let v = field.split('.').try_fold(obj, |cur, key| cur.get(key));
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn parses_the_full_grammar() {
        let sel = LabelSelector::parse("a=b,c!=d,e in (x, y),f notin (z),g,!h,i==j").unwrap();
        assert_eq!(
            sel.0,
            vec![
                LabelReq::In("a".into(), vec!["b".into()]),
                LabelReq::NotIn("c".into(), vec!["d".into()]),
                LabelReq::In("e".into(), vec!["x".into(), "y".into()]),
                LabelReq::NotIn("f".into(), vec!["z".into()]),
                LabelReq::Exists("g".into()),
                LabelReq::NotExists("h".into()),
                LabelReq::In("i".into(), vec!["j".into()]),
            ]
        );
    }

    #[test]
    fn matching_follows_apimachinery() {
        let sel = LabelSelector::parse("a=b,c!=d,e in (x,y),f notin (z),g,!h").unwrap();
        let ok = labels(json!({"a": "b", "e": "y", "g": ""}));
        assert!(sel.matches(&ok));
        let mut bad = ok.clone();
        bad.insert("h".into(), json!("1"));
        assert!(!sel.matches(&bad));
        let mut bad = ok.clone();
        bad.insert("c".into(), json!("d"));
        assert!(!sel.matches(&bad));
        let mut bad = ok.clone();
        bad.insert("f".into(), json!("z"));
        assert!(!sel.matches(&bad));
        let mut bad = ok;
        bad.remove("g");
        assert!(!sel.matches(&bad));
    }

    #[test]
    fn prefixed_keys_and_comparisons() {
        let sel = LabelSelector::parse("karpenter.sh/nodepool=default,rank>2").unwrap();
        assert!(sel.matches(&labels(
            json!({"karpenter.sh/nodepool": "default", "rank": "3"})
        )));
        assert!(!sel.matches(&labels(
            json!({"karpenter.sh/nodepool": "default", "rank": "2"})
        )));
    }

    #[test]
    fn malformed_label_selectors_are_errors() {
        for bad in ["a in (b", "a in b", "a=b)", "=b", "a b", "a=-x-", "a>x"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn field_selectors() {
        let pod =
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "unschedulable": true}});
        let sel = FieldSelector::parse("spec.nodeName=n1,metadata.name!=q").unwrap();
        assert!(sel.matches(&pod));
        assert!(
            !FieldSelector::parse("spec.nodeName==n2")
                .unwrap()
                .matches(&pod)
        );
        assert!(
            FieldSelector::parse("spec.unschedulable=true")
                .unwrap()
                .matches(&pod)
        );
        assert!(FieldSelector::parse("status.phase=").unwrap().matches(&pod));
        assert!(FieldSelector::parse("nonsense").is_err());
        assert_eq!(
            sel.check_supported(&["metadata.name"]),
            Err(SelectorError::UnsupportedField("spec.nodeName".into()))
        );
    }

    #[test]
    fn selector_objects_render_as_strings() {
        let s = label_selector_string(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]
        }));
        assert_eq!(s, "app=web,tier in (a,b)");
        assert!(LabelSelector::parse(&s).is_ok());
    }
}
