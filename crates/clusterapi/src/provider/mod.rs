//! The Cluster API CloudProvider: [`ClusterApiProvider`].
//!
//! Responsibility: implement [`cloudprovider::CloudProvider`] over a management cluster (Cluster
//! API objects) and a workload cluster (NodeClaims, ClusterAPINodeClasses). Writes are only
//! JSON merge patches carrying `metadata.resourceVersion` (compare-and-set) — never a
//! full-object update through the lossy `api` structs. Replicas change only together with the
//! [`ownership`] record (which replicas we raised) in one such patch of the MachineDeployment.
//!
//! **Node groups** are MachineDeployments and stand-alone MachineSets (no MachineDeployment
//! owns them): a stand-alone set is read as a [`MachineDeployment::from_machine_set`] view, its
//! [`MachineDeploymentRef`] carries [`GroupKind::MachineSet`], and reads, merge patches and
//! fresh Machine lists go to its own resource ([`ClusterApiProvider::read_group`],
//! [`ClusterApiProvider::patch_group`], [`ClusterApiProvider::list_machines_of`]). Everything
//! below says "MachineDeployment" and holds for both; a set is its own scale-down target (no
//! rollout can redirect a lowered replica).
//!
//! **Ownership.** We touch only what is provably ours: Machines claimed by a NodeClaim of this
//! workload cluster ([`CLAIMED_BY_CLUSTER`] names its identity), and replicas we raised
//! ourselves (the [`ownership`] record). A Machine that was running before we raised anything
//! is never claimed and never collected.
//!
//! **Create** (never waits for the providerID):
//! 1. *Resume*: a NodeClaim annotated `karpenter.cluster.x-k8s.io/machine` (or the legacy
//!    `cluster.x-k8s.io/machine`) returns that Machine (read fresh); a Machine whose
//!    [`CLAIMED_BY_UID`] annotation holds the NodeClaim's UID is returned too — a restart
//!    between the claim and the lifecycle's write scales nothing again. A bound
//!    Machine that no longer exists is InsufficientCapacity (core deletes the NodeClaim).
//! 2. Build the NodeClass catalogue and try the compatible available offerings **cheapest
//!    first** (ties: instance type name, then MachineDeployment).
//! 3. Under a per-MachineDeployment lock (one process; leader election keeps one active): if a
//!    replica we raised is unclaimed and not reserved by another create (the record's
//!    `raised` minus our claims minus the waiting creates), reserve it — a retry or the next
//!    NodeClaim reuses it, nothing is raised again; otherwise raise replicas and the record
//!    together (resourceVersion precondition; 409 → re-read and decide again). **Batched:**
//!    the raise is by as many replicas as creates are waiting for that MD's lock at that moment
//!    (capped by the max-size annotation); the waiters then reserve those replicas without
//!    another write (20 concurrent creates → 2 writes in the tests). A create cancelled while
//!    waiting is not counted. Max size is never exceeded — so concurrent creates cannot
//!    overshoot it. At max size the next offering is tried; none left → InsufficientCapacity.
//! 4. Outside the lock, claim a fresh Machine of that MD (`cluster.x-k8s.io/deployment-name`,
//!    no `delete-machine`, not deleting, no member label, **not in the record's baseline**) by
//!    a merge patch with its resourceVersion setting the member label and [`CLAIMED_BY`] /
//!    [`CLAIMED_BY_UID`] / [`CLAIMED_BY_CLUSTER`]; a 409 means someone else changed it (Cluster
//!    API writes a new Machine several times at once): it is read fresh and tried again at its
//!    current version (twice at most), then the next candidate is tried. Creates of this process never PATCH the same candidate at once
//!    (each takes a candidate no other is claiming), so a scale-out of N does not cost N²/2
//!    conflicts; a 429 backs off a second and looks again. Candidates come from the [`cache`]; when none is left the create
//!    waits for the next cache change (no polling), up to [`ProviderConfig::claim_timeout`]
//!    (then Transient; the raised replica stays for the retry, or for the next NodeClaim, so
//!    Machines that never come — a paused MachineSet, rejected creates — raise replicas once,
//!    not once per retry; [`crate::gc`] lets such replicas go after its grace period).
//! 5. The launch carries the binding annotation (`karpenter.cluster.x-k8s.io/machine`), which
//!    the lifecycle writes with the launch's labels in its one metadata patch (no write of its
//!    own). A NodeClaim that vanished meanwhile (finalizer removed by hand) leaves a Machine
//!    claimed by a UID that no longer exists: [`crate::gc`] collects it as an orphan.
//!
//! **Delete** (idempotent): find the Machine (providerID index, else the annotations, else the
//! UID claim); gone → NodeClaimNotFound. Already `delete-machine`-annotated or deleting → `Ok`
//! and nothing else (replicas are never lowered twice) — unless the annotation is ours and the
//! record does not account for it yet (the scale-down failed, or we restarted in between):
//! then this delete finishes it. Otherwise the removal is queued per MD; the next holder of the
//! MD lock serves every queued removal (**batched**): for each, a fresh read, the caller's
//! check, and the `delete-machine` + `removed-by` annotations (merge patch with
//! resourceVersion); then one write lowers replicas and the record's `raised` by the number
//! annotated and records each in `removed` (10 concurrent deletes → fewer writes in the
//! tests). **At the min-size
//! annotation** replicas are not lowered below it: the annotated Machines beyond the room are
//! deleted directly instead, so the MachineSet replaces them with fresh, unclaimed Machines that
//! keep the user's baseline (and that later creates reuse). **Mid-rollout** (more than one
//! MachineSet holds replicas) CAPI takes a lowered replica from the oldest old MachineSet and
//! honours `delete-machine` only inside it, so replicas are lowered only for Machines of the
//! MachineSet a scale-down certainly lands in (`machinesets`, from a fresh list of the
//! MachineDeployment's MachineSets); any other removed Machine is deleted directly, replicas
//! kept (CAPI replaces it with an unclaimed Machine, ours to reuse or collect), and the
//! collector's surplus removals and releases of unborn replicas wait for the rollout to end.
//!
//! **Reads** come from caches ([`cache`]: Machines; [`objects`]: MachineDeployments,
//! MachineSets and ClusterAPINodeClasses), so instance types, a launch's shape and `get_launch` cost no request;
//! [`CloudProvider::launch_changes`] tells the lifecycle which NodeClaim's Machine changed, so it
//! does not poll for providerIDs. Compare-and-set writes read fresh.
//!
//! **Get / List** read the cache; Get looks the providerID up in the normalised index. List
//! returns every Machine carrying the member label, except those claimed by another workload
//! cluster; a Machine whose MachineDeployment cannot be described is still listed (without
//! shape), so one bad Machine never fails List. Shapes use the NodeClass of the Machine's
//! NodeClaim (Get), else the first NodeClass by name that selects its MachineDeployment, so
//! allocatable includes that NodeClass's overhead.
//!
//! Orphaned and surplus Machines are collected by [`crate::gc`] through the same removal
//! (`ClusterApiProvider::remove_machine`).
//!
//! **Drift** ([`crate::drift`]): `is_drifted` compares the Machine with its MachineDeployment.
//!
//! **Repair** (gate `NodeRepair`): the policies come from [`ProviderConfig::repair`];
//! `remediated_elsewhere` names the MachineHealthCheck that targets the Machine
//! ([`health_checks`]), so core leaves that Machine to it.
//!
//! Modules, by responsibility: `create` (resume, reservation and batched raises), `claim`
//! (compare-and-set claims and their undo), `removal` (terminate and the one removal path,
//! batched), `scale` (replica + record writes), `reads` (NodeClasses, catalogues, Get / List /
//! drift), `identity` (this workload cluster's identity), [`ownership`] (the record),
//! [`cache`] (the Machine reflector).
//!
//! **Instance types** come from the MachineDeployments' annotations and their infrastructure
//! templates' `status.capacity` / `status.nodeInfo` ([`crate::templates`]: one watch per
//! template kind, not a GET per request), as `plan` reads them from a dump.

mod adopt;
pub mod cache;
mod catalogue_memo;
mod claim;
mod create;
pub mod health_checks;
mod identity;
mod machinesets;
pub mod objects;
pub mod ownership;
mod pools;
mod prices;
mod reads;
mod removal;
mod scale;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::well_known::annotations::{LEGACY_MACHINE, MACHINE};
use api::well_known::capi::{
    DELETE_MACHINE, DEPLOYMENT_NAME, KARPENTER_MEMBER, POOL_NAME, SET_NAME,
};
use api::{
    CapiVersion, ClusterAPINodeClass, GroupKind, Machine, MachineDeployment, MachinePool,
    MachineSet, NodeClaim, NodePool,
};
use cloudprovider::{CloudProvider, CloudProviderError, Launch, ObjectRef};
use kube::api::{Api, ListParams};
use scheduling::instance_type::InstanceType;
use scheduling::labels::WellKnownLabels;

use crate::instance_types::MachineDeploymentRef;
use crate::selection::Scope;
use crate::templates::Templates;

pub use adopt::ADOPTED;
pub use cache::MachineCache;
use create::Batches;
pub use identity::CLAIMED_BY_CLUSTER;
pub(crate) use identity::{claim_cluster, claimed_by, not_claimed_by};
pub use objects::ObjectCache;
pub use prices::NodePrice;
use reads::launch_of;
pub(crate) use removal::Removal;
use removal::RemovalRequest;

/// Machine annotation: the name of the NodeClaim that claimed it.
pub const CLAIMED_BY: &str = "karpenter.cluster.x-k8s.io/nodeclaim";
/// Machine annotation: the UID of the NodeClaim that claimed it (the claim's identity).
pub const CLAIMED_BY_UID: &str = "karpenter.cluster.x-k8s.io/nodeclaim-uid";

/// Settings of the provider.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Where MachineDeployments may come from.
    pub scope: Scope,
    /// How long Create waits for a Machine to appear and be claimed.
    pub claim_timeout: Duration,
    /// This workload cluster's identity, written with every claim (default: the UID of its
    /// `kube-system` namespace). 1–54 characters of `[A-Za-z0-9._-]`.
    pub cluster_id: Option<String>,
    /// How long a call waits for the Machine cache's first list before failing with
    /// [`CloudProviderError::CacheNotSynced`] (naming the watch's last error).
    pub cache_sync_timeout: Duration,
    /// How long the first read of an infrastructure template kind waits for its watch to
    /// list (later reads never wait; a kind that cannot be listed reads as no template).
    pub template_sync_timeout: Duration,
    /// How long after our `delete-machine` annotation and scale-down a Machine may still be
    /// there, not deleting, before the next delete deletes it directly (a rollout can shrink
    /// another MachineSet than the annotated Machine's, which then never goes).
    pub removal_escalation: Duration,
    /// How long a MachineDeployment whose launch could not complete (no Machine claimed within
    /// [`ProviderConfig::claim_timeout`], or its new Machine failed) is offered as unavailable,
    /// so the next batch picks another offering (upstream's unavailable-offerings TTL).
    pub unavailable_offering_ttl: Duration,
    /// The Cluster API group and version spoken to the management cluster; callers set it
    /// from [`crate::discovery::discover`] (the default, v1beta2, is for tests).
    pub capi: CapiVersion,
    /// What node repair repairs (used only with the `NodeRepair` gate).
    pub repair: cloudprovider::RepairPolicies,
}

impl Default for ProviderConfig {
    fn default() -> Self {
        Self {
            scope: Scope::everywhere(),
            claim_timeout: Duration::from_secs(120),
            cluster_id: None,
            cache_sync_timeout: Duration::from_secs(60),
            removal_escalation: Duration::from_secs(600),
            template_sync_timeout: Duration::from_secs(10),
            unavailable_offering_ttl: Duration::from_secs(180),
            capi: CapiVersion::v1beta2(),
            repair: cloudprovider::RepairPolicies::cluster_api_defaults(),
        }
    }
}

/// The Cluster API CloudProvider.
pub struct ClusterApiProvider {
    management: kube::Client,
    workload: kube::Client,
    cache: MachineCache,
    /// Every MachineDeployment of the management cluster.
    mds: ObjectCache<MachineDeployment>,
    /// Every MachineSet of the management cluster (drift reads a Machine's MachineSet).
    sets: ObjectCache<MachineSet>,
    /// Every MachinePool of the management cluster (empty where MachinePools are not served).
    pools: ObjectCache<MachinePool>,
    /// Every ClusterAPINodeClass of the workload cluster.
    classes: ObjectCache<ClusterAPINodeClass>,
    config: ProviderConfig,
    /// The infrastructure templates (one watch per kind).
    templates: Arc<Templates>,
    /// [`ClusterApiProvider::cluster_id`], once resolved.
    cluster_id: tokio::sync::OnceCell<String>,
    well_known: WellKnownLabels,
    locks: Mutex<HashMap<MachineDeploymentRef, Arc<tokio::sync::Mutex<()>>>>,
    /// Creates that reserved a Machine of this MD and have not claimed it yet.
    pending: Mutex<HashMap<MachineDeploymentRef, usize>>,
    /// Machines this process claimed (the cache may not show the label yet).
    claimed: Mutex<HashSet<ObjectRef>>,
    /// Machines a create of this process is claiming right now.
    claiming: Mutex<HashSet<ObjectRef>>,
    /// Per MD: creates waiting for its lock, and replicas already raised for them.
    batches: Batches,
    /// Per MD: removals waiting to be served by the next holder of its lock.
    removals: Mutex<HashMap<MachineDeploymentRef, Vec<RemovalRequest>>>,
    /// Per MD: until when it is unavailable after a launch that could not complete, and why.
    launch_failures: Mutex<HashMap<MachineDeploymentRef, (tokio::time::Instant, String)>>,
    /// The last catalogues built, shared by launches whose inputs have not changed.
    catalogues: catalogue_memo::CatalogueMemo,
    /// Events on NodeClaims (the workload cluster).
    /// The NodeOverlay store (the `NodeOverlay` gate): a launch ranks offerings at the prices
    /// the scheduler planned with.
    overlays: Option<Arc<cloudprovider::overlay::OverlayStore>>,
    recorder: kube::runtime::events::Recorder,
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

/// Wait (bounded) for `cache`'s first list.
async fn synced<K>(cache: &ObjectCache<K>) -> Result<(), CloudProviderError>
where
    K::DynamicType: Clone + Eq + std::hash::Hash + std::fmt::Debug + Unpin,
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    cache
        .ready()
        .await
        .map_err(|e| CloudProviderError::CacheNotSynced {
            cache: cache.kind().into(),
            cause: e.to_string(),
        })
}

fn has_label(meta: &kube::api::ObjectMeta, key: &str) -> bool {
    meta.labels.as_ref().is_some_and(|l| l.contains_key(key))
}

/// The node group `m` belongs to: its MachineDeployment (the `cluster.x-k8s.io/deployment-name`
/// label), else its MachineSet (the controller owner reference, else the
/// `cluster.x-k8s.io/set-name` label) — a node group only if that set is stand-alone, which
/// the caller's lookup of the group decides — else its MachinePool (a MachinePool Machine:
/// [`pools::machine_pool_of`]).
pub fn deployment_of(m: &Machine) -> Option<MachineDeploymentRef> {
    let namespace = m.metadata.namespace.as_deref()?;
    if let Some(md) = m
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(DEPLOYMENT_NAME))
    {
        return Some(MachineDeploymentRef::deployment(namespace, md));
    }
    if let Some(set) = machinesets::machine_set_of(m) {
        return Some(MachineDeploymentRef::machine_set(namespace, set));
    }
    Some(MachineDeploymentRef::machine_pool(
        namespace,
        pools::machine_pool_of(m)?,
    ))
}

/// Whether termination of `m` was already requested (annotation or deletionTimestamp).
pub(crate) fn terminating(m: &Machine) -> bool {
    m.metadata.deletion_timestamp.is_some() || annotation(&m.metadata, DELETE_MACHINE).is_some()
}

/// Whether Cluster API reports `m` failed (phase `Failed` or a failure reason, either version).
pub(crate) fn failed(m: &Machine) -> bool {
    m.status
        .as_ref()
        .is_some_and(|s| s.phase.as_deref() == Some("Failed") || s.failure_reason().is_some())
}

/// Whether `m` is a fresh Machine of `md` nobody claimed (and not failed).
pub(crate) fn claimable(m: &Machine, md: &MachineDeploymentRef) -> bool {
    deployment_of(m).as_ref() == Some(md) && unclaimed(m)
}

/// `m` could be claimed by a create, whatever its MachineDeployment: not terminating, not
/// failed, not a static member, claimed by no NodeClaim.
pub(crate) fn unclaimed(m: &Machine) -> bool {
    !terminating(m)
        && !failed(m)
        && !has_label(&m.metadata, KARPENTER_MEMBER)
        && annotation(&m.metadata, CLAIMED_BY_UID).is_none()
}

/// Whether the NodeClaim is bound by the upstream provider's key only (its Machines carry no
/// claim annotations).
fn legacy_binding(nc: &NodeClaim) -> bool {
    annotation(&nc.metadata, MACHINE).is_none()
        && annotation(&nc.metadata, LEGACY_MACHINE).is_some()
}

/// The NodeClaim's binding annotation (ours, else the legacy key).
fn bound_machine(nc: &NodeClaim) -> Option<ObjectRef> {
    annotation(&nc.metadata, MACHINE)
        .or_else(|| annotation(&nc.metadata, LEGACY_MACHINE))
        .and_then(ObjectRef::parse)
}

impl ClusterApiProvider {
    /// A provider over `management` (CAPI) and `workload` (NodeClaims, NodeClasses); starts the
    /// Machine cache. Must be called inside a tokio runtime.
    #[must_use]
    pub fn new(management: kube::Client, workload: kube::Client, config: ProviderConfig) -> Self {
        let recorder = kube::runtime::events::Recorder::new(
            workload.clone(),
            kube::runtime::events::Reporter {
                controller: "karpenter-capi".into(),
                instance: None,
            },
        );
        Self {
            cache: MachineCache::start(
                management.clone(),
                config.scope.namespace.as_deref(),
                &config.capi,
                config.cache_sync_timeout,
            ),
            mds: ObjectCache::start(
                management.clone(),
                config.scope.namespace.as_deref(),
                &config.capi,
                "MachineDeployment",
                config.cache_sync_timeout,
            ),
            sets: ObjectCache::start(
                management.clone(),
                config.scope.namespace.as_deref(),
                &config.capi,
                "MachineSet",
                config.cache_sync_timeout,
            ),
            pools: ObjectCache::start_optional(
                management.clone(),
                config.scope.namespace.as_deref(),
                &config.capi,
                "MachinePool",
                config.cache_sync_timeout,
            ),
            classes: ObjectCache::start_cluster_scoped(
                workload.clone(),
                "ClusterAPINodeClass",
                config.cache_sync_timeout,
            ),
            templates: Arc::new(Templates::scoped(
                management.clone(),
                config.scope.namespace.clone(),
                config.template_sync_timeout,
            )),
            management,
            workload,
            config,
            cluster_id: tokio::sync::OnceCell::new(),
            well_known: WellKnownLabels::cluster_api(),
            locks: Mutex::default(),
            pending: Mutex::default(),
            claimed: Mutex::default(),
            claiming: Mutex::default(),
            batches: Arc::default(),
            removals: Mutex::default(),
            launch_failures: Mutex::default(),
            catalogues: catalogue_memo::CatalogueMemo::default(),
            overlays: None,
            recorder,
        }
    }

    /// The same provider ranking launch offerings with NodeOverlays applied (`None`: without).
    #[must_use]
    pub fn with_overlays(
        mut self,
        overlays: Option<Arc<cloudprovider::overlay::OverlayStore>>,
    ) -> Self {
        self.overlays = overlays;
        self
    }

    /// The NodeOverlay store, when the gate is on.
    pub(crate) fn overlays(&self) -> Option<&Arc<cloudprovider::overlay::OverlayStore>> {
        self.overlays.as_ref()
    }

    /// Offer `md` as unavailable for the unavailable-offering TTL: a launch on it could not
    /// complete (`why`).
    pub(crate) fn launch_failed(&self, md: &MachineDeploymentRef, why: &str) {
        tracing::warn!(machine_deployment = %md, reason = %why,
            ttl = ?self.config.unavailable_offering_ttl,
            "a launch could not complete; the MachineDeployment's offering is unavailable for the TTL");
        self.launch_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                md.clone(),
                (
                    tokio::time::Instant::now() + self.config.unavailable_offering_ttl,
                    why.to_owned(),
                ),
            );
    }

    /// Why `md` is unavailable after a recent launch failure, if it is (expired entries go).
    #[must_use]
    pub fn recent_launch_failure(&self, md: &MachineDeploymentRef) -> Option<String> {
        let mut failures = self
            .launch_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = tokio::time::Instant::now();
        failures.retain(|_, (until, _)| *until > now);
        failures.get(md).map(|(_, why)| why.clone())
    }

    /// The Machine cache.
    #[must_use]
    pub fn cache(&self) -> &MachineCache {
        &self.cache
    }

    /// The provider's watch tasks (Machines, MachineDeployments, MachineSets,
    /// ClusterAPINodeClasses), each
    /// running until the provider is dropped, for liveness.
    #[must_use]
    pub fn watch_tasks(&self) -> Vec<(String, tokio::task::AbortHandle)> {
        vec![
            (
                "Machine watch (provider)".to_owned(),
                self.cache.watch_task(),
            ),
            (
                format!("{} watch (provider)", self.mds.kind()),
                self.mds.watch_task(),
            ),
            (
                format!("{} watch (provider)", self.sets.kind()),
                self.sets.watch_task(),
            ),
            (
                format!("{} watch (provider)", self.pools.kind()),
                self.pools.watch_task(),
            ),
            (
                format!("{} watch (provider)", self.classes.kind()),
                self.classes.watch_task(),
            ),
        ]
    }

    /// The infrastructure templates (share them with the NodeClass status controller).
    #[must_use]
    pub fn templates(&self) -> Arc<Templates> {
        Arc::clone(&self.templates)
    }

    /// Wait (bounded) for the Machine cache's first list.
    ///
    /// # Errors
    /// [`CloudProviderError::CacheNotSynced`] naming the watch's last error.
    pub(crate) async fn ready(&self) -> Result<(), CloudProviderError> {
        self.cache
            .ready()
            .await
            .map_err(|e| CloudProviderError::CacheNotSynced {
                cache: "Machine".into(),
                cause: e.to_string(),
            })
    }

    /// Every node group, from the caches: the MachineDeployments, then the stand-alone
    /// MachineSets (as [`MachineDeployment::from_machine_set`] views).
    ///
    /// # Errors
    /// [`CloudProviderError::CacheNotSynced`] when a cache has not listed in time.
    pub(crate) async fn machine_deployments(
        &self,
    ) -> Result<Vec<Arc<MachineDeployment>>, CloudProviderError> {
        synced(&self.mds).await?;
        synced(&self.sets).await?;
        synced(&self.pools).await?;
        let mut groups = self.mds.all();
        let sets = self.sets.all();
        groups.extend(crate::selection::stand_alone(sets.iter().map(AsRef::as_ref)).map(Arc::new));
        groups.extend(
            self.pools
                .all()
                .iter()
                .map(|p| Arc::new(MachineDeployment::from_machine_pool(p))),
        );
        Ok(groups)
    }

    /// The node group `r` from the caches (a MachineSet only when stand-alone), without a read.
    pub(crate) fn cached_group(&self, r: &MachineDeploymentRef) -> Option<Arc<MachineDeployment>> {
        match r.kind {
            GroupKind::MachineDeployment => self.mds.get(&r.namespace, &r.name),
            GroupKind::MachineSet => self
                .sets
                .get(&r.namespace, &r.name)
                .filter(|s| s.is_stand_alone())
                .map(|s| Arc::new(MachineDeployment::from_machine_set(&s))),
            GroupKind::MachinePool => self
                .pools
                .get(&r.namespace, &r.name)
                .map(|p| Arc::new(MachineDeployment::from_machine_pool(&p))),
        }
    }

    /// The MachineSet `namespace/name`, from the cache.
    ///
    /// # Errors
    /// [`CloudProviderError::CacheNotSynced`] when the cache has not listed in time.
    pub(crate) async fn machine_set(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<MachineSet>>, CloudProviderError> {
        synced(&self.sets).await?;
        Ok(self.sets.get(namespace, name))
    }

    /// The MachineDeployment `r`: the cache's copy, else (not listed yet) read.
    ///
    /// # Errors
    /// The cache has not synced, or the read failed.
    pub(crate) async fn machine_deployment(
        &self,
        r: &MachineDeploymentRef,
    ) -> Result<Option<Arc<MachineDeployment>>, CloudProviderError> {
        synced(&self.mds).await?;
        synced(&self.sets).await?;
        synced(&self.pools).await?;
        if let Some(md) = self.cached_group(r) {
            return Ok(Some(md));
        }
        self.read_group(r).await.map(|md| md.map(Arc::new))
    }

    /// The node group `r`, read fresh (`None`: not found, or a MachineSet that is not
    /// stand-alone).
    ///
    /// # Errors
    /// The read failed.
    pub(crate) async fn read_group(
        &self,
        r: &MachineDeploymentRef,
    ) -> Result<Option<MachineDeployment>, CloudProviderError> {
        match r.kind {
            GroupKind::MachineDeployment => self
                .mds_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get MachineDeployment", e)),
            GroupKind::MachineSet => Ok(self
                .sets_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get MachineSet", e))?
                .filter(MachineSet::is_stand_alone)
                .map(|s| MachineDeployment::from_machine_set(&s))),
            GroupKind::MachinePool => Ok(self
                .pools_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get MachinePool", e))?
                .map(|p| MachineDeployment::from_machine_pool(&p))),
        }
    }

    /// Merge-patch the node group `r` (its own kind's resource).
    pub(crate) async fn patch_group(
        &self,
        r: &MachineDeploymentRef,
        patch: &serde_json::Value,
    ) -> Result<(), kube::Error> {
        let params = kube::api::PatchParams::default();
        let patch = kube::api::Patch::Merge(patch);
        match r.kind {
            GroupKind::MachineDeployment => self
                .mds_api(&r.namespace)
                .patch(&r.name, &params, &patch)
                .await
                .map(drop),
            GroupKind::MachineSet => self
                .sets_api(&r.namespace)
                .patch(&r.name, &params, &patch)
                .await
                .map(drop),
            GroupKind::MachinePool => self
                .pools_api(&r.namespace)
                .patch(&r.name, &params, &patch)
                .await
                .map(drop),
        }
    }

    /// Wait (each bounded by the sync timeout) for the Machine, MachineDeployment, MachineSet
    /// and ClusterAPINodeClass caches' first lists.
    ///
    /// # Errors
    /// [`CloudProviderError::CacheNotSynced`] naming the first cache that has not listed and its
    /// watch's last error (e.g. a 403 from a missing RBAC rule).
    pub async fn caches_synced(&self) -> Result<(), CloudProviderError> {
        self.ready().await?;
        synced(&self.mds).await?;
        synced(&self.sets).await?;
        synced(&self.pools).await?;
        synced(&self.classes).await
    }

    pub(super) fn lock_of(&self, md: &MachineDeploymentRef) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(md.clone()).or_default())
    }

    pub(super) fn machines_api(&self, namespace: &str) -> Api<Machine> {
        Api::namespaced_with(self.management.clone(), namespace, &self.config.capi)
    }

    pub(super) fn mds_api(&self, namespace: &str) -> Api<MachineDeployment> {
        Api::namespaced_with(self.management.clone(), namespace, &self.config.capi)
    }

    pub(super) fn sets_api(&self, namespace: &str) -> Api<MachineSet> {
        Api::namespaced_with(self.management.clone(), namespace, &self.config.capi)
    }

    pub(super) fn pools_api(&self, namespace: &str) -> Api<MachinePool> {
        Api::namespaced_with(self.management.clone(), namespace, &self.config.capi)
    }

    /// The Cluster API group and version this provider speaks.
    #[must_use]
    pub fn capi(&self) -> &CapiVersion {
        &self.config.capi
    }

    /// The Machines of `md`, per the cache.
    pub(crate) fn machines_of(&self, md: &MachineDeploymentRef) -> Vec<Arc<Machine>> {
        self.cache
            .machines()
            .into_iter()
            .filter(|m| deployment_of(m).as_ref() == Some(md))
            .collect()
    }

    /// The Machines of `md`, from a fresh list: by the `deployment-name` label for a
    /// MachineDeployment, by the `set-name` label for a MachineSet and the `pool-name` label for
    /// a MachinePool (their values are the name up to 63 characters; Cluster API hashes longer
    /// names, so those list the namespace), each checked with [`deployment_of`].
    ///
    /// # Errors
    /// The list failed.
    pub(crate) async fn list_machines_of(
        &self,
        md: &MachineDeploymentRef,
    ) -> Result<Vec<Machine>, CloudProviderError> {
        let params = match md.kind {
            GroupKind::MachineDeployment => {
                ListParams::default().labels(&format!("{DEPLOYMENT_NAME}={}", md.name))
            }
            GroupKind::MachineSet if md.name.len() <= 63 => {
                ListParams::default().labels(&format!("{SET_NAME}={}", md.name))
            }
            GroupKind::MachineSet => ListParams::default(),
            GroupKind::MachinePool if md.name.len() <= 63 => {
                ListParams::default().labels(&format!("{POOL_NAME}={}", md.name))
            }
            GroupKind::MachinePool => ListParams::default(),
        };
        Ok(self
            .machines_api(&md.namespace)
            .list(&params)
            .await
            .map_err(|e| transient("list Machines", e))?
            .items
            .into_iter()
            .filter(|m| deployment_of(m).as_ref() == Some(md))
            .collect())
    }

    /// Creates that reserved a raised replica of `md` and have not claimed it yet.
    pub(crate) fn reserved(&self, md: &MachineDeploymentRef) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(md)
            .copied()
            .unwrap_or(0)
    }

    /// Replicas of `md` raised by `cluster` (per `record`) that no Machine claimed by
    /// `cluster` (per the cache, or this process's own claims) uses.
    pub(crate) fn free(
        &self,
        md: &MachineDeploymentRef,
        record: &ownership::Record,
        cluster: &str,
    ) -> usize {
        let machines = self.machines_of(md);
        record.free(
            machines.iter().map(AsRef::as_ref),
            cluster,
            |m| self.claimed_locally(&cache::machine_ref(m)),
            self.reserved(md),
        )
    }

    /// `md`'s min-size annotation (absent: 0; malformed: an error naming it).
    pub(crate) fn min_size(&self, md: &MachineDeployment) -> Result<i32, CloudProviderError> {
        scale::min_size(md)
    }

    /// The management cluster client.
    pub(crate) fn scope(&self) -> &Scope {
        &self.config.scope
    }

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

impl CloudProvider for ClusterApiProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.launch(node_claim).await
    }

    async fn get_launch(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.launch_of_node_claim(node_claim).await
    }

    fn launch_changes(&self) -> Option<futures::stream::BoxStream<'static, String>> {
        Some(self.cache.claimed_changes())
    }

    async fn get(&self, provider_id: &str) -> Result<Launch, CloudProviderError> {
        self.launch_by_provider_id(provider_id).await
    }

    async fn list(&self) -> Result<Vec<Launch>, CloudProviderError> {
        self.launches().await
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        self.terminate(node_claim).await
    }

    async fn get_instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        self.instance_types_of(node_pool).await
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        self.drift_of(node_claim).await
    }

    async fn removal_room(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<cloudprovider::RemovalRoom>, CloudProviderError> {
        self.removal_room_of(node_claim).await
    }

    fn repair_policies(&self) -> cloudprovider::RepairPolicies {
        self.config.repair.clone()
    }

    async fn remediated_elsewhere(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        self.health_check_of(node_claim).await
    }

    fn name(&self) -> &'static str {
        "clusterapi"
    }
}
