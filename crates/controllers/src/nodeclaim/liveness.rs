//! Liveness (spec §4.5): delete NodeClaims that do not launch or register in time.
//!
//! Responsibility: [`verdict`] (pure) — nothing once `Registered` is True; otherwise the
//! NodeClaim expires when `Launched` has not been True for `launch_timeout` since its last
//! transition (`launch_timeout`) or `Registered` has not been True for `registration_timeout`
//! since its last transition (`registration_timeout`), else the reconcile is requeued at the
//! nearest deadline. An expired NodeClaim is deleted and counted in `nodeclaims_disrupted`.
//! Timers use condition transition times, not the creation time.
//! Inputs: the conditions, "now", [`LifecycleConfig`]. Outputs: a verdict; a delete.

use std::time::Duration;

use api::common::{Condition, ConditionStatus};
use api::well_known::conditions::{LAUNCHED, REGISTERED};
use k8s_openapi::jiff::Timestamp;

use super::context::{Ctx, LifecycleConfig};
use super::error::Error;
use super::work::{Flow, Work, delete_node_claim};

/// `nodeclaims_disrupted` reason when launching took too long.
pub const LAUNCH_TIMEOUT: &str = "launch_timeout";
/// `nodeclaims_disrupted` reason when registering took too long.
pub const REGISTRATION_TIMEOUT: &str = "registration_timeout";

/// What liveness decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Registered: nothing to watch.
    Alive,
    /// Look again after this long.
    Wait(Duration),
    /// Delete the NodeClaim, counted with this reason.
    Expired(&'static str),
}

/// Time left until `timeout` has passed since `condition`'s last transition (zero when passed).
fn remaining(condition: Option<&Condition>, now: Timestamp, timeout: Duration) -> Duration {
    let since = condition.map_or(Duration::ZERO, |c| {
        Duration::try_from(now.duration_since(c.last_transition_time.0)).unwrap_or(Duration::ZERO)
    });
    timeout.saturating_sub(since)
}

/// The liveness verdict for these conditions at `now`.
#[must_use]
pub fn verdict(conditions: &[Condition], now: Timestamp, config: &LifecycleConfig) -> Verdict {
    let get = |t: &str| conditions.iter().find(|c| c.type_ == t);
    let is_true = |t: &str| get(t).is_some_and(|c| c.status == ConditionStatus::True);
    if is_true(REGISTERED) {
        return Verdict::Alive;
    }
    let mut wait = Duration::MAX;
    if !is_true(LAUNCHED) {
        let left = remaining(get(LAUNCHED), now, config.launch_timeout);
        if left.is_zero() {
            return Verdict::Expired(LAUNCH_TIMEOUT);
        }
        wait = wait.min(left);
    }
    let left = remaining(get(REGISTERED), now, config.registration_timeout);
    if left.is_zero() {
        return Verdict::Expired(REGISTRATION_TIMEOUT);
    }
    Verdict::Wait(wait.min(left))
}

/// The liveness phase.
pub(crate) async fn reconcile<P>(work: &mut Work, ctx: &Ctx<P>) -> Result<Flow, Error> {
    match verdict(work.conditions.conditions(), ctx.clock.now(), &ctx.config) {
        Verdict::Alive => Ok(Flow::Continue),
        Verdict::Wait(after) => {
            work.requeue_after(after);
            Ok(Flow::Continue)
        }
        Verdict::Expired(reason) => {
            tracing::info!(
                nodeclaim = work.name(),
                reason,
                "nodeclaim did not become ready in time"
            );
            delete_node_claim(ctx, &work.nc, reason).await?;
            Ok(Flow::Deleted)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::conditions::ConditionSet;
    use crate::nodeclaim::work::DEPENDENTS;
    use api::well_known::conditions::reasons::NODE_NOT_FOUND;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_000_000 + secs).unwrap()
    }

    fn config() -> LifecycleConfig {
        LifecycleConfig::default()
    }

    #[test]
    fn a_claim_that_never_launches_expires_after_the_launch_timeout() {
        let set = ConditionSet::new(None, DEPENDENTS, Some(1), at(0));
        let c = set.conditions();
        assert_eq!(
            verdict(c, at(0), &config()),
            Verdict::Wait(Duration::from_secs(300))
        );
        assert_eq!(
            verdict(c, at(299), &config()),
            Verdict::Wait(Duration::from_secs(1))
        );
        assert_eq!(
            verdict(c, at(300), &config()),
            Verdict::Expired(LAUNCH_TIMEOUT)
        );
    }

    #[test]
    fn a_launch_failure_restarts_the_launch_timer() {
        let set = ConditionSet::new(None, DEPENDENTS, Some(1), at(0));
        let mut set = ConditionSet::new(Some(set.conditions()), DEPENDENTS, Some(1), at(200));
        set.set_unknown(LAUNCHED, "LaunchFailed", "boom");
        assert_eq!(
            verdict(set.conditions(), at(400), &config()),
            Verdict::Wait(Duration::from_secs(100))
        );
    }

    #[test]
    fn a_launched_claim_expires_after_the_registration_timeout_since_its_last_transition() {
        let set = ConditionSet::new(None, DEPENDENTS, Some(1), at(0));
        let mut set = ConditionSet::new(Some(set.conditions()), DEPENDENTS, Some(1), at(60));
        set.set_true(LAUNCHED);
        set.set_unknown(
            REGISTERED,
            NODE_NOT_FOUND,
            "Node not registered with cluster",
        );
        let c = set.conditions();
        assert_eq!(
            verdict(c, at(600), &config()),
            Verdict::Wait(Duration::from_secs(360))
        );
        assert_eq!(
            verdict(c, at(960), &config()),
            Verdict::Expired(REGISTRATION_TIMEOUT)
        );
    }

    #[test]
    fn registered_claims_are_alive() {
        let mut set = ConditionSet::new(None, DEPENDENTS, Some(1), at(0));
        set.set_true(LAUNCHED);
        set.set_true(REGISTERED);
        assert_eq!(
            verdict(set.conditions(), at(100_000), &config()),
            Verdict::Alive
        );
    }
}
