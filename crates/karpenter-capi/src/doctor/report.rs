//! What `doctor` found, as text for people and JSON for tools.
//!
//! Responsibility: the [`Report`] (findings plus the inventory of what each NodeClass
//! selects and each NodePool can launch), its text rendering and the exit status: 1 when a
//! finding blocks provisioning, else 0.
//! Inputs: findings and inventories. Outputs: strings and a status.

use std::fmt::Write as _;

use serde::Serialize;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Provisioning cannot work (for a NodePool, or at all) until it is fixed.
    Blocker,
    /// Works, but not as the user probably expects (an MD left out, unpriced, shared with
    /// the cluster-autoscaler, …).
    Warning,
    /// Worth knowing; nothing to fix.
    Info,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Blocker => "BLOCKER",
            Severity::Warning => "WARNING",
            Severity::Info => "INFO",
        })
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// How much it matters.
    pub severity: Severity,
    /// A stable code (`crd-missing`, `permission-denied`, … see `docs/troubleshooting.md`).
    pub code: &'static str,
    /// The object or area, e.g. `NodePool default`, `MachineDeployment ns/md`.
    pub subject: String,
    /// What is wrong, naming the field or annotation.
    pub message: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Finding {
    /// A finding without a hint.
    #[must_use]
    pub fn new(
        severity: Severity,
        code: &'static str,
        subject: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            code,
            subject: subject.into(),
            message: message.into(),
            hint: None,
        }
    }

    /// With a hint.
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// What one selected MachineDeployment would launch, and where each fact came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentReport {
    /// `namespace/name`.
    pub name: String,
    /// The instance type it backs (absent when it was left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// `label` or `derived`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_source: Option<String>,
    /// Capacity (cpu, memory, pods, …) as quantities.
    pub capacity: Vec<(String, String)>,
    /// Where cpu and memory came from: `annotations`, `template <Kind>/<name>`, or both.
    pub capacity_source: String,
    /// Price per hour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price: Option<f64>,
    /// `annotation`, `legacy annotation`, `nodeclass spec.prices[i]`, `none (0)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub price_source: Option<String>,
    /// Zone (`""`: none).
    pub zone: String,
    /// `label`, `spec.template.spec.failureDomain` or `none`.
    pub zone_source: String,
    /// Capacity type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    /// `spec.replicas`.
    pub replicas: Option<i32>,
    /// The min-size annotation.
    pub min_size: Option<String>,
    /// The max-size annotation.
    pub max_size: Option<String>,
    /// Node labels its nodes get (count).
    pub labels: usize,
    /// Taints its nodes register with.
    pub taints: Vec<String>,
    /// Why it cannot launch now, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Why it was left out, if so.
    pub problems: Vec<String>,
}

/// One NodeClass and what it selects.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReport {
    /// Its name.
    pub name: String,
    /// Its selected MachineDeployments.
    pub machine_deployments: Vec<MachineDeploymentReport>,
    /// Instance types in its catalogue.
    pub instance_types: usize,
}

/// One NodePool and what it can launch.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolReport {
    /// Its name.
    pub name: String,
    /// Its NodeClass (ours only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_class: Option<String>,
    /// Instance types its requirements allow.
    pub compatible_instance_types: Vec<String>,
    /// Of those, the ones with an offering that can launch now.
    pub available_instance_types: Vec<String>,
    /// Offerings whose price a NodeOverlay sets (the `NodeOverlay` gate on).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overlaid_prices: Vec<OverlaidPrice>,
}

/// An offering whose price a NodeOverlay sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OverlaidPrice {
    /// The instance type.
    pub instance_type: String,
    /// The MachineDeployment behind the offering (`namespace/name`).
    pub machine_deployment: String,
    /// Its zone (`""`: none).
    pub zone: String,
    /// Its capacity type.
    pub capacity_type: String,
    /// The price before the overlay.
    pub listed: f64,
    /// Where that came from (`annotation`, `nodeclass spec.prices[i]`, …).
    pub listed_source: String,
    /// The effective price.
    pub price: f64,
    /// The NodeOverlay that sets it.
    pub overlay: String,
}

/// Everything `doctor` found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// True when nothing blocks provisioning.
    pub ok: bool,
    /// Number of blockers.
    pub blockers: usize,
    /// Number of warnings.
    pub warnings: usize,
    /// Permission checks made (allowed or not).
    pub permissions_checked: usize,
    /// The findings, blockers first.
    pub findings: Vec<Finding>,
    /// The NodeClasses.
    pub node_classes: Vec<NodeClassReport>,
    /// The NodePools.
    pub node_pools: Vec<NodePoolReport>,
    /// The NodePools a blocker stops: named by it, or using a NodeClass named by it — every
    /// NodePool when a blocker is not about one (a CRD, a permission).
    pub blocked_node_pools: Vec<String>,
}

/// The NodePools `findings`' blockers stop (see [`Report::blocked_node_pools`]).
fn blocked_pools(findings: &[Finding], pools: &[NodePoolReport]) -> Vec<String> {
    let blockers: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.severity == Severity::Blocker)
        .collect();
    let named = |prefix: &str| -> Vec<&str> {
        blockers
            .iter()
            .filter_map(|f| f.subject.strip_prefix(prefix))
            .collect()
    };
    let (by_pool, by_class) = (named("NodePool "), named("ClusterAPINodeClass "));
    let global = blockers.iter().any(|f| {
        !f.subject.starts_with("NodePool ") && !f.subject.starts_with("ClusterAPINodeClass ")
    });
    pools
        .iter()
        .filter(|p| {
            global
                || by_pool.contains(&p.name.as_str())
                || p.node_class
                    .as_deref()
                    .is_some_and(|c| by_class.contains(&c))
        })
        .map(|p| p.name.clone())
        .collect()
}

impl Report {
    /// A report of these findings and inventories (findings sorted by severity, stably).
    #[must_use]
    pub fn new(
        mut findings: Vec<Finding>,
        node_classes: Vec<NodeClassReport>,
        node_pools: Vec<NodePoolReport>,
        permissions_checked: usize,
    ) -> Self {
        findings.sort_by_key(|f| f.severity);
        let blockers = findings
            .iter()
            .filter(|f| f.severity == Severity::Blocker)
            .count();
        let warnings = findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count();
        let blocked_node_pools = blocked_pools(&findings, &node_pools);
        Self {
            ok: blockers == 0,
            blockers,
            warnings,
            permissions_checked,
            findings,
            node_classes,
            node_pools,
            blocked_node_pools,
        }
    }

    /// The findings with this code.
    pub fn with_code<'a>(&'a self, code: &'a str) -> impl Iterator<Item = &'a Finding> + 'a {
        self.findings.iter().filter(move |f| f.code == code)
    }

    /// 1 when something blocks provisioning, else 0.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.ok)
    }

    /// The readable report.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "NodeClasses");
        if self.node_classes.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
        for nc in &self.node_classes {
            let _ = writeln!(
                out,
                "  {}: {} MachineDeployment(s), {} instance type(s)",
                nc.name,
                nc.machine_deployments.len(),
                nc.instance_types
            );
            for md in &nc.machine_deployments {
                render_md(&mut out, md);
            }
        }
        let _ = writeln!(out, "NodePools");
        if self.node_pools.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
        for pool in &self.node_pools {
            let _ = writeln!(
                out,
                "  {} (NodeClass {}): {} compatible instance type(s), {} available now{}",
                pool.name,
                pool.node_class.as_deref().unwrap_or("-"),
                pool.compatible_instance_types.len(),
                pool.available_instance_types.len(),
                if pool.available_instance_types.is_empty() {
                    String::new()
                } else {
                    format!(": {}", pool.available_instance_types.join(", "))
                }
            );
            for p in &pool.overlaid_prices {
                let zone = if p.zone.is_empty() { "-" } else { &p.zone };
                let _ = writeln!(
                    out,
                    "    price of {} via {} ({zone}, {}): {:.4} ({}) → {:.4} (NodeOverlay {})",
                    p.instance_type,
                    p.machine_deployment,
                    p.capacity_type,
                    p.listed,
                    p.listed_source,
                    p.price,
                    p.overlay
                );
            }
        }
        let _ = writeln!(
            out,
            "Permissions: {} checked with SelfSubjectAccessReview",
            self.permissions_checked
        );
        let _ = writeln!(out, "Findings");
        if self.findings.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for f in &self.findings {
            let _ = writeln!(
                out,
                "  {} [{}] {}: {}",
                f.severity, f.code, f.subject, f.message
            );
            if let Some(hint) = &f.hint {
                let _ = writeln!(out, "      → {hint}");
            }
        }
        let working: Vec<&str> = self
            .node_pools
            .iter()
            .map(|p| p.name.as_str())
            .filter(|p| !self.blocked_node_pools.iter().any(|b| b == p))
            .collect();
        let verdict = if self.ok {
            "OK, nothing blocks provisioning".to_owned()
        } else if !working.is_empty() && !self.blocked_node_pools.is_empty() {
            format!(
                "NOT OK, provisioning is blocked for NodePool(s) {}; {} can provision",
                self.blocked_node_pools.join(", "),
                working.join(", ")
            )
        } else {
            "NOT OK, provisioning is blocked".to_owned()
        };
        let _ = writeln!(
            out,
            "{verdict}: {} blocker(s), {} warning(s)",
            self.blockers, self.warnings
        );
        out
    }
}

fn render_md(out: &mut String, md: &MachineDeploymentReport) {
    let Some(it) = &md.instance_type else {
        let _ = writeln!(
            out,
            "    - {}: left out: {}",
            md.name,
            md.problems.join("; ")
        );
        return;
    };
    let capacity: Vec<String> = md
        .capacity
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let _ = writeln!(
        out,
        "    - {}: instance type {it} ({}), {} [from {}]",
        md.name,
        md.name_source.as_deref().unwrap_or("?"),
        capacity.join(" "),
        md.capacity_source
    );
    let _ = writeln!(
        out,
        "      price {} [{}], zone {} [{}], {}, replicas {}, min {}, max {}, {} label(s), taints [{}]{}",
        md.price.map_or_else(|| "-".into(), |p| format!("{p}")),
        md.price_source.as_deref().unwrap_or("-"),
        if md.zone.is_empty() {
            "-"
        } else {
            md.zone.as_str()
        },
        md.zone_source,
        md.capacity_type.as_deref().unwrap_or("-"),
        md.replicas
            .map_or_else(|| "unset".into(), |r| r.to_string()),
        md.min_size.as_deref().unwrap_or("-"),
        md.max_size.as_deref().unwrap_or("-"),
        md.labels,
        md.taints.join(", "),
        md.unavailable
            .as_ref()
            .map_or_else(String::new, |u| format!("; unavailable: {u}"))
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blockers_come_first_and_set_the_exit_status() {
        let r = Report::new(
            vec![
                Finding::new(Severity::Warning, "w", "a", "b"),
                Finding::new(Severity::Blocker, "b", "c", "d").hint("fix it"),
            ],
            Vec::new(),
            Vec::new(),
            3,
        );
        assert_eq!(r.findings[0].code, "b");
        assert_eq!(
            (r.blockers, r.warnings, r.ok, r.exit_code()),
            (1, 1, false, 1)
        );
        let text = r.render();
        assert!(text.contains("BLOCKER [b] c: d\n      → fix it"), "{text}");
        assert!(text.contains("NOT OK"), "{text}");
        let ok = Report::new(
            vec![Finding::new(Severity::Info, "i", "a", "b")],
            Vec::new(),
            Vec::new(),
            0,
        );
        assert_eq!(ok.exit_code(), 0);

        // A blocker about one NodePool (or its NodeClass) blocks that one; the verdict says
        // which and which still work.
        let pool = |name: &str, class: &str| NodePoolReport {
            name: name.into(),
            node_class: Some(class.into()),
            compatible_instance_types: Vec::new(),
            available_instance_types: Vec::new(),
            overlaid_prices: Vec::new(),
        };
        let pools = vec![pool("a", "missing"), pool("b", "good"), pool("c", "broken")];
        let r = Report::new(
            vec![
                Finding::new(
                    Severity::Blocker,
                    "nodepool-nodeclass-missing",
                    "NodePool a",
                    "x",
                ),
                Finding::new(
                    Severity::Blocker,
                    "nodeclass-selects-nothing",
                    "ClusterAPINodeClass broken",
                    "y",
                ),
            ],
            Vec::new(),
            pools.clone(),
            0,
        );
        assert_eq!(r.blocked_node_pools, ["a", "c"]);
        assert!(
            r.render()
                .contains("NOT OK, provisioning is blocked for NodePool(s) a, c; b can provision"),
            "{}",
            r.render()
        );
        let r = Report::new(
            vec![Finding::new(Severity::Blocker, "crd-missing", "CRDs", "z")],
            Vec::new(),
            pools,
            0,
        );
        assert_eq!(r.blocked_node_pools, ["a", "b", "c"]);
        assert!(r.render().contains("NOT OK, provisioning is blocked: "));
        let json = serde_json::to_value(&ok).unwrap();
        assert_eq!(json["findings"][0]["severity"], "info");
    }
}
