//! Fault injection: errors, latency and broken watches on chosen verbs and resources.
//!
//! Responsibility: decide, for each API request the HTTP front receives, whether to delay it,
//! fail it (500 InternalError, 429 TooManyRequests with `Retry-After`, 409 Conflict, 403
//! Forbidden as a missing RBAC rule gives), answer a watch with 410 Gone, or end a watch early
//! (a forced disconnect after an event). Every random
//! choice comes from one seeded [`Rng`] per server, so the same seed and the same sequence of
//! requests give the same faults. Counters say what was injected.
//! Inputs: a [`FaultConfig`] and each request's [`Verb`] and resource. Outputs: a [`Decision`].
//! Concurrent clients interleave their requests nondeterministically; reproducibility holds for
//! a given request order.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{ApiError, GroupResource};
use crate::rng::Rng;
use crate::state::Endpoint;

/// An API verb, as RBAC names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// GET of one object (or subresource).
    Get,
    /// GET of a collection.
    List,
    /// A watch.
    Watch,
    /// POST (including `binding` and `eviction`).
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

/// The error an injected fault answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultError {
    /// 500 InternalError.
    #[default]
    Internal,
    /// 429 TooManyRequests (with `Retry-After: 1`).
    TooManyRequests,
    /// 409 Conflict.
    Conflict,
    /// 403 Forbidden (as a missing RBAC rule answers).
    Forbidden,
}

/// One fault rule. A request matches when its verb is in `verbs` (empty: any) and its
/// resource in `resources` (empty: any). Resources are written as RBAC does — `pods`,
/// `pods/binding`, `machinedeployments.cluster.x-k8s.io/scale` — or `*`; a plain resource
/// does not match its subresources.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultRule {
    /// Verbs; empty matches every verb.
    pub verbs: Vec<Verb>,
    /// Resources; empty matches every resource.
    pub resources: Vec<String>,
    /// Probability that a matching request fails with `error`.
    pub error_rate: f64,
    /// The error.
    pub error: FaultError,
    /// Latency added to every matching request.
    pub latency: Duration,
    /// Probability, per event sent on a matching watch, that the watch ends right after it.
    pub watch_disconnect_rate: f64,
    /// Probability that a matching watch is answered with a 410 Gone error event.
    pub watch_gone_rate: f64,
}

/// The faults of one server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    /// The seed of the random choices.
    pub seed: u64,
    /// Rules; every matching rule applies (latencies add up, the first error wins).
    pub rules: Vec<FaultRule>,
}

/// What to do with one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// Wait this long first.
    pub latency: Duration,
    /// Fail with this error.
    pub error: Option<ApiError>,
    /// (Watches) answer with 410 Gone.
    pub gone: bool,
    /// (Watches) the per-event disconnect probability.
    pub disconnect_rate: f64,
}

/// How many faults were injected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Requests failed.
    pub errors: u64,
    /// Requests delayed.
    pub delayed: u64,
    /// Watches answered with 410.
    pub gone: u64,
    /// Watches ended early.
    pub disconnects: u64,
}

#[derive(Debug)]
struct Inner {
    config: FaultConfig,
    rng: Rng,
    counts: FaultCounts,
}

/// A server's fault injector.
#[derive(Debug)]
pub struct Faults {
    inner: Mutex<Inner>,
}

fn matches_resource(pattern: &str, ep: &Endpoint, sub: Option<&str>) -> bool {
    if pattern == "*" {
        return true;
    }
    let (res, want_sub) = match pattern.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (pattern, None),
    };
    let (plural, group) = match res.split_once('.') {
        Some((p, g)) => (p, Some(g)),
        None => (res, None),
    };
    plural == ep.plural
        && group.is_none_or(|g| g == ep.group)
        && (want_sub == sub || want_sub == Some("*"))
}

impl Faults {
    /// An injector with this configuration.
    pub fn new(config: FaultConfig) -> Self {
        Self {
            inner: Mutex::new(Inner {
                rng: Rng::new(config.seed),
                config,
                counts: FaultCounts::default(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Replace the configuration and restart the random sequence from its seed.
    pub fn set(&self, config: FaultConfig) {
        let mut inner = self.lock();
        inner.rng = Rng::new(config.seed);
        inner.config = config;
    }

    /// What was injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.lock().counts
    }

    /// Decide the faults of one request.
    pub fn decide(
        &self,
        verb: Verb,
        ep: &Endpoint,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Decision {
        let mut inner = self.lock();
        let Inner {
            config,
            rng,
            counts,
        } = &mut *inner;
        let mut d = Decision::default();
        for rule in &config.rules {
            let verb_ok = rule.verbs.is_empty() || rule.verbs.contains(&verb);
            let res_ok = rule.resources.is_empty()
                || rule.resources.iter().any(|r| matches_resource(r, ep, sub));
            if !verb_ok || !res_ok {
                continue;
            }
            d.latency += rule.latency;
            if d.error.is_none() && rng.chance(rule.error_rate) {
                d.error = Some(injected(rule.error, ep, name));
            }
            if verb == Verb::Watch {
                if rng.chance(rule.watch_gone_rate) {
                    d.gone = true;
                }
                d.disconnect_rate = d.disconnect_rate.max(rule.watch_disconnect_rate);
            }
        }
        if d.error.is_some() {
            counts.errors += 1;
        } else if d.gone {
            counts.gone += 1;
        }
        if !d.latency.is_zero() {
            counts.delayed += 1;
        }
        d
    }

    /// Whether a watch with this disconnect probability ends after the event just sent.
    pub fn disconnect_now(&self, rate: f64) -> bool {
        if rate <= 0.0 {
            return false;
        }
        let mut inner = self.lock();
        let hit = inner.rng.chance(rate);
        if hit {
            inner.counts.disconnects += 1;
        }
        hit
    }
}

fn injected(kind: FaultError, ep: &Endpoint, name: Option<&str>) -> ApiError {
    match kind {
        FaultError::Internal => ApiError::Internal("injected fault".into()),
        FaultError::TooManyRequests => ApiError::TooManyRequests {
            message: "Too many requests, please try again later. (injected fault)".into(),
            causes: Vec::new(),
        },
        FaultError::Conflict => ApiError::Conflict {
            resource: GroupResource::new(ep.group.clone(), ep.plural.clone()),
            name: name.unwrap_or_default().to_owned(),
            why: "the object has been modified; please apply your changes to the latest version and try again (injected fault)".into(),
        },
        FaultError::Forbidden => ApiError::Forbidden {
            resource: GroupResource::new(ep.group.clone(), ep.plural.clone()),
            name: name.unwrap_or_default().to_owned(),
            why: "the service account may not do this (injected fault)".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> Endpoint {
        Endpoint::namespaced("", "v1", "pods", "default")
    }

    #[test]
    fn resources_match_like_rbac() {
        let md = Endpoint::namespaced("cluster.x-k8s.io", "v1beta1", "machinedeployments", "d");
        assert!(matches_resource("pods", &pods(), None));
        assert!(!matches_resource("pods", &pods(), Some("binding")));
        assert!(matches_resource("pods/binding", &pods(), Some("binding")));
        assert!(matches_resource("pods/*", &pods(), Some("status")));
        assert!(matches_resource(
            "machinedeployments.cluster.x-k8s.io/scale",
            &md,
            Some("scale")
        ));
        assert!(!matches_resource("machinedeployments.apps", &md, None));
        assert!(matches_resource("*", &md, Some("scale")));
    }

    #[test]
    fn same_seed_same_faults() {
        let config = FaultConfig {
            seed: 42,
            rules: vec![FaultRule {
                verbs: vec![Verb::Create],
                error_rate: 0.5,
                error: FaultError::TooManyRequests,
                ..FaultRule::default()
            }],
        };
        let run = || {
            let f = Faults::new(config.clone());
            (0..32)
                .map(|_| f.decide(Verb::Create, &pods(), None, None).error.is_some())
                .collect::<Vec<_>>()
        };
        let first = run();
        assert_eq!(first, run());
        assert!(first.iter().any(|e| *e) && first.iter().any(|e| !*e));
        let f = Faults::new(config);
        assert!(
            f.decide(Verb::Get, &pods(), Some("p"), None)
                .error
                .is_none()
        );
    }
}
