//! Why the instance-type filter kept nothing (spec §3.9): diagnosis and the error.
//!
//! Responsibility: the second pass over the candidates that records which of {requirements,
//! resources, offering} some single candidate met, alone or in pairs; the
//! [`InstanceTypeFilterError`] holding those facts (and a strict-policy minValues shortfall); and
//! its message: the most telling cause, the NodeClaim requirements, the pod requests (with the
//! smallest and largest daemon overhead when groups differ), and a hint for CPU requests of a
//! million cores or more.
//! Inputs: the filter's groups, requirements and input. Outputs: the error; the message is only
//! formatted when displayed.
//!
//! The pass evaluates the requirement and offering checks of a candidate only while they can
//! still change a flag, so after the first few candidates it costs one resource check each; the
//! flags are nevertheless exactly those of evaluating every check on every candidate.

use std::fmt;

use super::InstanceType;
use super::check::Checker;
use super::dense::Dense;
use super::filter::{FilterGroup, FilterInput};
use super::list::MinValuesError;
use crate::quantity::Quantity;
use crate::requirements::Requirements;
use crate::resources::{ResourceName, Resources};

/// The second pass: which criteria some single candidate met.
pub(super) fn diagnose<C: AsRef<InstanceType>>(
    groups: &[FilterGroup<'_, C>],
    requirements: &Requirements,
    input: &FilterInput<'_>,
    requests: &Dense,
) -> InstanceTypeFilterError {
    let mut error = InstanceTypeFilterError::new(requirements, input);
    error.track_overheads(groups);
    let checker = Checker::all(requirements, input.well_known);
    let flags = &mut error.0.flags;
    for group in groups {
        let with_overhead;
        let needed = if group.overhead.is_empty() {
            requests
        } else {
            with_overhead = requests.plus(group.overhead);
            &with_overhead
        };
        for candidate in group.candidates {
            let it = candidate.as_ref();
            let fits = needed.fits_in(it.dense_allocatable());
            // Whether this candidate could still set a "two of three" flag.
            let pair_open = if fits {
                !flags.requirements_and_resources || !flags.resources_and_offering
            } else {
                !flags.requirements_and_offering
            };
            let compatible = (!flags.requirements || pair_open).then(|| checker.intersects(it));
            let offering = (!flags.offering || pair_open).then(|| checker.has_offering(it));
            flags.resources |= fits;
            flags.requirements |= compatible == Some(true);
            flags.offering |= offering == Some(true);
            if let (true, Some(r), Some(o)) = (pair_open, compatible, offering) {
                flags.requirements_and_resources |= r && fits && !o;
                flags.requirements_and_offering |= r && o && !fits;
                flags.resources_and_offering |= fits && o && !r;
            }
        }
    }
    error
}

/// Which criteria at least one candidate met, alone or in pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FilterFlags {
    /// Some candidate's requirements intersect the NodeClaim's.
    pub requirements: bool,
    /// Some candidate had enough resources.
    pub resources: bool,
    /// Some candidate had a compatible available offering.
    pub offering: bool,
    /// Some candidate met requirements and resources but had no offering.
    pub requirements_and_resources: bool,
    /// Some candidate met requirements and had an offering but not enough resources.
    pub requirements_and_offering: bool,
    /// Some candidate had resources and an offering but did not meet the requirements.
    pub resources_and_offering: bool,
}

/// Why nothing was kept, most telling cause first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterFailure {
    /// Candidates were kept but did not satisfy minValues (strict policy).
    MinValues,
    /// No candidate met any of the three criteria.
    RequirementsResourcesAndOffering,
    /// No candidate met the requirements, and none had enough resources.
    RequirementsAndResources,
    /// No candidate met the requirements, and none had an offering.
    RequirementsAndOffering,
    /// No candidate had enough resources, and none had an offering.
    ResourcesAndOffering,
    /// No candidate met the requirements.
    Requirements,
    /// No candidate had enough resources.
    Resources,
    /// No candidate had a compatible available offering.
    Offering,
    /// The candidates meeting requirements and resources had no offering.
    OfferingOfThoseFitting,
    /// The candidates with resources and an offering did not meet the requirements.
    RequirementsOfThoseFitting,
    /// The candidates meeting requirements with an offering lacked resources.
    ResourcesOfThoseCompatible,
    /// Each criterion and each pair was met by some candidate, but never all three at once.
    Combination,
}

impl FilterFailure {
    fn message(self) -> &'static str {
        match self {
            Self::MinValues => "instance types left do not meet minValues",
            Self::RequirementsResourcesAndOffering => {
                "no instance type met the scheduling requirements or had enough resources or had a required offering"
            }
            Self::RequirementsAndResources => {
                "no instance type met the scheduling requirements or had enough resources"
            }
            Self::RequirementsAndOffering => {
                "no instance type met the scheduling requirements or had a required offering"
            }
            Self::ResourcesAndOffering => {
                "no instance type had enough resources or had a required offering"
            }
            Self::Requirements => "no instance type met the scheduling requirements",
            Self::Resources => "no instance type had enough resources",
            Self::Offering => "no instance type had a required offering",
            Self::OfferingOfThoseFitting => {
                "no instance type meeting the scheduling requirements with enough resources had a required offering"
            }
            Self::RequirementsOfThoseFitting => {
                "no instance type with enough resources and a required offering met the scheduling requirements"
            }
            Self::ResourcesOfThoseCompatible => {
                "no instance type meeting the scheduling requirements with a required offering had enough resources"
            }
            Self::Combination => {
                "no instance type met the scheduling requirements, had enough resources and had a required offering at once"
            }
        }
    }
}

/// No candidate instance type could take the pod (spec §3.9).
///
/// Cheap to build; the message is formatted only when displayed.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceTypeFilterError(Box<Details>);

#[derive(Debug, Clone, PartialEq)]
struct Details {
    flags: FilterFlags,
    min_values: Option<MinValuesError>,
    requirements: Requirements,
    pod_requests: Resources,
    /// The smallest and largest non-empty daemon overhead among the groups.
    daemon_overhead: Option<(Resources, Resources)>,
}

impl InstanceTypeFilterError {
    fn new(requirements: &Requirements, input: &FilterInput<'_>) -> Self {
        Self(Box::new(Details {
            flags: FilterFlags::default(),
            min_values: None,
            requirements: requirements.clone(),
            pod_requests: input.pod_requests.clone(),
            daemon_overhead: None,
        }))
    }

    /// Kept candidates fell short of minValues under the strict policy.
    pub(super) fn min_values_shortfall<C>(
        requirements: &Requirements,
        input: &FilterInput<'_>,
        groups: &[FilterGroup<'_, C>],
        shortfall: MinValuesError,
    ) -> Self {
        let mut error = Self::new(requirements, input);
        error.track_overheads(groups);
        error.0.min_values = Some(shortfall);
        error
    }

    fn track_overheads<C>(&mut self, groups: &[FilterGroup<'_, C>]) {
        let mut previous: Option<&Resources> = None;
        for group in groups.iter().filter(|g| !g.overhead.is_empty()) {
            if previous.is_some_and(|p| std::ptr::eq(p, group.overhead)) {
                continue;
            }
            previous = Some(group.overhead);
            self.0.daemon_overhead = Some(match self.0.daemon_overhead.take() {
                None => (group.overhead.clone(), group.overhead.clone()),
                Some((min, max)) => (min.min_with(group.overhead), max.max_with(group.overhead)),
            });
        }
    }

    /// Which criteria some single candidate met.
    #[must_use]
    pub fn flags(&self) -> FilterFlags {
        self.0.flags
    }

    /// The minValues shortfall, when that is the cause.
    #[must_use]
    pub fn min_values(&self) -> Option<&MinValuesError> {
        self.0.min_values.as_ref()
    }

    /// The NodeClaim requirements the candidates were checked against.
    #[must_use]
    pub fn requirements(&self) -> &Requirements {
        &self.0.requirements
    }

    /// The cause, most telling first.
    #[must_use]
    pub fn reason(&self) -> FilterFailure {
        let f = self.0.flags;
        match (f.requirements, f.resources, f.offering) {
            _ if self.0.min_values.is_some() => FilterFailure::MinValues,
            (false, false, false) => FilterFailure::RequirementsResourcesAndOffering,
            (false, false, true) => FilterFailure::RequirementsAndResources,
            (false, true, false) => FilterFailure::RequirementsAndOffering,
            (true, false, false) => FilterFailure::ResourcesAndOffering,
            (false, true, true) => FilterFailure::Requirements,
            (true, false, true) => FilterFailure::Resources,
            (true, true, false) => FilterFailure::Offering,
            (true, true, true) if f.requirements_and_resources => {
                FilterFailure::OfferingOfThoseFitting
            }
            (true, true, true) if f.resources_and_offering => {
                FilterFailure::RequirementsOfThoseFitting
            }
            (true, true, true) if f.requirements_and_offering => {
                FilterFailure::ResourcesOfThoseCompatible
            }
            (true, true, true) => FilterFailure::Combination,
        }
    }

    /// Whether the pod's CPU request looks like a milli/mega typo (≥ 1M cores).
    fn cpu_typo(&self) -> bool {
        self.0.pod_requests.get_or_zero(&ResourceName::CPU) >= Quantity::from_value(1_000_000)
    }
}

impl fmt::Display for InstanceTypeFilterError {
    /// `<cause>, requirements=<requirements>, resources=<pod requests (+ daemon overhead)>`,
    /// plus a typo hint when resources were short and the CPU request is at least 1M.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0.min_values {
            Some(error) => write!(f, "{error}")?,
            None => f.write_str(self.reason().message())?,
        }
        write!(f, ", requirements={}, resources=", self.0.requirements)?;
        match &self.0.daemon_overhead {
            None => write!(f, "{}", self.0.pod_requests)?,
            Some((min, max)) => {
                let (low, high) = (
                    self.0.pod_requests.merged(min),
                    self.0.pod_requests.merged(max),
                );
                if low == high {
                    write!(f, "{low}")?;
                } else {
                    write!(f, "min={low}, max={high}")?;
                }
            }
        }
        if self.0.min_values.is_none() && !self.0.flags.resources && self.cpu_typo() {
            f.write_str(" (CPU request >= 1 million cores, m vs M typo?)")?;
        }
        Ok(())
    }
}

impl std::error::Error for InstanceTypeFilterError {}
