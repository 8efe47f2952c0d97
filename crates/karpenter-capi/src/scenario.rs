//! Scenarios for `simulate`: objects for both clusters and a timeline of steps.
//!
//! Responsibility: the scenario file format (YAML), the built-in scenario
//! (`scenarios/basic.yaml`), parsing with errors that name the field, and applying manifests
//! to a cluster through discovery (any kind the server serves).
//!
//! Format:
//! ```yaml
//! name: basic
//! description: text
//! featureGates: CapacityBuffer=true   # optional: upstream's gate list, as --feature-gates
//! management: [manifests…]   # Cluster API objects (MachineDeployments, templates)
//! workload: [manifests…]     # NodeClasses, NodePools, Deployments, …
//! steps:
//!   - scale: {deployment: default/web, replicas: 18}
//!   - waitForPods: {timeout: 90s}   # every pod of every Deployment Running
//!   - waitForConsolidation: {timeout: 120s}   # the disruption loop has nothing left to do
//!   - waitForNodes: {count: 2, timeout: 90s}   # at least 2 Nodes Ready
//!   - sleep: 3s
//! ```
//! Inputs: YAML text, clients. Outputs: [`Scenario`] values, created objects.

use anyhow::{Context, bail};
use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::pinned_kind;
use serde::Deserialize;
use serde_json::Value;

/// The built-in scenario's YAML.
pub const BASIC: &str = include_str!("../scenarios/basic.yaml");
/// The CapacityBuffer scenario's YAML (`scenarios/capacity-buffer.yaml`).
pub const CAPACITY_BUFFER: &str = include_str!("../scenarios/capacity-buffer.yaml");
/// The NodeOverlay scenario's YAML (`scenarios/node-overlay.yaml`).
pub const NODE_OVERLAY: &str = include_str!("../scenarios/node-overlay.yaml");

/// The built-in scenarios, by the name `simulate --scenario` takes.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("basic", BASIC),
    ("capacity-buffer", CAPACITY_BUFFER),
    ("node-overlay", NODE_OVERLAY),
];

/// The built-in scenario `name`'s YAML.
#[must_use]
pub fn built_in(name: &str) -> Option<&'static str> {
    BUILT_IN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, yaml)| *yaml)
}

/// A scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// The feature gates the controller runs with (`--feature-gates` syntax).
    #[serde(default, rename = "featureGates")]
    pub feature_gates: String,
    /// Objects for the management cluster.
    #[serde(default)]
    pub management: Vec<Value>,
    /// Objects for the workload cluster.
    #[serde(default)]
    pub workload: Vec<Value>,
    /// The timeline.
    #[serde(default)]
    pub steps: Vec<Step>,
}

impl Scenario {
    /// The feature gates it asks for.
    ///
    /// # Errors
    /// An entry that is not `Name=true|false` of a known gate.
    pub fn gates(&self) -> Result<crate::feature_gates::FeatureGates, String> {
        self.feature_gates.parse()
    }
}

/// One step of the timeline.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Step {
    /// Set a Deployment's replicas.
    Scale {
        /// `namespace/name`.
        deployment: String,
        /// Replicas.
        replicas: i32,
    },
    /// Wait until every pod of every Deployment is Running and every Deployment has its
    /// replicas.
    WaitForPods {
        /// Give up (the scenario fails) after this long (Go duration, e.g. `90s`).
        timeout: String,
    },
    /// Wait until the disruption loop has nothing left to do: no command in flight and
    /// three passes in a row that decided nothing.
    WaitForConsolidation {
        /// Give up (the scenario fails) after this long.
        timeout: String,
    },
    /// Wait until at least `count` Nodes are Ready.
    WaitForNodes {
        /// Ready Nodes to wait for.
        count: usize,
        /// Give up (the scenario fails) after this long.
        timeout: String,
    },
    /// Let time pass (Go duration).
    Sleep(String),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Scale {
                deployment,
                replicas,
            } => write!(f, "scale {deployment} to {replicas}"),
            Self::WaitForPods { timeout } => write!(f, "wait for pods (timeout {timeout})"),
            Self::WaitForNodes { count, timeout } => {
                write!(f, "wait for {count} Ready nodes (timeout {timeout})")
            }
            Self::WaitForConsolidation { timeout } => {
                write!(f, "wait for consolidation (timeout {timeout})")
            }
            Self::Sleep(d) => write!(f, "sleep {d}"),
        }
    }
}

/// Parses a scenario; errors name the field (`steps[2].scale.replicas: …`).
///
/// # Errors
/// Invalid YAML, unknown fields, bad durations, objects without apiVersion/kind/name.
pub fn parse(text: &str) -> anyhow::Result<Scenario> {
    let value: Value = serde_norway::from_str(text).context("the scenario is not valid YAML")?;
    let scenario: Scenario = serde_path_to_error::deserialize(&value)
        .map_err(|e| anyhow::anyhow!("scenario: {}: {}", e.path(), e.inner()))?;
    scenario
        .gates()
        .map_err(|e| anyhow::anyhow!("scenario: featureGates: {e}"))?;
    for (i, step) in scenario.steps.iter().enumerate() {
        let duration = match step {
            Step::WaitForPods { timeout }
            | Step::WaitForConsolidation { timeout }
            | Step::WaitForNodes { timeout, .. } => Some(timeout),
            Step::Sleep(d) => Some(d),
            Step::Scale { deployment, .. } => {
                if deployment.split_once('/').is_none() {
                    bail!(
                        "scenario: steps[{i}].scale.deployment: {deployment:?} is not namespace/name"
                    );
                }
                None
            }
        };
        if let Some(d) = duration {
            api::common::parse_duration(d)
                .map_err(|e| anyhow::anyhow!("scenario: steps[{i}]: {e}"))?;
        }
    }
    for (side, objects) in [
        ("management", &scenario.management),
        ("workload", &scenario.workload),
    ] {
        for (i, o) in objects.iter().enumerate() {
            gvk_and_name(o).with_context(|| format!("scenario: {side}[{i}]"))?;
        }
    }
    Ok(scenario)
}

fn gvk_and_name(object: &Value) -> anyhow::Result<(GroupVersionKind, String)> {
    let text = |p: &str| object.pointer(p).and_then(Value::as_str);
    let (Some(api_version), Some(kind), Some(name)) =
        (text("/apiVersion"), text("/kind"), text("/metadata/name"))
    else {
        bail!("apiVersion, kind and metadata.name are required");
    };
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok((GroupVersionKind::gvk(group, version, kind), name.to_owned()))
}

/// Creates every object in `client`'s cluster (kinds resolved through discovery).
///
/// # Errors
/// An unknown kind or a rejected object, named.
pub async fn apply(client: &kube::Client, objects: &[Value]) -> anyhow::Result<()> {
    for object in objects {
        let (gvk, name) = gvk_and_name(object)?;
        let (resource, capabilities) = pinned_kind(client, &gvk)
            .await
            .with_context(|| format!("{} {name}: kind not served", gvk.kind))?;
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        let api: Api<DynamicObject> = if capabilities.scope == kube::discovery::Scope::Namespaced {
            Api::namespaced_with(client.clone(), namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let typed: DynamicObject = serde_json::from_value(object.clone())
            .with_context(|| format!("{} {name}", gvk.kind))?;
        api.create(&PostParams::default(), &typed)
            .await
            .with_context(|| format!("cannot create {} {name}", gvk.kind))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_capacity_buffer_scenario_parses_with_its_gate() {
        let s = parse(CAPACITY_BUFFER).unwrap();
        assert_eq!(s.name, "capacity-buffer");
        assert!(s.gates().unwrap().capacity_buffer);
        assert!(
            s.steps
                .iter()
                .any(|s| matches!(s, Step::WaitForNodes { count: 2, .. }))
        );
        assert!(
            parse(BASIC).unwrap().gates().unwrap() == crate::feature_gates::FeatureGates::default()
        );
        let bad = parse("name: x\nfeatureGates: CapacityBufer=true\n").unwrap_err();
        assert!(bad.to_string().contains("featureGates"), "{bad}");
    }

    #[test]
    fn every_built_in_scenario_parses_under_its_own_name() {
        for (name, yaml) in BUILT_IN {
            assert_eq!(parse(yaml).unwrap().name, *name);
        }
        let overlay = parse(NODE_OVERLAY).unwrap();
        assert!(overlay.gates().unwrap().node_overlay);
        assert!(
            overlay
                .workload
                .iter()
                .any(|o| o["kind"] == "NodeOverlay" && o["spec"]["priceAdjustment"] == "-50%")
        );
        assert_eq!(built_in("node-overlay"), Some(NODE_OVERLAY));
        assert_eq!(built_in("nope"), None);
    }

    #[test]
    fn the_built_in_scenario_parses() {
        let s = parse(BASIC).unwrap();
        assert_eq!(s.name, "basic");
        assert_eq!(s.management.len(), 4);
        assert!(
            s.steps
                .iter()
                .any(|s| matches!(s, Step::WaitForPods { .. }))
        );
    }

    #[test]
    fn the_scale_in_500_scenario_parses() {
        let s = parse(include_str!("../scenarios/scale-in-500.yaml")).unwrap();
        assert_eq!(s.name, "scale-in-500");
        assert!(
            s.steps
                .iter()
                .any(|s| matches!(s, Step::WaitForConsolidation { .. }))
        );
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse("name: x\nsteps:\n  - scale: {deployment: web, replicas: 1}\n").unwrap_err();
        assert!(e.to_string().contains("steps[0].scale.deployment"), "{e}");
        let e = parse("name: x\nsteps:\n  - sleep: soon\n").unwrap_err();
        assert!(e.to_string().contains("steps[0]"), "{e}");
        let e = parse("name: x\nsteps:\n  - jump: {}\n").unwrap_err();
        assert!(e.to_string().contains("steps[0]"), "{e}");
        let e = parse("name: x\nworkload:\n  - {kind: Pod}\n").unwrap_err();
        assert!(format!("{e:#}").contains("workload[0]"), "{e:#}");
    }
}
