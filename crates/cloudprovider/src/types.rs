//! The values the CloudProvider contract exchanges: [`Launch`] and [`ObjectRef`], plus
//! providerID normalisation.
//!
//! Responsibility: plain data, no I/O. A [`Launch`] is what core copies onto the NodeClaim
//! (providerID, capacity, allocatable, labels) once known.

use std::collections::BTreeMap;
use std::fmt;

use scheduling::resources::Resources;

/// A namespaced object reference, displayed `namespace/name`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// The namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectRef {
    /// `namespace/name`.
    #[must_use]
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// Parses `namespace/name` (both non-empty, exactly one `/`, surrounding spaces ignored).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (namespace, name) = text.trim().split_once('/')?;
        (!namespace.is_empty() && !name.is_empty() && !name.contains('/'))
            .then(|| Self::new(namespace, name))
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The scaling group an instance belongs to, how many of the group's instances may still be
/// removed without a replacement before it would fall below its minimum size, and whether
/// this instance may be removed at all just now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovalRoom {
    /// The group (for Cluster API: `namespace/name` of the MachineDeployment).
    pub group: String,
    /// Its minimum size.
    pub min: u32,
    /// Its current size minus the minimum, never below 0.
    pub room: u32,
    /// Why this instance must not be disrupted now whatever the room, when it must not: its
    /// removal could not be made exact (for Cluster API: mid-rollout, lowering the
    /// MachineDeployment's replicas would make Cluster API delete a Machine of another
    /// MachineSet, and deleting this one alone would only make its MachineSet replace it).
    pub hold: Option<String>,
}

/// One launched (or launching) instance, as core sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// The provider object backing the instance (for Cluster API: the Machine).
    pub machine: ObjectRef,
    /// The providerID, once the infrastructure reported it.
    pub provider_id: Option<String>,
    /// The NodeClaim the instance is bound to (name), when known.
    pub node_claim: Option<String>,
    /// The instance type name (value of `node.kubernetes.io/instance-type`).
    pub instance_type: String,
    /// The zone (`None`: unknown).
    pub zone: Option<String>,
    /// The capacity type (`on-demand`, `spot`, `reserved`).
    pub capacity_type: String,
    /// The node's capacity.
    pub capacity: Resources,
    /// The node's allocatable (capacity minus overhead).
    pub allocatable: Resources,
    /// The labels the node will carry (instance type, zone, capacity type, …).
    pub labels: BTreeMap<String, String>,
    /// Annotations the NodeClaim must carry (for Cluster API: its Machine), written by the
    /// lifecycle together with the labels.
    pub annotations: BTreeMap<String, String>,
    /// Whether the instance is being terminated.
    pub deleting: bool,
    /// Whether its owner already deletes the instance itself (for Cluster API: the Machine
    /// has a deletionTimestamp — a rollout, a scale-down, a deletion by hand), as opposed to
    /// a removal only asked for. Its Node may still be up and Ready while it drains.
    pub instance_deleting: bool,
}

impl Launch {
    /// A launch of `machine` with nothing else known.
    #[must_use]
    pub fn bare(machine: ObjectRef) -> Self {
        Self {
            machine,
            provider_id: None,
            node_claim: None,
            instance_type: String::new(),
            zone: None,
            capacity_type: String::new(),
            capacity: Resources::new(),
            allocatable: Resources::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            deleting: false,
            instance_deleting: false,
        }
    }
}

/// The comparable form of a providerID: surrounding spaces and trailing slashes removed, the
/// scheme (before `://`) lower-cased. `AWS:///us-east-1a/i-1/` → `aws:///us-east-1a/i-1`.
#[must_use]
pub fn normalize_provider_id(provider_id: &str) -> String {
    let trimmed = provider_id.trim().trim_end_matches('/');
    match trimmed.split_once("://") {
        Some((scheme, rest)) => format!("{}://{rest}", scheme.to_ascii_lowercase()),
        None => trimmed.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_normalise() {
        assert_eq!(
            normalize_provider_id(" AWS:///us-east-1a/i-1// "),
            "aws:///us-east-1a/i-1"
        );
        assert_eq!(normalize_provider_id("sim:///z1/m"), "sim:///z1/m");
        assert_eq!(normalize_provider_id("opaque/"), "opaque");
    }

    #[test]
    fn object_refs_parse() {
        assert_eq!(ObjectRef::parse("ns/m"), Some(ObjectRef::new("ns", "m")));
        assert_eq!(ObjectRef::parse(" ns/m "), Some(ObjectRef::new("ns", "m")));
        for bad in ["", "m", "/m", "ns/", "a/b/c"] {
            assert_eq!(ObjectRef::parse(bad), None, "{bad}");
        }
        assert_eq!(ObjectRef::new("ns", "m").to_string(), "ns/m");
    }
}
