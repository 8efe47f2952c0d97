//! The upkeep every pass does before deciding: removing disruption marks no command holds
//! (`clean_up`), deleting expired NodeClaims (`expire`), and writing each NodeClaim's
//! `Consolidatable` and `Drifted` conditions and `lastPodEventTime` (`write_conditions`,
//! with the provider's drift answer cached per NodeClaim for `drift_recheck`).
//!
//! Inputs: a [`Snapshot`] and the instance types per NodePool. Outputs: writes to the
//! workload cluster (NodeClaim deletes and status patches, Node taint removal).

use super::*;

impl<P: CloudProvider + 'static> Disruption<P> {
    /// Removes the disrupted taint and `DisruptionReason` from managed nodes no command of
    /// this process holds (left behind by a restart or a failed command).
    pub(super) async fn clean_up(&self, snapshot: &Snapshot) {
        let in_flight = lock(&self.orchestrator.in_flight).clone();
        for node in &snapshot.nodes {
            let name = node.name_any();
            let managed = node.labels().contains_key(NODE_POOL);
            if !managed || in_flight.contains(&name) || node.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let nc = snapshot
                .node_claims
                .iter()
                .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&name));
            // Only nodes of our own NodeClaims: another provider's marks are its own business,
            // and a node without a NodeClaim is not provably ours.
            let Some(nc) = nc.filter(|c| is_ours(c)) else {
                continue;
            };
            if nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let marked = nc
                .status
                .as_ref()
                .and_then(|s| s.conditions.condition(DISRUPTION_REASON))
                .is_some();
            if !writes::is_tainted(node) && !marked {
                continue;
            }
            let nc_name = nc.name_any();
            tracing::info!(node = %name, "removing a disruption mark no command holds");
            if let Err(e) = self.orchestrator.mark(&name, &nc_name, None).await {
                tracing::warn!(node = %name, error = %e, "disruption mark not removed");
            }
        }
    }

    /// Why the NodeClaim drifted, if it did: static drift, requirements drift, its instance
    /// type gone (judged only when the pool's instance types resolved: `offered`), then the
    /// provider's answer (asked at most every `drift_recheck` per NodeClaim; a NodeClaim not
    /// launched yet has not drifted).
    pub(super) async fn drift_of(
        &self,
        nc: &NodeClaim,
        pool: &NodePool,
        offered: Option<&Vec<Arc<InstanceType>>>,
        now: Timestamp,
    ) -> Option<String> {
        let launched = nc
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.is_true(LAUNCHED));
        if !launched {
            return None;
        }
        if let Some(r) = drift::computable(nc, pool, offered.map(Vec::as_slice), now) {
            return Some(r.to_owned());
        }
        let uid = nc.metadata.uid.clone().unwrap_or_default();
        let cached = lock(&self.provider_drift).get(&uid).cloned();
        if let Some((at, answer)) = &cached
            && at.elapsed() < self.config.drift_recheck
        {
            return answer.clone();
        }
        match self.provider.is_drifted(nc).await {
            Ok(answer) => {
                lock(&self.provider_drift).insert(uid, (Instant::now(), answer.clone()));
                answer
            }
            Err(e) => {
                tracing::debug!(nodeclaim = %nc.name_any(), error = %e, "drift not checked");
                // Keep the last answer (NotFound and transient errors are not drift).
                cached.and_then(|(_, a)| a)
            }
        }
    }

    /// Deletes NodeClaims past `spec.expireAfter` (spec §4.9: forceful, no budgets, no
    /// replacement first; the drain still respects PDBs unless a terminationGracePeriod ends it).
    /// Returns the nodes of the NodeClaims it deleted.
    pub(super) async fn expire(&self, snapshot: &Snapshot, now: Timestamp) -> BTreeSet<String> {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut expired = BTreeSet::new();
        for nc in &snapshot.node_claims {
            if nc.metadata.deletion_timestamp.is_some() || !is_ours(nc) {
                continue;
            }
            let at = match drift::expires_at(nc) {
                Ok(Some(at)) => at,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(nodeclaim = %nc.name_any(), error = %e, "expiry not evaluated");
                    continue;
                }
            };
            if at > now {
                continue;
            }
            let params = kube::api::DeleteParams {
                preconditions: nc.metadata.uid.clone().map(|uid| kube::api::Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..kube::api::DeleteParams::default()
            };
            match api.delete(&nc.name_any(), &params).await {
                Ok(_) => {
                    tracing::info!(nodeclaim = %nc.name_any(), expired_at = %at, "deleting expired nodeclaim");
                    if let Some(node) = nc.status.as_ref().and_then(|s| s.node_name.clone()) {
                        expired.insert(node);
                    }
                    self.metrics
                        .nodeclaims_disrupted
                        .get_or_create(&crate::metrics::DisruptedLabels {
                            reason: "expired".into(),
                            nodepool: nc.labels().get(NODE_POOL).cloned().unwrap_or_default(),
                            capacity_type: nc
                                .labels()
                                .get(scheduling::labels::CAPACITY_TYPE)
                                .cloned()
                                .unwrap_or_default(),
                        })
                        .inc();
                }
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => {
                    tracing::warn!(nodeclaim = %nc.name_any(), error = %e, "expired nodeclaim not deleted")
                }
            }
        }
        expired
    }

    /// Writes `Consolidatable` and `lastPodEventTime` where they changed.
    pub(super) async fn write_conditions(
        &self,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        now: Timestamp,
    ) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        for nc in &snapshot.node_claims {
            if nc.metadata.deletion_timestamp.is_some() || !is_ours(nc) {
                continue;
            }
            let Some(pool) = nc.labels().get(NODE_POOL).and_then(|p| {
                snapshot
                    .node_pools
                    .iter()
                    .find(|n| n.metadata.name.as_deref() == Some(p))
            }) else {
                continue;
            };
            let node = nc.status.as_ref().and_then(|s| s.node_name.as_deref());
            let last = node.and_then(|n| self.state.last_pod_event(n));
            let stored = nc
                .status
                .as_ref()
                .and_then(|s| s.last_pod_event_time.as_ref())
                .map(|t| t.0);
            // Written at most every 10 s per NodeClaim (upstream's rate), and only where it can
            // change a decision after a restart: with `consolidateAfter` 0 or Never it cannot
            // (this process evaluates with the events it saw), so the write is saved.
            let waits = matches!(
                consolidatable::consolidate_after(pool),
                Ok(Some(after)) if !after.is_zero()
            );
            let write_last = last.filter(|_| waits).filter(|l| {
                stored.is_none_or(|s| {
                    s.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(10))
                        .is_ok_and(|due| *l >= due)
                })
            });
            // Static pools are never consolidated: the condition is never set for them.
            let consolidation = if pool.spec.is_static() {
                Consolidation::Disabled("static NodePool".into())
            } else {
                consolidatable::evaluate(nc, pool, last, now)
            };
            let drifted = self
                .drift_of(nc, pool, its.get(&pool.name_any()), now)
                .await;
            let patch = writes::status_patch(nc, now, write_last, |set| {
                match &consolidation {
                    Consolidation::Consolidatable => {
                        set.set(CONSOLIDATABLE, ConditionStatus::True, CONSOLIDATABLE, "");
                    }
                    _ => set.clear(CONSOLIDATABLE),
                }
                match &drifted {
                    Some(reason) => set.set(DRIFTED, ConditionStatus::True, reason, reason),
                    None => set.clear(DRIFTED),
                }
            });
            let Some(patch) = patch else {
                continue;
            };
            match api
                .patch_status(
                    &nc.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {}
                // Another writer was first: the next pass sees its version.
                Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {}
                Err(e) => {
                    tracing::debug!(nodeclaim = %nc.name_any(), error = %e, "disruption conditions not written")
                }
            }
        }
        let nodes: BTreeSet<&str> = snapshot
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        self.state.forget_pod_events(|n| nodes.contains(n));
    }
}
