//! Test builders: MachineDeployments and NodeClass specs that read like sentences.

use std::collections::BTreeMap;

use api::MachineDeployment;
use api::capi::MachineDeploymentSpec;
use api::nodeclass::ClusterAPINodeClassSpec;
use api::well_known::capi::{self, KARPENTER_MEMBER, capacity};

/// A member MachineDeployment under construction.
#[derive(Debug, Clone)]
pub(crate) struct MdBuilder(MachineDeployment);

/// A member MachineDeployment `namespace/name` (member label `""`, no annotations).
pub(crate) fn md(namespace: &str, name: &str) -> MdBuilder {
    let mut md = MachineDeployment {
        spec: MachineDeploymentSpec::default(),
        ..MachineDeployment::default()
    };
    md.metadata.name = Some(name.to_owned());
    md.metadata.namespace = Some(namespace.to_owned());
    MdBuilder(md).label(KARPENTER_MEMBER, "")
}

impl MdBuilder {
    pub(crate) fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    pub(crate) fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    pub(crate) fn without_label(mut self, key: &str) -> Self {
        if let Some(labels) = self.0.metadata.labels.as_mut() {
            labels.remove(key);
        }
        self
    }

    pub(crate) fn template_label(mut self, key: &str, value: &str) -> Self {
        self.0
            .spec
            .template
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_owned(), value.to_owned());
        self
    }

    pub(crate) fn cluster(mut self, name: &str) -> Self {
        self.0.spec.cluster_name = name.to_owned();
        self.0.spec.template.spec.cluster_name = name.to_owned();
        self.label(capi::CLUSTER_NAME, name)
    }

    pub(crate) fn replicas(mut self, replicas: i32) -> Self {
        self.0.spec.replicas = Some(replicas);
        self
    }

    pub(crate) fn paused(mut self) -> Self {
        self.0.spec.paused = Some(true);
        self
    }

    pub(crate) fn failure_domain(mut self, zone: &str) -> Self {
        self.0.spec.template.spec.failure_domain = Some(zone.to_owned());
        self
    }

    /// cpu and memory annotations.
    pub(crate) fn shape(self, cpu: &str, memory: &str) -> Self {
        self.annotation(capacity::CPU, cpu)
            .annotation(capacity::MEMORY, memory)
    }

    /// The labels annotation.
    pub(crate) fn labels(self, labels: &str) -> Self {
        self.annotation(capacity::LABELS, labels)
    }

    pub(crate) fn max_size(self, max: &str) -> Self {
        self.annotation(capi::MAX_SIZE, max)
    }

    pub(crate) fn build(self) -> MachineDeployment {
        self.0
    }
}

/// An empty NodeClass spec with `evictionHard: {}` (no overhead at all), so capacities compare
/// directly with allocatable.
pub(crate) fn bare_nodeclass() -> ClusterAPINodeClassSpec {
    ClusterAPINodeClassSpec {
        eviction_hard: Some(BTreeMap::new()),
        ..ClusterAPINodeClassSpec::default()
    }
}
