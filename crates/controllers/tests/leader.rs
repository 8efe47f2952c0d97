//! Lease-based leader election, against sim and against a real kube-apiserver.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod support;

use std::time::Duration;

use controllers::leader::{LeaderElector, LeaseConfig, default_identity};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use sim::realk8s::{RealCluster, RealConfig};
use sim::{Sim, SimConfig};
use support::wait_for;
use tokio::sync::watch;
use world::Backend;

const NS: &str = "kube-system";
const NAME: &str = "karpenter-leader-election";
const WAIT: Duration = Duration::from_secs(20);

fn fast() -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(200),
    }
}

/// Keeps the server of a test alive.
#[allow(dead_code)]
enum Server {
    Sim(Sim),
    Real(RealCluster),
}

async fn client(backend: Backend) -> (Server, kube::Client) {
    match backend {
        Backend::Sim => {
            let sim = Sim::new(SimConfig::default());
            let client = kube::Client::new(sim.router(), "default");
            (Server::Sim(sim), client)
        }
        Backend::Real => {
            let real = RealCluster::start(RealConfig::default()).await.unwrap();
            let client = real.client().await.unwrap();
            (Server::Real(real), client)
        }
    }
}

fn elector(client: &kube::Client, identity: &str) -> LeaderElector {
    LeaderElector::new(client.clone(), NS, NAME, identity.into(), fast())
}

fn leases(client: &kube::Client) -> Api<Lease> {
    Api::namespaced(client.clone(), NS)
}

async fn lease(client: &kube::Client) -> Lease {
    leases(client).get(NAME).await.unwrap()
}

fn holder(lease: &Lease) -> Option<String> {
    lease.spec.as_ref()?.holder_identity.clone()
}

async fn wait_for_value(rx: &mut watch::Receiver<bool>, value: bool) {
    tokio::time::timeout(WAIT, rx.wait_for(|v| *v == value))
        .await
        .expect("leading did not change in time")
        .unwrap();
}

/// Waits until the Lease's renewTime moved `times` times (so renewals are happening).
async fn renewals(client: &kube::Client, times: usize) {
    let mut last = lease(client).await.spec.unwrap().renew_time;
    for i in 0..times {
        last = wait_for(&format!("renewal {i}"), WAIT, || {
            let last = last.clone();
            async move {
                let now = lease(client).await.spec.unwrap().renew_time;
                (now != last).then_some(now)
            }
        })
        .await;
    }
}

async fn only_one_candidate_leads_and_the_other_takes_over_on_release(backend: Backend) {
    let (_sim, client) = client(backend).await;
    let a = elector(&client, "a");
    let b = elector(&client, "b");
    let (winner, loser) = tokio::select! {
        () = a.acquire() => (&a, &b),
        () = b.acquire() => (&b, &a),
    };
    assert!(*winner.leading().borrow());
    let taken = lease(&client).await;
    assert_eq!(holder(&taken).as_deref(), Some(winner.identity()));
    assert_eq!(taken.spec.as_ref().unwrap().lease_duration_seconds, Some(3));

    // The loser keeps trying while the winner renews; it never gets the Lease.
    let contender = loser.acquire();
    tokio::pin!(contender);
    tokio::select! {
        () = &mut contender => panic!("both candidates lead"),
        () = renewals(&client, 3) => {}
    }
    assert!(!*loser.leading().borrow());
    assert_eq!(
        holder(&lease(&client).await).as_deref(),
        Some(winner.identity())
    );

    let mut winner_leading = winner.leading();
    winner.release().await;
    wait_for_value(&mut winner_leading, false).await;
    tokio::time::timeout(WAIT, contender)
        .await
        .expect("the other candidate did not take over");
    assert!(*loser.leading().borrow());
    let taken = lease(&client).await;
    assert_eq!(holder(&taken).as_deref(), Some(loser.identity()));
    assert_eq!(taken.spec.unwrap().lease_transitions, Some(1));
}

async fn a_stale_lease_is_taken_over(backend: Backend) {
    let (_sim, client) = client(backend).await;
    let long_ago = Timestamp::now() - SignedDuration::from_hours(1);
    let stale: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 15,
            "acquireTime": long_ago, "renewTime": long_ago, "leaseTransitions": 4},
    }))
    .unwrap();
    leases(&client)
        .create(&PostParams::default(), &stale)
        .await
        .unwrap();
    let me = LeaderElector::new(
        client.clone(),
        NS,
        NAME,
        "me".into(),
        LeaseConfig::default(),
    );
    tokio::time::timeout(WAIT, me.acquire())
        .await
        .expect("the stale lease was not taken");
    let taken = lease(&client).await;
    assert_eq!(holder(&taken).as_deref(), Some("me"));
    let spec = taken.spec.unwrap();
    assert_eq!(spec.lease_transitions, Some(5));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert!(spec.acquire_time.unwrap().0 > long_ago);
    me.release().await;
    assert_eq!(holder(&lease(&client).await), None);
}

async fn leadership_is_lost_when_someone_else_holds_the_lease(backend: Backend) {
    let (_sim, client) = client(backend).await;
    let me = elector(&client, "me");
    me.acquire().await;
    let mut leading = me.leading();
    assert!(*leading.borrow_and_update());

    // MicroTime: kube-apiserver wants exactly six fractional digits.
    let now = Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let patch = json!({"spec": {"holderIdentity": "intruder", "renewTime": now,
        "leaseDurationSeconds": 3600}});
    leases(&client)
        .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for_value(&mut leading, false).await;
    // Releasing a lease we no longer hold leaves it alone.
    me.release().await;
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("intruder"));
}

/// Issue 11 item 7: a Lease whose `renewTime` lies far in the past by our wall clock (the
/// holder's clock is behind) but that keeps being renewed is not expired: only a record that
/// stops changing for a lease duration, by our own clock, is.
async fn a_lease_renewed_by_a_skewed_clock_is_not_taken(backend: Backend) {
    let (_sim, client) = client(backend).await;
    let skewed = |offset: i64| {
        (Timestamp::now() - SignedDuration::from_hours(1) + SignedDuration::from_secs(offset))
            .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string()
    };
    let behind: Lease = serde_json::from_value(json!({
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"holderIdentity": "behind", "leaseDurationSeconds": 3,
            "acquireTime": skewed(0), "renewTime": skewed(0)},
    }))
    .unwrap();
    leases(&client)
        .create(&PostParams::default(), &behind)
        .await
        .unwrap();
    let renewer = {
        let client = client.clone();
        tokio::spawn(async move {
            for i in 1.. {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let patch = json!({"spec": {"renewTime": skewed(i)}});
                let _ = leases(&client)
                    .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
            }
        })
    };
    let me = elector(&client, "me");
    let attempt = tokio::time::timeout(Duration::from_secs(8), me.acquire()).await;
    assert!(attempt.is_err(), "took a Lease its holder keeps renewing");
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("behind"));
    renewer.abort();
    tokio::time::timeout(WAIT, me.acquire())
        .await
        .expect("a Lease that stopped changing is taken after its duration");
    assert_eq!(holder(&lease(&client).await).as_deref(), Some("me"));
    me.release().await;
}

/// Issue 11 item 7: renewals that hang are cut off at the renew deadline, so the leader stops
/// leading before anyone else may take the Lease.
#[tokio::test(start_paused = true)]
async fn a_hanging_renewal_loses_leadership_by_the_renew_deadline() {
    let sim = Sim::new(SimConfig::default());
    let client = kube::Client::new(sim.router(), "default");
    let me = elector(&client, "me");
    me.acquire().await;
    let mut leading = me.leading();
    assert!(*leading.borrow_and_update());
    sim.set_faults(sim::fault::FaultConfig {
        seed: 1,
        rules: vec![sim::fault::FaultRule {
            resources: vec!["leases".into()],
            latency: Duration::from_secs(3600),
            ..sim::fault::FaultRule::default()
        }],
    });
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(60), leading.wait_for(|v| !*v))
        .await
        .expect("leadership not lost while renewals hang")
        .unwrap();
    let took = started.elapsed();
    assert!(
        took <= fast().renew_deadline + fast().retry_period * 2,
        "lost only after {took:?}"
    );
}

#[test]
fn identities_name_the_host_and_differ_per_process_start() {
    let id = default_identity();
    let (host, suffix) = id.rsplit_once('_').unwrap();
    assert!(!host.is_empty() && !suffix.is_empty(), "{id}");
}

world::backend_tests!(
    only_one_candidate_leads_and_the_other_takes_over_on_release,
    a_stale_lease_is_taken_over,
    leadership_is_lost_when_someone_else_holds_the_lease,
    a_lease_renewed_by_a_skewed_clock_is_not_taken,
);
