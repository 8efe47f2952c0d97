//! `docs/metrics.md` is the reference of every metric the registry exports, and the Grafana
//! dashboard `charts/karpenter-capi/dashboards/karpenter-capi.json` queries only series it
//! lists.
//!
//! The registry's families and types come from [`Metrics::families`] (the text exposition
//! omits a labelled family until it has a series), checked against [`Metrics::encode`];
//! the reference's from its table rows (`| \`name\` | type | ...`), where a counter is listed
//! by its `_total` series. The dashboard's queries are every `expr` in its panels' targets.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use controllers::metrics::Metrics;
use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The registry: the series name a query uses (counters with `_total`) → type.
fn registered() -> BTreeMap<String, String> {
    Metrics::new()
        .families()
        .into_iter()
        .map(|(name, kind)| {
            let name = if kind == "counter" {
                format!("{name}_total")
            } else {
                name
            };
            (name, kind.to_owned())
        })
        .collect()
}

/// The reference's table rows: name → type.
fn documented() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(workspace().join("docs/metrics.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("| `karpenter_") else {
            continue;
        };
        let cells: Vec<&str> = rest.split('|').map(str::trim).collect();
        let name = format!("karpenter_{}", cells[0].trim_end_matches('`'));
        let previous = out.insert(name.clone(), cells[1].to_owned());
        assert!(previous.is_none(), "{name} documented twice");
    }
    out
}

/// The series a documented metric is queried by.
fn series(name: &str, kind: &str) -> Vec<String> {
    match kind {
        "histogram" => ["_bucket", "_sum", "_count"]
            .iter()
            .map(|s| format!("{name}{s}"))
            .collect(),
        _ => vec![name.to_owned()],
    }
}

/// Every `karpenter_*` identifier in `expr`.
fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("karpenter_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    out
}

/// Every `expr` of the dashboard (panels, and panels nested in rows).
fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| exprs(i, out)),
        _ => {}
    }
}

#[test]
fn the_reference_lists_exactly_the_registered_metrics() {
    let registered = registered();
    let documented = documented();
    assert!(registered.len() >= 30, "{registered:?}");
    let missing: Vec<_> = registered
        .iter()
        .filter(|(n, k)| documented.get(*n) != Some(k))
        .collect();
    let extra: Vec<_> = documented
        .iter()
        .filter(|(n, k)| registered.get(*n) != Some(k))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/metrics.md and the registry differ:\nregistered, not documented (or another type): {missing:?}\ndocumented, not registered (or another type): {extra:?}"
    );
}

#[test]
fn the_dashboard_queries_only_documented_series() {
    let text = std::fs::read_to_string(
        workspace().join("charts/karpenter-capi/dashboards/karpenter-capi.json"),
    )
    .unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let known: BTreeSet<String> = documented()
        .iter()
        .flat_map(|(n, k)| series(n, k))
        .collect();
    let mut all = Vec::new();
    exprs(&dashboard, &mut all);
    assert!(all.len() >= 10, "the dashboard has {} queries", all.len());
    let mut used = BTreeSet::new();
    for expr in &all {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "a query of no karpenter metric: {expr}");
        for name in names {
            assert!(
                known.contains(&name),
                "{name} (in {expr}) is not a documented series"
            );
            used.insert(name);
        }
    }
    // The dashboard covers every area of the reference.
    for name in [
        "karpenter_nodeclaims_created_total",
        "karpenter_nodes_created_total",
        "karpenter_pods_eviction_requests_total",
        "karpenter_scheduler_scheduling_duration_seconds_bucket",
        "karpenter_nodepools_usage",
        "karpenter_voluntary_disruption_decisions_total",
        "karpenter_cluster_state_synced",
    ] {
        assert!(used.contains(name), "the dashboard does not show {name}");
    }
}

/// What `families` lists is what the exposition declares, once every family has a series.
#[test]
fn families_agree_with_the_exposition() {
    let metrics = Metrics::new();
    let text = metrics.encode();
    for line in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let (name, kind) = line.split_once(' ').unwrap();
        assert!(
            metrics
                .families()
                .contains(&(name.to_owned(), kind_str(kind))),
            "{name} {kind} not in families()"
        );
    }
}

fn kind_str(kind: &str) -> &'static str {
    match kind {
        "counter" => "counter",
        "gauge" => "gauge",
        "histogram" => "histogram",
        other => panic!("unexpected type {other}"),
    }
}

#[test]
fn metric_names_are_read_from_queries() {
    assert_eq!(
        metric_names("sum(rate(karpenter_a_total[5m])) / karpenter_b{x=\"karpenter_c\"}"),
        ["karpenter_a_total", "karpenter_b", "karpenter_c"]
    );
    assert_eq!(
        series("karpenter_x_seconds", "histogram")[0],
        "karpenter_x_seconds_bucket"
    );
}
