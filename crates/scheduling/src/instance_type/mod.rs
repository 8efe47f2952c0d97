//! Instance types, their offerings, and the instance-type filtering the scheduler runs
//! (spec §2.3, §3.9, §3.16).
//!
//! Responsibility: the [`InstanceType`] model a cloud provider reports (requirements, offerings,
//! capacity, overhead) with its allocatable computed once and cached; validation of what a
//! provider hands us; price ordering, compatibility, minValues and truncation helpers over
//! candidate lists; and [`filter_instance_types`], the per-NodeClaim filter on the scheduler's
//! hot path.
//! Inputs: provider data ([`InstanceTypeSpec`]), NodeClaim requirements, pod requests, daemon
//! overhead per group. Outputs: validated [`InstanceType`]s, ordered/filtered candidate lists,
//! prices, typed errors ([`InstanceTypeError`], [`MinValuesError`],
//! [`InstanceTypeFilterError`]).
//!
//! Candidate lists are generic over `C: AsRef<InstanceType> + Clone`: `Arc<InstanceType>`,
//! `&InstanceType`, or a caller's own handle. Everything is deterministic: ties in price order
//! break by name, and lists keep their input order otherwise.

mod check;
mod dense;
mod failure;
mod filter;
mod list;
mod matcher;
mod offering;

use std::sync::Arc;

pub(crate) use dense::{Covered, Dense};
pub use failure::{FilterFailure, FilterFlags, InstanceTypeFilterError};
pub use filter::{FilterGroup, FilterInput, FilterOutcome, filter_instance_types};
pub use list::{
    MinValuesError, MinValuesPolicy, UnsatisfiedMinValues, compatible, order_by_price,
    satisfies_min_values, truncate,
};
pub use matcher::OfferingMatcher;
pub use offering::{Offering, OfferingIterExt, Offerings, PriceRank};

use crate::labels::{CAPACITY_TYPE, INSTANCE_TYPE, TOPOLOGY_ZONE, WellKnownLabels};
use crate::quantity::Quantity;
use crate::requirements::Requirements;
use crate::resources::{ResourceName, Resources};

/// Resources the node reserves outside Kubernetes' pods, as absolute quantities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overhead {
    /// Reserved for Kubernetes system daemons (kubelet, container runtime).
    pub kube_reserved: Resources,
    /// Reserved for OS system daemons.
    pub system_reserved: Resources,
    /// Kept free by the kubelet's hard eviction thresholds.
    pub eviction_threshold: Resources,
}

impl Overhead {
    /// The element-wise sum of the three parts.
    #[must_use]
    pub fn total(&self) -> Resources {
        crate::resources::merge([
            &self.kube_reserved,
            &self.system_reserved,
            &self.eviction_threshold,
        ])
    }
}

/// The provider's description of an instance type, before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceTypeSpec {
    /// The name; must equal the instance-type requirement's value when that is defined.
    pub name: Arc<str>,
    /// What a node of this type offers (should define every well-known label, possibly empty).
    pub requirements: Requirements,
    /// Where and how it can be launched.
    pub offerings: Vec<Offering>,
    /// Full resource capacity.
    pub capacity: Resources,
    /// Reserved overhead.
    pub overhead: Overhead,
}

/// Why an [`InstanceTypeSpec`] is not a valid instance type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InstanceTypeError {
    /// The name is empty.
    #[error("instance type name is empty")]
    EmptyName,
    /// The instance-type requirement does not name exactly this instance type.
    #[error("instance type {name:?}: requirement {requirement} does not match the name")]
    NameMismatch {
        /// The instance type's name.
        name: Arc<str>,
        /// The offending requirement, as displayed.
        requirement: String,
    },
    /// An offering does not define a required key.
    #[error("instance type {name:?}: offering {offering} does not define {key}")]
    OfferingMissingKey {
        /// The instance type's name.
        name: Arc<str>,
        /// The offering's position.
        offering: usize,
        /// The missing key.
        key: &'static str,
    },
    /// An offering's price is negative, infinite or NaN, or not 0 while it is unpriced.
    #[error("instance type {name:?}: offering {offering} has invalid price {price}")]
    InvalidPrice {
        /// The instance type's name.
        name: Arc<str>,
        /// The offering's position.
        offering: usize,
        /// The price.
        price: f64,
    },
    /// A capacity or overhead quantity is negative.
    #[error("instance type {name:?}: {field} {resource} is negative ({quantity})")]
    NegativeQuantity {
        /// The instance type's name.
        name: Arc<str>,
        /// `capacity`, `kube-reserved`, `system-reserved` or `eviction-threshold`.
        field: &'static str,
        /// The resource.
        resource: ResourceName,
        /// The quantity.
        quantity: Quantity,
    },
}

/// Which NodeOverlays changed an instance type: a price of one of its offerings, or its
/// capacity. Set by the overlay store; NodeClaims launched from such types are annotated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OverlayMarks {
    /// An overlay set the price of at least one offering.
    pub price: bool,
    /// An overlay added or replaced an extended resource.
    pub capacity: bool,
}

/// A validated instance type with its allocatable computed once.
///
/// Immutable: build a changed copy with [`InstanceType::to_spec`] and [`InstanceType::new`].
#[derive(Debug, Clone)]
pub struct InstanceType {
    overlay_marks: OverlayMarks,
    name: Arc<str>,
    requirements: Requirements,
    offerings: Offerings,
    capacity: Resources,
    overhead: Overhead,
    allocatable: Resources,
    dense_allocatable: Dense,
    /// [`key_bit`]s of the requirement keys: a key whose bit is clear is certainly undefined.
    key_mask: u64,
    /// [`key_bit`]s of every key any offering defines: only requirements on those keys can
    /// change offering compatibility.
    offering_key_mask: u64,
    /// Per offering, its capacity type and zone when those are its only requirements, each
    /// `In` one value (the usual shape, checked without walking requirements).
    simple_offerings: Box<[Option<SimpleOffering>]>,
}

/// An offering whose requirements are exactly a capacity type and a zone, `In` one value each.
#[derive(Debug, Clone)]
pub(crate) struct SimpleOffering {
    pub(crate) capacity_type: Arc<str>,
    pub(crate) zone: Arc<str>,
}

/// One bit of a 64-bit key mask, from the FNV-1a hash of the key's bytes.
pub(crate) fn key_bit(key: &str) -> u64 {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    1 << (hash % 64)
}

fn key_mask<'a>(keys: impl IntoIterator<Item = &'a str>) -> u64 {
    keys.into_iter().fold(0, |mask, key| mask | key_bit(key))
}

/// The simple form of an offering, when it has one.
fn simple_offering(offering: &Offering) -> Option<SimpleOffering> {
    let single = |key: &str| {
        let requirement = offering.requirements.get(key)?;
        let complement = requirement.is_complement();
        let bounded = requirement.lower_bound().is_some() || requirement.upper_bound().is_some();
        match requirement.values() {
            [value] if !complement && !bounded => Some(value.clone()),
            _ => None,
        }
    };
    if offering.requirements.len() != 2 {
        return None;
    }
    Some(SimpleOffering {
        capacity_type: single(CAPACITY_TYPE)?,
        zone: single(TOPOLOGY_ZONE)?,
    })
}

impl InstanceType {
    /// Validates `spec` and computes the allocatable (see [`InstanceType::allocatable`]).
    ///
    /// # Errors
    /// [`InstanceTypeError`]: empty name; an instance-type requirement other than `In [name]`;
    /// an offering without a capacity-type or zone requirement, or with a negative or
    /// non-finite price; a negative capacity or overhead quantity.
    pub fn new(spec: InstanceTypeSpec) -> Result<Self, InstanceTypeError> {
        validate(&spec)?;
        let allocatable = allocatable(&spec.capacity, &spec.overhead.total());
        Ok(Self {
            overlay_marks: OverlayMarks::default(),
            key_mask: key_mask(spec.requirements.keys()),
            offering_key_mask: key_mask(spec.offerings.iter().flat_map(|o| o.requirements.keys())),
            simple_offerings: spec.offerings.iter().map(simple_offering).collect(),
            dense_allocatable: Dense::new(&allocatable),
            allocatable,
            name: spec.name,
            requirements: spec.requirements,
            offerings: Offerings::new(spec.offerings),
            capacity: spec.capacity,
            overhead: spec.overhead,
        })
    }

    /// A copy of the provider description, e.g. to change offerings and rebuild.
    #[must_use]
    pub fn to_spec(&self) -> InstanceTypeSpec {
        InstanceTypeSpec {
            name: self.name.clone(),
            requirements: self.requirements.clone(),
            offerings: self.offerings.to_vec(),
            capacity: self.capacity.clone(),
            overhead: self.overhead.clone(),
        }
    }

    /// The same instance type, marked as changed by NodeOverlays.
    #[must_use]
    pub fn with_overlay_marks(mut self, marks: OverlayMarks) -> Self {
        self.overlay_marks = marks;
        self
    }

    /// Which NodeOverlays changed it (none unless the overlay store set them).
    #[must_use]
    pub fn overlay_marks(&self) -> OverlayMarks {
        self.overlay_marks
    }

    /// The name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name as a shared string.
    #[must_use]
    pub fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// The requirements.
    #[must_use]
    pub fn requirements(&self) -> &Requirements {
        &self.requirements
    }

    /// The offerings.
    #[must_use]
    pub fn offerings(&self) -> &Offerings {
        &self.offerings
    }

    /// The full capacity.
    #[must_use]
    pub fn capacity(&self) -> &Resources {
        &self.capacity
    }

    /// The overhead.
    #[must_use]
    pub fn overhead(&self) -> &Overhead {
        &self.overhead
    }

    /// What pods can use: capacity minus the overhead total, for the names in capacity only;
    /// then every `hugepages-*` capacity is taken from memory, clamped at zero. Cached.
    #[must_use]
    pub fn allocatable(&self) -> &Resources {
        &self.allocatable
    }

    /// Whether `requests` fit the allocatable ([`crate::resources::fits`] semantics).
    #[must_use]
    pub fn fits(&self, requests: &Resources) -> bool {
        Dense::new(requests).fits_in(&self.dense_allocatable)
    }

    /// Whether some available offering is compatible with `requirements`.
    #[must_use]
    pub fn has_compatible_offering(
        &self,
        requirements: &Requirements,
        well_known: &WellKnownLabels,
    ) -> bool {
        self.offerings
            .has_compatible_available(requirements, well_known)
    }

    pub(crate) fn dense_allocatable(&self) -> &Dense {
        &self.dense_allocatable
    }

    pub(crate) fn key_mask(&self) -> u64 {
        self.key_mask
    }

    pub(crate) fn offering_key_mask(&self) -> u64 {
        self.offering_key_mask
    }

    /// The offerings, each with its simple form when it has one.
    pub(crate) fn offerings_with_shape(
        &self,
    ) -> impl Iterator<Item = (&Offering, Option<&SimpleOffering>)> {
        self.offerings
            .iter()
            .zip(self.simple_offerings.iter().map(Option::as_ref))
    }
}

impl AsRef<InstanceType> for InstanceType {
    fn as_ref(&self) -> &InstanceType {
        self
    }
}

impl TryFrom<InstanceTypeSpec> for InstanceType {
    type Error = InstanceTypeError;

    fn try_from(spec: InstanceTypeSpec) -> Result<Self, InstanceTypeError> {
        Self::new(spec)
    }
}

fn validate(spec: &InstanceTypeSpec) -> Result<(), InstanceTypeError> {
    let name = || spec.name.clone();
    if spec.name.is_empty() {
        return Err(InstanceTypeError::EmptyName);
    }
    if let Some(requirement) = spec.requirements.get(INSTANCE_TYPE) {
        let matches = !requirement.is_complement()
            && requirement.lower_bound().is_none()
            && requirement.upper_bound().is_none()
            && requirement.values().len() == 1
            && requirement.has(&spec.name);
        if !matches {
            return Err(InstanceTypeError::NameMismatch {
                name: name(),
                requirement: requirement.to_string(),
            });
        }
    }
    for (index, offering) in spec.offerings.iter().enumerate() {
        for key in [CAPACITY_TYPE, TOPOLOGY_ZONE] {
            if !offering.requirements.contains_key(key) {
                return Err(InstanceTypeError::OfferingMissingKey {
                    name: name(),
                    offering: index,
                    key,
                });
            }
        }
        if !offering.price.is_finite()
            || offering.price < 0.0
            || (!offering.priced && offering.price > 0.0)
        {
            return Err(InstanceTypeError::InvalidPrice {
                name: name(),
                offering: index,
                price: offering.price,
            });
        }
    }
    let lists = [
        ("capacity", &spec.capacity),
        ("kube-reserved", &spec.overhead.kube_reserved),
        ("system-reserved", &spec.overhead.system_reserved),
        ("eviction-threshold", &spec.overhead.eviction_threshold),
    ];
    for (field, list) in lists {
        if let Some((resource, quantity)) = list.iter().find(|(_, q)| q.is_negative()) {
            return Err(InstanceTypeError::NegativeQuantity {
                name: name(),
                field,
                resource: resource.clone(),
                quantity,
            });
        }
    }
    Ok(())
}

/// Capacity minus overhead over capacity's names, then huge pages taken from memory (≥ 0).
fn allocatable(capacity: &Resources, overhead: &Resources) -> Resources {
    let mut allocatable = capacity.difference(overhead);
    for (_, hugepages) in capacity.iter().filter(|(name, _)| name.is_hugepages()) {
        let memory = allocatable
            .get_or_zero(&ResourceName::MEMORY)
            .saturating_sub(hugepages);
        let memory = if memory.is_negative() {
            Quantity::ZERO.with_format(memory.format())
        } else {
            memory
        };
        allocatable.insert(ResourceName::MEMORY, memory);
    }
    allocatable
}
