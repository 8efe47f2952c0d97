//! Existing nodes as placement candidates (spec §3.7 step 1).
//!
//! Responsibility: track what is left on each existing node during a solve (resources after
//! bound pods and pending daemon overhead, host ports) and decide whether a pod fits there:
//! tolerates the node's taints, host ports free, requests fit, node labels strictly compatible
//! with the pod's requirements, topology allows the node's domains.
//! Inputs: [`ExistingNode`]s, bound pods, DaemonSet pods. Outputs: [`ExistingCandidate`]s.

use std::sync::Arc;

use crate::labels::HOSTNAME;
use crate::pod::{HostPort, Pod};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::taints::{Taint, tolerates_all};
use crate::topology::Topology;

use super::PodData;
use super::daemons::{DaemonPod, existing_node_overhead};
use super::input::ExistingNode;

/// An existing node during a solve.
#[derive(Debug)]
pub(crate) struct ExistingCandidate {
    pub(crate) name: Arc<str>,
    pub(crate) requirements: Requirements,
    taints: Vec<Taint>,
    remaining: Resources,
    host_ports: Vec<HostPort>,
    pub(crate) pods: Vec<Arc<str>>,
}

impl ExistingCandidate {
    pub(crate) fn new(node: &ExistingNode, bound: &[&Pod], daemons: &[DaemonPod]) -> Self {
        let mut requirements = Requirements::from_labels(node.labels.iter());
        // The hostname domain is the label; the node name only when the label is missing.
        if !node.labels.contains_key(HOSTNAME) {
            requirements.add(Requirement::in_values(HOSTNAME, [node.name.clone()]));
        }
        let mut used = Resources::default();
        let mut host_ports = Vec::new();
        for pod in bound.iter().filter(|p| !p.terminal_or_terminating) {
            used.merge(&pod.requests);
            host_ports.extend(pod.host_ports.iter().cloned());
        }
        let daemons_on_node: Vec<&Pod> = bound
            .iter()
            .copied()
            .filter(|p| p.owned_by_daemonset)
            .collect();
        let overhead =
            existing_node_overhead(daemons, &node.taints, &requirements, &daemons_on_node);
        let mut remaining = node.allocatable.clone();
        remaining.subtract(&used);
        remaining.subtract(&overhead.requests);
        host_ports.extend(overhead.host_ports);
        Self {
            name: node.name.clone(),
            requirements,
            taints: node.taints.clone(),
            remaining,
            host_ports,
            pods: Vec::new(),
        }
    }

    /// Whether `pod` can go here; on success the requirements to record in topology.
    pub(crate) fn can_add(
        &self,
        pod: &Pod,
        data: &PodData,
        topology: &Topology,
    ) -> Result<Requirements, String> {
        tolerates_all(&self.taints, &pod.tolerations).map_err(|e| e.to_string())?;
        if let Some(port) = pod
            .host_ports
            .iter()
            .find(|p| self.host_ports.iter().any(|used| used.conflicts(p)))
        {
            return Err(format!(
                "host port {}/{} is in use",
                port.port, port.protocol
            ));
        }
        if !pod.requests.fits(&self.remaining) {
            return Err("exceeds node resources".into());
        }
        self.requirements
            .compatible_strict(&data.requirements)
            .map_err(|e| e.to_string())?;
        let topology_requirements = topology
            .add_requirements(pod, &data.strict_requirements, &self.requirements)
            .map_err(|e| e.to_string())?;
        self.requirements
            .compatible_strict(&topology_requirements)
            .map_err(|e| e.to_string())?;
        let mut final_requirements = self.requirements.clone();
        final_requirements.add_all(&topology_requirements);
        Ok(final_requirements)
    }

    /// The node's taints.
    pub(crate) fn taints(&self) -> &[Taint] {
        &self.taints
    }

    /// Commits `pod` to this node.
    pub(crate) fn add(&mut self, pod: &Pod) {
        self.remaining.subtract(&pod.requests);
        self.host_ports.extend(pod.host_ports.iter().cloned());
        self.pods.push(pod.uid.clone());
    }
}
