//! The recording fake: cheapest choice, late providerIDs, idempotent delete, injected errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;

use api::NodeClaim;
use api::common::{NodeClassReference, NodeSelectorOperator, NodeSelectorRequirementWithMinValues};
use api::nodeclaim::{NodeClaimSpec, ResourceRequirements};
use cloudprovider::{CloudProvider, CloudProviderError, FakeCloudProvider, Method};
use futures::executor::block_on;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use scheduling::fixtures::default_fake_instance_types;

fn node_claim(name: &str, cpu: &str) -> NodeClaim {
    let spec = NodeClaimSpec {
        expire_after: None,
        node_class_ref: NodeClassReference {
            group: "karpenter.cluster.x-k8s.io".into(),
            kind: "ClusterAPINodeClass".into(),
            name: "default".into(),
        },
        requirements: vec![NodeSelectorRequirementWithMinValues {
            key: "kubernetes.io/arch".into(),
            min_values: None,
            operator: NodeSelectorOperator::In,
            values: Some(vec!["amd64".into()]),
        }],
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([("cpu".into(), Quantity(cpu.into()))])),
        }),
        startup_taints: None,
        taints: None,
        termination_grace_period: None,
    };
    NodeClaim::new(name, spec)
}

#[test]
fn create_picks_the_cheapest_fit_and_the_provider_id_comes_later() {
    let fake = FakeCloudProvider::new(default_fake_instance_types().unwrap());
    let nc = node_claim("a", "1");
    let launch = block_on(fake.create(&nc)).unwrap();
    assert_eq!(launch.instance_type, "small-instance-type");
    assert_eq!(launch.provider_id, None);
    assert_eq!(
        block_on(fake.create(&nc)).unwrap(),
        launch,
        "create is idempotent"
    );

    let id = fake.assign_provider_id("a").unwrap();
    let later = block_on(fake.get_launch(&nc)).unwrap();
    assert_eq!(later.provider_id.as_deref(), Some(id.as_str()));
    assert_eq!(
        block_on(fake.get(&format!("{id}/"))).unwrap().machine,
        launch.machine
    );

    let big = node_claim("b", "3");
    assert_eq!(
        block_on(fake.create(&big)).unwrap().instance_type,
        "default-instance-type"
    );
    assert_eq!(block_on(fake.list()).unwrap().len(), 2);
    assert_eq!(fake.count(Method::Create), 3);
}

#[test]
fn delete_is_idempotent_then_not_found() {
    let fake = FakeCloudProvider::new(default_fake_instance_types().unwrap());
    let nc = node_claim("a", "1");
    block_on(fake.create(&nc)).unwrap();
    block_on(fake.delete(&nc)).unwrap();
    assert!(block_on(fake.delete(&nc)).unwrap_err().is_not_found());
    assert!(block_on(fake.get_launch(&nc)).unwrap_err().is_not_found());
}

#[test]
fn injected_errors_and_insufficient_capacity() {
    let fake = FakeCloudProvider::new(default_fake_instance_types().unwrap());
    fake.inject_error(Method::Create, CloudProviderError::Transient("boom".into()));
    let nc = node_claim("a", "1");
    assert_eq!(
        block_on(fake.create(&nc)).unwrap_err(),
        CloudProviderError::Transient("boom".into())
    );
    assert!(block_on(fake.create(&nc)).is_ok());
    let huge = node_claim("huge", "1000");
    assert!(
        block_on(fake.create(&huge))
            .unwrap_err()
            .is_insufficient_capacity()
    );
    fake.assign_on_create(true);
    assert!(
        block_on(fake.create(&node_claim("c", "1")))
            .unwrap()
            .provider_id
            .is_some()
    );
    fake.set_drifted("c", "AMIDrifted");
    assert_eq!(
        block_on(fake.is_drifted(&node_claim("c", "1")))
            .unwrap()
            .as_deref(),
        Some("AMIDrifted")
    );
}
