//! Field management: `metadata.managedFields` for every write, and server-side apply's
//! ownership rules (conflicts, `force`, shared ownership).
//!
//! Responsibility, following structured-merge-diff as kube-apiserver uses it:
//! - a create, update or patch by manager M (the `fieldManager` parameter, else the
//!   User-Agent's product, else `unknown`) gives M's `Update` entry the fields it added or
//!   changed and takes them from every other manager; fields it removed leave every set;
//! - an apply by M merges the applied configuration, removes the fields M applied last time
//!   and no longer applies (unless another manager owns them), and sets M's `Apply` entry to
//!   exactly the applied fields; fields owned by another manager whose value the apply would
//!   change are conflicts — a 409 listing each, unless `force` moves them to M. Applying a
//!   field with the value it already has shares its ownership;
//! - managers left with no field lose their entry; entries are sorted as kube-apiserver
//!   sorts them (operation, time, manager).
//!
//! Field sets are sets of paths: `f:<field>` through maps, `k:{<merge key>}` through the keyed
//! lists of [`crate::patch::MERGE_KEYS`], `v:<value>` through set-like lists; every other list
//! and every scalar is one leaf. With a status subresource, main-resource writes do not own
//! `status` and status writes own only `status`.
//! Approximations: list types come from [`crate::patch::MERGE_KEYS`], not schemas; a map
//! node is owned only when it is empty (kube-apiserver also marks maps an updater created,
//! `.` in `FieldsV1`); the scale subresource counts as the main resource.
//! Inputs: the live object, the new object or applied configuration, the manager. Outputs: the
//! object with its `managedFields`, or an [`ApiError::ApplyConflict`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::object;
use crate::patch::merge_key;

/// Metadata fields that are never owned.
const SYSTEM_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Lists of scalars that merge as sets.
const SET_LISTS: &[&str] = &["finalizers"];

/// A field path, as `FieldsV1` keys (`f:spec`, `k:{"name":"c"}`, `v:"x"`).
type Path = Vec<String>;

/// The owned paths of an object with the values of its leaves (`None` for list items, which
/// are owned as wholes besides their fields).
type Fields = BTreeMap<Path, Option<Value>>;

/// Which part of an object a write owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Everything (no status subresource).
    All,
    /// All but `status` (the main resource of a type with a status subresource).
    Main,
    /// Only `status` (the status subresource).
    Status,
}

impl Part {
    fn keeps(self, path: &Path) -> bool {
        let status = path.first().is_some_and(|p| p == "f:status");
        match self {
            Part::All => true,
            Part::Main => !status,
            Part::Status => status,
        }
    }

    fn subresource(self) -> Option<&'static str> {
        (self == Part::Status).then_some("status")
    }
}

/// The leaf paths of `v` (field `name`) under `prefix`.
fn collect(v: &Value, name: &str, prefix: &Path, out: &mut Fields) {
    let at = |seg: String| {
        let mut p = prefix.clone();
        p.push(seg);
        p
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                collect(child, k, &at(format!("f:{k}")), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if let Some(key) = merge_key(name)
                && items.iter().all(|i| i.get(key).is_some())
            {
                for item in items {
                    let id = item.get(key).cloned().unwrap_or(Value::Null);
                    let p = at(format!("k:{}", json!({ key: id })));
                    out.insert(p.clone(), None);
                    if let Value::Object(m) = item {
                        for (k, child) in m {
                            let mut q = p.clone();
                            q.push(format!("f:{k}"));
                            collect(child, k, &q, out);
                        }
                    }
                }
            } else if SET_LISTS.contains(&name) {
                for item in items {
                    out.insert(at(format!("v:{item}")), Some(item.clone()));
                }
            } else {
                out.insert(prefix.clone(), Some(v.clone()));
            }
        }
        _ => {
            out.insert(prefix.clone(), Some(v.clone()));
        }
    }
}

/// The owned paths of a whole object (or applied configuration), limited to `part`.
fn fields(obj: &Value, part: Part) -> Fields {
    let mut out = Fields::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                for (mk, mv) in v.as_object().into_iter().flatten() {
                    if !SYSTEM_META.contains(&mk.as_str()) {
                        let p = vec!["f:metadata".to_owned(), format!("f:{mk}")];
                        collect(mv, mk, &p, &mut out);
                    }
                }
            }
            _ => collect(v, k, &vec![format!("f:{k}")], &mut out),
        }
    }
    out.retain(|p, _| part.keeps(p));
    out
}

/// Paths added, changed and removed between two objects.
fn compare(old: &Fields, new: &Fields) -> (BTreeSet<Path>, BTreeSet<Path>) {
    let changed = new
        .iter()
        .filter(|(p, v)| old.get(*p) != Some(*v))
        .map(|(p, _)| p.clone())
        .collect();
    let removed = old
        .keys()
        .filter(|p| !new.contains_key(*p))
        .cloned()
        .collect();
    (changed, removed)
}

/// The paths added or changed, and removed, from `old` to `new` (values of field `name` under
/// `prefix`), walking only where they differ: what [`compare`] computes, without collecting
/// the unchanged leaves of both objects.
fn diff(
    old: Option<&Value>,
    new: Option<&Value>,
    name: &str,
    prefix: &Path,
    changed: &mut BTreeSet<Path>,
    removed: &mut BTreeSet<Path>,
) {
    if old == new {
        return;
    }
    let leaves = |v: Option<&Value>| {
        let mut f = Fields::new();
        if let Some(v) = v {
            collect(v, name, prefix, &mut f);
        }
        f
    };
    let child = |seg: String| {
        let mut p = prefix.clone();
        p.push(seg);
        p
    };
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) if !a.is_empty() && !b.is_empty() => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                diff(
                    a.get(k),
                    b.get(k),
                    k,
                    &child(format!("f:{k}")),
                    changed,
                    removed,
                );
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b)))
            if !a.is_empty()
                && !b.is_empty()
                && merge_key(name)
                    .is_some_and(|key| a.iter().chain(b).all(|i| i.get(key).is_some())) =>
        {
            let key = merge_key(name).unwrap_or_default();
            let id = |i: &Value| i.get(key).cloned().unwrap_or(Value::Null);
            let mut ids: Vec<Value> = a.iter().map(id).collect();
            for i in b {
                if !ids.contains(&id(i)) {
                    ids.push(id(i));
                }
            }
            for i in ids {
                let find = |list: &[Value]| list.iter().find(|x| id(x) == i).cloned();
                let (x, y) = (find(a), find(b));
                let p = child(format!("k:{}", json!({ key: i })));
                match (&x, &y) {
                    (None, Some(_)) => {
                        changed.insert(p.clone());
                    }
                    (Some(_), None) => {
                        removed.insert(p.clone());
                    }
                    _ => {}
                }
                let fields_of = |v: &Option<Value>| v.as_ref().and_then(Value::as_object).cloned();
                let (fx, fy) = (fields_of(&x), fields_of(&y));
                let keys: BTreeSet<String> = fx
                    .iter()
                    .chain(fy.iter())
                    .flat_map(|m| m.keys().cloned())
                    .collect();
                for k in keys {
                    let mut q = p.clone();
                    q.push(format!("f:{k}"));
                    diff(
                        fx.as_ref().and_then(|m| m.get(&k)),
                        fy.as_ref().and_then(|m| m.get(&k)),
                        &k,
                        &q,
                        changed,
                        removed,
                    );
                }
            }
        }
        _ => {
            let (before, after) = (leaves(old), leaves(new));
            let (c, r) = compare(&before, &after);
            changed.extend(c);
            removed.extend(r);
        }
    }
}

/// [`diff`] of two whole objects, limited to `part`.
fn diff_objects(old: Option<&Value>, new: &Value, part: Part) -> (BTreeSet<Path>, BTreeSet<Path>) {
    let (mut changed, mut removed) = (BTreeSet::new(), BTreeSet::new());
    let empty = Map::new();
    let a = old.and_then(Value::as_object).unwrap_or(&empty);
    let b = new.as_object().unwrap_or(&empty);
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for k in keys {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let (ma, mb) = (
                    a.get(k).and_then(Value::as_object).unwrap_or(&empty),
                    b.get(k).and_then(Value::as_object).unwrap_or(&empty),
                );
                let mkeys: BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
                for mk in mkeys {
                    if !SYSTEM_META.contains(&mk.as_str()) {
                        let p = vec!["f:metadata".to_owned(), format!("f:{mk}")];
                        diff(ma.get(mk), mb.get(mk), mk, &p, &mut changed, &mut removed);
                    }
                }
            }
            _ => diff(
                a.get(k),
                b.get(k),
                k,
                &vec![format!("f:{k}")],
                &mut changed,
                &mut removed,
            ),
        }
    }
    changed.retain(|p| part.keeps(p));
    removed.retain(|p| part.keeps(p));
    (changed, removed)
}

/// A `FieldsV1` tree as a set of paths: a node is a member when it is `{}` or has `.`.
fn from_fields_v1(tree: &Value, prefix: &Path, out: &mut BTreeSet<Path>) {
    let Some(m) = tree.as_object() else { return };
    if !prefix.is_empty() && (m.is_empty() || m.contains_key(".")) {
        out.insert(prefix.clone());
    }
    for (k, child) in m {
        if k != "." {
            let mut p = prefix.clone();
            p.push(k.clone());
            from_fields_v1(child, &p, out);
        }
    }
}

/// A set of paths as a `FieldsV1` tree.
fn to_fields_v1(set: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for seg in path {
            let child = node.entry(seg.clone()).or_insert_with(|| json!({}));
            let Value::Object(m) = child else { break };
            node = m;
        }
    }
    // Members with children carry `.`.
    fn mark(node: &mut Map<String, Value>, prefix: &mut Path, set: &BTreeSet<Path>) {
        for (k, child) in node.iter_mut() {
            prefix.push(k.clone());
            if let Value::Object(m) = child {
                if !m.is_empty() && set.contains(prefix) {
                    m.insert(".".into(), json!({}));
                }
                mark(m, prefix, set);
            }
            prefix.pop();
        }
    }
    mark(&mut root, &mut Vec::new(), set);
    Value::Object(root)
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    subresource: Option<String>,
    time: String,
    set: BTreeSet<Path>,
}

impl Entry {
    fn parse(v: &Value) -> Option<Entry> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let mut set = BTreeSet::new();
        from_fields_v1(
            v.get("fieldsV1").unwrap_or(&Value::Null),
            &Vec::new(),
            &mut set,
        );
        Some(Entry {
            manager: text("manager")?,
            operation: text("operation").unwrap_or_else(|| "Update".into()),
            api_version: text("apiVersion").unwrap_or_default(),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            time: text("time").unwrap_or_default(),
            set,
        })
    }

    fn to_json(&self) -> Value {
        let mut e = json!({"manager": self.manager, "operation": self.operation,
            "apiVersion": self.api_version, "time": self.time, "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&self.set)});
        if let (Some(s), Some(m)) = (&self.subresource, e.as_object_mut()) {
            m.insert("subresource".into(), json!(s));
        }
        e
    }

    fn same_identity(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    /// The manager as kube-apiserver prints it in conflicts.
    fn display(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if self.operation == "Update" {
            s = format!("{s} using {}", self.api_version);
        }
        if let Some(sub) = &self.subresource {
            s = format!("{s} with subresource {sub:?}");
        }
        s
    }
}

fn entries(obj: &Value) -> Vec<Entry> {
    object::get_path(obj, ".metadata.managedFields")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Entry::parse).collect())
        .unwrap_or_default()
}

/// Write the entries back (without empty ones), sorted as kube-apiserver sorts them.
fn store(obj: &mut Value, mut list: Vec<Entry>) {
    list.retain(|e| !e.set.is_empty());
    list.sort_by(|a, b| {
        (
            &a.operation,
            seconds(&a.time),
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                seconds(&b.time),
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let value = if list.is_empty() {
        Value::Null
    } else {
        Value::Array(list.iter().map(Entry::to_json).collect())
    };
    object::set_meta(obj, "managedFields", value);
}

/// An RFC 3339 time to the second, for ordering.
fn seconds(t: &str) -> &str {
    t.get(..19).unwrap_or(t)
}

/// The `apiVersion` of an object.
fn api_version(obj: &Value) -> String {
    obj.get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Record a create (`old` is `None`), update or patch of `new` by `manager`: the manager's
/// `Update` entry gains what it added or changed, every other entry loses it, and what was
/// removed leaves every entry. The starting entries are `new`'s (a request may set them).
pub fn record_update(old: Option<&Value>, new: &mut Value, manager: &str, part: Part) {
    let (changed, removed) = diff_objects(old, new, part);
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    // Edit the entries' `FieldsV1` trees in place: parsing every entry into a set and writing
    // it back would cost a walk of every owned field per write.
    let api_version = api_version(new);
    let subresource = part.subresource();
    let time = object::now_rfc3339();
    let mut list: Vec<Value> = object::get_path(new, ".metadata.managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(str::to_owned);
    let is_mine = |e: &Value| {
        text(e, "manager").as_deref() == Some(manager)
            && text(e, "operation").as_deref() == Some("Update")
            && text(e, "apiVersion").as_deref() == Some(api_version.as_str())
            && text(e, "subresource").filter(|s| !s.is_empty()).as_deref() == subresource
    };
    let mut own = match list.iter().position(is_mine) {
        Some(i) => list.remove(i),
        None => {
            let mut e = json!({"manager": manager, "operation": "Update",
                "apiVersion": api_version, "time": time, "fieldsType": "FieldsV1",
                "fieldsV1": {}});
            if let (Some(sub), Some(m)) = (subresource, e.as_object_mut()) {
                m.insert("subresource".into(), json!(sub));
            }
            e
        }
    };
    for e in &mut list {
        if let Some(tree) = e.get_mut("fieldsV1").and_then(Value::as_object_mut) {
            for p in changed.iter().chain(&removed) {
                tree_remove(tree, p);
            }
        }
    }
    if let Some(tree) = own.get_mut("fieldsV1").and_then(Value::as_object_mut) {
        for p in &removed {
            tree_remove(tree, p);
        }
        for p in &changed {
            tree_insert(tree, p);
        }
    }
    if let Some(m) = own.as_object_mut() {
        m.insert("time".into(), json!(time));
    }
    list.push(own);
    list.retain(|e| {
        e.get("fieldsV1")
            .and_then(Value::as_object)
            .is_some_and(|t| !t.is_empty())
    });
    list.sort_by_cached_key(|e| {
        (
            text(e, "operation").unwrap_or_default(),
            text(e, "time")
                .map(|t| seconds(&t).to_owned())
                .unwrap_or_default(),
            text(e, "manager").unwrap_or_default(),
            text(e, "apiVersion").unwrap_or_default(),
            text(e, "subresource").unwrap_or_default(),
        )
    });
    object::set_meta(
        new,
        "managedFields",
        if list.is_empty() {
            Value::Null
        } else {
            Value::Array(list)
        },
    );
}

/// Remove `path` from a `FieldsV1` tree, and the nodes that only existed to hold it.
fn tree_remove(tree: &mut Map<String, Value>, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(Value::Object(node)) = tree.get_mut(first) else {
        return;
    };
    if rest.is_empty() {
        // `first` is no longer a member; its children stay.
        let children = node.keys().any(|k| k != ".");
        if children {
            node.remove(".");
        } else {
            tree.remove(first);
        }
        return;
    }
    // An empty node is a member leaf (`{"f:data":{}}` owns `data` itself): it has no
    // descendants to remove, and it stays.
    if node.is_empty() {
        return;
    }
    let member = node.contains_key(".");
    tree_remove(node, rest);
    if node.is_empty() && !member {
        tree.remove(first);
    } else if node.len() == 1 && member {
        node.remove(".");
    }
}

/// Add `path` to a `FieldsV1` tree.
fn tree_insert(tree: &mut Map<String, Value>, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let existed = tree.contains_key(first);
    let slot = tree.entry(first.clone()).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    let Value::Object(node) = slot else { return };
    if rest.is_empty() {
        if node.keys().any(|k| k != ".") {
            node.insert(".".into(), json!({}));
        }
        return;
    }
    // An existing empty node is a member leaf: it keeps its membership as it gains a child.
    if existed && node.is_empty() {
        node.insert(".".into(), json!({}));
    }
    tree_insert(node, rest);
}

/// Remove the value at `path` from `obj`.
fn remove_path(obj: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = obj;
    for seg in parents {
        let next = match seg.split_once(':') {
            Some(("f", f)) => node.get_mut(f),
            Some(("k", key)) => {
                let key: Value = serde_json::from_str(key).unwrap_or(Value::Null);
                node.as_array_mut()
                    .and_then(|items| items.iter_mut().find(|i| matches_key(i, &key)))
            }
            _ => None,
        };
        let Some(next) = next else { return };
        node = next;
    }
    match last.split_once(':') {
        Some(("f", f)) => {
            if let Some(m) = node.as_object_mut() {
                m.remove(f);
            }
        }
        Some(("k", key)) => {
            let key: Value = serde_json::from_str(key).unwrap_or(Value::Null);
            if let Some(items) = node.as_array_mut() {
                items.retain(|i| !matches_key(i, &key));
            }
        }
        Some(("v", v)) => {
            let v: Value = serde_json::from_str(v).unwrap_or(Value::Null);
            if let Some(items) = node.as_array_mut() {
                items.retain(|i| *i != v);
            }
        }
        _ => {}
    }
}

fn matches_key(item: &Value, key: &Value) -> bool {
    key.as_object()
        .is_some_and(|k| k.iter().all(|(kk, kv)| item.get(kk) == Some(kv)))
}

/// A path as structured-merge-diff prints it: `.spec.containers[name="c"].image`.
fn path_string(path: &Path) -> String {
    let mut s = String::new();
    for seg in path {
        match seg.split_once(':') {
            Some(("f", f)) => {
                s.push('.');
                s.push_str(f);
            }
            Some(("k", key)) => {
                let key: Value = serde_json::from_str(key).unwrap_or(Value::Null);
                let parts: Vec<String> = key
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                s.push_str(&format!("[{}]", parts.join(",")));
            }
            Some(("v", v)) => s.push_str(&format!("[={v}]")),
            _ => s.push_str(seg),
        }
    }
    s
}

/// Merge the applied configuration into the live object: maps recursively, keyed lists by
/// their merge key, set-like lists as sets, other lists replaced; `null` removes.
fn merge(target: &mut Value, applied: &Value) {
    let Some(amap) = applied.as_object() else {
        *target = applied.clone();
        return;
    };
    let tmap = object::as_map(target);
    for (k, v) in amap {
        match v {
            Value::Null => {
                tmap.remove(k);
            }
            Value::Object(_) => merge(tmap.entry(k.clone()).or_insert(Value::Null), v),
            Value::Array(items) => {
                let merged = match (merge_key(k), tmap.get_mut(k)) {
                    (Some(key), Some(Value::Array(cur))) => {
                        for item in items {
                            let id = item.get(key);
                            match cur.iter_mut().find(|c| id.is_some() && c.get(key) == id) {
                                Some(existing) => merge(existing, item),
                                None => cur.push(item.clone()),
                            }
                        }
                        Value::Array(std::mem::take(cur))
                    }
                    (None, Some(Value::Array(cur))) if SET_LISTS.contains(&k.as_str()) => {
                        for item in items {
                            if !cur.contains(item) {
                                cur.push(item.clone());
                            }
                        }
                        Value::Array(std::mem::take(cur))
                    }
                    _ => v.clone(),
                };
                tmap.insert(k.clone(), merged);
            }
            _ => {
                tmap.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Server-side apply of `applied` by `manager` to `live` (or to nothing, for a create).
pub fn apply(
    live: Option<&Value>,
    mut applied: Value,
    manager: &str,
    force: bool,
    part: Part,
) -> Result<Value, ApiError> {
    if let Some(meta) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        meta.remove("resourceVersion");
    }
    let applied_fields = fields(&applied, part);
    let applied_set: BTreeSet<Path> = applied_fields.keys().cloned().collect();
    let base = live.cloned().unwrap_or_else(|| json!({}));
    let mut list = entries(&base);
    let mine = Entry {
        manager: manager.to_owned(),
        operation: "Apply".into(),
        api_version: api_version(&applied),
        subresource: part.subresource().map(str::to_owned),
        time: object::now_rfc3339(),
        set: applied_set.clone(),
    };
    let previous = list
        .iter()
        .position(|e| e.same_identity(&mine))
        .map(|i| list.remove(i));
    let mut result = base.clone();
    merge(&mut result, &applied);
    if let Some(prev) = &previous {
        let others: BTreeSet<&Path> = list.iter().flat_map(|e| e.set.iter()).collect();
        for path in prev.set.iter().rev() {
            if !applied_set.contains(path) && !others.contains(path) {
                remove_path(&mut result, path);
            }
        }
    }
    let (changed, removed) = diff_objects(Some(&base), &result, part);
    let mut conflicts: Vec<(String, String)> = Vec::new();
    for e in &list {
        for p in e.set.iter().filter(|p| changed.contains(*p)) {
            conflicts.push((e.display(), path_string(p)));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApiError::ApplyConflict(conflicts));
    }
    for e in &mut list {
        e.set
            .retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    list.push(mine);
    store(&mut result, list);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn managers(obj: &Value) -> Vec<(String, String, Value)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap().to_owned(),
                    e["operation"].as_str().unwrap().to_owned(),
                    e["fieldsV1"].clone(),
                )
            })
            .collect()
    }

    #[test]
    fn fields_v1_round_trips() {
        let tree = json!({"f:data": {".": {}, "f:a": {}}, "f:spec": {"f:containers": {
            "k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}});
        let mut set = BTreeSet::new();
        from_fields_v1(&tree, &Vec::new(), &mut set);
        assert_eq!(set.len(), 4);
        assert_eq!(to_fields_v1(&set), tree);
    }

    #[test]
    fn the_diff_walk_agrees_with_comparing_all_fields() {
        let a = json!({"apiVersion": "v1", "metadata": {"name": "x", "labels": {"a": "1", "b": "2"},
            "finalizers": ["f", "g"]},
            "spec": {"containers": [{"name": "c", "image": "1", "args": ["x"]}, {"name": "d", "image": "1"}],
                "tolerations": [{"key": "t"}], "x": {}},
            "status": {"phase": "Pending"}});
        let b = json!({"apiVersion": "v1", "metadata": {"name": "x", "labels": {"a": "1", "c": "3"},
            "finalizers": ["g", "h"]},
            "spec": {"containers": [{"name": "c", "image": "2", "args": ["x"]}, {"name": "e", "image": "1"}],
                "tolerations": [{"key": "u"}], "x": {"y": 1}},
            "status": {"phase": "Running"}});
        for part in [Part::All, Part::Main, Part::Status] {
            assert_eq!(
                diff_objects(Some(&a), &b, part),
                compare(&fields(&a, part), &fields(&b, part)),
                "{part:?}"
            );
        }
        assert_eq!(
            diff_objects(None, &b, Part::All),
            compare(&Fields::new(), &fields(&b, Part::All))
        );
    }

    #[test]
    fn tree_edits_match_set_edits() {
        let tree = json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}});
        let mut set = BTreeSet::new();
        from_fields_v1(&tree, &Vec::new(), &mut set);
        let p = |segs: &[&str]| segs.iter().map(|s| (*s).to_owned()).collect::<Path>();
        let edits = [
            (false, p(&["f:data", "f:a"])),
            (false, p(&["f:spec", "f:containers", "k:{\"name\":\"c\"}"])),
            (true, p(&["f:data", "f:b"])),
            (true, p(&["f:metadata", "f:labels", "f:x", "f:deep"])),
            (false, p(&["f:metadata", "f:labels", "f:x"])),
            (true, p(&["f:status", "f:phase"])),
        ];
        let mut t = tree.as_object().cloned().unwrap();
        for (add, path) in &edits {
            if *add {
                tree_insert(&mut t, path);
                set.insert(path.clone());
            } else {
                tree_remove(&mut t, path);
                set.remove(path);
            }
        }
        let mut from_tree = BTreeSet::new();
        from_fields_v1(&Value::Object(t), &Vec::new(), &mut from_tree);
        assert_eq!(from_tree, set);
    }

    #[test]
    fn conflicts_force_and_sharing() {
        let cm = |data: Value| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x"}, "data": data})
        };
        let a = apply(
            None,
            cm(json!({"a": "1", "b": "1"})),
            "alice",
            false,
            Part::All,
        )
        .unwrap();
        let err = apply(Some(&a), cm(json!({"a": "2"})), "bob", false, Part::All).unwrap_err();
        assert_eq!(
            err.status()["message"],
            "Apply failed with 1 conflict: conflict with \"alice\": .data.a"
        );
        let shared = apply(Some(&a), cm(json!({"a": "1"})), "bob", false, Part::All).unwrap();
        assert_eq!(managers(&shared).len(), 2);
        let forced = apply(Some(&shared), cm(json!({"a": "3"})), "bob", true, Part::All).unwrap();
        assert_eq!(forced["data"], json!({"a": "3", "b": "1"}));
        assert_eq!(
            managers(&forced)[0],
            (
                "alice".into(),
                "Apply".into(),
                json!({"f:data": {"f:b": {}}})
            )
        );
        // alice stops applying b, which only she owns: it goes.
        let pruned = apply(Some(&forced), cm(json!({})), "alice", false, Part::All).unwrap();
        assert_eq!(pruned["data"], json!({"a": "3"}));
    }

    #[test]
    fn updates_take_ownership_from_appliers() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {"a": "1"}});
        let applied = apply(None, cm, "alice", false, Part::All).unwrap();
        let mut patched = applied.clone();
        patched["data"]["a"] = json!("2");
        record_update(Some(&applied), &mut patched, "carol", Part::All);
        let m = managers(&patched);
        assert_eq!(m.len(), 1, "alice's only field moved to carol: {m:?}");
        assert_eq!(m[0].1, "Update");
        let mut back = patched.clone();
        back["data"]["a"] = json!("3");
        let reapplied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {"a": "1"}});
        let err = apply(Some(&back), reapplied, "alice", false, Part::All).unwrap_err();
        assert!(
            err.to_string().contains("\"carol\" using v1: .data.a"),
            "{err}"
        );
    }
}
