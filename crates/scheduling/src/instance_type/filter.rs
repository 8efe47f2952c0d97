//! The per-NodeClaim instance-type filter (spec §3.9, §3.16): the scheduler's hot path.
//!
//! Responsibility: given a NodeClaim's candidate instance types (grouped by DaemonSet overhead),
//! its requirements after adding a pod, and its total pod requests, keep the candidates that
//! (1) hold the requests plus their group's daemon overhead, (2) have requirements intersecting
//! the NodeClaim's, and (3) have an available offering compatible with them; then apply the
//! minValues policy. When nothing is kept, explain which of {requirements, resources, offering}
//! no single candidate satisfied.
//! Inputs: [`FilterGroup`]s, `&mut Requirements` (minValues may be relaxed), [`FilterInput`].
//! Outputs: the kept candidates per group (written into a caller-owned buffer) and a
//! [`FilterOutcome`], or an [`InstanceTypeFilterError`].
//!
//! Performance: requests (and requests + overhead, once per group) are turned into a fixed-slot
//! form so the resource check, which runs first because it is the cheapest and most selective,
//! is a few integer comparisons against each instance type's cached allocatable; the requirement
//! and offering checks follow. Each instance type carries 64-bit masks of its requirement keys
//! and offering keys, so a NodeClaim key it cannot define (hostname, pool labels) costs one AND;
//! offerings of the usual shape (one capacity type, one zone) are checked by membership in the
//! NodeClaim's two requirements, resolved once per call. With [`FilterInput::checked_against`]
//! only the keys whose requirement changed since the candidates were last checked are
//! re-checked (both checks are conjunctions over keys), and offerings only when an offering key
//! changed. The output buffers are reused. Diagnosis ([`super::failure`]) is a second pass that
//! runs only when nothing is kept.

use super::InstanceType;
use super::check::Checker;
use super::dense::Dense;
use super::failure::{InstanceTypeFilterError, diagnose};
use super::list::{MinValuesPolicy, min_values_prefix};
use crate::labels::WellKnownLabels;
use crate::requirements::Requirements;
use crate::resources::Resources;

/// One DaemonSet-overhead group of candidates: every candidate in it needs `overhead` on top of
/// the pod requests. Leave out groups the pod cannot use (e.g. its host ports conflict with the
/// group's daemons).
#[derive(Debug, Clone, Copy)]
pub struct FilterGroup<'a, C> {
    /// The daemon overhead of the group (may be empty).
    pub overhead: &'a Resources,
    /// The candidates, in the order results keep.
    pub candidates: &'a [C],
}

static NO_OVERHEAD: Resources = Resources::new();

impl<'a, C> FilterGroup<'a, C> {
    /// A group whose candidates need `overhead`.
    #[must_use]
    pub fn new(overhead: &'a Resources, candidates: &'a [C]) -> Self {
        Self {
            overhead,
            candidates,
        }
    }

    /// A group without daemon overhead.
    #[must_use]
    pub fn without_overhead(candidates: &'a [C]) -> Self {
        Self::new(&NO_OVERHEAD, candidates)
    }
}

/// Everything the filter needs besides the candidates and the requirements.
#[derive(Debug, Clone, Copy)]
pub struct FilterInput<'a> {
    /// The NodeClaim's total pod requests including the new pod (daemon overhead excluded).
    pub requests: &'a Resources,
    /// The new pod's own requests: shown in the error message.
    pub pod_requests: &'a Resources,
    /// Labels that may stay undefined when checking offerings.
    pub well_known: &'a WellKnownLabels,
    /// What to do when minValues cannot be met.
    pub min_values_policy: MinValuesPolicy,
    /// Requirements every candidate is known to pass the requirement and offering checks
    /// against (e.g. the NodeClaim's requirements before this pod, when the candidates are the
    /// output of an earlier call, or the template's requirements for a new NodeClaim). Only the
    /// keys whose requirement differs are then re-checked, and offerings only when one of those
    /// keys is an offering key; equal requirements re-check resources alone. `None` checks
    /// everything.
    pub checked_against: Option<&'a Requirements>,
}

/// What a successful filter did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FilterOutcome {
    /// Candidates kept over all groups.
    pub kept: usize,
    /// Whether [`MinValuesPolicy::BestEffort`] lowered some minValues in the requirements.
    pub min_values_relaxed: bool,
}

/// Keeps, per group, the candidates that fit `input.requests` plus the group overhead, whose
/// requirements intersect `requirements`, and that have an available offering compatible with
/// them. `kept` is resized to one vector per group (reusing its buffers) and holds the result;
/// on error every vector in it is empty.
///
/// minValues (when `requirements` carry any) is checked over everything kept, in group order:
/// under [`MinValuesPolicy::Strict`] a shortfall is an error; under
/// [`MinValuesPolicy::BestEffort`] each short key's minValues is lowered in `requirements` to the
/// number of values available.
///
/// # Errors
/// [`InstanceTypeFilterError`] when nothing is kept, or minValues fails under the strict policy.
pub fn filter_instance_types<C: AsRef<InstanceType> + Clone>(
    groups: &[FilterGroup<'_, C>],
    requirements: &mut Requirements,
    input: &FilterInput<'_>,
    kept: &mut Vec<Vec<C>>,
) -> Result<FilterOutcome, InstanceTypeFilterError> {
    kept.truncate(groups.len());
    kept.iter_mut().for_each(Vec::clear);
    kept.resize_with(groups.len(), Vec::new);
    let requests = Dense::new(input.requests);
    let checker = Checker::since(requirements, input.checked_against, input.well_known);
    let mut total = 0;
    for (group, out) in groups.iter().zip(kept.iter_mut()) {
        let with_overhead;
        let needed = if group.overhead.is_empty() {
            &requests
        } else {
            with_overhead = requests.plus(group.overhead);
            &with_overhead
        };
        for candidate in group.candidates {
            let it = candidate.as_ref();
            if needed.fits_in(it.dense_allocatable()) && checker.passes(it) {
                out.push(candidate.clone());
            }
        }
        total += out.len();
    }
    if total == 0 {
        return Err(diagnose(groups, requirements, input, &requests));
    }
    let mut outcome = FilterOutcome {
        kept: total,
        min_values_relaxed: false,
    };
    if requirements.has_min_values() {
        let all = kept.iter().flatten().map(AsRef::as_ref);
        if let Err(error) = min_values_prefix(all, requirements) {
            if input.min_values_policy == MinValuesPolicy::Strict {
                kept.iter_mut().for_each(Vec::clear);
                return Err(InstanceTypeFilterError::min_values_shortfall(
                    requirements,
                    input,
                    groups,
                    error,
                ));
            }
            for short in &error.unsatisfied {
                outcome.min_values_relaxed |=
                    requirements.relax_min_values(&short.key, short.available);
            }
        }
    }
    Ok(outcome)
}
