//! Node overhead from the NodeClass: kubeReserved, systemReserved and hard eviction thresholds.
//!
//! Responsibility: validate the NodeClass overhead fields once ([`NodeOverhead::from_spec`]) and
//! resolve them against an instance type's capacity ([`NodeOverhead::for_capacity`]), so that
//! allocatable = capacity − overhead is what the kubelet will report.
//! Inputs: the NodeClass spec, then a capacity. Outputs: a scheduling [`Overhead`], or a
//! [`NodeClassError`].
//!
//! - kubeReserved / systemReserved: `cpu`, `memory`, `ephemeral-storage` count; `pid` is
//!   accepted and ignored (it is not a schedulable resource); anything else is an error.
//! - evictionHard: `memory.available` reserves memory and `nodefs.available` ephemeral storage;
//!   the other kubelet signals are accepted and ignored. A percentage is of this capacity,
//!   rounded up to a whole unit (`10%` of 100Gi is 10Gi); a percentage of a resource the capacity
//!   lacks reserves nothing. Absent field: the kubelet defaults [`DEFAULT_EVICTION_HARD`].

use std::collections::BTreeMap;

use api::nodeclass::{ClusterAPINodeClassSpec, EVICTION_SIGNALS};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use scheduling::instance_type::Overhead;
use scheduling::quantity::{NANOS_PER_UNIT, Quantity};
use scheduling::resources::{ResourceName, Resources};

use super::NodeClassError;

/// The kubelet's hard eviction defaults that affect allocatable, used when the NodeClass has no
/// `evictionHard`.
pub const DEFAULT_EVICTION_HARD: [(&str, &str); 2] =
    [("memory.available", "100Mi"), ("nodefs.available", "10%")];

/// One hard eviction threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Threshold {
    /// An absolute amount.
    Absolute(Quantity),
    /// Hundredths of a percent of capacity (0..=10000).
    Percent(u32),
}

/// The validated overhead settings of a NodeClass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeOverhead {
    kube_reserved: Resources,
    system_reserved: Resources,
    eviction: Vec<(ResourceName, Threshold)>,
}

fn error(field: String, message: impl Into<String>) -> NodeClassError {
    NodeClassError {
        field,
        message: message.into(),
    }
}

/// Reads a kubeReserved / systemReserved list.
fn reserved<'a>(
    field: &str,
    list: impl IntoIterator<Item = (&'a String, &'a str)>,
) -> Result<Resources, NodeClassError> {
    let mut resources = Resources::new();
    for (name, text) in list {
        let path = || format!("{field}.{name}");
        let quantity = Quantity::parse(text.trim()).map_err(|e| error(path(), e.to_string()))?;
        if quantity.is_negative() {
            return Err(error(path(), format!("{text:?} must not be negative")));
        }
        match name.as_str() {
            "cpu" | "memory" | "ephemeral-storage" => {
                resources.insert(ResourceName::new(name), quantity);
            }
            "pid" => {}
            _ => {
                return Err(error(
                    path(),
                    "not a reservable resource (cpu, memory, ephemeral-storage, pid)",
                ));
            }
        }
    }
    Ok(resources)
}

/// The entries of an optional resource list as text.
fn pairs(list: Option<&BTreeMap<String, K8sQuantity>>) -> impl Iterator<Item = (&String, &str)> {
    list.into_iter()
        .flatten()
        .map(|(name, quantity)| (name, quantity.0.as_str()))
}

/// Reads `10%`, `7.5%`, `100%` as hundredths of a percent.
fn percent(text: &str) -> Option<u32> {
    let number = text.strip_suffix('%')?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 3 || fraction.len() > 2 || !digits(whole) {
        return None;
    }
    if !digits(fraction) || (number.contains('.') && fraction.is_empty()) {
        return None;
    }
    let whole: u32 = whole.parse().ok()?;
    let fraction: u32 = format!("{fraction:0<2}").parse().ok()?;
    Some(whole * 100 + fraction).filter(|bp| *bp <= 10_000)
}

fn threshold(signal: &str, text: &str) -> Result<Threshold, NodeClassError> {
    let path = || format!("evictionHard.{signal}");
    let text = text.trim();
    if text.ends_with('%') {
        return percent(text).map(Threshold::Percent).ok_or_else(|| {
            error(
                path(),
                format!("{text:?} is not a percentage from 0 to 100"),
            )
        });
    }
    let quantity = Quantity::parse(text).map_err(|e| error(path(), e.to_string()))?;
    if quantity.is_negative() {
        return Err(error(path(), format!("{text:?} must not be negative")));
    }
    Ok(Threshold::Absolute(quantity))
}

impl NodeOverhead {
    /// Validates the overhead fields of `spec`.
    ///
    /// # Errors
    /// An invalid or negative quantity, an unknown resource or signal, a bad percentage.
    pub fn from_spec(spec: &ClusterAPINodeClassSpec) -> Result<Self, NodeClassError> {
        let kube_reserved = reserved("kubeReserved", pairs(spec.kube_reserved.as_ref()))?;
        let system_reserved = reserved("systemReserved", pairs(spec.system_reserved.as_ref()))?;
        let defaults = DEFAULT_EVICTION_HARD.map(|(k, v)| (k.to_owned(), v.to_owned()));
        let signals: Vec<(&str, &str)> = match &spec.eviction_hard {
            Some(map) => map.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
            None => defaults
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
        };
        let mut eviction = Vec::new();
        for (signal, text) in signals {
            if !EVICTION_SIGNALS.contains(&signal) {
                return Err(error(
                    format!("evictionHard.{signal}"),
                    "unknown eviction signal",
                ));
            }
            let threshold = threshold(signal, text)?;
            let resource = match signal {
                "memory.available" => ResourceName::MEMORY,
                "nodefs.available" => ResourceName::EPHEMERAL_STORAGE,
                _ => continue,
            };
            eviction.push((resource, threshold));
        }
        Ok(Self {
            kube_reserved,
            system_reserved,
            eviction,
        })
    }

    /// The overhead of a node with `capacity`.
    #[must_use]
    pub fn for_capacity(&self, capacity: &Resources) -> Overhead {
        let mut eviction_threshold = Resources::new();
        for (resource, threshold) in &self.eviction {
            let amount = match *threshold {
                Threshold::Absolute(quantity) => Some(quantity),
                Threshold::Percent(hundredths) => {
                    capacity.get(resource).map(|total| share(total, hundredths))
                }
            };
            if let Some(amount) = amount {
                eviction_threshold.insert(resource.clone(), amount);
            }
        }
        Overhead {
            kube_reserved: self.kube_reserved.clone(),
            system_reserved: self.system_reserved.clone(),
            eviction_threshold,
        }
    }
}

/// `ceil(total × hundredths / 10000)`, rounded up to a whole unit, in `total`'s format.
fn share(total: Quantity, hundredths: u32) -> Quantity {
    let nanos = total.as_nanos().max(0);
    let hundredths = i128::from(hundredths);
    // total = q·10000 + r, so total·h/10000 = q·h + r·h/10000, with no overflow for h ≤ 10000.
    let (q, r) = (nanos / 10_000, nanos % 10_000);
    let exact = q * hundredths + (r * hundredths + 9_999) / 10_000;
    let units = (exact + NANOS_PER_UNIT - 1) / NANOS_PER_UNIT;
    let rounded = units.saturating_mul(NANOS_PER_UNIT).min(nanos);
    Quantity::from_nanos(rounded, total.format()).unwrap_or(total)
}
