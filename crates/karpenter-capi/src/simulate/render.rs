//! The text form of a `simulate` summary: totals, MachineDeployments, provisioning decisions
//! (with what LATENCY and SOLVE measure), disruption decisions, steps, and where to go next.
//!
//! Inputs: a [`Summary`]. Outputs: text.

use super::Summary;

/// The summary as text.
#[must_use]
pub fn render(summary: &Summary) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario {} finished in {:.1}s",
        summary.scenario, summary.wall_seconds
    );
    let _ = writeln!(
        out,
        "pods: {} running of {}   nodes: {}   nodeclaims: {} ({} ready)",
        summary.pods_running,
        summary.pods,
        summary.nodes,
        summary.node_claims,
        summary.node_claims_ready
    );
    let _ = writeln!(
        out,
        "utilization: cpu {:.1}%  memory {:.1}%   cost: ${:.3}/hour",
        summary.cpu_utilization_percent, summary.memory_utilization_percent, summary.cost_per_hour
    );
    if summary.peak_nodes != summary.nodes
        || (summary.peak_cost_per_hour - summary.cost_per_hour).abs() > 1e-9
    {
        let removed: usize = summary.disruptions.iter().map(|d| d.nodes.len()).sum();
        let replaced: usize = summary
            .disruptions
            .iter()
            .map(|d| d.replacements.len())
            .sum();
        let _ = writeln!(
            out,
            "peak: {} nodes at ${:.3}/hour   now: {} nodes at ${:.3}/hour   disruption removed {} node(s), launched {} replacement(s)",
            summary.peak_nodes,
            summary.peak_cost_per_hour,
            summary.nodes,
            summary.cost_per_hour,
            removed,
            replaced
        );
    }
    // Node groups read `ns/name` (MachineDeployments) or `<Kind> ns/name`: size the column.
    let width = summary
        .node_groups
        .iter()
        .map(|g| g.name.len())
        .max()
        .unwrap_or(0)
        .max("NODE GROUP".len());
    let _ = writeln!(
        out,
        "\n{:<width$}  NODES  REPLICAS  $/NODE-HOUR  PRICE SOURCE",
        "NODE GROUP"
    );
    for g in &summary.node_groups {
        let source = if g.price_source.is_empty() {
            "-"
        } else {
            &g.price_source
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:>5}  {:>8}  {:>11.3}  {source}",
            g.name, g.nodes, g.replicas, g.price_per_hour
        );
    }
    let _ = writeln!(
        out,
        "\nDECISION AT   PODS  BUFFER  NODECLAIMS  ON-EXISTING  UNSCHEDULABLE  LATENCY  SOLVE"
    );
    for d in &summary.decisions {
        // Latency is "until the NodeClaims were created": without any there is none to show.
        let latency = if d.node_claims == 0 {
            "-".to_owned()
        } else {
            format!("{}ms", d.latency_ms)
        };
        let _ = writeln!(
            out,
            "{:>10.1}s {:>5}  {:>6}  {:>10}  {:>11}  {:>13}  {:>7}  {:>3}ms",
            d.at_seconds,
            d.pods,
            d.buffer_pods,
            d.node_claims,
            d.pods_on_existing,
            d.unschedulable,
            latency,
            d.solve_ms
        );
    }
    let _ = writeln!(
        out,
        "LATENCY: first pending pod seen -> its NodeClaims created, including the batching window \
         (1s idle, 10s at most); SOLVE: the scheduling simulation alone; BUFFER: CapacityBuffer \
         virtual pods scheduled with the pods (not counted in the other columns)."
    );
    if !summary.disruptions.is_empty() {
        let _ = writeln!(
            out,
            "\nDISRUPTION AT  REASON         METHOD                     DECISION  NODES  REPLACEMENTS  SAVES $/H  COMPUTED  OUTCOME"
        );
        for d in &summary.disruptions {
            let _ = writeln!(
                out,
                "{:>12.1}s  {:<13}  {:<25}  {:<8}  {:>5}  {:<12}  {:>9.3}  {:>6}ms  {}",
                d.at_seconds,
                d.reason,
                d.method,
                d.decision,
                d.nodes.len(),
                if d.replacements.is_empty() {
                    "-".to_owned()
                } else {
                    d.replacements.join(",")
                },
                d.savings_per_hour,
                d.computed_ms,
                d.outcome
            );
        }
    }
    let _ = writeln!(
        out,
        "\nSTEP                                      AT      TOOK"
    );
    for s in &summary.steps {
        let _ = writeln!(
            out,
            "{:<40} {:>6.1}s {:>7.1}s",
            s.step, s.started_seconds, s.took_seconds
        );
    }
    let _ = writeln!(
        out,
        "\nNext: `karpenter-capi sim serve` keeps simulated clusters running for kubectl and \
         `karpenter-capi run`; docs/getting-started.md walks through it."
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::DecisionSummary;

    #[test]
    fn latency_is_explained_and_shown_only_where_node_claims_were_made() {
        let summary = Summary {
            decisions: vec![
                DecisionSummary {
                    pods: 3,
                    node_claims: 1,
                    latency_ms: 1_200,
                    ..DecisionSummary::default()
                },
                DecisionSummary {
                    pods: 2,
                    pods_on_existing: 2,
                    latency_ms: 1_000,
                    ..DecisionSummary::default()
                },
            ],
            ..Summary::default()
        };
        let text = render(&summary);
        let rows: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("DECISION AT"))
            .skip(1)
            .take(2)
            .collect();
        assert!(rows[0].contains("1200ms"), "{text}");
        assert!(
            rows[1].contains(" - ") && !rows[1].contains("1000ms"),
            "{text}"
        );
        assert!(text.contains("LATENCY: first pending pod seen"), "{text}");
        assert!(text.contains("Next: `karpenter-capi sim serve`"), "{text}");
    }
}
