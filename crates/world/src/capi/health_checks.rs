//! The MachineHealthCheck controller (management cluster), simplified: it decides which
//! Machines are unhealthy; their MachineSet deletes them ([`super::sets`]).
//!
//! Responsibility: for each `v1beta2` MachineHealthCheck (none when the kind is not served),
//! its targets as Cluster API picks them — Machines of its namespace labelled
//! `cluster.x-k8s.io/cluster-name: <spec.clusterName>` that `spec.selector` matches, not
//! annotated `cluster.x-k8s.io/skip-remediation` or `cluster.x-k8s.io/paused`, not deleting.
//! A target with a Node is unhealthy when the Node is gone (`NodeDeleted`, at once) or one of
//! `spec.checks.unhealthyNodeConditions` (`type`, `status`, `timeoutSeconds`) has held longer
//! than its timeout (`UnhealthyNode`). Targets without a Node yet are left alone (no
//! `nodeStartupTimeoutSeconds`). When the unhealthy count is within
//! `spec.remediation.triggerIf.unhealthyLessThanOrEqualTo` (a number or a percentage of the
//! targets rounded down; default `100%`), each unhealthy Machine gets `HealthCheckSucceeded`
//! False and `OwnerRemediated` False (`WaitingForRemediation`); healthy ones
//! `HealthCheckSucceeded` True. Not modelled: `unhealthyInRange`, `unhealthyMachineConditions`,
//! external remediation templates, the Cluster's readiness gates, MHC status.
//! Inputs: MachineHealthChecks, Machines (management), Nodes (workload). Outputs: Machine
//! status conditions; the time of the next timeout.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::well_known::capi as keys;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::{Value, json};

use super::client::Capi;
use crate::WorldError;
use crate::driver::{PassResult, Reconciler};
use crate::objects::{annotations, code, condition, labels, new_condition, text};
use sim::convert::capi::CapiKind;
use sim::object;

/// The MachineHealthCheck controller.
pub struct HealthChecks {
    capi: Arc<Capi>,
    workload: kube::Client,
}

impl std::fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthChecks").finish_non_exhaustive()
    }
}

impl HealthChecks {
    /// Over a management cluster's Cluster API and a workload cluster's Nodes.
    pub fn new(capi: Arc<Capi>, workload: kube::Client) -> Self {
        Self { capi, workload }
    }
}

/// The `v1beta2` MachineHealthCheck resource.
pub fn resource() -> ApiResource {
    ApiResource {
        group: api::CapiVersion::GROUP.to_owned(),
        version: "v1beta2".to_owned(),
        api_version: format!("{}/v1beta2", api::CapiVersion::GROUP),
        kind: keys::MACHINE_HEALTH_CHECK.to_owned(),
        plural: "machinehealthchecks".to_owned(),
    }
}

/// Whether `mhc` targets `machine`.
pub fn targets(mhc: &Value, machine: &Value) -> bool {
    if object::namespace(mhc) != object::namespace(machine) || object::is_deleting(machine) {
        return false;
    }
    let a = annotations(machine);
    if a.contains_key(keys::SKIP_REMEDIATION) || a.contains_key(keys::PAUSED) {
        return false;
    }
    let l = labels(machine);
    if l.get(keys::CLUSTER_NAME).map(String::as_str) != text(mhc, ".spec.clusterName") {
        return false;
    }
    let selector = mhc.pointer("/spec/selector").cloned().unwrap_or(json!({}));
    let Ok(selector) =
        sim::selectors::LabelSelector::parse(&sim::selectors::label_selector_string(&selector))
    else {
        return false;
    };
    let map: serde_json::Map<String, Value> =
        l.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
    selector.matches(&map)
}

/// Why a target is unhealthy, or how long until a check times out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Healthy, with no check running.
    Healthy,
    /// Healthy for now; a condition times out after this long.
    Until(Duration),
    /// Unhealthy: (reason, message).
    Unhealthy(&'static str, String),
}

/// The check of a target whose Node is `node` (`None`: the Node is gone) at `now`.
pub fn check(mhc: &Value, node: Option<&Value>, now: Timestamp) -> Check {
    let Some(node) = node else {
        return Check::Unhealthy("NodeDeleted", "Node has been deleted".to_owned());
    };
    let mut next: Option<Duration> = None;
    let checks = mhc
        .pointer("/spec/checks/unhealthyNodeConditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for c in &checks {
        let (Some(kind), Some(status)) = (text(c, ".type"), text(c, ".status")) else {
            continue;
        };
        let Some(current) = condition(node, kind) else {
            continue;
        };
        if text(current, ".status") != Some(status) {
            continue;
        }
        let timeout = Duration::from_secs(
            c.get("timeoutSeconds")
                .and_then(Value::as_u64)
                .unwrap_or_default(),
        );
        let since = text(current, ".lastTransitionTime")
            .and_then(|t| t.parse::<Timestamp>().ok())
            .unwrap_or(now);
        let held = Duration::try_from(now.duration_since(since)).unwrap_or(Duration::ZERO);
        if held > timeout {
            return Check::Unhealthy(
                "UnhealthyNode",
                format!(
                    "Condition {kind} on Node is reporting status {status} for more than {timeout:?}"
                ),
            );
        }
        let left = timeout - held + Duration::from_secs(1);
        next = Some(next.map_or(left, |n| n.min(left)));
    }
    next.map_or(Check::Healthy, Check::Until)
}

/// How many unhealthy targets of `total` still allow remediation.
pub fn allowed(mhc: &Value, total: usize) -> usize {
    let limit = mhc
        .pointer("/spec/remediation/triggerIf/unhealthyLessThanOrEqualTo")
        .cloned()
        .unwrap_or(json!("100%"));
    match &limit {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => p
                .parse::<usize>()
                .map_or(0, |p| total.saturating_mul(p) / 100),
            None => s.parse::<usize>().unwrap_or(0),
        },
        _ => 0,
    }
}

impl HealthChecks {
    async fn mark(&self, machine: &Value, verdict: Option<(&str, &str)>) -> Result<(), WorldError> {
        let mut all: Vec<Value> = machine
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut set = |c: Value| {
            let kind = c.get("type").cloned();
            match all.iter_mut().find(|x| x.get("type") == kind.as_ref()) {
                Some(slot) => *slot = c,
                None => all.push(c),
            }
        };
        match verdict {
            None => set(new_condition(
                condition(machine, "HealthCheckSucceeded"),
                "HealthCheckSucceeded",
                true,
                "HealthCheckSucceeded",
                "",
            )),
            Some((reason, message)) => {
                set(new_condition(
                    condition(machine, "HealthCheckSucceeded"),
                    "HealthCheckSucceeded",
                    false,
                    reason,
                    message,
                ));
                // Set once: the MachineSet moves it on (`MachineDeleting`).
                if condition(machine, "OwnerRemediated").is_none() {
                    set(new_condition(
                        None,
                        "OwnerRemediated",
                        false,
                        "WaitingForRemediation",
                        "Waiting for remediation",
                    ));
                }
            }
        }
        let mut desired = machine.get("status").cloned().unwrap_or(json!({}));
        object::set_path(&mut desired, ".conditions", Value::Array(all));
        self.capi
            .patch_status_if_changed(CapiKind::Machine, machine, desired)
            .await
    }
}

impl Reconciler for HealthChecks {
    fn name(&self) -> &'static str {
        "capi-machinehealthchecks"
    }

    async fn pass(&mut self) -> PassResult {
        let api: Api<DynamicObject> = Api::all_with(self.capi.client().clone(), &resource());
        let mhcs: Vec<Value> = match api.list(&ListParams::default()).await {
            Ok(l) => l
                .items
                .into_iter()
                .filter_map(|o| serde_json::to_value(o).ok())
                .collect(),
            Err(e) if code(&e) == Some(404) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if mhcs.is_empty() {
            return Ok(None);
        }
        let machines = self.capi.list(CapiKind::Machine).await?;
        let nodes: BTreeMap<String, Value> = crate::objects::list_json(
            &self.workload,
            &ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&()),
        )
        .await?
        .into_iter()
        .map(|n| (object::name(&n).to_owned(), n))
        .collect();
        let now = Timestamp::now();
        let mut next: Option<Duration> = None;
        for mhc in &mhcs {
            let targets: Vec<&Value> = machines.iter().filter(|m| targets(mhc, m)).collect();
            let mut verdicts: Vec<(&Value, Option<(&'static str, String)>)> = Vec::new();
            for m in &targets {
                let Some(node_name) = text(m, ".status.nodeRef.name") else {
                    continue;
                };
                match check(mhc, nodes.get(node_name), now) {
                    Check::Healthy => verdicts.push((m, None)),
                    Check::Until(d) => {
                        next = Some(next.map_or(d, |n| n.min(d)));
                        verdicts.push((m, None));
                    }
                    Check::Unhealthy(reason, message) => {
                        verdicts.push((m, Some((reason, message))))
                    }
                }
            }
            let unhealthy = verdicts.iter().filter(|(_, v)| v.is_some()).count();
            if unhealthy > allowed(mhc, targets.len()) {
                tracing::info!(
                    mhc = object::name(mhc),
                    unhealthy,
                    "remediation restricted: too many unhealthy"
                );
                continue;
            }
            for (m, verdict) in verdicts {
                self.mark(m, verdict.as_ref().map(|(r, msg)| (*r, msg.as_str())))
                    .await?;
            }
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mhc(limit: Value) -> Value {
        json!({"metadata": {"name": "mhc", "namespace": "capi"},
            "spec": {"clusterName": "prod", "selector": {"matchLabels": {"pool": "a"}},
                "checks": {"unhealthyNodeConditions": [
                    {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300}]},
                "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": limit}}}})
    }

    fn machine(extra: Value) -> Value {
        let mut m = json!({"metadata": {"name": "m", "namespace": "capi",
            "labels": {"cluster.x-k8s.io/cluster-name": "prod", "pool": "a"}}});
        json_patch::merge(&mut m, &extra);
        m
    }

    fn node(status: &str, since: &str) -> Value {
        json!({"metadata": {"name": "n"}, "status": {"conditions": [
            {"type": "Ready", "status": status, "lastTransitionTime": since}]}})
    }

    #[test]
    fn targets_as_cluster_api_picks_them() {
        let h = mhc(json!("100%"));
        assert!(targets(&h, &machine(json!({}))));
        for extra in [
            json!({"metadata": {"namespace": "other"}}),
            json!({"metadata": {"labels": {"pool": "b"}}}),
            json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "dev"}}}),
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/skip-remediation": ""}}}),
            json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}),
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        ] {
            assert!(!targets(&h, &machine(extra.clone())), "{extra}");
        }
    }

    #[test]
    fn a_condition_past_its_timeout_or_a_deleted_node_is_unhealthy() {
        let h = mhc(json!("100%"));
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        assert_eq!(
            check(&h, Some(&node("True", "2026-01-01T00:00:00Z")), now),
            Check::Healthy
        );
        assert_eq!(
            check(&h, Some(&node("Unknown", "2026-01-01T00:58:00Z")), now),
            Check::Until(Duration::from_secs(181))
        );
        assert!(matches!(
            check(&h, Some(&node("Unknown", "2026-01-01T00:50:00Z")), now),
            Check::Unhealthy("UnhealthyNode", _)
        ));
        assert!(matches!(
            check(&h, None, now),
            Check::Unhealthy("NodeDeleted", _)
        ));
    }

    #[test]
    fn remediation_limits() {
        assert_eq!(allowed(&mhc(json!("100%")), 3), 3);
        assert_eq!(allowed(&mhc(json!("40%")), 3), 1);
        assert_eq!(allowed(&mhc(json!(2)), 10), 2);
        assert_eq!(allowed(&mhc(json!("2")), 10), 2);
    }
}
