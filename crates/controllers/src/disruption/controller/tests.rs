//! The disruption loop's passes against the simulated API server with a paused clock: the
//! objects of a [`Fixture`] are created in `sim`, the cluster state watches them, and each test
//! calls [`Disruption::pass`] itself, moving tokio's clock where a rule waits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use api::common::NillableDuration;
use api::well_known::taints::DISRUPTED;
use cloudprovider::fake::FakeCloudProvider;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::PostParams;
use serde_json::json;
use state::StateConfig;

use super::*;
use crate::disruption::testing::{Fixture, instance_type};

/// A running loop's parts, over a `sim` holding the fixture's objects.
struct Harness {
    _sim: sim::Sim,
    client: kube::Client,
    provider: Arc<FakeCloudProvider>,
    events: Events,
    metrics: Arc<Metrics>,
    disruption: Arc<Disruption<FakeCloudProvider>>,
}

fn hash(_: &NodePool) -> PoolHash {
    PoolHash {
        hash: "h".into(),
        version: "v3".into(),
    }
}

/// `object` as JSON without what the server assigns, and its status apart.
fn split<T: serde::Serialize>(object: &T) -> (serde_json::Value, Option<serde_json::Value>) {
    let mut v = serde_json::to_value(object).unwrap();
    let meta = v["metadata"].as_object_mut().unwrap();
    meta.remove("uid");
    meta.remove("resourceVersion");
    meta.remove("creationTimestamp");
    let status = v.as_object_mut().unwrap().remove("status");
    (v, status)
}

async fn put<K>(api: Api<K>, object: &K)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let (body, status) = split(object);
    let created: K = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(body).unwrap(),
        )
        .await
        .unwrap();
    if let Some(status) = status {
        api.patch_status(
            &created.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
    }
}

/// Creates `pod` with the image the API server requires.
async fn put_pod(client: &kube::Client, pod: &Pod) {
    let mut pod = pod.clone();
    for c in &mut pod.spec.get_or_insert_default().containers {
        c.image
            .get_or_insert_with(|| "registry.k8s.io/pause:3.10".into());
    }
    put::<Pod>(Api::namespaced(client.clone(), "default"), &pod).await;
}

impl Harness {
    /// Creates `fixture`'s objects (NodePools Ready, NodeClaims launched and registered) and
    /// starts the cluster state; the provider offers every instance type of the fixture.
    async fn new(fixture: &Fixture) -> Self {
        let sim = sim::Sim::new(sim::SimConfig::default());
        let client = kube::Client::new(sim.router(), "default");
        sim::crds::install_karpenter_crds(&client).await.unwrap();
        for pool in &fixture.node_pools {
            let mut pool = pool.clone();
            pool.status = Some(
                serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True",
                    "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
                .unwrap(),
            );
            put(Api::all(client.clone()), &pool).await;
        }
        for node in &fixture.nodes {
            put::<Node>(Api::all(client.clone()), node).await;
        }
        for nc in &fixture.node_claims {
            let mut nc = nc.clone();
            let status = nc.status.get_or_insert_default();
            let mut conditions: Vec<serde_json::Value> =
                serde_json::from_value(serde_json::to_value(&status.conditions).unwrap())
                    .unwrap_or_default();
            for type_ in ["Launched", "Registered"] {
                conditions.push(json!({"type": type_, "status": "True", "reason": type_,
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}));
            }
            status.conditions = serde_json::from_value(json!(conditions)).unwrap();
            put::<NodeClaim>(Api::all(client.clone()), &nc).await;
        }
        for pod in &fixture.pods {
            put_pod(&client, pod).await;
        }
        for pdb in &fixture.pdbs {
            put::<PodDisruptionBudget>(Api::namespaced(client.clone(), "default"), pdb).await;
        }
        let types: Vec<Arc<InstanceType>> =
            fixture
                .instance_types
                .values()
                .flatten()
                .fold(Vec::new(), |mut all, it| {
                    if !all
                        .iter()
                        .any(|a: &Arc<InstanceType>| a.name() == it.name())
                    {
                        all.push(Arc::clone(it));
                    }
                    all
                });
        let provider = Arc::new(FakeCloudProvider::new(types));
        let state = ClusterState::start(&client, StateConfig { triggers: None });
        let events = Events::recording();
        let metrics = Arc::new(Metrics::new());
        let disruption = Arc::new(Disruption::new(
            client.clone(),
            Arc::clone(&provider),
            state,
            events.clone(),
            Arc::clone(&metrics),
            DisruptionConfig::default(),
            hash,
        ));
        disruption.wait_synced().await;
        let h = Self {
            _sim: sim,
            client,
            provider,
            events,
            metrics,
            disruption,
        };
        h.settle(|s| {
            s.node_claims.len() == fixture.node_claims.len() && s.pods.len() == fixture.pods.len()
        })
        .await;
        h
    }

    /// Waits until the cluster state's snapshot satisfies `done`.
    async fn settle(&self, done: impl Fn(&Snapshot) -> bool) {
        for _ in 0..500 {
            if done(&self.disruption.state.snapshot()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the cluster state never showed what the test waits for");
    }

    async fn pass(&self) -> bool {
        Arc::clone(&self.disruption).pass().await
    }

    async fn node(&self, name: &str) -> Option<Node> {
        Api::<Node>::all(self.client.clone())
            .get_opt(name)
            .await
            .unwrap()
    }

    async fn node_claim(&self, name: &str) -> Option<NodeClaim> {
        Api::<NodeClaim>::all(self.client.clone())
            .get_opt(name)
            .await
            .unwrap()
    }

    fn records(&self) -> Vec<Record> {
        lock(&self.disruption.records).clone()
    }

    fn reasons(&self) -> Vec<&'static str> {
        self.events
            .published()
            .into_iter()
            .map(|(_, m)| m.reason)
            .collect()
    }
}

fn tainted(node: &Node) -> bool {
    writes::is_tainted(node)
}

fn has_condition(nc: &NodeClaim, type_: &str) -> bool {
    nc.status
        .as_ref()
        .and_then(|s| s.conditions.condition(type_))
        .is_some()
}

/// Marks `node` with the disrupted taint and its NodeClaim with a `DisruptionReason`, as a
/// command does.
fn mark(f: &mut Fixture, node: &str) {
    let n = f
        .nodes
        .iter_mut()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .unwrap();
    n.spec.get_or_insert_default().taints = Some(vec![
        serde_json::from_value(json!({"key": DISRUPTED, "effect": "NoSchedule"})).unwrap(),
    ]);
    let nc = f
        .node_claims
        .iter_mut()
        .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .unwrap();
    let status = nc.status.get_or_insert_default();
    let mut conditions: Vec<serde_json::Value> =
        serde_json::from_value(serde_json::to_value(&status.conditions).unwrap())
            .unwrap_or_default();
    conditions.push(
        json!({"type": DISRUPTION_REASON, "status": "True", "reason": "Underutilized",
        "message": "Underutilized", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
    );
    status.conditions = serde_json::from_value(json!(conditions)).unwrap();
}

/// Gives the NodeClaim of `node` another provider's node class: not ours.
fn foreign(f: &mut Fixture, node: &str) {
    let nc = f
        .node_claims
        .iter_mut()
        .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .unwrap();
    nc.spec.node_class_ref.group = "karpenter.k8s.aws".into();
    nc.spec.node_class_ref.kind = "EC2NodeClass".into();
}

/// A NodePool `p` of the 4-cpu type `c4` ($1/h), consolidating after `after`.
fn pool_p(f: &mut Fixture, after: &str) -> Arc<InstanceType> {
    let it = instance_type("c4", 4, 1.0);
    f.pool("p", vec![it.clone()])
        .spec
        .disruption
        .as_mut()
        .unwrap()
        .consolidate_after = NillableDuration(after.into());
    it
}

/// One pool `p` of 4-cpu nodes `n1`, `n2` and `n3`, each holding a 3-cpu pod; the NodePool
/// never consolidates, so only the rule under test acts.
fn three_full_nodes() -> Fixture {
    let mut f = Fixture::default();
    let it = pool_p(&mut f, "Never");
    for n in ["n1", "n2", "n3"] {
        f.node(n, "p", &it);
        f.pod(&format!("{n}-pod"), Some(n), "3");
    }
    f
}

/// Spec §5.2 clean-up: a mark no command holds is removed from our own node; a node whose
/// NodeClaim is another provider's keeps it, and so does one whose NodeClaim is deleting.
#[tokio::test(start_paused = true)]
async fn clean_up_removes_only_our_marks_no_command_holds() {
    let mut f = three_full_nodes();
    mark(&mut f, "n1");
    mark(&mut f, "n2");
    foreign(&mut f, "n2");
    mark(&mut f, "n3");
    f.node_claims[2].metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
    let h = Harness::new(&f).await;
    Api::<NodeClaim>::all(h.client.clone())
        .delete("n3-claim", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    h.settle(|s| {
        s.node_claims
            .iter()
            .any(|c| c.name_any() == "n3-claim" && c.metadata.deletion_timestamp.is_some())
    })
    .await;

    assert!(!h.pass().await);

    let n1 = h.node("n1").await.unwrap();
    assert!(!tainted(&n1), "our node's stray mark is removed");
    assert!(!has_condition(
        &h.node_claim("n1-claim").await.unwrap(),
        DISRUPTION_REASON
    ));
    assert!(
        tainted(&h.node("n2").await.unwrap()),
        "another provider's node is left alone"
    );
    assert!(has_condition(
        &h.node_claim("n2-claim").await.unwrap(),
        DISRUPTION_REASON
    ));
    assert!(
        tainted(&h.node("n3").await.unwrap()),
        "a deleting NodeClaim's node stays marked"
    );
}

/// Spec §4.9: a NodeClaim is deleted once `expireAfter` has passed since its creation (no
/// budget, no replacement first), and not before; another provider's NodeClaim is never.
#[tokio::test(start_paused = true)]
async fn expiry_deletes_our_node_claims_once_expire_after_has_passed() {
    let mut f = three_full_nodes();
    for nc in &mut f.node_claims {
        nc.spec.expire_after = Some(NillableDuration("10m".into()));
    }
    foreign(&mut f, "n2");
    f.node_claims[2].spec.expire_after = Some(NillableDuration("Never".into()));
    let h = Harness::new(&f).await;

    h.pass().await;
    assert!(h.node_claim("n1-claim").await.is_some(), "not expired yet");

    tokio::time::advance(Duration::from_secs(601)).await;
    h.pass().await;

    assert!(
        h.node_claim("n1-claim").await.is_none(),
        "expired and deleted"
    );
    assert!(
        h.node_claim("n2-claim").await.is_some(),
        "another provider's is left alone"
    );
    assert!(
        h.node_claim("n3-claim").await.is_some(),
        "expireAfter: Never"
    );
    let expired = h
        .metrics
        .nodeclaims_disrupted
        .get_or_create(&crate::metrics::DisruptedLabels {
            reason: "expired".into(),
            nodepool: "p".into(),
            capacity_type: String::new(),
        })
        .get();
    assert_eq!(expired, 1);
}

/// Issue 23 item 1: every node held by a PDB at 0 — nothing is gracefully disruptable — and
/// a drifted NodeClaim with a `terminationGracePeriod` is still replaced (drift runs on the
/// eventual class). The first pass writes `Drifted`; the next one acts on it, once.
#[tokio::test(start_paused = true)]
async fn drift_runs_when_nothing_is_gracefully_disruptable() {
    let mut f = three_full_nodes();
    for n in ["n1", "n2", "n3"] {
        f.pdb(&format!("{n}-pod"), 0);
    }
    // `maxUnavailable: 0`: the server's disruption controller keeps `disruptionsAllowed` at 0.
    for pdb in &mut f.pdbs {
        pdb.spec.as_mut().unwrap().max_unavailable =
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0));
    }
    f.node_claims[0].spec.termination_grace_period = Some("1h".into());
    let h = Harness::new(&f).await;
    h.provider
        .set_drifted("n1-claim", "MachineDeploymentDrifted");

    let (cands, blocked) = h.disruption.candidates_of(
        &h.disruption.state.snapshot(),
        &h.disruption
            .instance_types(&h.disruption.state.snapshot().node_pools)
            .await,
        &BTreeSet::new(),
        &Floors::default(),
        h.disruption.clock.now(),
        Class::Graceful,
    );
    assert!(
        cands.is_empty(),
        "nothing is gracefully disruptable: {blocked:?}"
    );
    assert!(!h.pass().await, "the first pass only writes the condition");
    h.settle(|s| {
        s.node_claims.iter().any(|c| {
            c.name_any() == "n1-claim"
                && c.status
                    .as_ref()
                    .is_some_and(|st| st.conditions.is_true(DRIFTED))
        })
    })
    .await;
    assert!(h.pass().await, "drift acts");

    let records = h.records();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].method, Method::Drift);
    assert_eq!(records[0].nodes, vec!["n1".to_owned()]);
    // n2 and n3 did not drift: a second pass while n1's command is in flight leaves them.
    h.pass().await;
    assert_eq!(h.records().len(), 1);
    assert!(!tainted(&h.node("n2").await.unwrap()));
    assert!(!tainted(&h.node("n3").await.unwrap()));
}

/// Spec §5.2 validation: an empty node chosen by emptiness that takes a pod during the
/// validation delay is kept; a node still empty after it is deleted.
#[tokio::test(start_paused = true)]
async fn emptiness_is_validated_after_the_delay() {
    let it = instance_type("c4", 4, 1.0);
    let mut f = Fixture::default();
    f.pool("p", vec![it.clone()]);
    f.node("busy", "p", &it);
    f.pod("stays", Some("busy"), "3");
    f.node("e1", "p", &it);
    let h = Harness::new(&f).await;

    // A pod arrives on e1 while the command waits for its validation.
    let pass = tokio::spawn({
        let d = Arc::clone(&h.disruption);
        async move { d.pass().await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut g = Fixture::default();
    g.pod("arrived", Some("e1"), "1");
    put_pod(&h.client, &g.pods[0]).await;
    h.settle(|s| s.pods.len() == 2).await;
    assert!(!pass.await.unwrap(), "validation abandons the command");
    assert!(h.records().is_empty());
    assert!(!tainted(&h.node("e1").await.unwrap()));
    assert!(h.node_claim("e1-claim").await.is_some());
    let failed = h
        .metrics
        .disruption_failed_validations
        .get_or_create(&ConsolidationTypeLabels {
            consolidation_type: Method::Emptiness.label().into(),
        })
        .get();
    assert_eq!(failed, 1);

    // Once the pod is gone the node is empty again, and this time it goes.
    Api::<Pod>::namespaced(h.client.clone(), "default")
        .delete(
            "arrived",
            &kube::api::DeleteParams::default().grace_period(0),
        )
        .await
        .unwrap();
    h.settle(|s| s.pods.len() == 1).await;
    assert!(h.pass().await);
    let records = h.records();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0].method, Method::Emptiness);
    assert_eq!(records[0].nodes, vec!["e1".to_owned()]);
    assert!(
        h.node("busy").await.is_some_and(|n| !tainted(&n)),
        "the busy node is left alone"
    );
    assert!(h.node_claim("busy-claim").await.is_some());
}

/// A command's nodes are its own until it ends: the next pass's clean-up does not strip the
/// taint of a node the command is draining, and no other method takes it again.
#[tokio::test(start_paused = true)]
async fn a_command_in_flight_keeps_its_marks() {
    let it = instance_type("c4", 4, 1.0);
    let mut f = Fixture::default();
    f.pool("p", vec![it.clone()]);
    f.node("busy", "p", &it);
    f.pod("stays", Some("busy"), "3");
    f.node("e1", "p", &it);
    f.node_claims[1].metadata.finalizers = Some(vec!["karpenter.sh/termination".into()]);
    let h = Harness::new(&f).await;

    assert!(h.pass().await, "emptiness takes e1");
    h.settle(|s| {
        s.nodes
            .iter()
            .any(|n| n.name_any() == "e1" && writes::is_tainted(n))
    })
    .await;
    // The NodeClaim waits on its finalizer (no termination controller here): in flight.
    for _ in 0..3 {
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(!h.pass().await);
    }
    assert!(
        tainted(&h.node("e1").await.unwrap()),
        "clean-up leaves a command's node"
    );
    assert_eq!(h.records().len(), 1);
    assert!(!h.reasons().contains(&CONSOLIDATION_REJECTED));
}

/// `Consolidatable` is written once `consolidateAfter` has passed since the node's last pod
/// event, and not before (the fixture's NodeClaim initialized long ago: only the event holds).
#[tokio::test(start_paused = true)]
async fn consolidatable_is_written_after_consolidate_after() {
    let mut f = Fixture::default();
    let it = pool_p(&mut f, "5m");
    f.node("n1", "p", &it);
    let h = Harness::new(&f).await;
    // A pod binds to n1 while the loop watches: a pod event.
    let mut g = Fixture::default();
    g.pod("p1", Some("n1"), "3");
    put_pod(&h.client, &g.pods[0]).await;
    h.settle(|s| s.pods.len() == 1).await;

    h.pass().await;
    let nc = h.node_claim("n1-claim").await.unwrap();
    assert!(
        !has_condition(&nc, CONSOLIDATABLE),
        "the pod event is recent"
    );

    tokio::time::advance(Duration::from_secs(301)).await;
    h.pass().await;
    let nc = h.node_claim("n1-claim").await.unwrap();
    assert!(
        nc.status
            .as_ref()
            .unwrap()
            .conditions
            .is_true(CONSOLIDATABLE),
        "{:?}",
        nc.status
    );
}
