#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use api::capacitybuffer::{CapacityBufferSpec, ScalableRef};
use api::well_known::capacity_buffer::reasons::POD_TEMPLATE_NOT_FOUND;
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaimVolumeSource, PodSpec, ResourceRequirements, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

fn buffer(spec: CapacityBufferSpec) -> CapacityBuffer {
    let mut b = CapacityBuffer::new("warm", spec);
    b.metadata.namespace = Some("apps".into());
    b.metadata.uid = Some("u1".into());
    b.metadata.generation = Some(2);
    b
}

fn spec() -> CapacityBufferSpec {
    CapacityBufferSpec {
        limits: None,
        percentage: None,
        pod_template_ref: None,
        provisioning_strategy: None,
        replicas: None,
        scalable_ref: None,
    }
}

fn limits(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, K8sQuantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), K8sQuantity((*v).to_owned())))
            .collect(),
    )
}

fn requests(cpu: &str, memory: &str) -> Resources {
    Resources::parse([("cpu", cpu), ("memory", memory), ("pods", "1")]).unwrap()
}

fn deployment() -> Option<ScalableRef> {
    Some(ScalableRef {
        api_group: Some("apps".into()),
        kind: "Deployment".into(),
        name: "web".into(),
    })
}

#[test]
fn replicas_percentage_and_limits_combine_as_upstream() {
    let r = requests("2", "4Gi");
    let only_replicas = buffer(CapacityBufferSpec {
        replicas: Some(5),
        ..spec()
    });
    assert_eq!(chunks(&only_replicas, None, &r), Ok(5));
    // 20 % of 10 = 2, of 11 = 2.2 → 3 (rounded up), of 1 → at least 1.
    let pct = buffer(CapacityBufferSpec {
        scalable_ref: deployment(),
        percentage: Some(20),
        ..spec()
    });
    assert_eq!(chunks(&pct, Some(10), &r), Ok(2));
    assert_eq!(chunks(&pct, Some(11), &r), Ok(3));
    assert_eq!(chunks(&pct, Some(1), &r), Ok(1));
    assert_eq!(chunks(&pct, Some(0), &r), Ok(0), "no replicas, no buffer");
    // Both: the larger.
    let both = buffer(CapacityBufferSpec {
        replicas: Some(4),
        ..pct.spec.clone()
    });
    assert_eq!(chunks(&both, Some(10), &r), Ok(4));
    assert_eq!(chunks(&both, Some(100), &r), Ok(20));
    // Limits bound the count: cpu 20 / 2 = 10, memory 40Gi / 4Gi = 10, so 5 stays 5; 7Gi of
    // memory allows 1.
    let bounded = buffer(CapacityBufferSpec {
        replicas: Some(5),
        limits: limits(&[("cpu", "20"), ("memory", "7Gi")]),
        ..spec()
    });
    assert_eq!(chunks(&bounded, None, &r), Ok(1));
    // Limits alone: as many as fit, the smallest over the resources both name.
    let only_limits = buffer(CapacityBufferSpec {
        limits: limits(&[("cpu", "9"), ("memory", "40Gi"), ("nvidia.com/gpu", "4")]),
        ..spec()
    });
    assert_eq!(chunks(&only_limits, None, &r), Ok(4));
    // Limits on nothing the chunk requests bind nothing beside replicas, and alone are an
    // error naming the field.
    let unrelated = buffer(CapacityBufferSpec {
        replicas: Some(3),
        limits: limits(&[("nvidia.com/gpu", "4")]),
        ..spec()
    });
    assert_eq!(chunks(&unrelated, None, &r), Ok(3));
    let alone = buffer(CapacityBufferSpec {
        limits: limits(&[("nvidia.com/gpu", "4")]),
        ..spec()
    });
    let err = chunks(&alone, None, &r).unwrap_err();
    assert!(err.contains("spec.limits") && err.contains("cpu"), "{err}");
    let bad = buffer(CapacityBufferSpec {
        limits: limits(&[("cpu", "lots")]),
        ..spec()
    });
    assert!(
        chunks(&bad, None, &r)
            .unwrap_err()
            .contains("spec.limits.cpu")
    );
    // A percentage without a scalableRef is ignored (upstream).
    let stray = buffer(CapacityBufferSpec {
        replicas: Some(2),
        percentage: Some(500),
        ..spec()
    });
    assert_eq!(chunks(&stray, Some(10), &r), Ok(2));
}

#[test]
fn virtual_pods_are_named_annotated_and_stripped_of_storage() {
    let b = buffer(CapacityBufferSpec {
        replicas: Some(2),
        ..spec()
    });
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            node_name: Some("pinned".into()),
            priority_class_name: Some("high".into()),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([("cpu".into(), K8sQuantity("1".into()))])),
                    ..ResourceRequirements::default()
                }),
                volume_mounts: Some(vec![
                    VolumeMount {
                        name: "data".into(),
                        mount_path: "/data".into(),
                        ..VolumeMount::default()
                    },
                    VolumeMount {
                        name: "cfg".into(),
                        mount_path: "/cfg".into(),
                        ..VolumeMount::default()
                    },
                ]),
                ..Container::default()
            }],
            volumes: Some(vec![
                Volume {
                    name: "data".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: "d".into(),
                        ..PersistentVolumeClaimVolumeSource::default()
                    }),
                    ..Volume::default()
                },
                Volume {
                    name: "cfg".into(),
                    ..Volume::default()
                },
            ]),
            ..PodSpec::default()
        }),
    };
    let pods = virtual_pods(&b, &template, 2, at(100));
    assert_eq!(pods.len(), 2);
    let p = &pods[1];
    assert_eq!(p.metadata.name.as_deref(), Some("capacity-buffer-warm-2"));
    assert_eq!(p.metadata.namespace.as_deref(), Some("apps"));
    assert_eq!(p.metadata.uid.as_deref(), Some("u1-2"));
    assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "web");
    assert!(is_virtual(p));
    assert_eq!(buffer_of(p).as_deref(), Some("apps/warm"));
    let s = p.spec.as_ref().unwrap();
    assert_eq!(s.node_name, None);
    assert_eq!(s.priority, Some(i32::MIN));
    assert_eq!(s.priority_class_name, None);
    let volumes: Vec<&str> = s
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(volumes, ["cfg"]);
    let mounts: Vec<&str> = s.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(mounts, ["cfg"]);
    // The scheduler reads them like any pending pod.
    let converted = scheduling::k8s::pod(p).unwrap();
    assert_eq!(
        converted.requests.get(&ResourceName::new("cpu")),
        Some(Quantity::parse("1").unwrap())
    );
    assert!(virtual_pods(&b, &template, 0, at(1)).is_empty());
}

fn shape(name: &str) -> Shape {
    Shape {
        template: PodTemplateSpec::default(),
        pod_template: Some((name.into(), Some(3))),
        workload_replicas: None,
    }
}

#[test]
fn status_follows_resolution_and_placement_and_changes_only_when_it_must() {
    let mut b = buffer(CapacityBufferSpec {
        replicas: Some(2),
        ..spec()
    });
    let resolved = Resolution::Resolved {
        shape: Box::new(shape("tpl")),
        replicas: 2,
    };
    // Resolved, not placed yet: no Provisioning condition.
    let (s, changed) = status(&b, &resolved, None, at(10));
    assert!(changed);
    assert_eq!(s.replicas, Some(2));
    assert_eq!(s.pod_template_ref.as_ref().unwrap().name, "tpl");
    assert_eq!(s.pod_template_generation, Some(3));
    assert_eq!(
        s.provisioning_strategy.as_deref(),
        Some("buffer.x-k8s.io/active-capacity")
    );
    let conds = s.conditions.clone().unwrap();
    assert_eq!(conds.len(), 1);
    assert_eq!(
        (conds[0].type_.as_str(), conds[0].reason.as_str()),
        ("ReadyForProvisioning", "Resolved")
    );
    assert_eq!(conds[0].observed_generation, Some(2));
    b.status = Some(s);
    assert!(!status(&b, &resolved, None, at(20)).1, "nothing to write");
    // A pass that needed a new NodeClaim for one of the two.
    let needs = Placement {
        desired: 2,
        existing: 1,
        new: 1,
        failed: 0,
    };
    let (s, changed) = status(&b, &resolved, Some(needs), at(30));
    assert!(changed);
    let p = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Provisioning")
        .unwrap()
        .clone();
    assert_eq!(
        (p.status, p.reason.as_str(), p.message.as_str()),
        (
            ConditionStatus::False,
            "RequiresNewCapacity",
            "1/2 virtual pods required new capacity, 0 failed"
        )
    );
    b.status = Some(s);
    // Then all fit: True, with a new transition time.
    let fits = Placement {
        desired: 2,
        existing: 2,
        new: 0,
        failed: 0,
    };
    let (s, _) = status(&b, &resolved, Some(fits), at(40));
    let p = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Provisioning")
        .unwrap()
        .clone();
    assert_eq!(
        (p.status, p.reason.as_str(), p.last_transition_time.0),
        (ConditionStatus::True, "FitsExistingCapacity", at(40))
    );
    assert_eq!(p.message, "All 2 virtual pods fit on existing capacity");
    b.status = Some(s);
    // The template is deleted: not ready, the count kept, Provisioning follows.
    let gone = Resolution::Failed(Unresolved {
        reason: POD_TEMPLATE_NOT_FOUND,
        message: "PodTemplate apps/tpl not found".into(),
    });
    let (s, changed) = status(&b, &gone, Some(fits), at(50));
    assert!(changed);
    assert_eq!(s.replicas, Some(2), "the last good count stays");
    let by_type: BTreeMap<&str, &Condition> = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.type_.as_str(), c))
        .collect();
    assert_eq!(
        by_type["ReadyForProvisioning"].reason,
        "PodTemplateNotFound"
    );
    assert_eq!(by_type["Provisioning"].reason, "NotReadyForProvisioning");
    // Zero chunks: BufferEmpty.
    let empty = Resolution::Resolved {
        shape: Box::new(shape("tpl")),
        replicas: 0,
    };
    let (s, _) = status(&b, &empty, None, at(60));
    assert!(
        s.conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Provisioning" && c.reason == "BufferEmpty")
    );
}
