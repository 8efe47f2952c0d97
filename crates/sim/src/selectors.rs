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

/// A malformed selector, with apimachinery's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector cannot be parsed.
    #[error("{0}")]
    Label(String),
    /// The field selector cannot be parsed.
    #[error("{0}")]
    Field(String),
    /// The field is not a field label of this resource (which has its own field labels).
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
    /// The field is not `metadata.name` or `metadata.namespace` (the resource has no other
    /// field labels).
    #[error("{0:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")]
    UnknownField(String),
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

/// A token of apimachinery's label selector lexer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::GreaterThan,
        "in" => Tok::In,
        "<" => Tok::LessThan,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// The tokens of a selector, as apimachinery's `Lexer` scans them.
fn lex(s: &str) -> Vec<(Tok, String)> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while b
            .get(i)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        {
            i += 1;
        }
        let Some(&c) = b.get(i) else {
            out.push((Tok::End, String::new()));
            return out;
        };
        let start = i;
        if special(c) {
            let mut last: Option<(Tok, usize)> = None;
            while let Some(&c) = b.get(i) {
                if !special(c) {
                    break;
                }
                i += 1;
                match keyword(s.get(start..i).unwrap_or_default()) {
                    Some(t) => last = Some((t, i)),
                    None if last.is_some() => {
                        i -= 1;
                        break;
                    }
                    None => {}
                }
            }
            match last {
                Some((t, end)) => {
                    i = end;
                    out.push((t, s.get(start..end).unwrap_or_default().to_owned()));
                }
                None => {
                    let found = s.get(start..i).unwrap_or_default();
                    out.push((
                        Tok::Error,
                        format!("error expected: keyword found '{found}'"),
                    ));
                }
            }
        } else {
            while b
                .get(i)
                .is_some_and(|&c| !special(c) && !matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
            {
                i += 1;
            }
            let word = s.get(start..i).unwrap_or_default();
            let tok = match keyword(word) {
                Some(t @ (Tok::In | Tok::NotIn)) => t,
                _ => Tok::Identifier,
            };
            out.push((tok, word.to_owned()));
        }
    }
}

/// apimachinery's `Parser`: `in`/`notin` are identifiers where values are expected.
struct Parser {
    tokens: Vec<(Tok, String)>,
    pos: usize,
}

impl Parser {
    fn peek(&self, values: bool) -> (Tok, String) {
        let (t, lit) = self
            .tokens
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::End, String::new()));
        match t {
            Tok::In | Tok::NotIn if values => (Tok::Identifier, lit),
            _ => (t, lit),
        }
    }

    fn next(&mut self, values: bool) -> (Tok, String) {
        let t = self.peek(values);
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        t
    }

    fn parse(&mut self) -> Result<Vec<LabelReq>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.peek(true);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self.requirement().map_err(|e| {
                        SelectorError::Label(format!("unable to parse requirement: {e}"))
                    })?;
                    reqs.push(r);
                    let (t, l) = self.next(true);
                    match t {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.peek(true);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(SelectorError::Label(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(SelectorError::Label(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Tok::End => return Ok(reqs),
                _ => {
                    return Err(SelectorError::Label(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<LabelReq, String> {
        let (mut tok, mut lit) = self.next(true);
        let negated = tok == Tok::DoesNotExist;
        if negated {
            (tok, lit) = self.next(true);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let key = lit;
        if let Some(e) = key_problem(&key) {
            return Err(format!("key: Invalid value: {key:?}: {e}"));
        }
        let (next, _) = self.peek(true);
        if negated {
            return Ok(LabelReq::NotExists(key));
        }
        if next == Tok::End || next == Tok::Comma {
            return Ok(LabelReq::Exists(key));
        }
        let (op, lit) = self.next(false);
        let values = match op {
            Tok::In | Tok::NotIn => self.values()?,
            Tok::Equals | Tok::DoubleEquals | Tok::NotEquals | Tok::GreaterThan | Tok::LessThan => {
                self.exact_value()?
            }
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        let mut problems = Vec::new();
        match op {
            Tok::In | Tok::NotIn if values.is_empty() => problems.push(
                "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
                    .to_owned(),
            ),
            Tok::GreaterThan | Tok::LessThan => {
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        problems.push(format!(
                            "values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            if !valid_value(v) {
                problems.push(format!(
                    "values[{i}][{key}]: Invalid value: {v:?}: {LABEL_VALUE_MESSAGE}"
                ));
            }
        }
        match problems.as_slice() {
            [] => {}
            [one] => return Err(one.clone()),
            many => return Err(format!("[{}]", many.join(", "))),
        }
        Ok(match op {
            Tok::In | Tok::Equals | Tok::DoubleEquals => LabelReq::In(key, values),
            Tok::NotIn | Tok::NotEquals => LabelReq::NotIn(key, values),
            Tok::GreaterThan => {
                LabelReq::Gt(key, values.first().map_or(0, |v| v.parse().unwrap_or(0)))
            }
            _ => LabelReq::Lt(key, values.first().map_or(0, |v| v.parse().unwrap_or(0))),
        })
    }

    /// `(a,b)` after `in`/`notin`, as a sorted set.
    fn values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.next(true);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.peek(true);
        let mut set = std::collections::BTreeSet::new();
        match tok {
            Tok::Identifier | Tok::Comma => {
                loop {
                    let (t, l) = self.next(true);
                    match t {
                        Tok::Identifier => {
                            set.insert(l);
                            let (t2, l2) = self.peek(true);
                            match t2 {
                                Tok::Comma => {}
                                Tok::ClosedPar => break,
                                _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                            }
                        }
                        Tok::Comma => {
                            if set.is_empty() {
                                set.insert(String::new());
                            }
                            let (t2, _) = self.peek(true);
                            if t2 == Tok::ClosedPar {
                                set.insert(String::new());
                                break;
                            }
                            if t2 == Tok::Comma {
                                self.next(true);
                                set.insert(String::new());
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',', or identifier")),
                    }
                }
                let (t, _) = self.next(true);
                if t != Tok::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
            }
            Tok::ClosedPar => {
                self.next(true);
                set.insert(String::new());
            }
            _ => return Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
        Ok(set.into_iter().collect())
    }

    /// The one value after `=`, `==`, `!=`, `>`, `<` (empty at a comma or the end).
    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.peek(true);
        if tok == Tok::End || tok == Tok::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.next(true);
        if tok == Tok::Identifier {
            Ok(vec![lit])
        } else {
            Err(format!("found '{lit}', expected: identifier"))
        }
    }
}

/// Why a label value is invalid, as `IsValidLabelValue` says it.
pub(crate) const LABEL_VALUE_MESSAGE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// What is wrong with a label key (a qualified name), as `IsQualifiedName` says it.
pub(crate) fn key_problem(k: &str) -> Option<String> {
    const NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    if !valid_value(name) {
        return Some(NAME.into());
    }
    if let Some(p) = prefix {
        let label = |l: &str| {
            !l.is_empty()
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if p.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if p.len() > 253 || !p.split('.').all(label) {
            return Some("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into());
        }
    }
    None
}

/// Whether `s` is a valid label value (may be empty).
pub(crate) fn valid_value(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

impl LabelSelector {
    /// Parse a `labelSelector` query value, as apimachinery's `labels.Parse`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let tokens = lex(s);
        if let Some((_, message)) = tokens.iter().find(|(t, _)| *t == Tok::Error) {
            // The lexer's error token ends the scan; the parser reports what it found.
            return Err(SelectorError::Label(format!(
                "found '{message}', expected: !, identifier, or 'end of string'"
            )));
        }
        Parser { tokens, pos: 0 }.parse().map(Self)
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
/// (`a=b,c in (d)`), its requirements ordered by key as apimachinery orders them: how
/// `Scale.status.selector` and `kubectl get -o wide`'s `Selector` column show it.
pub fn label_selector_string(sel: &Value) -> String {
    let mut terms: Vec<(&str, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            terms.push((k, format!("{k}={}", v.as_str().unwrap_or_default())));
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
                "In" => terms.push((k, format!("{k} in ({})", values.join(",")))),
                "NotIn" => terms.push((k, format!("{k} notin ({})", values.join(",")))),
                "Exists" => terms.push((k, k.to_owned())),
                "DoesNotExist" => terms.push((k, format!("!{k}"))),
                _ => {}
            }
        }
    }
    terms.sort_by(|a, b| a.0.cmp(b.0));
    terms
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
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
    /// Parse a `fieldSelector` query value, as apimachinery's `fields.ParseSelector`.
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
                        "invalid selector: '{s}'; can't understand '{term}'"
                    )));
                };
                Ok(FieldReq {
                    field: field.trim().to_owned(),
                    value: value.trim().to_owned(),
                    negated,
                })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Check every field is one of `supported`. Resources with field labels of their own
    /// say "not supported"; the others list the two metadata fields, as kube-apiserver does.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), SelectorError> {
        let own_labels = supported
            .iter()
            .any(|f| !matches!(*f, "metadata.name" | "metadata.namespace"));
        match self
            .0
            .iter()
            .find(|r| !supported.contains(&r.field.as_str()))
        {
            Some(r) if own_labels => Err(SelectorError::UnsupportedField(r.field.clone())),
            Some(r) => Err(SelectorError::UnknownField(r.field.clone())),
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
        for bad in [
            "a in (b", "a in b", "a=b)", "=b", "a b", "a=-x-", "a>x", "a in ()x",
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
        let message = |s: &str| LabelSelector::parse(s).unwrap_err().to_string();
        assert_eq!(
            message("app in ("),
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
        assert_eq!(
            message("a b"),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            message("=x"),
            "found '=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            message("app=web,,"),
            "found ',', expected: identifier after ','"
        );
        assert!(LabelSelector::parse("a in (),b notin (x,,y)").is_ok());
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
            Err(SelectorError::UnknownField("spec.nodeName".into()))
        );
        assert_eq!(
            sel.check_supported(&["metadata.name", "status.phase"]),
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
