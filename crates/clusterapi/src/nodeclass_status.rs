//! The ClusterAPINodeClass status controller.
//!
//! Responsibility: keep `status` of every ClusterAPINodeClass (workload cluster) in line with
//! the MachineDeployments it selects (management cluster), and tell users which
//! MachineDeployments are excluded and why.
//!
//! Inputs: a workload client (NodeClasses, Events), a management client (MachineDeployments
//! and their infrastructure templates, [`crate::templates`], whose `status.capacity` and
//! `status.nodeInfo` describe MachineDeployments without capacity annotations) and a
//! [`StatusConfig`] (the provider [`Scope`], the resync period). A `kube::runtime`
//! [`Controller`] reconciles a NodeClass when it changes, and every NodeClass when any
//! MachineDeployment changes.
//!
//! Outputs, per NodeClass:
//! - `status.conditions[type=Ready]`: True (reason `Ready`) only when at least one selected
//!   MachineDeployment parses into an instance type; otherwise False with reason
//!   `InvalidSelector`, `InvalidNodeClass` (bad overhead or price table),
//!   `NoMachineDeploymentsSelected` or `NoValidMachineDeployments` (naming the first problems).
//!   `observedGeneration` is the NodeClass generation; `lastTransitionTime` moves only when the
//!   status, reason or message change. Other condition types are kept as they are.
//! - `status.instanceTypes`: [`crate::Catalogue::status`].
//! - `status.conditions[type=RolloutStrategyCompatible]` ([`rollout`]): False (reason
//!   `RollingUpdate`) when a selected MachineDeployment would let Cluster API replace its
//!   Machines itself on a template change (the strategy — v1beta2 `spec.rollout.strategy.type`,
//!   v1beta1 `spec.strategy.type`, named as the served version spells it — absent or
//!   `RollingUpdate`): the
//!   new Machines would have no NodeClaim and the old ones would go outside Karpenter's
//!   disruption budgets. True (reason `OnDelete`) when every selected one uses `OnDelete`, so
//!   a template change only marks the nodes drifted and Karpenter replaces them. A warning:
//!   it does not change `Ready`. Absent when nothing is selected. A Warning Event
//!   `IncompatibleRolloutStrategy` is published when it turns False or its message changes.
//!
//! - `status.conditions[type=MachineDeploymentsHealthy]` ([`health`]): False (reason `Failed`
//!   or `ScaleUpBlocked`) while Cluster API reports a selected MachineDeployment Failed or its
//!   scale-up blocked (its MachineSets' preflight checks, listed each reconcile), naming them; True (reason `Healthy`)
//!   otherwise; absent when nothing is selected. A warning too: a Warning Event
//!   `UnhealthyMachineDeployment` when it turns False or its message changes.
//!
//! - `status.conditions[type=MachineDeploymentsPriced]` ([`pricing`]): False (reason
//!   `Unpriced`, or `NoPrices` when none has a price) while a selected MachineDeployment has no
//!   price, naming them: unpriced offerings rank after every priced one and are never a
//!   cheaper replacement. True (reason `Priced`); absent without instance types. A warning too:
//!   a Warning Event `UnpricedMachineDeployment` when it turns False or its message changes.
//!
//! Both are written with one JSON merge patch on `/status`, and only when they differ from what
//! is there (so our own write does not loop). For each excluded MachineDeployment a Warning
//! Event `InvalidMachineDeployment` is published on the NodeClass, once per distinct message.
//!
//! Errors: API failures requeue the NodeClass with exponential backoff (5 s doubling to 5 min);
//! success requeues after [`StatusConfig::resync`].

use state::backoff::WatchBackoff;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use api::common::{Condition, ConditionStatus};
use api::nodeclass::InstanceTypeStatus;
use api::well_known::capi::KARPENTER_MEMBER;
use api::well_known::conditions::READY;
use api::{ClusterAPINodeClass, MachineDeployment};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::instance_types::{
    InvalidMachineDeployment, MachineDeploymentInput, MachineDeploymentRef, build_catalogue,
};
use crate::selection::{Scope, is_member, select};
use crate::templates::Templates;
use crate::watch_errors::WatchErrors;

mod advisories;

pub use advisories::{
    MACHINE_DEPLOYMENTS_HEALTHY, MACHINE_DEPLOYMENTS_PRICED, REASON_INCOMPATIBLE_ROLLOUT_STRATEGY,
    REASON_UNHEALTHY_MACHINE_DEPLOYMENT, REASON_UNPRICED_MACHINE_DEPLOYMENT,
    ROLLOUT_STRATEGY_COMPATIBLE, health, pricing, rollout,
};

/// Reason of a True `Ready`.
pub const REASON_READY: &str = "Ready";
/// No member MachineDeployment matches the selector in scope.
pub const REASON_NO_MACHINE_DEPLOYMENTS_SELECTED: &str = "NoMachineDeploymentsSelected";
/// MachineDeployments are selected but none yields an instance type.
pub const REASON_NO_VALID_MACHINE_DEPLOYMENTS: &str = "NoValidMachineDeployments";
/// The `scalableResourceSelector` is invalid.
pub const REASON_INVALID_SELECTOR: &str = "InvalidSelector";
/// The NodeClass overhead or price table is invalid.
pub const REASON_INVALID_NODE_CLASS: &str = "InvalidNodeClass";
/// Event reason for an excluded MachineDeployment.
pub const REASON_INVALID_MACHINE_DEPLOYMENT: &str = "InvalidMachineDeployment";

/// How long the first read of a template kind waits for its watch to list.
const TEMPLATE_SYNC_TIMEOUT: Duration = Duration::from_secs(10);
/// How many problems the `NoValidMachineDeployments` message names.
const PROBLEMS_IN_MESSAGE: usize = 3;
/// An Event note is at most 1 kB.
const NOTE_LIMIT: usize = 1024;

/// Settings of the status controller.
#[derive(Debug, Clone)]
pub struct StatusConfig {
    /// Where MachineDeployments may come from (the provider's scope).
    pub scope: Scope,
    /// Requeue period after a successful reconcile.
    pub resync: Duration,
    /// The Event reporter (controller name).
    pub reporter: String,
    /// The infrastructure templates to read `status.capacity` / `status.nodeInfo` from (share
    /// the provider's, [`crate::ClusterApiProvider::templates`], for one watch per kind);
    /// `None`: the controller watches its own.
    pub templates: Option<Arc<Templates>>,
    /// The Cluster API group and version (the provider's, [`crate::ClusterApiProvider::capi`]).
    pub capi: api::CapiVersion,
}

impl Default for StatusConfig {
    fn default() -> Self {
        Self {
            scope: Scope::everywhere(),
            resync: Duration::from_secs(300),
            reporter: "karpenter-capi".into(),
            templates: None,
            capi: api::CapiVersion::v1beta2(),
        }
    }
}

/// Errors of one reconcile (all transient: retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// A Kubernetes API call failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was being done.
        context: &'static str,
        /// The error.
        #[source]
        source: kube::Error,
    },
}

fn kube_error(context: &'static str) -> impl FnOnce(kube::Error) -> StatusError {
    move |source| StatusError::Kube { context, source }
}

/// The desired `Ready` condition and instance types, plus the excluded MachineDeployments.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// Ready's status.
    pub status: ConditionStatus,
    /// Ready's reason.
    pub reason: String,
    /// Ready's message.
    pub message: String,
    /// `status.instanceTypes`.
    pub instance_types: Vec<InstanceTypeStatus>,
    /// The MachineDeployments excluded for bad input (one per problem).
    pub problems: Vec<InvalidMachineDeployment>,
    /// The `MachineDeploymentsPriced` condition ([`pricing`]); `None` without instance types.
    pub pricing: Option<advisories::Advisory>,
}

impl Observed {
    fn not_ready(reason: &str, message: String) -> Self {
        Self {
            status: ConditionStatus::False,
            reason: reason.into(),
            message,
            instance_types: Vec::new(),
            problems: Vec::new(),
            pricing: None,
        }
    }
}

fn scope_text(scope: &Scope) -> String {
    let namespace = scope.namespace.as_deref().map_or_else(
        || "any namespace".to_owned(),
        |ns| format!("namespace {ns}"),
    );
    let cluster = scope
        .cluster_name
        .as_deref()
        .map_or_else(|| "any cluster".to_owned(), |c| format!("cluster {c}"));
    format!("{namespace} / {cluster}")
}

/// What `nodeclass` should report, given every MachineDeployment of the management cluster.
/// Pure.
#[must_use]
pub fn observe(
    nodeclass: &ClusterAPINodeClass,
    mds: &[MachineDeployment],
    scope: &Scope,
) -> Observed {
    observe_with_templates(nodeclass, mds, &HashMap::new(), scope)
}

/// [`observe`] with the MachineDeployments' infrastructure templates (by MachineDeployment).
#[must_use]
pub fn observe_with_templates(
    nodeclass: &ClusterAPINodeClass,
    mds: &[MachineDeployment],
    templates: &HashMap<MachineDeploymentRef, serde_json::Value>,
    scope: &Scope,
) -> Observed {
    let selected = match select(
        mds,
        nodeclass.spec.scalable_resource_selector.as_ref(),
        scope,
    ) {
        Ok(selected) => selected,
        Err(e) => {
            return Observed::not_ready(
                REASON_INVALID_SELECTOR,
                format!("invalid scalableResourceSelector: {e}"),
            );
        }
    };
    if selected.is_empty() {
        return Observed::not_ready(
            REASON_NO_MACHINE_DEPLOYMENTS_SELECTED,
            format!(
                "no MachineDeployment carries {KARPENTER_MEMBER} and matches the selector in {}",
                scope_text(scope)
            ),
        );
    }
    let inputs: Vec<_> = selected
        .iter()
        .map(|md| {
            let input = MachineDeploymentInput::new(md);
            match templates.get(&MachineDeploymentRef::of(md)) {
                Some(template) => input.with_infrastructure_template(template),
                None => input,
            }
        })
        .collect();
    let catalogue = match build_catalogue(&nodeclass.spec, &inputs) {
        Ok(catalogue) => catalogue,
        Err(e) => {
            return Observed::not_ready(
                REASON_INVALID_NODE_CLASS,
                format!("spec.{}: {}", e.field, e.message),
            );
        }
    };
    let problems = catalogue.problems().to_vec();
    if catalogue.entries().is_empty() {
        let mut message = format!(
            "none of the {} selected MachineDeployments yields an instance type: {}",
            selected.len(),
            problems
                .iter()
                .take(PROBLEMS_IN_MESSAGE)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        if problems.len() > PROBLEMS_IN_MESSAGE {
            message.push_str(&format!(
                " (and {} more)",
                problems.len() - PROBLEMS_IN_MESSAGE
            ));
        }
        return Observed {
            problems,
            ..Observed::not_ready(REASON_NO_VALID_MACHINE_DEPLOYMENTS, message)
        };
    }
    Observed {
        status: ConditionStatus::True,
        reason: REASON_READY.into(),
        message: String::new(),
        instance_types: catalogue.status(),
        problems,
        pricing: pricing(&catalogue),
    }
}

/// The conditions to write: the old ones with `Ready` replaced; the old `lastTransitionTime`
/// is kept unless status, reason or message changed.
#[must_use]
pub fn conditions(
    old: &[Condition],
    observed: &Observed,
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let ready = Condition {
        last_transition_time: Time(now),
        message: observed.message.clone(),
        observed_generation: generation,
        reason: observed.reason.clone(),
        status: observed.status,
        type_: READY.into(),
    };
    upsert(old, ready)
}

/// `old` with the condition of `new`'s type replaced by `new` (or added), keeping the old
/// `lastTransitionTime` unless status, reason or message changed.
#[must_use]
pub fn upsert(old: &[Condition], mut new: Condition) -> Vec<Condition> {
    if let Some(previous) = old.iter().find(|c| {
        c.type_ == new.type_
            && c.status == new.status
            && c.reason == new.reason
            && c.message == new.message
    }) {
        new.last_transition_time = previous.last_transition_time.clone();
    }
    let mut out: Vec<Condition> = old
        .iter()
        .filter(|c| c.type_ != new.type_)
        .cloned()
        .collect();
    out.push(new);
    out
}

/// Shared state of the controller.
pub struct Context {
    workload: kube::Client,
    management: kube::Client,
    config: StatusConfig,
    templates: Arc<Templates>,
    /// Who reports the Events; each is created by a new `Recorder` (a shared one would fold a
    /// later Event of the NodeClass with the same reason into the first one's series, keeping
    /// the first message).
    reporter: Reporter,
    /// (NodeClass, MD, annotation) → last message published.
    published: Mutex<HashMap<(String, String, String), String>>,
    /// NodeClass → consecutive failures.
    failures: Mutex<HashMap<String, u32>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context over `workload` (NodeClasses, Events) and `management` (MachineDeployments).
    #[must_use]
    pub fn new(workload: kube::Client, management: kube::Client, config: StatusConfig) -> Self {
        let reporter = Reporter {
            controller: config.reporter.clone(),
            instance: None,
        };
        let templates = config.templates.clone().unwrap_or_else(|| {
            Arc::new(Templates::scoped(
                management.clone(),
                config.scope.namespace.clone(),
                TEMPLATE_SYNC_TIMEOUT,
            ))
        });
        Self {
            workload,
            management,
            config,
            templates,
            reporter,
            published: Mutex::default(),
            failures: Mutex::default(),
        }
    }

    fn set_api(&self) -> Api<api::MachineSet> {
        match &self.config.scope.namespace {
            Some(ns) => Api::namespaced_with(self.management.clone(), ns, &self.config.capi),
            None => Api::all_with(self.management.clone(), &self.config.capi),
        }
    }

    fn md_api(&self) -> Api<MachineDeployment> {
        match &self.config.scope.namespace {
            Some(ns) => Api::namespaced_with(self.management.clone(), ns, &self.config.capi),
            None => Api::all_with(self.management.clone(), &self.config.capi),
        }
    }

    /// Reconcile one NodeClass: write its status and publish Events for new problems.
    ///
    /// # Errors
    /// [`StatusError`] when an API call fails (transient).
    pub async fn reconcile(&self, nodeclass: &ClusterAPINodeClass) -> Result<(), StatusError> {
        let name = nodeclass.name_any();
        let mds = self
            .md_api()
            .list(&ListParams::default())
            .await
            .map_err(kube_error("list MachineDeployments"))?;
        let sets = self
            .set_api()
            .list(&ListParams::default())
            .await
            .map_err(kube_error("list MachineSets"))?;
        // The node groups: MachineDeployments, then stand-alone MachineSets.
        let mut groups = mds.items;
        groups.extend(crate::selection::stand_alone(&sets.items));
        let mut templates = HashMap::new();
        for md in groups.iter().filter(|md| is_member(md)) {
            if let Some(template) = self.templates.of(md).await {
                templates.insert(MachineDeploymentRef::of(md), template);
            }
        }
        let observed = observe_with_templates(nodeclass, &groups, &templates, &self.config.scope);
        let status = nodeclass.status.clone().unwrap_or_default();
        let old = status.conditions.unwrap_or_default();
        let now = Timestamp::now();
        let mut new = conditions(&old, &observed, nodeclass.metadata.generation, now);
        let advisories = [
            (
                ROLLOUT_STRATEGY_COMPATIBLE,
                REASON_INCOMPATIBLE_ROLLOUT_STRATEGY,
                rollout(
                    nodeclass,
                    &groups,
                    &sets.items,
                    &self.config.scope,
                    &self.config.capi,
                ),
            ),
            (
                MACHINE_DEPLOYMENTS_HEALTHY,
                REASON_UNHEALTHY_MACHINE_DEPLOYMENT,
                health(nodeclass, &groups, &sets.items, &self.config.scope),
            ),
            (
                MACHINE_DEPLOYMENTS_PRICED,
                REASON_UNPRICED_MACHINE_DEPLOYMENT,
                observed.pricing.clone(),
            ),
        ];
        let mut warnings = Vec::new();
        for (type_, event_reason, advisory) in advisories {
            match advisory {
                Some((status, reason, message)) => {
                    let changed = !old
                        .iter()
                        .any(|c| c.type_ == type_ && c.status == status && c.message == message);
                    if status == ConditionStatus::False && changed {
                        warnings.push((event_reason, message.clone()));
                    }
                    new = upsert(
                        &new,
                        Condition {
                            last_transition_time: Time(now),
                            message,
                            observed_generation: nodeclass.metadata.generation,
                            reason: reason.into(),
                            status,
                            type_: type_.into(),
                        },
                    );
                }
                None => new.retain(|c| c.type_ != type_),
            }
        }
        let old_types = status.instance_types.unwrap_or_default();
        if new != old || old_types != observed.instance_types {
            let patch = json!({"status": {
                "conditions": new,
                "instanceTypes": observed.instance_types,
            }});
            let api: Api<ClusterAPINodeClass> = Api::all(self.workload.clone());
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                // Deleted meanwhile: nothing to report on.
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
                Err(e) => return Err(kube_error("patch ClusterAPINodeClass status")(e)),
            }
        }
        for (reason, mut note) in warnings {
            truncate(&mut note, NOTE_LIMIT);
            let event = Event {
                type_: EventType::Warning,
                reason: reason.into(),
                note: Some(note),
                action: "SelectMachineDeployments".into(),
                secondary: None,
            };
            Recorder::new(self.workload.clone(), self.reporter.clone())
                .publish(&event, &nodeclass.object_ref(&()))
                .await
                .map_err(kube_error("publish Event"))?;
        }
        self.publish(nodeclass, &observed.problems).await
    }

    async fn publish(
        &self,
        nodeclass: &ClusterAPINodeClass,
        problems: &[InvalidMachineDeployment],
    ) -> Result<(), StatusError> {
        let name = nodeclass.name_any();
        let key = |p: &InvalidMachineDeployment| {
            (
                name.clone(),
                format!("{} {}/{}", p.kind.as_str(), p.namespace, p.name),
                p.annotation.clone(),
            )
        };
        {
            // Forget problems that went away, so a recurrence is reported again.
            let mut published = self
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let current: Vec<_> = problems.iter().map(key).collect();
            published.retain(|k, _| k.0 != name || current.contains(k));
        }
        let reference = nodeclass.object_ref(&());
        for p in problems {
            let k = key(p);
            let already = self
                .published
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&k)
                .is_some_and(|m| *m == p.message);
            if already {
                continue;
            }
            let mut note = format!(
                "{} {}/{} excluded, {}: {}",
                p.kind.as_str(),
                p.namespace,
                p.name,
                p.annotation,
                p.message
            );
            truncate(&mut note, NOTE_LIMIT);
            let event = Event {
                type_: EventType::Warning,
                reason: REASON_INVALID_MACHINE_DEPLOYMENT.into(),
                note: Some(note),
                action: "SelectMachineDeployments".into(),
                secondary: None,
            };
            Recorder::new(self.workload.clone(), self.reporter.clone())
                .publish(&event, &reference)
                .await
                .map_err(kube_error("publish Event"))?;
            self.published
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(k, p.message.clone());
        }
        Ok(())
    }

    fn backoff(&self, name: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let n = failures.entry(name.to_owned()).or_default();
        *n = n.saturating_add(1);
        let secs = 5_u64.saturating_mul(1_u64 << (*n - 1).min(6));
        Duration::from_secs(secs.min(300))
    }

    fn succeeded(&self, name: &str) {
        self.failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }
}

/// Cut `s` to at most `limit` bytes on a character boundary.
fn truncate(s: &mut String, limit: usize) {
    if s.len() > limit {
        let mut end = limit;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

async fn reconcile(
    nodeclass: Arc<ClusterAPINodeClass>,
    ctx: Arc<Context>,
) -> Result<Action, StatusError> {
    ctx.reconcile(&nodeclass).await?;
    ctx.succeeded(&nodeclass.name_any());
    Ok(Action::requeue(ctx.config.resync))
}

fn error_policy(nodeclass: Arc<ClusterAPINodeClass>, _: &StatusError, ctx: Arc<Context>) -> Action {
    Action::requeue(ctx.backoff(&nodeclass.name_any()))
}

/// Run the status controller until the NodeClass watch ends (shutdown).
pub async fn run(workload: kube::Client, management: kube::Client, config: StatusConfig) {
    let ctx = Arc::new(Context::new(workload.clone(), management, config));
    let nodeclasses: Api<ClusterAPINodeClass> = Api::all(workload);
    let md_errors = Arc::new(std::sync::Mutex::new(WatchErrors::new(
        "MachineDeployment (NodeClass status)",
    )));
    let md_changes = watcher(ctx.md_api(), watcher::Config::default())
        .retry_backoff()
        .touched_objects()
        .filter_map(move |r| {
            let md_errors = Arc::clone(&md_errors);
            async move {
                let mut errors = md_errors
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match r {
                    Ok(_) => {
                        errors.succeeded();
                        Some(())
                    }
                    Err(e) => {
                        errors.failed(&e);
                        None
                    }
                }
            }
        });
    let mut errors = WatchErrors::new("ClusterAPINodeClass (NodeClass status)");
    state::controller(nodeclasses, watcher::Config::default())
        .reconcile_all_on(md_changes)
        .run(reconcile, error_policy, ctx)
        .for_each(move |result| {
            match result {
                // Retried by `error_policy`; the NodeClass condition says why.
                Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
                Err(e) => {
                    errors.failed(&e);
                }
                Ok(_) => errors.succeeded(),
            }
            async {}
        })
        .await;
}

#[cfg(test)]
mod tests;
