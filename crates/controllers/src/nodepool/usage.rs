//! The NodePool counter loop (spec §1.2 `status.resources`, `status.nodes`; §7
//! `karpenter_nodepools_usage`, `karpenter_nodepools_limit`): I/O around [`super::counter`].
//!
//! Responsibility: over the shared [`ClusterState`]'s Node, NodeClaim and NodePool stores (no
//! watches of its own), every [`COUNTER_PERIOD`] and after every change of the state (events arriving together are handled in one
//! pass, and passes come at most every [`MIN_PASS_INTERVAL`], so a scale-up's stream of
//! Node and NodeClaim events costs one status write a second, not one per event), once all
//! three stores have listed, recount every pool: write `status.resources` and
//! `status.nodes` with a `/status` merge patch when they changed, set the usage and limit
//! gauges, and remove the gauges of pools that are gone. A singleton loop, not a
//! `Controller`: one pass reads the whole state.
//!
//! Errors: a failed patch is logged and retried on the next pass (at most one period later).
//!
//! Inputs: a workload `kube::Client`, the [`ClusterState`], the [`Metrics`]. Outputs: NodePool
//! status, gauges.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use api::NodePool;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use scheduling::quantity::Quantity;
use state::ClusterState;
use tokio::time::MissedTickBehavior;

use super::counter::{Usage, as_f64, status_patch, usage_by_pool};
use crate::metrics::{Metrics, ResourceLabels};

/// How often every pool is recounted without a change.
pub const COUNTER_PERIOD: Duration = Duration::from_secs(5);

/// The least time between two passes (changes arriving meanwhile fold into the next one).
pub const MIN_PASS_INTERVAL: Duration = Duration::from_secs(1);

/// The gauges this loop has set: pool → resource types (usage, limit).
type Published = BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>;

/// Runs the counter over the shared `state` (its Node, NodeClaim and NodePool stores: no
/// watches of its own) until the state's watches end.
pub async fn run(client: kube::Client, state: Arc<ClusterState>, metrics: Arc<Metrics>) {
    let (nodes, claims, pools) = (
        state.nodes().clone(),
        state.node_claims().clone(),
        state.node_pools().clone(),
    );
    let mut changes = state.changes();
    let mut tick = tokio::time::interval(COUNTER_PERIOD);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut published = Published::new();
    let api: Api<NodePool> = Api::all(client);
    let mut last_pass: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = changes.changed() => if changed.is_err() { return },
        }
        if let Some(last) = last_pass {
            tokio::time::sleep_until(last + MIN_PASS_INTERVAL).await;
        }
        // Everything that arrived meanwhile is in the stores: one pass counts it all.
        changes.borrow_and_update();
        // (Never `now_or_never` on a store's own readiness: see `state::listed`.)
        if !state.listed_now() {
            continue;
        }
        last_pass = Some(tokio::time::Instant::now());
        let node_list = nodes.state();
        let claim_list = claims.state();
        let usage = usage_by_pool(
            node_list.iter().map(|n| &**n),
            claim_list.iter().map(|c| &**c),
        );
        let pool_list = pools.state();
        for pool in &pool_list {
            let name = pool.name_any();
            let pool_usage = usage.get(&name).cloned().unwrap_or_default();
            publish(&metrics, &mut published, pool, &pool_usage);
            if pool.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(patch) = status_patch(pool.status.as_ref(), &pool_usage) else {
                continue;
            };
            tracing::debug!(nodepool = %name, nodes = pool_usage.nodes,
                shown = ?pool.status.as_ref().and_then(|s| s.nodes), "writing NodePool usage");
            match api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => tracing::warn!(nodepool = %name, error = %e,
                    "NodePool resources not written"),
            }
        }
        let live: BTreeSet<String> = pool_list.iter().map(|p| p.name_any()).collect();
        published.retain(|pool, (usage_types, limit_types)| {
            if live.contains(pool) {
                return true;
            }
            for t in usage_types.iter() {
                metrics.nodepools_usage.remove(&labels(t, pool));
            }
            for t in limit_types.iter() {
                metrics.nodepools_limit.remove(&labels(t, pool));
            }
            false
        });
    }
}

fn labels(resource_type: &str, nodepool: &str) -> ResourceLabels {
    ResourceLabels {
        resource_type: resource_type.to_owned(),
        nodepool: nodepool.to_owned(),
    }
}

/// Sets the pool's usage and limit gauges, removing those of resource types it no longer has.
fn publish(metrics: &Metrics, published: &mut Published, pool: &NodePool, usage: &Usage) {
    let name = pool.name_any();
    let limits: BTreeMap<String, Quantity> = pool
        .spec
        .limits
        .iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), Quantity::parse(&v.0).ok()?)))
        .collect();
    let (usage_types, limit_types) = published.entry(name.clone()).or_default();
    for t in usage_types
        .iter()
        .filter(|t| !usage.resources.contains_key(*t))
    {
        metrics.nodepools_usage.remove(&labels(t, &name));
    }
    for t in limit_types.iter().filter(|t| !limits.contains_key(*t)) {
        metrics.nodepools_limit.remove(&labels(t, &name));
    }
    for (t, q) in &usage.resources {
        metrics
            .nodepools_usage
            .get_or_create(&labels(t, &name))
            .set(as_f64(*q));
    }
    for (t, q) in &limits {
        metrics
            .nodepools_limit
            .get_or_create(&labels(t, &name))
            .set(as_f64(*q));
    }
    *usage_types = usage.resources.keys().cloned().collect();
    *limit_types = limits.keys().cloned().collect();
}
