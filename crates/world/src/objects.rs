//! Helpers the world controllers share: the Cluster API resources as dynamic `Api`s, JSON field
//! access, owner references, merge-patch diffs, durations, and API error codes.
//!
//! Responsibility: small pure functions and thin wrappers, so each controller reads as what it
//! does. CAPI objects are handled as JSON (`DynamicObject`), never through the api crate's lossy
//! read-only structs, so writes (always patches) never drop fields.
//! Inputs: objects as JSON, kube clients. Outputs: values, `Api`s.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Resource;
use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use serde_json::{Map, Value, json};

use super::WorldError;
pub use sim::convert::capi::capi_resource;
use sim::convert::capi::{CapiKind, CapiVersion};
pub use sim::object::{code, condition, condition_true};

/// `cluster.x-k8s.io/v1beta2` MachineDeployments.
pub fn machine_deployments() -> ApiResource {
    capi_resource(CapiKind::MachineDeployment, CapiVersion::V1beta2)
}

/// `cluster.x-k8s.io/v1beta2` MachineSets.
pub fn machine_sets() -> ApiResource {
    capi_resource(CapiKind::MachineSet, CapiVersion::V1beta2)
}

/// `cluster.x-k8s.io/v1beta2` Machines.
pub fn machines() -> ApiResource {
    capi_resource(CapiKind::Machine, CapiVersion::V1beta2)
}

/// A dynamic `Api` over all namespaces.
pub fn all(client: &kube::Client, resource: &ApiResource) -> Api<DynamicObject> {
    Api::all_with(client.clone(), resource)
}

/// A dynamic `Api` in one namespace.
pub fn namespaced(client: &kube::Client, ns: &str, resource: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, resource)
}

/// Every object of a built-in kind (all namespaces), as JSON: decoded once, straight into
/// values (not into typed objects converted back) and without `metadata.managedFields`
/// ([`crate::lean`]), each item with its `apiVersion` and `kind` (a real server's list items
/// have neither).
pub async fn list_values<K>(client: &kube::Client) -> Result<Vec<Value>, WorldError>
where
    K: kube::Resource<DynamicType = ()>,
{
    list_raw(
        client,
        K::url_path(&(), None),
        &K::api_version(&()),
        &K::kind(&()),
    )
    .await
}

/// Every object of a resource (all namespaces), as JSON, as [`list_values`] reads them.
pub async fn list_json(
    client: &kube::Client,
    resource: &ApiResource,
) -> Result<Vec<Value>, WorldError> {
    let url = DynamicObject::url_path(resource, None);
    list_raw(client, url, &resource.api_version, &resource.kind).await
}

async fn list_raw(
    client: &kube::Client,
    url: String,
    api_version: &str,
    kind: &str,
) -> Result<Vec<Value>, WorldError> {
    let items = crate::lean::list_values(client, url).await?;
    Ok(items
        .into_iter()
        .map(|mut item| {
            if let Some(m) = item.as_object_mut() {
                m.insert("apiVersion".into(), json!(api_version));
                m.insert("kind".into(), json!(kind));
            }
            item
        })
        .collect())
}

/// Requests one world controller keeps in flight at once. kube-scheduler binds, and the other
/// Kubernetes controllers write, from many goroutines at once; one request after another,
/// a pass over a thousand pods spent seconds waiting on round trips.
pub const WRITES_IN_FLIGHT: usize = 16;

/// Runs `work` over `items` with at most [`WRITES_IN_FLIGHT`] of them in flight, every one to
/// its end (a failure does not stop the others, as a controller's per-object reconciles do
/// not), and returns the results in completion order.
pub async fn concurrently<I, F, Fut, T>(items: I, work: F) -> Vec<T>
where
    I: IntoIterator,
    F: FnMut(I::Item) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    use futures::StreamExt;
    futures::stream::iter(items)
        .map(work)
        .buffer_unordered(WRITES_IN_FLIGHT)
        .collect()
        .await
}

/// The string at a dotted path.
pub fn text<'a>(obj: &'a Value, path: &str) -> Option<&'a str> {
    sim::object::get_path(obj, path).and_then(Value::as_str)
}

/// The string map at a dotted path (labels, annotations, matchLabels).
pub fn string_map(obj: &Value, path: &str) -> BTreeMap<String, String> {
    sim::object::get_path(obj, path)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.labels`.
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, ".metadata.labels")
}

/// `metadata.annotations`.
pub fn annotations(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, ".metadata.annotations")
}

/// The uid of the owner reference marked `controller: true`, if any.
pub fn controller_uid(obj: &Value) -> Option<String> {
    sim::object::owner_refs(obj)
        .into_iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
}

/// The node group a Machine belongs to, as CAPI's providers read its shape: the
/// MachineDeployment its `cluster.x-k8s.io/deployment-name` label names, else the MachineSet
/// or MachinePool (in `sets`) controlling it (a stand-alone set or a pool, whose template and
/// annotations read like a MachineDeployment's).
pub fn group_of<'a>(machine: &Value, mds: &'a [Value], sets: &'a [Value]) -> Option<&'a Value> {
    let namespace = sim::object::namespace(machine);
    if let Some(d) = labels(machine).get(api::well_known::capi::DEPLOYMENT_NAME) {
        return mds
            .iter()
            .find(|md| sim::object::name(md) == d && sim::object::namespace(md) == namespace);
    }
    let uid = controller_uid(machine)?;
    sets.iter()
        .find(|s| sim::object::uid(s) == uid && sim::object::namespace(s) == namespace)
}

/// A controller owner reference to `owner` (which must carry apiVersion and kind).
pub fn controller_ref(owner: &Value) -> Value {
    json!({
        "apiVersion": owner.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": owner.get("kind").cloned().unwrap_or(Value::Null),
        "name": sim::object::name(owner),
        "uid": sim::object::uid(owner),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// `key=value,...` in key order: a selector's `matchLabels` as a label selector string.
pub fn selector_string(match_labels: &BTreeMap<String, String>) -> String {
    match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A JSON merge patch turning `old` into `new` (objects recurse, removed keys become `null`,
/// everything else is replaced), or `None` if they are equal.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    if old == new {
        return None;
    }
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut patch = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            patch.insert(k.clone(), d);
                        }
                    }
                    None => {
                        patch.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                patch.insert(k.clone(), Value::Null);
            }
            Some(Value::Object(patch))
        }
        _ => Some(new.clone()),
    }
}

/// A merge patch setting `obj`'s finalizers to `finalizers` (none: the field removed), guarded
/// by its resourceVersion.
pub fn finalizers_patch(obj: &Value, finalizers: &[String]) -> Value {
    let value = if finalizers.is_empty() {
        Value::Null
    } else {
        json!(finalizers)
    };
    json!({"metadata": {"finalizers": value,
        "resourceVersion": sim::object::resource_version(obj)}})
}

/// `Ok` for a 404 (the object is already gone), the error otherwise.
pub fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<(), WorldError> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A duration such as `90s`, `5m`, `1h`, `250ms` or a plain number of seconds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    match unit {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => Some(Duration::from_secs(n.saturating_mul(60))),
        "h" => Some(Duration::from_secs(n.saturating_mul(3600))),
        _ => None,
    }
}

/// Whether any field of `desired` (an object of status fields) differs from `obj`'s status.
pub fn status_changed(obj: &Value, desired: &Value) -> bool {
    let current = obj.get("status").unwrap_or(&Value::Null);
    desired.as_object().is_some_and(|d| {
        d.iter()
            .any(|(k, v)| current.get(k).unwrap_or(&Value::Null) != v)
    })
}

/// The HTTP code of a failed API request behind a world error.
pub fn world_code(e: &WorldError) -> Option<u16> {
    match e {
        WorldError::Kube(e) => code(e),
        _ => None,
    }
}

/// Merge-patch the `status` subresource with `desired` (an object of status fields) unless
/// every one of those fields already has that value in `obj`.
pub async fn patch_status_if_changed<K>(
    api: &Api<K>,
    obj: &Value,
    desired: Value,
) -> Result<(), WorldError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if !status_changed(obj, &desired) {
        return Ok(());
    }
    let patch = json!({"status": desired});
    api.patch_status(
        sim::object::name(obj),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// A condition, keeping the previous `lastTransitionTime` when the status did not change.
pub fn new_condition(
    previous: Option<&Value>,
    kind: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> Value {
    let status = if status { "True" } else { "False" };
    condition_with_status(previous, kind, status, reason, message)
}

/// [`new_condition`] with any status (`True`, `False`, `Unknown`).
pub fn condition_with_status(
    previous: Option<&Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> Value {
    let since = previous
        .filter(|p| p.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|p| p.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(sim::object::now_rfc3339()));
    json!({"type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": since})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At most [`WRITES_IN_FLIGHT`] at once, and every item runs even when others fail.
    #[tokio::test(start_paused = true)]
    async fn concurrently_bounds_what_is_in_flight_and_runs_everything() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (now, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let (now, peak) = (&now, &peak);
        let started = tokio::time::Instant::now();
        let results = concurrently(0..40_u32, |i| async move {
            let running = now.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(running, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            now.fetch_sub(1, Ordering::SeqCst);
            if i % 3 == 0 { Err(i) } else { Ok(i) }
        })
        .await;
        assert_eq!(results.len(), 40);
        assert_eq!(results.iter().filter(|r| r.is_err()).count(), 14);
        assert_eq!(peak.load(Ordering::SeqCst), WRITES_IN_FLIGHT);
        // 40 one-second items, 16 at a time: three rounds, not forty seconds.
        assert_eq!(started.elapsed().as_secs(), 3);
    }

    #[test]
    fn merge_diffs_null_removed_keys() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1]});
        let new = json!({"a": 1, "b": {"c": 5}, "e": [2], "f": true});
        assert_eq!(
            merge_diff(&old, &new).unwrap(),
            json!({"b": {"c": 5, "d": null}, "e": [2], "f": true})
        );
        assert!(merge_diff(&old, &old).is_none());
        let mut patched = old.clone();
        json_patch::merge(&mut patched, &merge_diff(&old, &new).unwrap());
        assert_eq!(patched, new);
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("12"), Some(Duration::from_secs(12)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5d"), None);
    }

    #[test]
    fn conditions_keep_their_transition_time() {
        let old = json!({"type": "Ready", "status": "True", "lastTransitionTime": "then"});
        let same = new_condition(Some(&old), "Ready", true, "R", "");
        assert_eq!(same["lastTransitionTime"], "then");
        let flipped = new_condition(Some(&old), "Ready", false, "R", "");
        assert_ne!(flipped["lastTransitionTime"], "then");
    }
}
