//! Resource names (`cpu`, `memory`, `nvidia.com/gpu`, ...), cheap to clone and compare.
//!
//! Responsibility: a name type for resource lists whose well-known values need no allocation and
//! compare as an integer, and whose other values share one allocation across clones — and
//! across separately parsed copies of the same name ([`intern`]: a NodeOverlay's
//! `nvidia.com/gpu` is the same `Arc` as the instance types'), so comparing two equal names is a
//! pointer comparison, not a string comparison.
//! Input: a name string. Output: a [`ResourceName`] ordered exactly as its string.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// At most this many distinct names are interned; later ones get an `Arc` of their own (still
/// correct, only compared by string). A cluster has a handful of extended resources.
const INTERN_MAX: usize = 4096;

static INTERNED: LazyLock<Mutex<HashSet<Arc<str>>>> = LazyLock::new(Mutex::default);

/// The one shared `Arc` of `name` (made on first use).
fn intern(name: &str) -> Arc<str> {
    let mut set = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(existing) = set.get(name) {
        return Arc::clone(existing);
    }
    let arc: Arc<str> = Arc::from(name);
    if set.len() < INTERN_MAX {
        set.insert(Arc::clone(&arc));
    }
    arc
}

/// The name of a resource, e.g. [`ResourceName::CPU`] or `nvidia.com/gpu`.
///
/// Well-known names are stored as a tag (no allocation, comparisons are integer compares); any
/// other name is an `Arc<str>`, so clones share it. Ordering and equality are those of the
/// string, so a list sorted by name is sorted by string.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ResourceName(Repr);

/// Invariant: `Other` never holds the string of a well-known variant.
#[derive(Clone, Eq)]
enum Repr {
    // Declared in string order, so comparing two well-known names can compare their tags.
    Cpu,
    EphemeralStorage,
    Memory,
    Nodes,
    Pods,
    Other(Arc<str>),
}

impl ResourceName {
    /// `cpu`, in cores.
    pub const CPU: ResourceName = ResourceName(Repr::Cpu);
    /// `memory`, in bytes.
    pub const MEMORY: ResourceName = ResourceName(Repr::Memory);
    /// `ephemeral-storage`, in bytes.
    pub const EPHEMERAL_STORAGE: ResourceName = ResourceName(Repr::EphemeralStorage);
    /// `pods`: the number of pods a node can run.
    pub const PODS: ResourceName = ResourceName(Repr::Pods);
    /// `nodes`: Karpenter's special NodePool limit on the number of nodes.
    pub const NODES: ResourceName = ResourceName(Repr::Nodes);

    /// The prefix of huge-page resources (`hugepages-2Mi`).
    pub const HUGEPAGES_PREFIX: &'static str = "hugepages-";

    /// The name `name`; well-known names map to their constants.
    #[must_use]
    pub fn new(name: &str) -> ResourceName {
        ResourceName::well_known(name).unwrap_or_else(|| ResourceName(Repr::Other(intern(name))))
    }

    fn well_known(name: &str) -> Option<ResourceName> {
        Some(match name {
            "cpu" => ResourceName::CPU,
            "memory" => ResourceName::MEMORY,
            "ephemeral-storage" => ResourceName::EPHEMERAL_STORAGE,
            "pods" => ResourceName::PODS,
            "nodes" => ResourceName::NODES,
            _ => return None,
        })
    }

    /// The name as a string.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Cpu => "cpu",
            Repr::EphemeralStorage => "ephemeral-storage",
            Repr::Memory => "memory",
            Repr::Nodes => "nodes",
            Repr::Pods => "pods",
            Repr::Other(name) => name,
        }
    }

    /// Whether this is a huge-page resource (`hugepages-<size>`).
    #[must_use]
    pub fn is_hugepages(&self) -> bool {
        self.as_str().starts_with(ResourceName::HUGEPAGES_PREFIX)
    }

    /// Whether the name is one of the constants, so compares without touching a string.
    fn is_well_known(&self) -> bool {
        !matches!(self.0, Repr::Other(_))
    }

    /// The position of a well-known name in string order.
    fn rank(&self) -> u8 {
        match self.0 {
            Repr::Cpu => 0,
            Repr::EphemeralStorage => 1,
            Repr::Memory => 2,
            Repr::Nodes => 3,
            Repr::Pods => 4,
            Repr::Other(_) => u8::MAX,
        }
    }
}

impl PartialEq for Repr {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            // Interned names are one allocation (`Arc<str>`'s own `==` compares the bytes).
            (Repr::Other(a), Repr::Other(b)) => Arc::ptr_eq(a, b) || a == b,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

impl std::hash::Hash for Repr {
    /// As `#[derive(Hash)]` would: the discriminant, then an other name's string (equal names
    /// hash alike whether or not they share an allocation).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        if let Repr::Other(name) = self {
            name.hash(state);
        }
    }
}

impl Ord for ResourceName {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.0, &other.0) {
            // Interned: equal names are one allocation.
            (Repr::Other(a), Repr::Other(b)) if Arc::ptr_eq(a, b) => Ordering::Equal,
            _ if self.is_well_known() && other.is_well_known() => self.rank().cmp(&other.rank()),
            _ => {
                // Names mostly differ in their first byte (`cpu` / `nvidia.com/gpu`): decide
                // that without a call to compare the whole strings (same order: bytewise).
                let (a, b) = (self.as_str().as_bytes(), other.as_str().as_bytes());
                match (a.first(), b.first()) {
                    (Some(x), Some(y)) if x != y => x.cmp(y),
                    _ => a.cmp(b),
                }
            }
        }
    }
}

impl PartialOrd for ResourceName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<&str> for ResourceName {
    fn from(name: &str) -> Self {
        ResourceName::new(name)
    }
}

impl From<String> for ResourceName {
    fn from(name: String) -> Self {
        ResourceName::well_known(&name).unwrap_or_else(|| ResourceName(Repr::Other(intern(&name))))
    }
}

impl AsRef<str> for ResourceName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Debug for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_names_normalize_to_their_constants() {
        assert_eq!(ResourceName::new("cpu"), ResourceName::CPU);
        assert_eq!(
            ResourceName::from(String::from("memory")),
            ResourceName::MEMORY
        );
        assert_eq!(
            ResourceName::from("ephemeral-storage"),
            ResourceName::EPHEMERAL_STORAGE
        );
        assert_eq!(ResourceName::new("pods"), ResourceName::PODS);
        assert_eq!(ResourceName::new("nodes"), ResourceName::NODES);
        assert!(ResourceName::new("nodes").is_well_known());
        assert!(!ResourceName::new("Nodes").is_well_known());
    }

    #[test]
    fn ordering_is_string_ordering() {
        let names = [
            "cpu",
            "ephemeral-storage",
            "hugepages-2Mi",
            "memory",
            "nodes",
            "nvidia.com/gpu",
            "pods",
            "a",
            "zz",
            "",
            "cpu0",
            "memorx",
        ];
        for a in names {
            for b in names {
                let by_name = ResourceName::new(a).cmp(&ResourceName::new(b));
                assert_eq!(by_name, a.cmp(b), "{a} vs {b}");
                assert_eq!(
                    ResourceName::new(a) == ResourceName::new(b),
                    a == b,
                    "{a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn other_names_are_interned_and_an_uninterned_copy_still_compares_by_string() {
        let (a, b) = (
            ResourceName::new("example.com/fpga"),
            ResourceName::from(String::from("example.com/fpga")),
        );
        match (&a.0, &b.0) {
            (Repr::Other(x), Repr::Other(y)) => assert!(Arc::ptr_eq(x, y)),
            _ => panic!("not other names"),
        }
        // As past INTERN_MAX: an Arc of its own.
        let own = ResourceName(Repr::Other(Arc::from("example.com/fpga")));
        assert_eq!(own, a);
        assert_eq!(own.cmp(&a), Ordering::Equal);
        assert_eq!(
            own.cmp(&ResourceName::new("example.com/fpgb")),
            Ordering::Less
        );
    }

    #[test]
    fn other_names_round_trip_their_string() {
        let gpu = ResourceName::new("nvidia.com/gpu");
        assert_eq!(gpu.as_str(), "nvidia.com/gpu");
        assert_eq!(gpu.to_string(), "nvidia.com/gpu");
        assert_eq!(format!("{gpu:?}"), "\"nvidia.com/gpu\"");
        assert_eq!(ResourceName::PODS.as_ref(), "pods");
    }

    #[test]
    fn hugepages_are_recognized_by_prefix() {
        assert!(ResourceName::new("hugepages-2Mi").is_hugepages());
        assert!(ResourceName::new("hugepages-1Gi").is_hugepages());
        assert!(!ResourceName::MEMORY.is_hugepages());
    }
}
