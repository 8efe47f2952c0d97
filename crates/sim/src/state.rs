//! The server's state and its create, read, list, update and patch operations.
//!
//! Responsibility: run one API operation against the store and registry, which the caller holds
//! locked for the whole operation (so each operation is atomic, as an etcd transaction is):
//! resolve the resource type, convert between served and stored forms, apply
//! [`crate::semantics`], validate, record managed fields ([`crate::managed`]), write, and keep
//! CRD registrations in step with CRD objects. Custom resources refuse updates without a
//! resourceVersion, as kube-apiserver does.
//! Inputs: an [`Endpoint`] and request bodies. Outputs: served objects, lists, or [`ApiError`]s.
//! Deletes are in [`crate::lifecycle`], subresources in [`crate::subresources`], watches in
//! [`crate::watch`].

use std::sync::Arc;

use serde_json::{Value, json};

use crate::answer::ListItem;
pub use crate::answer::{Answer, ListPage};
use crate::convert::{served, to_served, to_stored};
use crate::crd;
use crate::error::{ApiError, ApiResult, GroupResource};
use crate::managed::{self, Part};
use crate::object;
use crate::options::{ContinueToken, ListOptions, WriteOptions};
use crate::patch::{PatchError, PatchType, apply_patch};
use crate::registry::{Conversion, Registry, ResourceDef, Special, def_from_crd};
use crate::semantics::{
    WriteMode, check_namespace, check_resource_version, check_type, prepare_create, prepare_update,
};
use crate::store::{Store, Stored};

/// Which resource collection a request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name.
    pub plural: String,
    /// Namespace from the URL, if any.
    pub namespace: Option<String>,
}

impl Endpoint {
    /// A namespaced endpoint.
    pub fn namespaced(group: &str, version: &str, plural: &str, ns: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            namespace: Some(ns.to_owned()),
        }
    }

    /// A cluster-scoped (or all-namespaces) endpoint.
    pub fn cluster(group: &str, version: &str, plural: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            namespace: None,
        }
    }

    fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }
}

/// Everything the server keeps.
#[derive(Debug)]
pub struct State {
    /// Objects.
    pub store: Store,
    /// Resource types.
    pub registry: Registry,
    /// Graceful deletions started by the last operations, for the server's timer to finish.
    pub reaps: Vec<crate::lifecycle::Reap>,
}

/// `namespaces` as a store key.
pub fn namespaces_key() -> GroupResource {
    GroupResource::new("", "namespaces")
}

impl State {
    /// A store with the built-in types and the default namespaces.
    pub fn new(history: usize) -> Self {
        let mut st = Self {
            store: Store::new(history),
            registry: Registry::with_builtins(),
            reaps: Vec::new(),
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let ep = Endpoint::cluster("", "v1", "namespaces");
            // Creating the default namespaces in an empty store cannot fail.
            let _ = st.create(
                &ep,
                json!({"metadata": {"name": ns}}),
                &WriteOptions::default(),
            );
        }
        st
    }

    /// The resource type an endpoint serves.
    pub fn resolve(&self, ep: &Endpoint) -> ApiResult<Arc<ResourceDef>> {
        let def = self
            .registry
            .find(&ep.group, &ep.version, &ep.plural)
            .ok_or(ApiError::NoRoute)?;
        if !def.namespaced && ep.namespace.is_some() {
            return Err(ApiError::NoRoute);
        }
        Ok(Arc::clone(def))
    }

    /// The stored object, shared (not copied), or 404.
    pub fn stored_shared(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Arc<Stored>> {
        let ns = if def.namespaced { ns } else { "" };
        self.store
            .get_shared(&def.store, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::NotFound {
                resource: def.group_resource(),
                name: name.to_owned(),
            })
    }

    /// The stored object (a copy), or 404.
    pub fn stored(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<Value> {
        self.stored_shared(def, ns, name).map(|s| s.value.clone())
    }

    /// A request body turned into the stored form for this endpoint, with its name checked
    /// against the URL's (`url_name`, for updates).
    fn incoming(
        &self,
        def: &ResourceDef,
        ep: &Endpoint,
        mut body: Value,
        url_name: Option<&str>,
    ) -> ApiResult<Value> {
        check_type(def, &ep.version, &mut body)?;
        let mut obj = to_stored(def, body);
        check_namespace(def, ep.namespace.as_deref(), &mut obj)?;
        if let Some(url_name) = url_name {
            let body_name = object::name(&obj).to_owned();
            if body_name.is_empty() {
                object::set_meta(&mut obj, "name", json!(url_name));
            } else if body_name != url_name {
                return Err(ApiError::BadRequest(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({url_name})"
                )));
            }
        }
        Ok(obj)
    }

    /// POST: create an object.
    pub fn create(&mut self, ep: &Endpoint, body: Value, opts: &WriteOptions) -> ApiResult<Answer> {
        let def = self.resolve(ep)?;
        if def.special == Special::AccessReview {
            return crate::access_review::create(&def, ep, body, opts).map(Answer::Value);
        }
        let obj = self.incoming(&def, ep, body, None)?;
        self.create_stored(&def, &ep.version, obj, opts)
    }

    /// Create from an object already in stored form.
    pub fn create_stored(
        &mut self,
        def: &Arc<ResourceDef>,
        version: &str,
        mut obj: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Answer> {
        let ns = object::namespace(&obj).to_owned();
        if def.namespaced {
            self.check_namespace_open(def, &ns, object::name(&obj))?;
        }
        if object::name(&obj).is_empty()
            && let Some(prefix) = object::meta_str(&obj, "generateName").map(str::to_owned)
        {
            let free = (0..16)
                .map(|_| format!("{prefix}{}", object::random_suffix()))
                .find(|n| self.store.get(&def.store, &ns, n).is_none());
            let Some(name) = free else {
                return Err(ApiError::AlreadyExists {
                    resource: def.group_resource(),
                    name: prefix,
                });
            };
            object::set_meta(&mut obj, "name", json!(name));
        }
        let name = object::name(&obj).to_owned();
        if self.store.get(&def.store, &ns, &name).is_some() {
            return Err(ApiError::AlreadyExists {
                resource: def.group_resource(),
                name,
            });
        }
        let mut obj = prepare_create(def, obj)?;
        structural(def, &mut obj, None, false)?;
        let new_def = if def.special == Special::Crd {
            let d = crd::prepare(&mut obj, &self.registry)?;
            let status = crd::status(&obj, None);
            object::as_map(&mut obj).insert("status".into(), status);
            Some(d)
        } else {
            None
        };
        if !opts.applying {
            managed::record_update(None, &mut obj, &opts.manager(), part(def, WriteMode::Main));
        }
        if opts.dry_run {
            return Ok(Answer::Value(to_served(def, version, obj)));
        }
        let stored = self.store.put(&def.store, obj, None);
        if let Some(d) = new_def {
            self.registry.insert(d);
            self.refresh_ref_versions();
        }
        self.after_write(def, object::namespace(&stored));
        Ok(Answer::stored(def, version, stored))
    }

    /// Namespaced creates need an existing namespace that is not terminating.
    fn check_namespace_open(&self, def: &ResourceDef, ns: &str, name: &str) -> ApiResult<()> {
        match self.store.get(&namespaces_key(), "", ns) {
            None => Err(ApiError::NotFound {
                resource: GroupResource::new("", "namespaces"),
                name: ns.to_owned(),
            }),
            Some(n) if object::is_deleting(n) => Err(ApiError::Forbidden {
                resource: def.group_resource(),
                name: name.to_owned(),
                why: format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            }),
            Some(_) => Ok(()),
        }
    }

    /// GET one object.
    pub fn get(&self, ep: &Endpoint, name: &str) -> ApiResult<Value> {
        let def = self.resolve(ep)?;
        let obj = self.stored(&def, ep.ns(), name)?;
        Ok(to_served(&def, &ep.version, obj))
    }

    /// The served objects matching the options, in key order, after the continue point.
    pub fn matching(
        &self,
        def: &ResourceDef,
        ep: &Endpoint,
        opts: &ListOptions,
    ) -> ApiResult<Vec<Value>> {
        Ok(self
            .matching_shared(def, ep, opts)?
            .into_iter()
            .map(|item| item.into_served(def, &ep.version))
            .collect())
    }

    /// [`State::matching`], sharing the stored objects instead of copying them.
    fn matching_shared(
        &self,
        def: &ResourceDef,
        ep: &Endpoint,
        opts: &ListOptions,
    ) -> ApiResult<Vec<ListItem>> {
        opts.fields
            .check_supported(&def.all_field_labels())
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let after = opts.continue_from.as_ref().map(|c| &c.after);
        let selected =
            |obj: &Value| opts.labels.matches(&object::labels(obj)) && opts.fields.matches(obj);
        if let Some(c) = &opts.continue_from
            && c.rv < self.store.current_rv()
        {
            // Later pages show the list as of the first page (etcd's MVCC snapshot).
            let snapshot = self
                .store
                .list_at(&def.store, ep.namespace.as_deref(), after, c.rv)
                .map_err(|_| ApiError::Expired(CONTINUE_EXPIRED.into()))?;
            if def.conversion == Conversion::EventsV1 {
                return Ok(snapshot
                    .into_iter()
                    .map(|(_, obj)| to_served(def, &ep.version, obj.value.clone()))
                    .filter(|obj| selected(obj))
                    .map(ListItem::Served)
                    .collect());
            }
            return Ok(snapshot
                .into_iter()
                .filter(|(_, obj)| selected(obj))
                .map(|(_, obj)| ListItem::Shared(obj))
                .collect());
        }
        let objects = self
            .store
            .list_shared(&def.store, ep.namespace.as_deref(), after);
        if def.conversion == Conversion::EventsV1 {
            // Field names differ between the stored and served forms: select after converting.
            return Ok(objects
                .map(|(_, obj)| to_served(def, &ep.version, obj.value.clone()))
                .filter(|obj| selected(obj))
                .map(ListItem::Served)
                .collect());
        }
        // Nothing is copied: the page shares the stored objects.
        Ok(objects
            .filter(|(_, obj)| selected(obj))
            .map(|(_, obj)| ListItem::Shared(Arc::clone(obj)))
            .collect())
    }

    /// GET a collection.
    pub fn list(&self, ep: &Endpoint, opts: &ListOptions) -> ApiResult<Value> {
        Ok(self.list_page(ep, opts)?.into_value())
    }

    /// GET a collection, its items shared with the store (cheap under the lock; encode it
    /// with [`ListPage::to_json`] after letting go).
    pub fn list_page(&self, ep: &Endpoint, opts: &ListOptions) -> ApiResult<ListPage> {
        let def = self.resolve(ep)?;
        if opts.continue_from.is_some() && opts.resource_version.is_some() {
            return Err(ApiError::BadRequest(
                "specifying resource version is not allowed when using continue".into(),
            ));
        }
        let mut items = self.matching_shared(&def, ep, opts)?;
        let rv = opts
            .continue_from
            .as_ref()
            .map_or(self.store.current_rv(), |c| c.rv);
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if opts.limit > 0 && items.len() > opts.limit {
            let remaining = items.len() - opts.limit;
            items.truncate(opts.limit);
            if let Some(last) = items.last() {
                let last = last.value();
                let token = ContinueToken {
                    rv,
                    after: (
                        object::namespace(last).to_owned(),
                        object::name(last).to_owned(),
                    ),
                };
                let m = object::as_map(&mut meta);
                m.insert("continue".into(), json!(token.encode()));
                if opts.labels.is_empty() && opts.fields.0.is_empty() {
                    m.insert("remainingItemCount".into(), json!(remaining));
                }
            }
        }
        let head = json!({
            "kind": format!("{}List", def.kind),
            "apiVersion": def.api_version(&ep.version),
            "metadata": meta,
        });
        Ok(ListPage {
            version: ep.version.clone(),
            def,
            head,
            items,
        })
    }

    /// PUT: replace an object (or its status). Returns the object and whether it was created.
    pub fn update(
        &mut self,
        ep: &Endpoint,
        name: &str,
        body: Value,
        mode: WriteMode,
        opts: &WriteOptions,
    ) -> ApiResult<(Answer, bool)> {
        let def = self.resolve(ep)?;
        let obj = self.incoming(&def, ep, body, Some(name))?;
        let Some(old) = self.store.get_shared(&def.store, ep.ns(), name).cloned() else {
            if def.create_on_update && mode == WriteMode::Main {
                let mut fresh = obj;
                object::set_meta(&mut fresh, "resourceVersion", Value::Null);
                return Ok((self.create_stored(&def, &ep.version, fresh, opts)?, true));
            }
            return Err(ApiError::NotFound {
                resource: def.group_resource(),
                name: name.to_owned(),
            });
        };
        if def.custom && object::resource_version(&obj).is_empty() {
            // Custom resources allow no unconditional update.
            return Err(ApiError::Invalid {
                group: def.group.clone(),
                kind: def.plural.clone(),
                name: name.to_owned(),
                causes: vec![
                    "metadata.resourceVersion: Invalid value: 0: must be specified for an update"
                        .into(),
                ],
            });
        }
        check_resource_version(&def, &old, &obj)?;
        let new = prepare_update(&def, &old, obj, mode)?;
        Ok((self.commit(&def, &ep.version, old, new, mode, opts)?, false))
    }

    /// Write the result of an update: nothing if unchanged, removal if the last finalizer of a
    /// deleting object went, a new version otherwise.
    pub fn commit(
        &mut self,
        def: &Arc<ResourceDef>,
        version: &str,
        old: Arc<Stored>,
        mut new: Value,
        mode: WriteMode,
        opts: &WriteOptions,
    ) -> ApiResult<Answer> {
        structural(def, &mut new, Some(&old), !opts.binding)?;
        let mut new_def = None;
        if def.special == Special::Crd && mode == WriteMode::Main {
            new_def = Some(crd::prepare(&mut new, &self.registry)?);
            let status = crd::status(&new, old.get("status"));
            object::as_map(&mut new).insert("status".into(), status);
        }
        if !opts.applying {
            managed::record_update(Some(&old), &mut new, &opts.manager(), part(def, mode));
        }
        if new == old.value {
            return Ok(Answer::stored(def, version, old));
        }
        if opts.dry_run {
            return Ok(Answer::Value(to_served(def, version, new)));
        }
        if object::is_deleting(&new)
            && object::finalizers(&new).is_empty()
            && crate::deletion::current_grace(&new) == 0
        {
            // The answer is the updated object (without its finalizers), at the deletion's
            // resourceVersion.
            let last = self.remove(def, object::namespace(&new), object::name(&new));
            if let Some(last) = last {
                let rv = object::resource_version(&last).to_owned();
                object::set_meta(&mut new, "resourceVersion", json!(rv));
            }
            return Ok(Answer::Value(to_served(def, version, new)));
        }
        let released: Vec<String> = {
            let now = object::owner_uids(&new);
            object::owner_uids(&old)
                .into_iter()
                .filter(|u| !now.contains(u))
                .collect()
        };
        let stored = self.store.put(&def.store, new, Some(old));
        if let Some(d) = new_def {
            self.registry.insert(d);
            self.refresh_ref_versions();
        }
        self.after_write(def, object::namespace(&stored));
        if !released.is_empty() {
            let gone = json!({"metadata": {"ownerReferences": released
                .iter().map(|u| json!({"uid": u})).collect::<Vec<_>>()}});
            self.dependent_removed(&gone);
        }
        Ok(Answer::stored(def, version, stored))
    }

    /// PATCH an object (or its status). Server-side apply may create it.
    pub fn patch(
        &mut self,
        ep: &Endpoint,
        name: &str,
        kind: PatchType,
        body: &[u8],
        mode: WriteMode,
        opts: &WriteOptions,
    ) -> ApiResult<(Answer, bool)> {
        let def = self.resolve(ep)?;
        if kind == PatchType::Apply {
            return self.apply(&def, ep, name, body, mode, opts);
        }
        let old = self.stored_shared(&def, ep.ns(), name)?;
        let patched = apply_patch(kind, &served(&def, &ep.version, &old), body, def.custom)
            .map_err(patch_error)?;
        let obj = self.incoming(&def, ep, patched, Some(name))?;
        check_resource_version(&def, &old, &obj)?;
        let new = prepare_update(&def, &old, obj, mode)?;
        Ok((self.commit(&def, &ep.version, old, new, mode, opts)?, false))
    }

    fn apply(
        &mut self,
        def: &Arc<ResourceDef>,
        ep: &Endpoint,
        name: &str,
        body: &[u8],
        mode: WriteMode,
        opts: &WriteOptions,
    ) -> ApiResult<(Answer, bool)> {
        let Some(manager) = opts.field_manager.clone() else {
            return Err(ApiError::Invalid {
                group: "meta.k8s.io".into(),
                kind: "PatchOptions".into(),
                name: String::new(),
                causes: vec!["fieldManager: Required value: is required for apply patch".into()],
            });
        };
        let applied: Value = serde_norway::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
        let text = |f: &str| applied.get(f).and_then(Value::as_str).unwrap_or_default();
        if text("apiVersion").is_empty() || text("kind").is_empty() {
            let (group, version) = text("apiVersion")
                .rsplit_once('/')
                .unwrap_or(("", text("apiVersion")));
            return Err(ApiError::BadRequest(format!(
                "invalid object type: {group}/{version}, Kind={}",
                text("kind")
            )));
        }
        let applied = self.incoming(def, ep, applied, Some(name))?;
        let opts = &WriteOptions {
            applying: true,
            ..opts.clone()
        };
        let part = part(def, mode);
        match self.store.get_shared(&def.store, ep.ns(), name).cloned() {
            None => {
                if mode == WriteMode::Status {
                    return Err(ApiError::NotFound {
                        resource: def.group_resource(),
                        name: name.to_owned(),
                    });
                }
                let obj = managed::apply(None, applied, &manager, opts.force, part)?;
                Ok((self.create_stored(def, &ep.version, obj, opts)?, true))
            }
            Some(old) => {
                check_resource_version(def, &old, &applied)?;
                let merged = managed::apply(Some(&old), applied, &manager, opts.force, part)?;
                let new = prepare_update(def, &old, merged, mode)?;
                Ok((self.commit(def, &ep.version, old, new, mode, opts)?, false))
            }
        }
    }

    /// Remove an object for good and do what follows from it: a CRD takes its custom resources
    /// along; the garbage collector deletes or releases its dependents and lets owners waiting
    /// for it go ([`crate::gc`]); the last object of a terminating namespace lets the namespace
    /// go.
    pub fn remove(&mut self, def: &ResourceDef, ns: &str, name: &str) -> Option<Value> {
        let last = self.store.remove(&def.store, ns, name)?;
        if def.special == Special::Crd
            && let Some(custom) = def_from_crd(&last)
        {
            let removed = self.store.remove_all(&custom.store);
            self.registry.remove(&custom.group_resource());
            self.refresh_ref_versions();
            for gone in &removed {
                self.owner_removed(object::uid(gone));
                self.dependent_removed(gone);
            }
        }
        if def.namespaced {
            self.after_write(def, ns);
        }
        self.owner_removed(object::uid(&last));
        self.dependent_removed(&last);
        if def.namespaced {
            self.finish_namespace_if_empty(ns);
        }
        Some(last)
    }

    /// Keep the Cluster API conversions' reference versions current ([`crd::ref_versions`]).
    fn refresh_ref_versions(&mut self) {
        let versions = Arc::new(crd::ref_versions(&self.registry, &self.store));
        for d in self.registry.iter_mut() {
            if let Conversion::ClusterApi(c) = &mut d.conversion {
                c.ref_versions = Arc::clone(&versions);
            }
        }
    }

    /// Keep derived state current: disruption budgets follow their pods and the scale of
    /// the pods' controllers.
    pub fn after_write(&mut self, def: &ResourceDef, ns: &str) {
        let is_pdb = def.store == GroupResource::new("policy", "poddisruptionbudgets");
        if def.special == Special::Pod || is_pdb || (def.scale.is_some() && def.namespaced) {
            self.refresh_budgets(ns);
        }
    }
}

/// kube-apiserver's answer to a continue token older than the retained history.
const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// Which fields a write of this mode owns (see [`crate::managed`]).
fn part(def: &ResourceDef, mode: WriteMode) -> Part {
    match (def.status, mode) {
        (false, _) => Part::All,
        (true, WriteMode::Main) => Part::Main,
        (true, WriteMode::Status) => Part::Status,
    }
}

/// Built-in kinds: [`crate::builtin_validation`], and [`crate::update_validation`] on updates
/// with `update_checks`. Custom resources: prune and default with the CRD's schema, then
/// validate against the schema and its CEL rules ([`crate::validation`]); `old` is the stored
/// object on updates.
fn structural(
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
    update_checks: bool,
) -> ApiResult<()> {
    if !def.custom {
        let mut causes = crate::builtin_validation::validate(def, obj);
        if let Some(old) = old.filter(|_| update_checks) {
            causes.extend(crate::update_validation::validate_update(def, old, obj));
        }
        if causes.is_empty() {
            return Ok(());
        }
        return Err(ApiError::Invalid {
            group: def.group.clone(),
            kind: def.kind.clone(),
            name: object::name(obj).to_owned(),
            causes,
        });
    }
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut causes = Vec::new();
    if let Some(schema) = def.schema_for(&api_version) {
        crate::schema::apply(schema, obj);
        causes.extend(
            crate::validation::validate(schema, obj, old)
                .iter()
                .map(crate::validation::FieldError::render),
        );
    }
    if let Some(paths) = &def.scale {
        causes.extend(crate::scale::custom_replica_causes(paths, obj));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid {
        group: def.group.clone(),
        kind: def.kind.clone(),
        name: object::name(obj).to_owned(),
        causes,
    })
}

/// A patch failure as the API reports it.
/// A patch that does not apply is a 422 with kube-apiserver's generic message (it does not
/// say why).
fn patch_error(e: PatchError) -> ApiError {
    match e {
        PatchError::Malformed(m) => ApiError::BadRequest(m),
        PatchError::Failed(_) => ApiError::Rejected,
        PatchError::Unsupported(m) => ApiError::UnsupportedMediaType(m),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::options::parse_query;
    use crate::registry::StoreKey;

    fn list_opts(query: &str) -> ListOptions {
        ListOptions::parse(&parse_query(Some(query))).unwrap()
    }

    fn page_json(st: &State, ep: &Endpoint, query: &str) -> Value {
        serde_json::from_slice(&st.list_page(ep, &list_opts(query)).unwrap().to_json()).unwrap()
    }

    #[test]
    fn a_shared_page_encodes_what_the_copied_list_holds() {
        let mut st = State::new(100);
        let pods = Endpoint::namespaced("", "v1", "pods", "default");
        let opts = WriteOptions::default();
        for i in 0..5 {
            let pod = json!({"metadata": {"name": format!("p{i}"), "labels": {"n": i.to_string()}},
                "spec": {"containers": [{"name": "c", "image": "pause"}]}});
            st.create(&pods, pod, &opts).unwrap();
        }
        for query in ["", "labelSelector=n%3D3", "limit=2"] {
            let copied = st.list(&pods, &list_opts(query)).unwrap();
            assert_eq!(page_json(&st, &pods, query), copied, "{query}");
        }
        let all = page_json(&st, &pods, "");
        assert_eq!(all["items"].as_array().unwrap().len(), 5);
        assert_eq!(all["items"][0]["kind"], "Pod");
        assert_eq!(all["items"][0]["apiVersion"], "v1");
        // A later page after a write shows the list as of the first page (old versions shared).
        let first = page_json(&st, &pods, "limit=2");
        let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
        st.delete(&pods, "p3", &Default::default(), &opts).unwrap();
        let query = format!("limit=2&continue={token}");
        let rest = page_json(&st, &pods, &query);
        assert_eq!(rest, st.list(&pods, &list_opts(&query)).unwrap());
        let names: Vec<&str> = rest["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["p2", "p3"]);
        // Converted kinds (events.k8s.io serves core Events renamed) are encoded as served.
        let events = Endpoint::namespaced("events.k8s.io", "v1", "events", "default");
        let core = Endpoint::namespaced("", "v1", "events", "default");
        let event = json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p0"},
            "reason": "R", "message": "m", "type": "Normal"});
        st.create(&core, event, &opts).unwrap();
        let served = page_json(&st, &events, "");
        assert_eq!(served, st.list(&events, &list_opts("")).unwrap());
        assert_eq!(served["items"][0]["note"], "m");
    }

    #[test]
    fn a_writes_answer_is_the_stored_object_encoded_once_for_it_and_its_watchers() {
        let mut st = State::new(100);
        let pods = Endpoint::namespaced("", "v1", "pods", "default");
        let opts = WriteOptions::default();
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "pause"}]}});
        let created = st.create(&pods, pod, &opts).unwrap();
        assert!(matches!(created, Answer::Stored { .. }));
        let bytes = created.encode();
        let stored = Arc::clone(
            st.store
                .get_shared(&StoreKey::new("", "pods"), "default", "p")
                .unwrap(),
        );
        // The answer's bytes are cached on the stored object: a watcher asking for v1 gets
        // the same allocation, not a second encoding.
        let cached = stored
            .encoded
            .get_or_encode("v1", || unreachable!("encoded again"));
        assert!(Arc::ptr_eq(&bytes, &cached));
        let value = created.into_value();
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), value);
        assert_eq!(value, st.get(&pods, "p").unwrap());
        // A patch's answer is the new version; an unchanged one answers the stored object.
        let label = |st: &mut State, value: &str, opts: &WriteOptions| {
            let body = json!({"metadata": {"labels": {"a": value}}}).to_string();
            st.patch(
                &pods,
                "p",
                PatchType::Merge,
                body.as_bytes(),
                WriteMode::Main,
                opts,
            )
            .unwrap()
            .0
        };
        let patched = label(&mut st, "b", &opts).into_value();
        assert_eq!(patched["metadata"]["labels"]["a"], "b");
        assert_eq!(patched, st.get(&pods, "p").unwrap());
        assert_eq!(label(&mut st, "b", &opts).into_value(), patched);
        // A dry run answers with a value of its own and stores nothing.
        let dry = WriteOptions {
            dry_run: true,
            ..WriteOptions::default()
        };
        let tried = label(&mut st, "c", &dry);
        assert!(matches!(tried, Answer::Value(_)));
        assert_eq!(tried.into_value()["metadata"]["labels"]["a"], "c");
        assert_eq!(st.get(&pods, "p").unwrap(), patched);
    }
}
