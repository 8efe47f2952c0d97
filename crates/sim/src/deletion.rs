//! Delete requests as data: `DeleteOptions`, preconditions, grace periods, and what a delete
//! does to one object.
//!
//! Responsibility: parse `DeleteOptions` (body, with `propagationPolicy`, `gracePeriodSeconds`,
//! `orphanDependents` and `dryRun` also accepted as query parameters, the body winning), check
//! preconditions, compute a pod's grace period as the pod strategy does (bound, unfinished pods
//! get the requested period or `terminationGracePeriodSeconds`; everything else is deleted at
//! once), and plan the delete: remove now, mark deleting (finalizers, a grace period, or a
//! garbage-collector finalizer for foreground/orphan propagation), shorten a running grace
//! period, or nothing.
//! Inputs: the request's body and query, the stored object. Outputs: [`DeleteOptions`],
//! [`DeleteAction`], or an [`ApiError`]. Pure: no storage, no I/O.

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object;
use crate::options::Query;
use crate::registry::{ResourceDef, Special};

/// The finalizer of an object whose blocking dependents are being deleted first.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer of an object whose dependents are being orphaned.
pub const ORPHAN_FINALIZER: &str = "orphan";

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Delete the owner now; the garbage collector deletes dependents afterwards.
    Background,
    /// Delete blocking dependents first; the owner stays (with `foregroundDeletion`) meanwhile.
    Foreground,
    /// Remove the owner's references from its dependents; they stay.
    Orphan,
}

impl Propagation {
    fn parse(s: &str) -> ApiResult<Self> {
        match s {
            "Background" => Ok(Self::Background),
            "Foreground" => Ok(Self::Foreground),
            "Orphan" => Ok(Self::Orphan),
            other => Err(ApiError::invalid(
                "DeleteOptions",
                "meta.k8s.io",
                "",
                format!(
                    "propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                ),
            )),
        }
    }

    /// The garbage-collector finalizer this policy puts on the deleted object, if any.
    pub fn finalizer(self) -> Option<&'static str> {
        match self {
            Self::Background => None,
            Self::Foreground => Some(FOREGROUND_FINALIZER),
            Self::Orphan => Some(ORPHAN_FINALIZER),
        }
    }
}

/// `DeleteOptions.preconditions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// Required uid.
    pub uid: Option<String>,
    /// Required resourceVersion.
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// From a `DeleteOptions` body.
    pub fn from_delete_options(opts: &Value) -> Self {
        let p = opts.get("preconditions");
        let field = |k: &str| {
            p.and_then(|p| p.get(k))
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Self {
            uid: field("uid"),
            resource_version: field("resourceVersion"),
        }
    }

    /// Check them against the stored object. The 409 names the kind, not the resource, as
    /// the storage layer's precondition error does.
    pub fn check(&self, def: &ResourceDef, obj: &Value) -> ApiResult<()> {
        let fail = |why: String| ApiError::Conflict {
            resource: crate::error::GroupResource::new(def.group.clone(), def.kind.clone()),
            name: object::name(obj).to_owned(),
            why,
        };
        if let Some(uid) = &self.uid
            && uid != object::uid(obj)
        {
            return Err(fail(format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                object::uid(obj)
            )));
        }
        if let Some(rv) = &self.resource_version
            && rv != object::resource_version(obj)
        {
            return Err(fail(format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                object::resource_version(obj)
            )));
        }
        Ok(())
    }
}

/// Parsed `DeleteOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Preconditions.
    pub preconditions: Preconditions,
    /// `propagationPolicy` (or `orphanDependents`); `None` means the default, background.
    pub propagation: Option<Propagation>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `dryRun: [All]` in the body.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// From a `DeleteOptions` body (`{}` when the request had none) and the query.
    pub fn parse(body: &Value, query: &Query) -> ApiResult<Self> {
        let bad =
            |key: &str, v: &str| ApiError::BadRequest(format!("invalid value for {key}: {v:?}"));
        let mut out = Self {
            preconditions: Preconditions::from_delete_options(body),
            ..Self::default()
        };
        if let Some(v) = query.get("gracePeriodSeconds").filter(|s| !s.is_empty()) {
            out.grace_period_seconds = Some(v.parse().map_err(|_| bad("gracePeriodSeconds", v))?);
        }
        if let Some(v) = query.get("orphanDependents").filter(|s| !s.is_empty()) {
            out.propagation = Some(match v.as_str() {
                "true" => Propagation::Orphan,
                "false" => Propagation::Background,
                _ => return Err(bad("orphanDependents", v)),
            });
        }
        if let Some(v) = query.get("propagationPolicy").filter(|s| !s.is_empty()) {
            out.propagation = Some(Propagation::parse(v)?);
        }
        if let Some(g) = body.get("gracePeriodSeconds").filter(|v| !v.is_null()) {
            out.grace_period_seconds = Some(
                g.as_i64()
                    .ok_or_else(|| bad("gracePeriodSeconds", &g.to_string()))?,
            );
        }
        if let Some(o) = body.get("orphanDependents").and_then(Value::as_bool) {
            out.propagation = Some(if o {
                Propagation::Orphan
            } else {
                Propagation::Background
            });
        }
        if let Some(p) = body.get("propagationPolicy").and_then(Value::as_str) {
            out.propagation = Some(Propagation::parse(p)?);
        }
        out.dry_run = body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
        Ok(out)
    }

    /// From a body alone.
    pub fn from_body(body: &Value) -> ApiResult<Self> {
        Self::parse(body, &Query::new())
    }
}

/// `metadata.deletionGracePeriodSeconds`, or 0.
pub fn current_grace(obj: &Value) -> i64 {
    obj.get("metadata")
        .and_then(|m| m.get("deletionGracePeriodSeconds"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// The grace period a delete gives an object, as kube-apiserver's pod strategy decides it: a
/// pod that is bound to a node and not finished gets the requested period, else its
/// `spec.terminationGracePeriodSeconds` (default 30), a negative one becoming 1; unbound or
/// finished pods and every other kind are deleted at once (0).
pub fn grace_period(def: &ResourceDef, obj: &Value, requested: Option<i64>) -> i64 {
    if def.special != Special::Pod {
        return 0;
    }
    let bound = object::get_path(obj, ".spec.nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        object::get_path(obj, ".status.phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !bound || finished {
        return 0;
    }
    let period = requested.unwrap_or_else(|| {
        object::get_path(obj, ".spec.terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(30)
    });
    if period < 0 { 1 } else { period }
}

/// What a delete does to an object.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteAction {
    /// Remove it now.
    Remove,
    /// Mark it deleting (this object) and keep it: it has finalizers or a grace period.
    MarkDeleting(Value),
    /// It was already deleting; its grace period is shortened (this object).
    Shorten(Value),
    /// It is already deleting: nothing changes.
    AlreadyDeleting,
}

/// Decide what a delete with grace period `grace` does. `gc_finalizer` is the garbage
/// collector's finalizer to add (foreground or orphan propagation of an object with
/// dependents); `keep` forces marking instead of removal (namespaces).
pub fn plan_delete(
    obj: &Value,
    grace: i64,
    gc_finalizer: Option<&str>,
    keep: bool,
) -> DeleteAction {
    let grace = grace.max(0);
    if object::is_deleting(obj) {
        if grace >= current_grace(obj) {
            return DeleteAction::AlreadyDeleting;
        }
        if grace == 0 && object::finalizers(obj).is_empty() {
            return DeleteAction::Remove;
        }
        let mut shorter = obj.clone();
        let meta = object::metadata_mut(&mut shorter);
        meta.insert("deletionTimestamp".into(), json!(object::rfc3339_in(grace)));
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
        return DeleteAction::Shorten(shorter);
    }
    if object::finalizers(obj).is_empty() && gc_finalizer.is_none() && grace == 0 && !keep {
        return DeleteAction::Remove;
    }
    let mut marked = obj.clone();
    let mut finalizers = object::finalizers(obj);
    if let Some(f) = gc_finalizer
        && !finalizers.iter().any(|x| x == f)
    {
        finalizers.push(f.to_owned());
    }
    let meta = object::metadata_mut(&mut marked);
    meta.insert("deletionTimestamp".into(), json!(object::rfc3339_in(grace)));
    meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
    if !finalizers.is_empty() {
        meta.insert("finalizers".into(), json!(finalizers));
    }
    let g = object::generation(obj);
    if g > 0 {
        meta.insert("generation".into(), json!(g + 1));
    }
    DeleteAction::MarkDeleting(marked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn def(group: &str, plural: &str) -> ResourceDef {
        Registry::with_builtins()
            .get(&crate::error::GroupResource::new(group, plural))
            .cloned()
            .unwrap()
    }

    #[test]
    fn delete_plans() {
        let plain = json!({"metadata": {"name": "c"}});
        assert_eq!(plan_delete(&plain, 0, None, false), DeleteAction::Remove);
        let fin = json!({"metadata": {"name": "c", "finalizers": ["x"], "generation": 3}});
        let DeleteAction::MarkDeleting(marked) = plan_delete(&fin, 0, None, false) else {
            panic!("expected mark")
        };
        assert!(object::is_deleting(&marked));
        assert_eq!(marked["metadata"]["generation"], 4);
        assert_eq!(
            plan_delete(&marked, 0, None, false),
            DeleteAction::AlreadyDeleting
        );
        let DeleteAction::MarkDeleting(fg) =
            plan_delete(&plain, 0, Some(FOREGROUND_FINALIZER), false)
        else {
            panic!("expected mark")
        };
        assert_eq!(object::finalizers(&fg), vec![FOREGROUND_FINALIZER]);
    }

    #[test]
    fn graceful_deletes_can_be_shortened() {
        let pod = json!({"metadata": {"name": "p"}});
        let DeleteAction::MarkDeleting(marked) = plan_delete(&pod, 30, None, false) else {
            panic!("expected mark")
        };
        assert_eq!(current_grace(&marked), 30);
        assert_eq!(
            plan_delete(&marked, 30, None, false),
            DeleteAction::AlreadyDeleting
        );
        let DeleteAction::Shorten(shorter) = plan_delete(&marked, 5, None, false) else {
            panic!("expected shorten")
        };
        assert_eq!(current_grace(&shorter), 5);
        assert_eq!(plan_delete(&marked, 0, None, false), DeleteAction::Remove);
    }

    #[test]
    fn pods_get_grace_only_when_bound_and_unfinished() {
        let pods = def("", "pods");
        let bound = json!({"spec": {"nodeName": "n", "terminationGracePeriodSeconds": 10}});
        assert_eq!(grace_period(&pods, &bound, None), 10);
        assert_eq!(grace_period(&pods, &bound, Some(0)), 0);
        assert_eq!(grace_period(&pods, &bound, Some(-5)), 1);
        assert_eq!(grace_period(&pods, &json!({"spec": {}}), Some(30)), 0);
        let done = json!({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}});
        assert_eq!(grace_period(&pods, &done, None), 0);
        assert_eq!(grace_period(&def("", "configmaps"), &bound, Some(30)), 0);
    }

    #[test]
    fn options_come_from_body_and_query() {
        let q: Query = [("propagationPolicy".to_owned(), "Orphan".to_owned())].into();
        let o = DeleteOptions::parse(&json!({}), &q).unwrap();
        assert_eq!(o.propagation, Some(Propagation::Orphan));
        let o = DeleteOptions::parse(
            &json!({"propagationPolicy": "Foreground", "gracePeriodSeconds": 0}),
            &q,
        )
        .unwrap();
        assert_eq!(o.propagation, Some(Propagation::Foreground));
        assert_eq!(o.grace_period_seconds, Some(0));
        let o = DeleteOptions::from_body(&json!({"orphanDependents": true, "dryRun": ["All"]}))
            .unwrap();
        assert_eq!(o.propagation, Some(Propagation::Orphan));
        assert!(o.dry_run);
        assert_eq!(
            DeleteOptions::from_body(&json!({"propagationPolicy": "Sometimes"}))
                .unwrap_err()
                .code(),
            422
        );
    }

    #[test]
    fn preconditions() {
        let d = def("", "configmaps");
        let obj = json!({"metadata": {"name": "c", "uid": "u1", "resourceVersion": "3"}});
        let ok = Preconditions::from_delete_options(&json!({"preconditions": {"uid": "u1"}}));
        assert!(ok.check(&d, &obj).is_ok());
        let bad =
            Preconditions::from_delete_options(&json!({"preconditions": {"resourceVersion": "2"}}));
        assert_eq!(bad.check(&d, &obj).unwrap_err().code(), 409);
    }
}
