//! Starting a decided command: consolidation and emptiness commands wait the validation
//! delay and are checked again against a fresh snapshot ([`crate::disruption::validation`]);
//! a command that still holds is reserved, recorded ([`Record`]) and carried out by the
//! orchestrator in its own task.
//!
//! Inputs: the [`Command`] a method decided. Outputs: whether it started; Events
//! `ConsolidationCandidate` / `ConsolidationRejected`, the decision and failed-validation
//! metrics.

use super::*;

impl<P: CloudProvider + 'static> Disruption<P> {
    /// Validates a command after the delay (consolidation and emptiness), then starts it.
    pub(super) async fn validate_and_start(
        self: &Arc<Self>,
        cmd: Command,
        pools: Vec<NodePool>,
    ) -> bool {
        let consolidating = matches!(cmd.method, Method::SingleNode | Method::MultiNode);
        let summary = cmd.summary();
        if consolidating {
            self.on_candidates(&cmd, CONSOLIDATION_CANDIDATE, &summary);
        }
        let candidates = consolidating.then(|| cmd.clone());
        let cmd = match self.validate(cmd).await {
            Ok(cmd) => cmd,
            Err((method, why)) => {
                if let Some(candidates) = &candidates {
                    self.on_candidates(
                        candidates,
                        CONSOLIDATION_REJECTED,
                        &format!("{summary}: rejected at validation: {why}"),
                    );
                }
                tracing::info!(reason = %why, "disruption command abandoned at validation");
                self.metrics
                    .disruption_failed_validations
                    .get_or_create(&ConsolidationTypeLabels {
                        consolidation_type: method.label().into(),
                    })
                    .inc();
                return false;
            }
        };
        if !self.orchestrator.reserve(&cmd) {
            return false;
        }
        self.metrics
            .disruption_decisions
            .get_or_create(&crate::metrics::DecisionLabels {
                decision: cmd.decision().to_string(),
                reason: reason_name(cmd.reason()).to_lowercase(),
                consolidation_type: cmd.method.label().into(),
            })
            .inc();
        tracing::info!(
            method = ?cmd.method,
            decision = %cmd.decision(),
            nodes = ?cmd.nodes(),
            replacements = ?cmd.replacement_types(),
            savings = cmd.savings,
            computed_ms = cmd.took.as_millis() as u64,
            "disrupting node(s)"
        );
        let index = {
            let mut records = lock(&self.records);
            if records.len() >= 10_000 {
                records.remove(0);
            }
            records.push(Record {
                at: Instant::now(),
                method: cmd.method,
                decision: cmd.decision(),
                nodes: cmd.nodes(),
                replacements: cmd.replacement_types(),
                savings: cmd.savings,
                computed: cmd.took,
                outcome: None,
            });
            records.len() - 1
        };
        let orchestrator = self.orchestrator.clone();
        let records = Arc::clone(&self.records);
        tokio::spawn(async move {
            let outcome = orchestrator.execute(cmd, pools).await;
            let mut records = lock(&records);
            if let Some(r) = records.get_mut(index) {
                r.outcome = Some(match outcome {
                    Outcome::Deleted { .. } => Ok(()),
                    Outcome::RolledBack(why) => Err(why),
                });
            }
        });
        true
    }

    /// After the validation delay, against a fresh snapshot ([`validation`]): emptiness keeps
    /// the candidates still empty within a fresh budget; consolidation needs all of them, a
    /// fresh simulation deciding the same, and the Balanced pools' approval again.
    pub(super) async fn validate(
        self: &Arc<Self>,
        cmd: Command,
    ) -> Result<Command, (Method, String)> {
        let method = cmd.method;
        if method == Method::Drift {
            return Ok(cmd);
        }
        tokio::time::sleep(self.config.validation_delay).await;
        self.wait_synced().await;
        let snapshot = self.state.snapshot();
        let now = self.clock.now();
        let its = self.instance_types(&snapshot.node_pools).await;
        let in_flight = lock(&self.orchestrator.in_flight).clone();
        let floors = self.floors(&snapshot, &in_flight).await;
        let (cands, _) =
            self.candidates_of(&snapshot, &its, &in_flight, &floors, now, Class::Graceful);
        let mut budgets = self.budgets(&snapshot, &in_flight, cmd.reason(), now);
        budgets.groups.clone_from(floors.rooms());
        let fresh = validation::recheck(&cmd, &cands, &mut budgets).map_err(|why| (method, why))?;
        if method == Method::Emptiness {
            return Ok(Command {
                candidates: fresh,
                ..cmd
            });
        }
        let this = Arc::clone(self);
        let pools = snapshot.node_pools.clone();
        tokio::task::spawn_blocking(move || {
            let world = this.world(&snapshot, &its, now);
            validation::resimulated(&world, cmd, &fresh, &cands, &pools)
        })
        .await
        .map_err(|e| (method, e.to_string()))?
        .map_err(|why| (method, why))
    }
}
