//! What a pass says: consolidation scores and moves, `ConsolidationApproved`,
//! `DisruptionBlocked` on blocked nodes, timed-out searches, and Events on candidates.
//!
//! Inputs: decisions and reasons from a pass. Outputs: metrics, Events and log lines only.

use super::*;

impl<P: CloudProvider + 'static> Disruption<P> {
    /// `karpenter_consolidation_moves_total` for each NodePool of a consolidation move
    /// (`approved`: the move was taken), and `karpenter_consolidation_score` for each Balanced
    /// one (labelled with the pool's own decision).
    pub(super) fn report_scores(&self, scores: &[PoolScore], approved: bool) {
        let decision = |ok: bool| if ok { "approved" } else { "rejected" }.to_owned();
        for p in scores {
            let labels = ScoreLabels {
                decision: decision(approved),
                nodepool: p.pool.clone(),
                policy: p.policy.clone(),
            };
            self.metrics
                .consolidation_moves
                .get_or_create(&labels)
                .inc();
            if let Some(score) = p.score {
                tracing::debug!(nodepool = %p.pool, nodes = ?p.nodes, score = score.value(), approved = score.approved(), "balanced consolidation score");
                self.metrics
                    .consolidation_score
                    .get_or_create(&ScoreLabels {
                        decision: decision(score.approved()),
                        ..labels
                    })
                    .observe(score.value());
            }
        }
    }

    /// `ConsolidationApproved` on the Node and NodeClaim of each candidate of a Balanced
    /// NodePool in `cmd`, with the pool's score.
    pub(super) fn approved_events(&self, cmd: &Command) {
        for p in &cmd.scores {
            let Some(score) = p.score else {
                continue;
            };
            for c in cmd.candidates.iter().filter(|c| p.nodes.contains(&c.node)) {
                self.on_candidate(c, &|| {
                    Message::normal(CONSOLIDATION_APPROVED, score.to_string())
                });
            }
        }
    }

    pub(super) fn observe(&self, method: &str, m: Method, started: Instant) {
        self.metrics
            .disruption_evaluation_duration
            .get_or_create(&EvaluationLabels {
                method: method.into(),
                consolidation_type: m.label().into(),
            })
            .observe(started.elapsed().as_secs_f64());
    }

    pub(super) fn report_blocked(&self, snapshot: &Snapshot, blocked: &[Blocked]) {
        for b in blocked.iter().filter(|b| b.notable) {
            tracing::debug!(node = %b.node, reason = %b.reason, "disruption blocked");
            if let Some(node) = snapshot
                .nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(&b.node))
            {
                self.events.publish(
                    node,
                    Message::normal(DISRUPTION_BLOCKED, b.reason.clone()).dedupe_for(EVENT_DEDUPE),
                );
            }
            if let Some(nc) = b.node_claim.as_deref().and_then(|name| {
                snapshot
                    .node_claims
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(name))
            }) {
                self.events.publish(
                    nc,
                    Message::normal(DISRUPTION_BLOCKED, b.reason.clone()).dedupe_for(EVENT_DEDUPE),
                );
            }
        }
    }

    /// Counts a consolidation search its time limit stopped, and says so.
    pub(super) fn timed_out(&self, method: Method) {
        tracing::info!(method = ?method, "consolidation search stopped by its time limit");
        self.metrics
            .disruption_consolidation_timeouts
            .get_or_create(&ConsolidationTypeLabels {
                consolidation_type: method.label().into(),
            })
            .inc();
    }

    pub(super) fn event_on_node(&self, node: &str, message: Message) {
        if let Some(n) = self
            .state
            .nodes()
            .get(&kube::runtime::reflector::ObjectRef::new(node))
        {
            self.events.publish(&*n, message);
        }
    }

    /// Publishes `reason` with `note` on every candidate's Node and NodeClaim.
    pub(super) fn on_candidates(&self, cmd: &Command, reason: &'static str, note: &str) {
        for c in &cmd.candidates {
            self.on_candidate(c, &|| {
                Message::normal(reason, note.to_owned()).dedupe_for(EVENT_DEDUPE)
            });
        }
    }

    /// Publishes `message()` on the candidate's Node and NodeClaim.
    pub(super) fn on_candidate(&self, c: &Candidate, message: &dyn Fn() -> Message) {
        self.event_on_node(&c.node, message());
        if let Some(nc) = self
            .state
            .node_claims()
            .get(&kube::runtime::reflector::ObjectRef::new(&c.node_claim))
        {
            self.events.publish(&*nc, message());
        }
    }
}
