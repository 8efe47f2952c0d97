//! The Cluster API CloudProvider: [`ClusterApiProvider`].
//!
//! Responsibility: implement [`cloudprovider::CloudProvider`] over a management cluster (Cluster
//! API objects) and a workload cluster (NodeClaims, ClusterAPINodeClasses). Writes are only
//! JSON merge patches carrying `metadata.resourceVersion` (compare-and-set) and patches of the
//! MachineDeployment `/scale` subresource — never a full-object update through the lossy `api`
//! structs.
//!
//! **Create** (never waits for the providerID):
//! 1. *Resume*: a NodeClaim annotated `karpenter.cluster.x-k8s.io/machine` (or the legacy
//!    `cluster.x-k8s.io/machine`) returns that Machine (read fresh); a Machine whose
//!    [`CLAIMED_BY_UID`] annotation holds the NodeClaim's UID is returned too (and the NodeClaim
//!    annotation re-written) — a restart between claim and record scales nothing again. A bound
//!    Machine that no longer exists is InsufficientCapacity (core deletes the NodeClaim).
//! 2. Build the NodeClass catalogue and try the compatible available offerings **cheapest
//!    first** (ties: instance type name, then MachineDeployment).
//! 3. Under a per-MachineDeployment lock (one process; leader election keeps one active): if the
//!    cache shows more fresh, unclaimed Machines of that MD than creates already waiting for one,
//!    reserve one of them (surplus from earlier timeouts is reused, not leaked); otherwise raise
//!    replicas through `/scale` with the MD's resourceVersion as precondition (409 → re-read
//!    and retry). **Batched:** the raise is by as many replicas as creates are waiting for that
//!    MD's lock at that moment (capped by the max-size annotation); the waiters then take those
//!    replicas without another write (20 concurrent creates → 2 writes in the tests). A create
//!    cancelled while waiting is not counted. Max size is never exceeded — so concurrent
//!    creates cannot overshoot it. At max size the next offering is tried; none left →
//!    InsufficientCapacity.
//! 4. Outside the lock, claim a fresh Machine of that MD (`cluster.x-k8s.io/deployment-name`,
//!    no `delete-machine`, not deleting, no member label) by a merge patch with its
//!    resourceVersion setting the member label and [`CLAIMED_BY`] / [`CLAIMED_BY_UID`]; a 409
//!    means someone else changed it, so the next candidate is tried. Candidates come from the
//!    [`cache`]; when none is left the create waits for the next cache change (no polling), up
//!    to [`ProviderConfig::claim_timeout`] (then Transient; the replica stays for the retry).
//! 5. Record the Machine on the NodeClaim (merge patch of the annotation). If the NodeClaim is
//!    gone, the claim is rolled back (the Machine becomes reusable) and Create fails.
//!
//! **Delete** (idempotent): find the Machine (providerID index, else the annotations, else the
//! UID claim); gone → NodeClaimNotFound. Already `delete-machine`-annotated or deleting → `Ok`
//! and nothing else (replicas are never lowered twice). Otherwise the removal is queued per MD;
//! the next holder of the MD lock serves every queued removal (**batched**): for each, a fresh
//! read, the caller's check, and the `delete-machine` annotation (merge patch with
//! resourceVersion); then one `/scale` write lowers replicas by the number annotated (10
//! concurrent deletes → fewer writes in the tests). **At the min-size annotation** replicas are
//! not lowered below it: the annotated Machines beyond the room are deleted directly instead,
//! so the MachineSet replaces them with fresh, unclaimed Machines that keep the user's baseline
//! (and that later creates reuse).
//!
//! **Get / List** read the cache; Get looks the providerID up in the normalised index. List
//! returns every Machine carrying the member label; a Machine whose MachineDeployment cannot be
//! described is still listed (without shape), so one bad Machine never fails List. Shapes use
//! the NodeClass of the Machine's NodeClaim (Get), else the first NodeClass by name that
//! selects its MachineDeployment, so allocatable includes that NodeClass's overhead.
//!
//! Orphaned and surplus Machines are collected by [`crate::gc`] through the same removal
//! (`ClusterApiProvider::remove_machine`).
//!
//! **Drift** ([`crate::drift`]): `is_drifted` compares the Machine with its MachineDeployment.
//!
//! Not done: infrastructure templates (instance
//! shapes come from the MD annotations only), and a crash between `delete-machine` and the
//! scale-down leaves the replica in place (the Machine stays annotated).

pub mod cache;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::nodeclass::ClusterAPINodeClassSpec;
use api::well_known::annotations::{LEGACY_MACHINE, MACHINE};
use api::well_known::capi::{
    DELETE_MACHINE, DEPLOYMENT_NAME, KARPENTER_MEMBER, MAX_SIZE, MIN_SIZE,
};
use api::{ClusterAPINodeClass, Machine, MachineDeployment, NodeClaim, NodePool};
use cloudprovider::convert::{compatible_offerings, requests_of, requirements_of};
use cloudprovider::{CloudProvider, CloudProviderError, Launch, ObjectRef};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use scheduling::instance_type::InstanceType;
use scheduling::labels::WellKnownLabels;
use serde_json::json;

use crate::annotations::parse_size;
use crate::instance_types::{
    Catalogue, CatalogueEntry, MachineDeploymentInput, MachineDeploymentRef, OfferingOrigin,
    build_catalogue,
};
use crate::selection::{Scope, select};

pub use cache::MachineCache;

/// Machine annotation: the name of the NodeClaim that claimed it.
pub const CLAIMED_BY: &str = "karpenter.cluster.x-k8s.io/nodeclaim";
/// Machine annotation: the UID of the NodeClaim that claimed it (the claim's identity).
pub const CLAIMED_BY_UID: &str = "karpenter.cluster.x-k8s.io/nodeclaim-uid";

/// Attempts of a read-modify-write against `/scale` before giving up (Transient).
const SCALE_ATTEMPTS: usize = 10;

/// Settings of the provider.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Where MachineDeployments may come from.
    pub scope: Scope,
    /// How long Create waits for a Machine to appear and be claimed.
    pub claim_timeout: Duration,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            scope: Scope::everywhere(),
            claim_timeout: Duration::from_secs(120),
        }
    }
}

/// The Cluster API CloudProvider.
pub struct ClusterApiProvider {
    management: kube::Client,
    workload: kube::Client,
    cache: MachineCache,
    config: ProviderConfig,
    well_known: WellKnownLabels,
    locks: Mutex<HashMap<MachineDeploymentRef, Arc<tokio::sync::Mutex<()>>>>,
    /// Creates that reserved a Machine of this MD and have not claimed it yet.
    pending: Mutex<HashMap<MachineDeploymentRef, usize>>,
    /// Machines this process claimed (the cache may not show the label yet).
    claimed: Mutex<HashSet<ObjectRef>>,
    /// Per MD: creates waiting for its lock, and replicas already raised for them.
    batches: Batches,
    /// Per MD: removals waiting to be served by the next holder of its lock.
    removals: Mutex<HashMap<MachineDeploymentRef, Vec<RemovalRequest>>>,
}

/// The check a removal re-runs on the fresh Machine under the MD lock.
type RemovalCheck = Box<dyn Fn(&ClusterApiProvider, &Machine) -> bool + Send + Sync>;

/// One queued removal and where its answer goes.
struct RemovalRequest {
    machine: ObjectRef,
    check: RemovalCheck,
    done: tokio::sync::oneshot::Sender<Result<Removal, CloudProviderError>>,
}

/// Create batching state of one MachineDeployment.
#[derive(Debug, Default)]
struct Batch {
    /// Creates waiting for the MD's lock.
    waiting: usize,
    /// Replicas a batch raised for waiters that have not taken them yet.
    covered: usize,
}

type Batches = Arc<Mutex<HashMap<MachineDeploymentRef, Batch>>>;

/// A create registered as waiting for an MD's lock; unregisters on [`Waiting::leave`] or drop
/// (a cancelled create must not be counted in the next batch).
struct Waiting {
    batches: Batches,
    md: MachineDeploymentRef,
    left: bool,
}

impl Waiting {
    fn enter(batches: &Batches, md: &MachineDeploymentRef) -> Self {
        batches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(md.clone())
            .or_default()
            .waiting += 1;
        Self {
            batches: Arc::clone(batches),
            md: md.clone(),
            left: false,
        }
    }

    /// Stops waiting; returns how many were waiting, this create included.
    fn leave(mut self) -> usize {
        self.left = true;
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        let b = batches.entry(self.md.clone()).or_default();
        let queued = b.waiting.max(1);
        b.waiting = b.waiting.saturating_sub(1);
        queued
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.left {
            let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(b) = batches.get_mut(&self.md) {
                b.waiting = b.waiting.saturating_sub(1);
            }
        }
    }
}

impl std::fmt::Debug for ClusterApiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterApiProvider")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn transient(context: &str, e: impl std::fmt::Display) -> CloudProviderError {
    CloudProviderError::Transient(format!("{context}: {e}"))
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

pub(crate) fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn has_label(meta: &kube::api::ObjectMeta, key: &str) -> bool {
    meta.labels.as_ref().is_some_and(|l| l.contains_key(key))
}

pub(crate) fn deployment_of(m: &Machine) -> Option<MachineDeploymentRef> {
    Some(MachineDeploymentRef {
        namespace: m.metadata.namespace.clone()?,
        name: m.metadata.labels.as_ref()?.get(DEPLOYMENT_NAME)?.clone(),
    })
}

/// Whether termination of `m` was already requested (annotation or deletionTimestamp).
pub(crate) fn terminating(m: &Machine) -> bool {
    m.metadata.deletion_timestamp.is_some() || annotation(&m.metadata, DELETE_MACHINE).is_some()
}

/// Whether `m` is a fresh Machine of `md` nobody claimed.
pub(crate) fn claimable(m: &Machine, md: &MachineDeploymentRef) -> bool {
    deployment_of(m).as_ref() == Some(md)
        && !terminating(m)
        && !has_label(&m.metadata, KARPENTER_MEMBER)
        && annotation(&m.metadata, CLAIMED_BY_UID).is_none()
}

/// The NodeClaim's binding annotation (ours, else the legacy key).
fn bound_machine(nc: &NodeClaim) -> Option<ObjectRef> {
    annotation(&nc.metadata, MACHINE)
        .or_else(|| annotation(&nc.metadata, LEGACY_MACHINE))
        .and_then(ObjectRef::parse)
}

fn launch_of(m: &Machine, described: Option<(&CatalogueEntry, &OfferingOrigin)>) -> Launch {
    let mut launch = Launch::bare(cache::machine_ref(m));
    launch.provider_id = m.spec.fields.provider_id.clone().filter(|p| !p.is_empty());
    launch.node_claim = annotation(&m.metadata, CLAIMED_BY).map(str::to_owned);
    launch.deleting = terminating(m);
    if let Some((entry, origin)) = described {
        launch.instance_type = entry.name().to_owned();
        launch.zone = Some(origin.zone.clone()).filter(|z| !z.is_empty());
        launch.capacity_type.clone_from(&origin.capacity_type);
        launch.capacity = entry.instance_type().capacity().clone();
        launch.allocatable = entry.instance_type().allocatable().clone();
        launch.labels = entry.node_labels(origin);
    }
    launch
}

/// The catalogue entry and offering of `md` alone.
fn describe(md: &MachineDeployment, spec: &ClusterAPINodeClassSpec) -> Option<Catalogue> {
    build_catalogue(spec, &[MachineDeploymentInput::new(md)]).ok()
}

fn entry_for<'a>(
    catalogue: &'a Catalogue,
    md: &MachineDeploymentRef,
) -> Option<(&'a CatalogueEntry, &'a OfferingOrigin)> {
    catalogue.entries().iter().find_map(|e| {
        e.offerings()
            .find(|(_, o)| &o.machine_deployment == md)
            .map(|(_, o)| (e, o))
    })
}

enum Scaled {
    Up,
    AtMaxSize(String),
}

impl ClusterApiProvider {
    /// A provider over `management` (CAPI) and `workload` (NodeClaims, NodeClasses); starts the
    /// Machine cache. Must be called inside a tokio runtime.
    #[must_use]
    pub fn new(management: kube::Client, workload: kube::Client, config: ProviderConfig) -> Self {
        Self {
            cache: MachineCache::start(management.clone()),
            management,
            workload,
            config,
            well_known: WellKnownLabels::cluster_api(),
            locks: Mutex::default(),
            pending: Mutex::default(),
            claimed: Mutex::default(),
            batches: Arc::default(),
            removals: Mutex::default(),
        }
    }

    /// The Machine cache.
    #[must_use]
    pub fn cache(&self) -> &MachineCache {
        &self.cache
    }

    pub(crate) async fn ready(&self) -> Result<(), CloudProviderError> {
        self.cache
            .ready()
            .await
            .map_err(|e| transient("Machine cache", e))
    }

    fn lock_of(&self, md: &MachineDeploymentRef) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(md.clone()).or_default())
    }

    fn machines_api(&self, namespace: &str) -> Api<Machine> {
        Api::namespaced(self.management.clone(), namespace)
    }

    fn mds_api(&self, namespace: &str) -> Api<MachineDeployment> {
        Api::namespaced(self.management.clone(), namespace)
    }

    async fn nodeclass(&self, name: &str) -> Result<ClusterAPINodeClass, CloudProviderError> {
        let api: Api<ClusterAPINodeClass> = Api::all(self.workload.clone());
        match api.get_opt(name).await {
            Ok(Some(nc)) => Ok(nc),
            Ok(None) => Err(CloudProviderError::NodeClassNotReady(format!(
                "ClusterAPINodeClass {name} not found"
            ))),
            Err(e) => Err(transient("get ClusterAPINodeClass", e)),
        }
    }

    async fn catalogue(
        &self,
        spec: &ClusterAPINodeClassSpec,
    ) -> Result<Catalogue, CloudProviderError> {
        let api: Api<MachineDeployment> = Api::all(self.management.clone());
        let mds = api
            .list(&ListParams::default())
            .await
            .map_err(|e| transient("list MachineDeployments", e))?;
        let selected = select(
            &mds.items,
            spec.scalable_resource_selector.as_ref(),
            &self.config.scope,
        )
        .map_err(|e| CloudProviderError::NodeClassNotReady(e.to_string()))?;
        let inputs: Vec<_> = selected
            .into_iter()
            .map(MachineDeploymentInput::new)
            .collect();
        build_catalogue(spec, &inputs)
            .map_err(|e| CloudProviderError::NodeClassNotReady(e.to_string()))
    }

    /// Describe the Machine `m` (its MD read fresh; `spec` the NodeClass, if known).
    async fn launch_for(&self, m: &Machine, spec: Option<&ClusterAPINodeClassSpec>) -> Launch {
        let Some(md_ref) = deployment_of(m) else {
            return launch_of(m, None);
        };
        let md = self
            .mds_api(&md_ref.namespace)
            .get_opt(&md_ref.name)
            .await
            .ok()
            .flatten();
        let default = ClusterAPINodeClassSpec::default();
        let catalogue = md
            .as_ref()
            .and_then(|md| describe(md, spec.unwrap_or(&default)));
        launch_of(m, catalogue.as_ref().and_then(|c| entry_for(c, &md_ref)))
    }

    async fn spec_of(&self, nc: &NodeClaim) -> Option<ClusterAPINodeClassSpec> {
        self.nodeclass(&nc.spec.node_class_ref.name)
            .await
            .ok()
            .map(|c| c.spec)
    }

    /// Every ClusterAPINodeClass not being deleted, by name (empty when unreadable: callers
    /// fall back to the default spec).
    async fn node_classes(&self) -> Vec<ClusterAPINodeClass> {
        let api: Api<ClusterAPINodeClass> = Api::all(self.workload.clone());
        let mut classes: Vec<ClusterAPINodeClass> = api
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .collect();
        classes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        classes
    }

    /// The spec of the first NodeClass (by name) that selects `md`.
    fn spec_selecting<'a>(
        &self,
        classes: &'a [ClusterAPINodeClass],
        md: &MachineDeployment,
    ) -> Option<&'a ClusterAPINodeClassSpec> {
        classes.iter().map(|c| &c.spec).find(|spec| {
            select(
                std::slice::from_ref(md),
                spec.scalable_resource_selector.as_ref(),
                &self.config.scope,
            )
            .is_ok_and(|s| !s.is_empty())
        })
    }

    /// The Machine claimed for `nc` according to the cache (by UID).
    fn claimed_for(&self, uid: &str) -> Option<Arc<Machine>> {
        self.cache
            .machines()
            .into_iter()
            .find(|m| annotation(&m.metadata, CLAIMED_BY_UID) == Some(uid))
    }

    /// The Machine of `nc`: providerID index, binding annotation (read fresh), UID claim.
    async fn find_machine(&self, nc: &NodeClaim) -> Result<Option<Machine>, CloudProviderError> {
        self.ready().await?;
        if let Some(pid) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref())
            && let Some(m) = self.cache.by_provider_id(pid)
        {
            return Ok(Some((*m).clone()));
        }
        if let Some(r) = bound_machine(nc) {
            return self
                .machines_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get Machine", e));
        }
        let uid = nc.metadata.uid.as_deref().unwrap_or_default();
        Ok(self
            .claimed_for(uid)
            .filter(|_| !uid.is_empty())
            .map(|m| (*m).clone()))
    }

    async fn record(&self, nc_name: &str, machine: &ObjectRef) -> Result<(), kube::Error> {
        let api: Api<NodeClaim> = Api::all(self.workload.clone());
        let patch = json!({"metadata": {"annotations": {MACHINE: machine.to_string()}}});
        api.patch(nc_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    /// Raise replicas of `md` by up to `want` (at least one) through `/scale`, with the
    /// resourceVersion precondition and never past the max-size annotation; returns how many.
    async fn scale_up(
        &self,
        md: &MachineDeploymentRef,
        want: i32,
    ) -> Result<(Scaled, i32), CloudProviderError> {
        let api = self.mds_api(&md.namespace);
        for _ in 0..SCALE_ATTEMPTS {
            let current = api
                .get(&md.name)
                .await
                .map_err(|e| transient("get MachineDeployment", e))?;
            let replicas = current.spec.replicas.unwrap_or(0);
            let max = parse_size(MAX_SIZE, annotation(&current.metadata, MAX_SIZE))
                .map_err(|e| transient("MachineDeployment", e))?;
            if let Some(max) = max
                && replicas >= max
            {
                return Ok((
                    Scaled::AtMaxSize(format!("MachineDeployment {md} is at its max size {max}")),
                    0,
                ));
            }
            let room = max.map_or(i32::MAX, |max| max - replicas);
            let by = want.max(1).min(room);
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"replicas": replicas + by},
            });
            match api
                .patch_scale(&md.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok((Scaled::Up, by)),
                Err(e) if status_code(&e) == Some(409) => {}
                Err(e) => return Err(transient("scale MachineDeployment", e)),
            }
        }
        Err(CloudProviderError::Transient(format!(
            "MachineDeployment {md}: too many conflicts"
        )))
    }

    /// Lower replicas of `md` by up to `want` through `/scale`, never below the min-size
    /// annotation; returns by how many.
    async fn scale_down(
        &self,
        md: &MachineDeploymentRef,
        want: i32,
    ) -> Result<i32, CloudProviderError> {
        let api = self.mds_api(&md.namespace);
        for _ in 0..SCALE_ATTEMPTS {
            let current = api
                .get(&md.name)
                .await
                .map_err(|e| transient("get MachineDeployment", e))?;
            let replicas = current.spec.replicas.unwrap_or(0);
            let min = parse_size(MIN_SIZE, annotation(&current.metadata, MIN_SIZE))
                .ok()
                .flatten()
                .unwrap_or(0);
            let by = want.min(replicas - min.max(0));
            if by <= 0 {
                return Ok(0);
            }
            let patch = json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"replicas": replicas - by},
            });
            match api
                .patch_scale(&md.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(by),
                Err(e) if status_code(&e) == Some(409) => {}
                Err(e) => return Err(transient("scale MachineDeployment", e)),
            }
        }
        Err(CloudProviderError::Transient(format!(
            "MachineDeployment {md}: too many conflicts"
        )))
    }

    pub(crate) fn claimed_locally(&self, r: &ObjectRef) -> bool {
        self.claimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(r)
    }

    /// Reserve capacity on `md` for one more claim: take a replica an earlier batch raised for
    /// the waiters, reuse surplus, or scale up — by as many replicas as creates are waiting for
    /// this MD's lock (batching: one `/scale` write serves them all).
    async fn reserve(&self, md: &MachineDeploymentRef) -> Result<Scaled, CloudProviderError> {
        let lock = self.lock_of(md);
        let waiting = Waiting::enter(&self.batches, md);
        let _guard = lock.lock().await;
        let queued = waiting.leave();
        let scaled = if self.take_covered(md) || self.surplus(md) > 0 {
            Scaled::Up
        } else {
            let (scaled, by) = self
                .scale_up(md, i32::try_from(queued).unwrap_or(i32::MAX))
                .await?;
            if by > 1 {
                let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
                batches.entry(md.clone()).or_default().covered +=
                    usize::try_from(by - 1).unwrap_or(0);
            }
            scaled
        };
        if matches!(scaled, Scaled::Up) {
            *self
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(md.clone())
                .or_default() += 1;
        }
        Ok(scaled)
    }

    /// Take one replica raised earlier for a waiter, if any is left.
    fn take_covered(&self, md: &MachineDeploymentRef) -> bool {
        let mut batches = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        match batches.get_mut(md) {
            Some(b) if b.covered > 0 => {
                b.covered -= 1;
                true
            }
            _ => false,
        }
    }

    fn unreserve(&self, md: &MachineDeploymentRef) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = pending.get_mut(md) {
            *n = n.saturating_sub(1);
        }
    }

    /// Claim a fresh Machine of `md` for `nc` by compare-and-set, waiting on cache changes.
    async fn claim(
        &self,
        md: &MachineDeploymentRef,
        name: &str,
        uid: &str,
    ) -> Result<Machine, CloudProviderError> {
        let deadline = tokio::time::Instant::now() + self.config.claim_timeout;
        let mut changes = self.cache.changes();
        // Machines whose claim failed at this resourceVersion.
        let mut tried: HashMap<ObjectRef, String> = HashMap::new();
        loop {
            changes.borrow_and_update();
            let mut candidates: Vec<Arc<Machine>> = self
                .cache
                .machines()
                .into_iter()
                .filter(|m| claimable(m, md))
                .filter(|m| {
                    let r = cache::machine_ref(m);
                    !self.claimed_locally(&r)
                        && tried.get(&r) != m.metadata.resource_version.as_ref()
                })
                .collect();
            candidates.sort_by(|a, b| {
                (
                    &a.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    &a.metadata.name,
                )
                    .cmp(&(
                        &b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                        &b.metadata.name,
                    ))
            });
            for m in candidates {
                let r = cache::machine_ref(&m);
                let rv = m.metadata.resource_version.clone().unwrap_or_default();
                let patch = json!({"metadata": {
                    "resourceVersion": rv,
                    "labels": {KARPENTER_MEMBER: ""},
                    "annotations": {CLAIMED_BY: name, CLAIMED_BY_UID: uid},
                }});
                match self
                    .machines_api(&r.namespace)
                    .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(claimed) => {
                        self.claimed
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(r);
                        return Ok(claimed);
                    }
                    Err(e) if matches!(status_code(&e), Some(409 | 404)) => {
                        tried.insert(r, rv);
                    }
                    Err(e) => return Err(transient("claim Machine", e)),
                }
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => {
                    return Err(CloudProviderError::Transient(
                        "Machine cache stopped".into(),
                    ));
                }
                Err(_) => {
                    return Err(CloudProviderError::Transient(format!(
                        "no Machine of MachineDeployment {md} could be claimed yet"
                    )));
                }
            }
        }
    }

    /// Undo a claim whose NodeClaim disappeared (best effort; the Machine becomes reusable).
    async fn release(&self, m: &Machine) {
        let r = cache::machine_ref(m);
        let patch = json!({"metadata": {
            "resourceVersion": m.metadata.resource_version,
            "labels": {KARPENTER_MEMBER: null},
            "annotations": {CLAIMED_BY: null, CLAIMED_BY_UID: null},
        }});
        if self
            .machines_api(&r.namespace)
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            self.claimed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&r);
        }
    }

    async fn resume(
        &self,
        nc: &NodeClaim,
        name: &str,
        uid: &str,
    ) -> Result<Option<Launch>, CloudProviderError> {
        if let Some(r) = bound_machine(nc) {
            let m = self
                .machines_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get Machine", e))?
                .ok_or_else(|| {
                    CloudProviderError::InsufficientCapacity(format!(
                        "the Machine {r} bound to NodeClaim {name} no longer exists"
                    ))
                })?;
            let spec = self.spec_of(nc).await;
            return Ok(Some(self.launch_for(&m, spec.as_ref()).await));
        }
        self.ready().await?;
        let Some(m) = self.claimed_for(uid) else {
            return Ok(None);
        };
        self.record(name, &cache::machine_ref(&m))
            .await
            .map_err(|e| transient("annotate NodeClaim", e))?;
        let spec = self.spec_of(nc).await;
        Ok(Some(self.launch_for(&m, spec.as_ref()).await))
    }

    async fn launch(&self, nc: &NodeClaim) -> Result<Launch, CloudProviderError> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        if name.is_empty() || uid.is_empty() {
            return Err(CloudProviderError::Create {
                reason: "InvalidNodeClaim".into(),
                message: "the NodeClaim has no name or UID".into(),
            });
        }
        if let Some(launch) = self.resume(nc, &name, &uid).await? {
            return Ok(launch);
        }
        let nodeclass = self.nodeclass(&nc.spec.node_class_ref.name).await?;
        let catalogue = self.catalogue(&nodeclass.spec).await?;
        let requirements = requirements_of(nc)?;
        let requests = requests_of(nc)?;
        let its: Vec<Arc<InstanceType>> = catalogue.instance_types();
        let mut reasons = Vec::new();
        for choice in compatible_offerings(&its, &requirements, &requests, &self.well_known) {
            let Some(entry) = catalogue.entries().get(choice.instance_type) else {
                continue;
            };
            let Some((_, origin)) = entry.offerings().nth(choice.offering) else {
                continue;
            };
            let md = origin.machine_deployment.clone();
            match self.reserve(&md).await? {
                Scaled::AtMaxSize(why) => {
                    reasons.push(why);
                    continue;
                }
                Scaled::Up => {}
            }
            let claimed = self.claim(&md, &name, &uid).await;
            self.unreserve(&md);
            let machine = claimed?;
            let r = cache::machine_ref(&machine);
            if let Err(e) = self.record(&name, &r).await {
                self.release(&machine).await;
                return Err(if status_code(&e) == Some(404) {
                    CloudProviderError::Create {
                        reason: "NodeClaimGone".into(),
                        message: format!("NodeClaim {name} disappeared; released Machine {r}"),
                    }
                } else {
                    transient("annotate NodeClaim", e)
                });
            }
            return Ok(launch_of(&machine, Some((entry, origin))));
        }
        Err(CloudProviderError::InsufficientCapacity(
            if reasons.is_empty() {
                format!("no available offering satisfies NodeClaim {name}")
            } else {
                reasons.join("; ")
            },
        ))
    }

    async fn terminate(&self, nc: &NodeClaim) -> Result<(), CloudProviderError> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let not_found =
            || CloudProviderError::NodeClaimNotFound(format!("no Machine for NodeClaim {name}"));
        for _ in 0..SCALE_ATTEMPTS {
            let Some(found) = self.find_machine(nc).await? else {
                return Err(not_found());
            };
            match self
                .remove_machine(&cache::machine_ref(&found), |_, _| true)
                .await?
            {
                Removal::Gone => return Err(not_found()),
                Removal::Removed | Removal::AlreadyRequested | Removal::Declined => return Ok(()),
                Removal::Conflict => {}
            }
        }
        Err(CloudProviderError::Transient(format!(
            "Machine of NodeClaim {name}: too many conflicts"
        )))
    }

    /// Remove the Machine `r` the one way this crate does: read it fresh; already
    /// `delete-machine`-annotated or deleting → [`Removal::AlreadyRequested`] (replicas are never
    /// lowered twice); under the MD lock, `keep(self, fresh)` false → [`Removal::Declined`];
    /// otherwise annotate `delete-machine` with a resourceVersion precondition (409 →
    /// [`Removal::Conflict`], the caller re-reads), then lower replicas through `/scale` — one
    /// write for every removal queued on the MD — and at the min size delete the Machine
    /// instead (the MachineSet replaces it).
    pub(crate) async fn remove_machine(
        &self,
        r: &ObjectRef,
        check: impl Fn(&Self, &Machine) -> bool + Send + Sync + 'static,
    ) -> Result<Removal, CloudProviderError> {
        // Read fresh: the decision "already requested" must not rest on a stale cache.
        let Some(m) = self
            .machines_api(&r.namespace)
            .get_opt(&r.name)
            .await
            .map_err(|e| transient("get Machine", e))?
        else {
            return Ok(Removal::Gone);
        };
        if terminating(&m) {
            return Ok(Removal::AlreadyRequested);
        }
        let Some(md) = deployment_of(&m) else {
            return Err(CloudProviderError::Transient(format!(
                "Machine {r} has no {DEPLOYMENT_NAME} label"
            )));
        };
        // Queue the removal; whoever holds the MD lock next serves every queued removal of
        // that MD with one scale-down (batching).
        let (done, result) = tokio::sync::oneshot::channel();
        self.removals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(md.clone())
            .or_default()
            .push(RemovalRequest {
                machine: r.clone(),
                check: Box::new(check),
                done,
            });
        {
            let lock = self.lock_of(&md);
            let _guard = lock.lock().await;
            let batch = self
                .removals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&md)
                .unwrap_or_default();
            if !batch.is_empty() {
                self.remove_batch(&md, batch).await;
            }
        }
        result.await.unwrap_or_else(|_| {
            Err(CloudProviderError::Transient(format!(
                "removal of Machine {r} was not served"
            )))
        })
    }

    /// Serve queued removals of `md` (call under its lock): check and annotate each Machine
    /// (compare-and-set), then lower replicas once by the number annotated; Machines beyond the
    /// min size's room are deleted directly instead. Every request gets an answer.
    async fn remove_batch(&self, md: &MachineDeploymentRef, batch: Vec<RemovalRequest>) {
        let mut annotated = Vec::new();
        for request in batch {
            let outcome = self.annotate_for_removal(&request).await;
            match outcome {
                Ok(None) => annotated.push(request),
                Ok(Some(removal)) => {
                    let _ = request.done.send(Ok(removal));
                }
                Err(e) => {
                    let _ = request.done.send(Err(e));
                }
            }
        }
        if annotated.is_empty() {
            return;
        }
        let want = i32::try_from(annotated.len()).unwrap_or(i32::MAX);
        let lowered = match self.scale_down(md, want).await {
            Ok(l) => usize::try_from(l).unwrap_or(0),
            Err(e) => {
                for request in annotated {
                    let _ = request.done.send(Err(e.clone()));
                }
                return;
            }
        };
        for (i, request) in annotated.into_iter().enumerate() {
            let result = if i < lowered {
                Ok(Removal::Removed)
            } else {
                // At min size: keep the baseline; the MachineSet replaces the Machine.
                let r = &request.machine;
                match self
                    .machines_api(&r.namespace)
                    .delete(&r.name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => Ok(Removal::Removed),
                    Err(e) if status_code(&e) == Some(404) => Ok(Removal::Removed),
                    Err(e) => Err(transient("delete Machine", e)),
                }
            };
            let _ = request.done.send(result);
        }
    }

    /// Fresh read, checks and the `delete-machine` annotation of one queued removal;
    /// `Ok(None)` when annotated (replicas still to lower).
    async fn annotate_for_removal(
        &self,
        request: &RemovalRequest,
    ) -> Result<Option<Removal>, CloudProviderError> {
        let r = &request.machine;
        let Some(m) = self
            .machines_api(&r.namespace)
            .get_opt(&r.name)
            .await
            .map_err(|e| transient("get Machine", e))?
        else {
            return Ok(Some(Removal::Gone));
        };
        if terminating(&m) {
            return Ok(Some(Removal::AlreadyRequested));
        }
        if !(request.check)(self, &m) {
            return Ok(Some(Removal::Declined));
        }
        let patch = json!({"metadata": {
            "resourceVersion": m.metadata.resource_version,
            "annotations": {DELETE_MACHINE: "karpenter"},
        }});
        match self
            .machines_api(&r.namespace)
            .patch(&r.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(None),
            Err(e) if status_code(&e) == Some(409) => Ok(Some(Removal::Conflict)),
            Err(e) if status_code(&e) == Some(404) => Ok(Some(Removal::Gone)),
            Err(e) => Err(transient("annotate Machine", e)),
        }
    }

    /// Fresh, unclaimed Machines of `md` (per the cache) beyond the creates waiting for one:
    /// how many could go without starving a create. Call under the MD lock.
    pub(crate) fn surplus(&self, md: &MachineDeploymentRef) -> usize {
        let free = self
            .cache
            .machines()
            .iter()
            .filter(|m| claimable(m, md) && !self.claimed_locally(&cache::machine_ref(m)))
            .count();
        let waiting = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(md)
            .copied()
            .unwrap_or(0);
        free.saturating_sub(waiting)
    }

    /// The management cluster client.
    pub(crate) fn management(&self) -> &kube::Client {
        &self.management
    }

    /// The workload cluster client.
    pub(crate) fn workload(&self) -> &kube::Client {
        &self.workload
    }

    /// The provider's settings.
    pub(crate) fn config(&self) -> &ProviderConfig {
        &self.config
    }
}

/// What [`ClusterApiProvider::remove_machine`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    /// The Machine does not exist.
    Gone,
    /// Termination was already requested; nothing done.
    AlreadyRequested,
    /// The caller's check refused it; nothing done.
    Declined,
    /// The Machine changed between read and write; nothing done, read again.
    Conflict,
    /// Annotated, and replicas lowered (or the Machine deleted at min size).
    Removed,
}

impl CloudProvider for ClusterApiProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.launch(node_claim).await
    }

    async fn get_launch(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        let name = node_claim.metadata.name.clone().unwrap_or_default();
        let m = self.find_machine(node_claim).await?.ok_or_else(|| {
            CloudProviderError::NodeClaimNotFound(format!("no Machine for NodeClaim {name}"))
        })?;
        // Prefer the cache's copy: it carries the latest providerID without a request.
        let m = self
            .cache
            .get(&cache::machine_ref(&m))
            .map_or(m, |c| (*c).clone());
        let spec = self.spec_of(node_claim).await;
        Ok(self.launch_for(&m, spec.as_ref()).await)
    }

    async fn get(&self, provider_id: &str) -> Result<Launch, CloudProviderError> {
        if provider_id.trim().is_empty() {
            return Err(CloudProviderError::NodeClaimNotFound(
                "empty providerID".into(),
            ));
        }
        self.ready().await?;
        let m = self
            .cache
            .by_provider_id(provider_id)
            .ok_or_else(|| CloudProviderError::NodeClaimNotFound(provider_id.to_owned()))?;
        // Describe it with the NodeClass of its NodeClaim, else the one selecting its MD.
        let claimed_by = annotation(&m.metadata, CLAIMED_BY).map(str::to_owned);
        let mut spec = None;
        if let Some(name) = claimed_by {
            let api: Api<NodeClaim> = Api::all(self.workload.clone());
            if let Ok(Some(nc)) = api.get_opt(&name).await {
                spec = self.spec_of(&nc).await;
            }
        }
        if spec.is_none()
            && let Some(md_ref) = deployment_of(&m)
            && let Ok(Some(md)) = self.mds_api(&md_ref.namespace).get_opt(&md_ref.name).await
        {
            let classes = self.node_classes().await;
            spec = self.spec_selecting(&classes, &md).cloned();
        }
        Ok(self.launch_for(&m, spec.as_ref()).await)
    }

    async fn list(&self) -> Result<Vec<Launch>, CloudProviderError> {
        self.ready().await?;
        let api: Api<MachineDeployment> = Api::all(self.management.clone());
        let mds = api
            .list(&ListParams::default())
            .await
            .map_err(|e| transient("list MachineDeployments", e))?;
        let default = ClusterAPINodeClassSpec::default();
        let classes = self.node_classes().await;
        let mut by_ref: HashMap<MachineDeploymentRef, Option<Catalogue>> = HashMap::new();
        for md in &mds.items {
            let spec = self.spec_selecting(&classes, md).unwrap_or(&default);
            by_ref.insert(MachineDeploymentRef::of(md), describe(md, spec));
        }
        let mut launches: Vec<Launch> = self
            .cache
            .machines()
            .iter()
            .filter(|m| has_label(&m.metadata, KARPENTER_MEMBER))
            .map(|m| {
                let described = deployment_of(m).and_then(|md| {
                    by_ref
                        .get(&md)
                        .and_then(Option::as_ref)
                        .and_then(|c| entry_for(c, &md))
                });
                launch_of(m, described)
            })
            .collect();
        launches.sort_by(|a, b| a.machine.cmp(&b.machine));
        Ok(launches)
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        self.terminate(node_claim).await
    }

    async fn get_instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let nodeclass = self
            .nodeclass(&node_pool.spec.template.spec.node_class_ref.name)
            .await?;
        Ok(self.catalogue(&nodeclass.spec).await?.instance_types())
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let name = node_claim.metadata.name.clone().unwrap_or_default();
        let m = self.find_machine(node_claim).await?.ok_or_else(|| {
            CloudProviderError::NodeClaimNotFound(format!("no Machine for NodeClaim {name}"))
        })?;
        let Some(md_ref) = deployment_of(&m) else {
            return Ok(Some(crate::drift::MACHINE_DEPLOYMENT_NOT_FOUND.to_owned()));
        };
        let md = match self.mds_api(&md_ref.namespace).get_opt(&md_ref.name).await {
            Ok(Some(md)) => md,
            Ok(None) => return Ok(Some(crate::drift::MACHINE_DEPLOYMENT_NOT_FOUND.to_owned())),
            Err(e) => return Err(transient("get MachineDeployment", e)),
        };
        let machine_set = match m
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(api::well_known::capi::SET_NAME))
        {
            Some(set) => {
                Api::<api::MachineSet>::namespaced(self.management.clone(), &md_ref.namespace)
                    .get_opt(set)
                    .await
                    .map_err(|e| transient("get MachineSet", e))?
            }
            None => None,
        };
        let nodeclass = self.nodeclass(&node_claim.spec.node_class_ref.name).await?;
        let selected = select(
            std::slice::from_ref(&md),
            nodeclass.spec.scalable_resource_selector.as_ref(),
            &self.config.scope,
        )
        .map(|s| !s.is_empty())
        .unwrap_or(false);
        Ok(crate::drift::drift_reason(&m, machine_set.as_ref(), &md, selected).map(str::to_owned))
    }

    fn name(&self) -> &'static str {
        "clusterapi"
    }
}
