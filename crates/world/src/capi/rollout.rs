//! The MachineDeployment rollout, as Cluster API v1.12–v1.14's rollout planner decides it: how
//! many replicas each MachineSet of a deployment should have.
//!
//! Responsibility: the pure rules, no I/O. Which MachineSet is the deployment's *new* one
//! ([`rollout_fields`] equal: the template's `version`, `bootstrap`, `infrastructureRef` by
//! group, kind and name, and `failureDomain`; labels, annotations, taints and timeouts never
//! roll out); then, per strategy:
//! - **RollingUpdate** (`maxSurge` 1, `maxUnavailable` 0 by default; percentages of the
//!   replicas, surge rounded up, unavailable down; both 0 makes unavailable 1): a new
//!   MachineSet above the target is cut to it; one below grows while the sum over all
//!   MachineSets of `max(spec, status)` stays within target + surge; old MachineSets shrink,
//!   **oldest first**, within a budget that keeps `target − maxUnavailable` Machines
//!   available (unavailable replicas go first, then any).
//! - **OnDelete**: the new MachineSet takes what the old ones do not hold
//!   (`target − Σ max(spec, status)`); an old MachineSet is lowered to the Machines it still
//!   has; any excess over the target is taken from old MachineSets, **oldest first**, without
//!   availability checks. Old MachineSets create nothing (`disable-machine-create`).
//!
//! So lowering a deployment's replicas mid-rollout takes the replica from the oldest old
//! MachineSet, whatever `delete-machine` marks elsewhere — the behaviour the provider must
//! never be surprised by.
//! Inputs: the target replicas, the strategy, the MachineSets as [`SetView`]s. Outputs: a
//! [`Plan`].

use serde_json::Value;

use crate::objects::text;

/// A deployment's rollout strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Replace Machines gradually, within surge and unavailability bounds.
    RollingUpdate {
        /// Machines allowed above the target.
        max_surge: i64,
        /// Machines allowed to be unavailable.
        max_unavailable: i64,
    },
    /// Old Machines are replaced only when someone deletes them.
    OnDelete,
}

/// An int-or-percent value of `replicas` (`up`: round up).
fn resolve(v: Option<&Value>, replicas: i64, default: i64, up: bool) -> i64 {
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(p) if up => (p * replicas + 99) / 100,
            Some(p) => p * replicas / 100,
            None => s.parse().unwrap_or(default),
        },
        _ => default,
    }
}

/// The strategy of a deployment (v1beta2 `spec.rollout.strategy`, v1beta1 `spec.strategy`),
/// resolved against its target replicas.
pub fn strategy(md: &Value, replicas: i64) -> Strategy {
    let s = md
        .pointer("/spec/rollout/strategy")
        .or_else(|| md.pointer("/spec/strategy"));
    let kind = s.and_then(|s| s.get("type")).and_then(Value::as_str);
    if kind == Some("OnDelete") {
        return Strategy::OnDelete;
    }
    let rolling = s.and_then(|s| s.get("rollingUpdate"));
    let surge = resolve(rolling.and_then(|r| r.get("maxSurge")), replicas, 1, true);
    let mut unavailable = resolve(
        rolling.and_then(|r| r.get("maxUnavailable")),
        replicas,
        0,
        false,
    );
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Strategy::RollingUpdate {
        max_surge: surge.max(0),
        max_unavailable: unavailable.clamp(0, replicas.max(0)),
    }
}

/// A reference's identity for rollouts: group, kind and name (an API version change never
/// rolls out).
fn reference(r: Option<&Value>) -> Value {
    let Some(r) = r else { return Value::Null };
    let group = r
        .get("apiGroup")
        .and_then(Value::as_str)
        .or_else(|| {
            r.get("apiVersion")
                .and_then(Value::as_str)
                .map(|v| v.rsplit_once('/').map_or("", |(g, _)| g))
        })
        .unwrap_or_default();
    serde_json::json!({"group": group, "kind": r.get("kind"), "name": r.get("name")})
}

/// What of a Machine template rolls out when it changes.
pub fn rollout_fields(template: &Value) -> Value {
    let spec = template.get("spec").unwrap_or(&Value::Null);
    let bootstrap = spec.get("bootstrap");
    serde_json::json!({
        "version": spec.get("version"),
        "bootstrapConfig": reference(bootstrap.and_then(|b| b.get("configRef"))),
        "bootstrapSecret": bootstrap.and_then(|b| b.get("dataSecretName")),
        "infrastructure": reference(spec.get("infrastructureRef")),
        "failureDomain": spec.get("failureDomain"),
    })
}

/// One MachineSet as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetView {
    /// Its name.
    pub name: String,
    /// `metadata.creationTimestamp` (RFC 3339, so it orders as text).
    pub created: String,
    /// `spec.replicas`.
    pub spec: i64,
    /// `status.replicas`: its Machines, deleting ones included.
    pub status: i64,
    /// `status.availableReplicas`.
    pub available: i64,
}

impl SetView {
    /// The view of a MachineSet object.
    pub fn of(ms: &Value) -> SetView {
        let int = |p: &str| ms.pointer(p).and_then(Value::as_i64).unwrap_or(0);
        SetView {
            name: sim::object::name(ms).to_owned(),
            created: text(ms, ".metadata.creationTimestamp")
                .unwrap_or_default()
                .to_owned(),
            spec: int("/spec/replicas"),
            status: int("/status/replicas"),
            available: int("/status/availableReplicas"),
        }
    }
}

/// The replicas each MachineSet should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The new MachineSet's replicas (it is created with them when it does not exist).
    pub new: i64,
    /// Each old MachineSet's replicas, by name.
    pub old: Vec<(String, i64)>,
}

/// The plan for `target` replicas: `new` is the up-to-date MachineSet (if any), `old` the
/// others.
pub fn plan(target: i64, strategy: Strategy, new: Option<&SetView>, old: &[SetView]) -> Plan {
    let mut old: Vec<SetView> = old.to_vec();
    old.sort_by(|a, b| (&a.created, &a.name).cmp(&(&b.created, &b.name)));
    let (new_spec, new_status, new_available) =
        new.map_or((0, 0, 0), |n| (n.spec, n.status, n.available));
    let current: i64 =
        new_spec.max(new_status) + old.iter().map(|s| s.spec.max(s.status)).sum::<i64>();
    let mut old_specs: Vec<i64> = old.iter().map(|s| s.spec).collect();
    let new_target = match strategy {
        Strategy::RollingUpdate { max_surge, .. } => {
            if new_spec > target {
                target
            } else if new_spec < target && current < target + max_surge {
                new_spec + (target + max_surge - current).min(target - new_spec)
            } else {
                new_spec
            }
        }
        Strategy::OnDelete => {
            if new_spec > target {
                target
            } else {
                new_spec + (target - current).max(0)
            }
        }
    };
    match strategy {
        Strategy::RollingUpdate {
            max_unavailable, ..
        } => {
            if old_specs.iter().sum::<i64>() > 0 {
                let min_available = (target - max_unavailable).max(0);
                let total_spec = new_spec + old_specs.iter().sum::<i64>();
                let mut total_available =
                    new_available + old.iter().map(|s| s.available).sum::<i64>();
                let pending = (new_status - new_spec.min(new_target)).max(0)
                    + old.iter().map(|s| (s.status - s.spec).max(0)).sum::<i64>();
                let new_unavailable = (new_target - new_available).max(0);
                let mut budget = (total_spec - pending - min_available - new_unavailable).max(0);
                for only_unavailable in [true, false] {
                    for (set, spec) in old.iter().zip(old_specs.iter_mut()) {
                        if budget == 0 || *spec == 0 {
                            continue;
                        }
                        let mut cut = if only_unavailable {
                            (*spec - set.available).max(0).min(budget)
                        } else {
                            (*spec).min(budget)
                        };
                        if cut == 0 {
                            continue;
                        }
                        let mut next = *spec - cut;
                        let existing = set.status - next;
                        if set.available > 0 && existing > total_available - min_available {
                            next = set.status - (total_available - min_available).max(0);
                            next = next.clamp(0, *spec);
                            cut = *spec - next;
                        }
                        total_available -= set.available.min((set.status - next).max(0));
                        budget -= cut;
                        *spec = next;
                    }
                }
            }
        }
        Strategy::OnDelete => {
            for (set, spec) in old.iter().zip(old_specs.iter_mut()) {
                if *spec > set.status {
                    *spec = set.status;
                }
            }
            let mut excess = old_specs.iter().sum::<i64>() + new_target - target;
            for spec in &mut old_specs {
                if excess <= 0 {
                    break;
                }
                let cut = (*spec).min(excess);
                *spec -= cut;
                excess -= cut;
            }
        }
    }
    Plan {
        new: new_target,
        old: old.iter().map(|s| s.name.clone()).zip(old_specs).collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn set(name: &str, created: &str, spec: i64, status: i64, available: i64) -> SetView {
        SetView {
            name: name.into(),
            created: created.into(),
            spec,
            status,
            available,
        }
    }

    const ROLLING: Strategy = Strategy::RollingUpdate {
        max_surge: 1,
        max_unavailable: 0,
    };

    #[test]
    fn strategies_resolve_like_the_webhook() {
        assert_eq!(strategy(&json!({}), 3), ROLLING);
        let on_delete = json!({"spec": {"strategy": {"type": "OnDelete"}}});
        assert_eq!(strategy(&on_delete, 3), Strategy::OnDelete);
        let v1beta2 = json!({"spec": {"rollout": {"strategy": {"type": "OnDelete"}}}});
        assert_eq!(strategy(&v1beta2, 3), Strategy::OnDelete);
        let percent = json!({"spec": {"strategy": {"rollingUpdate":
            {"maxSurge": "25%", "maxUnavailable": "25%"}}}});
        assert_eq!(
            strategy(&percent, 10),
            Strategy::RollingUpdate {
                max_surge: 3,
                max_unavailable: 2
            }
        );
        let zeros = json!({"spec": {"strategy": {"rollingUpdate":
            {"maxSurge": 0, "maxUnavailable": 0}}}});
        assert_eq!(
            strategy(&zeros, 3),
            Strategy::RollingUpdate {
                max_surge: 0,
                max_unavailable: 1
            }
        );
    }

    #[test]
    fn only_version_bootstrap_infrastructure_and_failure_domain_roll_out() {
        let t = |extra: Value| {
            let mut v = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"version": "v1.33.0",
                "bootstrap": {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
                    "kind": "KubeadmConfigTemplate", "name": "b"}},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                    "kind": "DockerMachineTemplate", "name": "i"}}});
            json_patch::merge(&mut v, &extra);
            rollout_fields(&v)
        };
        let base = t(json!({}));
        assert_eq!(base, t(json!({"metadata": {"labels": {"a": "c"}}})));
        assert_eq!(base, t(json!({"spec": {"taints": [{"key": "k"}]}})));
        assert_eq!(
            base,
            t(
                json!({"spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2"}}})
            ),
            "an API version change does not roll out"
        );
        let v1beta2 = t(
            json!({"spec": {"infrastructureRef": {"apiVersion": null, "apiGroup": "infrastructure.cluster.x-k8s.io"}}}),
        );
        assert_eq!(base, v1beta2, "v1beta2 references name the group");
        assert_ne!(base, t(json!({"spec": {"version": "v1.34.0"}})));
        assert_ne!(
            base,
            t(json!({"spec": {"infrastructureRef": {"name": "i2"}}}))
        );
        assert_ne!(base, t(json!({"spec": {"failureDomain": "z2"}})));
    }

    #[test]
    fn one_set_scales_to_the_target() {
        let s = set("a", "1", 3, 3, 3);
        assert_eq!(plan(5, ROLLING, Some(&s), &[]).new, 5);
        assert_eq!(plan(2, ROLLING, Some(&s), &[]).new, 2);
        assert_eq!(plan(2, Strategy::OnDelete, Some(&s), &[]).new, 2);
        assert_eq!(plan(3, ROLLING, None, &[]).new, 3);
    }

    #[test]
    fn a_rolling_update_surges_then_replaces_available_machines() {
        // Template changed: the new set starts at the surge, the old keeps its 3.
        let old = set("old", "1", 3, 3, 3);
        let p = plan(3, ROLLING, None, std::slice::from_ref(&old));
        assert_eq!(p.new, 1);
        assert_eq!(p.old, vec![("old".into(), 3)]);
        // The new Machine became available: the old set loses one.
        let new = set("new", "2", 1, 1, 1);
        let p = plan(3, ROLLING, Some(&new), std::slice::from_ref(&old));
        assert_eq!(p.old, vec![("old".into(), 2)]);
        // Not available yet: nothing old goes (maxUnavailable 0).
        let new = set("new", "2", 1, 1, 0);
        let p = plan(3, ROLLING, Some(&new), std::slice::from_ref(&old));
        assert_eq!(p.old, vec![("old".into(), 3)]);
    }

    #[test]
    fn lowering_the_target_mid_rollout_takes_from_the_oldest_old_set() {
        // OnDelete, new set 2 (all up), two old sets: 3 → 2 replicas... the oldest loses it.
        let older = set("older", "1", 1, 1, 1);
        let old = set("old", "2", 1, 1, 1);
        let new = set("new", "3", 2, 2, 2);
        let p = plan(
            3,
            Strategy::OnDelete,
            Some(&new),
            &[old.clone(), older.clone()],
        );
        assert_eq!(p.new, 2, "the new set keeps its Machines");
        assert_eq!(p.old, vec![("older".into(), 0), ("old".into(), 1)]);
        // RollingUpdate likewise, once the budget allows.
        let p = plan(3, ROLLING, Some(&new), &[old, older]);
        assert_eq!(p.new, 2);
        assert_eq!(p.old, vec![("older".into(), 0), ("old".into(), 1)]);
    }

    #[test]
    fn on_delete_replaces_only_what_was_deleted() {
        // A template change under OnDelete: nothing new until an old Machine goes.
        let old = set("old", "1", 3, 3, 3);
        let p = plan(3, Strategy::OnDelete, None, std::slice::from_ref(&old));
        assert_eq!((p.new, p.old.clone()), (0, vec![("old".into(), 3)]));
        // One old Machine deleted and gone: the old set is lowered to its 2...
        let old = set("old", "1", 3, 2, 2);
        let new = set("new", "2", 0, 0, 0);
        let p = plan(
            3,
            Strategy::OnDelete,
            Some(&new),
            std::slice::from_ref(&old),
        );
        assert_eq!(p.old, vec![("old".into(), 2)]);
        assert_eq!(p.new, 0, "the new set grows on the next pass");
        let old = set("old", "1", 2, 2, 2);
        let p = plan(
            3,
            Strategy::OnDelete,
            Some(&new),
            std::slice::from_ref(&old),
        );
        assert_eq!(p.new, 1);
        // Raising the target mid-rollout grows the new set at once.
        let p = plan(5, Strategy::OnDelete, Some(&new), &[old]);
        assert_eq!(p.new, 3);
    }
}
