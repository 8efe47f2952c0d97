//! NodeOverlays end to end (gate `NodeOverlay`).

use api::NodeOverlay;
use karpenter_capi::scenario;
use kube::ResourceExt;
use serde_json::json;
use std::time::Duration;
use world::Backend;

use super::support::*;

fn overlay(name: &str, weight: i32, instance_type: &str, adjustment: &str) -> serde_json::Value {
    json!({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": name},
        "spec": {"weight": weight, "priceAdjustment": adjustment,
            "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                "values": [instance_type]}]}})
}

fn validation(o: &NodeOverlay) -> Option<(String, String)> {
    let c = o
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "ValidationSucceeded")?;
    Some((format!("{:?}", c.status), c.reason.clone()))
}

/// A NodeOverlay makes the dearer MachineDeployment the cheaper one: `dear` (0.5) less 90 % is
/// 0.05, under `cheap`'s 0.1, so the pod's node comes from `dear` (the scheduler's plan and
/// the Cluster API launch rank alike), its NodeClaim says a price overlay applied, and the
/// overlay is `ValidationSucceeded`. Two overlays of one weight setting the same price
/// conflict: the one whose name comes first alphabetically is `Conflict` and applied nowhere.
async fn an_overlay_price_decides_which_machine_deployment_launches(backend: Backend) {
    let world = setup(
        backend,
        &[
            md("cheap", 4, 16, "zone-a", 0.1),
            md("dear", 4, 16, "zone-a", 0.5),
        ],
    )
    .await;
    scenario::apply(
        &world.workload_client(),
        &[
            overlay("discount", 10, "dear", "-90%"),
            overlay("a-rival", 5, "cheap", "+1"),
            overlay("b-rival", 5, "cheap", "+2"),
        ],
    )
    .await
    .unwrap();
    let mut config = fast_operator();
    config.node_overlay = Some(controllers::nodeoverlay::NodeOverlayConfig {
        poll: Duration::from_millis(200),
        ..Default::default()
    });
    let _operator = start_with(&world, config);
    let statuses = wait_for(
        "the overlays' conditions",
        Duration::from_secs(60),
        || async {
            let all = list::<NodeOverlay>(world.workload_client()).await;
            let by: Vec<(String, Option<(String, String)>)> =
                all.iter().map(|o| (o.name_any(), validation(o))).collect();
            by.iter().all(|(_, v)| v.is_some()).then_some(by)
        },
    )
    .await;
    let want = |reason: &str, status: &str| Some((status.to_owned(), reason.to_owned()));
    assert_eq!(
        statuses,
        [
            ("a-rival".to_owned(), want("Conflict", "False")),
            ("b-rival".to_owned(), want("ValidationSucceeded", "True")),
            ("discount".to_owned(), want("ValidationSucceeded", "True")),
        ]
    );
    scenario::apply(
        &world.workload_client(),
        &[deployment("app", 1, "1", "1Gi", json!({}))],
    )
    .await
    .unwrap();
    all_running(&world, 1, Duration::from_secs(90)).await;
    let machines = machines(&world).await;
    assert_eq!(machines.len(), 1);
    assert_eq!(
        machines[0]
            .labels()
            .get(api::well_known::capi::DEPLOYMENT_NAME)
            .map(String::as_str),
        Some("dear-zone-a"),
        "the overlaid price made dear the cheapest"
    );
    let claims = node_claims(&world).await;
    assert_eq!(
        claims[0]
            .annotations()
            .get("karpenter.sh/price-overlay-applied")
            .map(String::as_str),
        Some("true")
    );
}

world::backend_tests!(an_overlay_price_decides_which_machine_deployment_launches);
