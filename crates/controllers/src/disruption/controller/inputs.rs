//! What a pass decides from: the simulated [`World`], the candidates of a class, the groups'
//! minimum sizes ([`Floors`]) and the budget map of a reason (whose NodePools with nothing
//! allowed get a `DisruptionBlocked` Event, and whose figures go to the budget metrics).
//!
//! Inputs: a [`Snapshot`], the instance types per NodePool, the nodes in flight. Outputs: the
//! values above; metrics and Events as said.

use super::*;

impl<P: CloudProvider + 'static> Disruption<P> {
    pub(super) fn world(
        &self,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        now: Timestamp,
    ) -> World {
        let state = &self.state;
        let last = move |n: &str| state.last_pod_event(n);
        World::new(
            &Objects {
                cluster: ClusterObjects {
                    nodes: &snapshot.nodes,
                    node_claims: &snapshot.node_claims,
                    pods: &snapshot.pods,
                    daemon_sets: &snapshot.daemon_sets,
                    namespaces: &snapshot.namespaces,
                },
                node_pools: &snapshot.node_pools,
                pdbs: &snapshot.pdbs,
                instance_types: its,
                now,
                last_pod_event: Some(&last),
            },
            &self.well_known,
        )
        .with_policies(self.policies.0, self.policies.1)
        .with_spot_to_spot(self.config.spot_to_spot)
        .with_buffer_pods(&self.state.buffer_pods())
    }

    /// The minimum sizes of our nodes' groups: the provider's room per NodeClaim of ours with
    /// a node, less the NodeClaims already leaving (deleting, tainted, in flight).
    pub(super) async fn floors(&self, snapshot: &Snapshot, in_flight: &BTreeSet<String>) -> Floors {
        let tainted: BTreeSet<&str> = snapshot
            .nodes
            .iter()
            .filter(|n| writes::is_tainted(n))
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let mut answers = BTreeMap::new();
        let mut leaving = BTreeSet::new();
        for nc in snapshot.node_claims.iter().filter(|nc| is_ours(nc)) {
            let Some(node) = nc.status.as_ref().and_then(|s| s.node_name.as_deref()) else {
                continue;
            };
            let name = nc.name_any();
            if nc.metadata.deletion_timestamp.is_some()
                || tainted.contains(node)
                || in_flight.contains(node)
            {
                leaving.insert(name.clone());
            }
            let answer = self
                .provider
                .removal_room(nc)
                .await
                .map_err(|e| e.to_string());
            answers.insert(name, answer);
        }
        Floors::new(answers, &leaving)
    }

    pub(super) fn candidates_of(
        &self,
        snapshot: &Snapshot,
        its: &BTreeMap<String, Vec<Arc<InstanceType>>>,
        in_flight: &BTreeSet<String>,
        floors: &Floors,
        now: Timestamp,
        class: Class,
    ) -> (Vec<Candidate>, Vec<Blocked>) {
        let state = Arc::clone(&self.state);
        let nominated = move |n: &str| state.is_nominated(n);
        let state = Arc::clone(&self.state);
        let planned = move |claim: &str| state.planned_pods(claim);
        let state = Arc::clone(&self.state);
        let last = move |n: &str| state.last_pod_event(n);
        let (mut cands, blocked) = candidates(
            &Inputs {
                nodes: &snapshot.nodes,
                node_claims: &snapshot.node_claims,
                pods: &snapshot.pods,
                pdbs: &snapshot.pdbs,
                node_pools: &snapshot.node_pools,
                instance_types: its,
                in_flight,
                nominated: &nominated,
                planned: &planned,
                last_pod_event: &last,
                floors,
                now,
            },
            class,
        );
        // Virtual pods were placed on the node, or on its NodeClaim while it was in flight.
        for c in &mut cands {
            c.buffer_pods =
                self.state.buffer_pods_on(&c.node) + self.state.buffer_pods_on(&c.node_claim);
        }
        (cands, blocked)
    }

    pub(super) fn budgets(
        &self,
        snapshot: &Snapshot,
        in_flight: &BTreeSet<String>,
        reason: DisruptionReason,
        now: Timestamp,
    ) -> BudgetMap {
        let map = budget_map(
            &snapshot.nodes,
            &snapshot.node_claims,
            &snapshot.node_pools,
            in_flight,
            reason,
            now,
        );
        let name = reason_name(reason);
        for (pool, b) in &map.pools {
            let labels = PoolReasonLabels {
                nodepool: pool.clone(),
                reason: name.to_lowercase(),
            };
            self.metrics
                .nodepools_allowed_disruptions
                .get_or_create(&labels)
                .set(i64::from(b.allowed));
            self.metrics
                .nodepools_nodes_consuming_budgets
                .get_or_create(&labels)
                .set(i64::try_from(b.disrupting).unwrap_or(0));
        }
        for (pool, e) in &map.errors {
            tracing::warn!(nodepool = %pool, error = %e, "invalid disruption budget (allows nothing)");
        }
        // A budget that allows nothing is the NodePool's news, not each node's (as upstream).
        let blocked = map
            .pools
            .iter()
            .filter(|(_, b)| b.allowed <= 0 && b.nodes > 0)
            .map(|(pool, _)| pool);
        for pool in blocked {
            if let Some(np) = snapshot
                .node_pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(pool.as_str()))
            {
                self.events.publish(
                    np,
                    Message::normal(DISRUPTION_BLOCKED, methods::budget_blocked(reason))
                        .dedupe_for(EVENT_DEDUPE),
                );
            }
        }
        map
    }
}
