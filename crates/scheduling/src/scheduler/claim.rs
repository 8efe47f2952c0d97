//! NodeClaims planned in this solve (spec §3.7 steps 2 and 4, §3.8, §3.9, §3.16).
//!
//! Responsibility: a planned NodeClaim — its requirements, summed pod requests, the instance
//! types (per DaemonSet-overhead group) that can still hold everything placed on it — and the
//! `can_add` pipeline: taints, requirement compatibility, topology, then instance-type filtering
//! and minValues. The filter is the scheduler's hot path: cheap necessary conditions are checked
//! first, and when a pod leaves the requirements unchanged only the resource fit is re-checked.
//! Inputs: a [`Template`], a pod and its cached data, topology. Outputs: a [`Proposal`] to
//! commit with [`Claim::add`], or a human-readable reason.

use std::borrow::Cow;
use std::sync::Arc;

use crate::instance_type::{
    Dense, FilterGroup, FilterInput, InstanceType, MinValuesPolicy, filter_instance_types,
};
use crate::labels::{HOSTNAME, WellKnownLabels};
use crate::pod::{HostPort, Pod};
use crate::quantity::Quantity;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::taints::tolerates_all;
use crate::topology::Topology;

use super::PodData;
use super::headroom;
use super::template::{GroupOptions, Template};

/// A NodeClaim planned in this solve.
#[derive(Debug)]
pub(crate) struct Claim {
    pub(crate) template: usize,
    /// The placeholder hostname (`hostname-placeholder-NNNN`).
    hostname: Arc<str>,
    pub(crate) requirements: Requirements,
    pub(crate) requests: Resources,
    pub(crate) options: Vec<GroupOptions>,
    pub(crate) host_ports: Vec<HostPort>,
    pub(crate) pods: Vec<Arc<str>>,
    pub(crate) min_values_relaxed: bool,
    /// Requirements every option is known to satisfy (the template's for a fresh claim, then
    /// the claim's own after each pod).
    checked_against: Requirements,
    /// Per resource, the most any remaining option could still hold (allocatable − group
    /// overhead): a pod whose requests plus ours exceed it cannot fit any option.
    headroom: Dense,
    /// The options that set some maximum of [`Self::headroom`] (a superset of them): options
    /// only ever shrink, so while all of these remain the headroom is unchanged.
    leaders: Vec<usize>,
    /// [`Self::requests`] in fixed-slot form, for the headroom check.
    dense_requests: Dense,
}

/// What adding a pod to a claim would change.
#[derive(Debug)]
pub(crate) struct Proposal {
    pub(crate) requirements: Requirements,
    pub(crate) options: Vec<GroupOptions>,
    pub(crate) min_values_relaxed: bool,
}

/// Everything the filter needs besides the candidate lists.
pub(crate) struct FilterContext<'a> {
    pub(crate) template: &'a Template,
    pub(crate) well_known: &'a WellKnownLabels,
    pub(crate) min_values_policy: MinValuesPolicy,
}

impl Claim {
    /// A fresh claim from a template, with its placeholder hostname.
    pub(crate) fn new(
        template_index: usize,
        template: &Template,
        options: Vec<GroupOptions>,
        hostname: Arc<str>,
    ) -> Self {
        let mut requirements = template.requirements.clone();
        requirements.add(Requirement::in_values(HOSTNAME, [hostname.clone()]));
        let mut claim = Self {
            template: template_index,
            hostname,
            requirements,
            requests: Resources::default(),
            options,
            host_ports: Vec::new(),
            pods: Vec::new(),
            min_values_relaxed: false,
            checked_against: template.requirements.clone(),
            headroom: Dense::default(),
            leaders: Vec::new(),
            dense_requests: Dense::default(),
        };
        (claim.headroom, claim.leaders) = headroom::of(template, &claim.options);
        claim
    }

    /// The claim's placeholder hostname.
    pub(crate) fn hostname(&self) -> &str {
        &self.hostname
    }

    /// Whether `pod` can join this claim; the proposal to commit if so. With `explain == false`
    /// (planned claims, whose rejections are never reported) a rejection carries no message, so
    /// the common failing attempt formats nothing.
    pub(crate) fn can_add(
        &self,
        pod: &Pod,
        data: &PodData,
        ctx: &FilterContext<'_>,
        topology: &Topology,
        explain: bool,
    ) -> Result<Proposal, Option<String>> {
        let reject = |message: &dyn Fn() -> String| explain.then(message);
        if !self
            .dense_requests
            .plus(&pod.requests)
            .fits_in(&self.headroom)
        {
            let total = self.requests.merged(&pod.requests);
            return Err(reject(&|| resources_error(&total)));
        }
        if let Some(port) = pod
            .host_ports
            .iter()
            .find(|p| self.host_ports.iter().any(|used| used.conflicts(p)))
        {
            return Err(reject(&|| {
                format!("host port {}/{} is in use", port.port, port.protocol)
            }));
        }
        if !ctx.template.taints.is_empty() {
            tolerates_all(&ctx.template.taints, &pod.tolerations)
                .map_err(|e| reject(&|| e.to_string()))?;
        }
        if !self
            .requirements
            .is_compatible(&data.requirements, ctx.well_known)
        {
            return Err(reject(&|| match self
                .requirements
                .compatible(&data.requirements, ctx.well_known)
            {
                Err(e) => format!("incompatible requirements, {e}"),
                Ok(()) => "incompatible requirements".to_owned(),
            }));
        }
        let base = self.with_pod(data);
        let base = base.as_ref();
        let topology_requirements = topology
            .add_requirements(pod, &data.strict_requirements, base)
            .map_err(|e| reject(&|| e.to_string()))?;
        if !base.is_compatible(&topology_requirements, ctx.well_known) {
            return Err(reject(
                &|| match base.compatible(&topology_requirements, ctx.well_known) {
                    Err(e) => format!("incompatible requirements, {e}"),
                    Ok(()) => "incompatible requirements".to_owned(),
                },
            ));
        }
        let mut requirements = base.clone();
        requirements.add_all(&topology_requirements);
        let total = self.requests.merged(&pod.requests);
        let (options, min_values_relaxed) = filter(
            ctx,
            &self.options,
            &mut requirements,
            &total,
            pod,
            Some(&self.checked_against),
        )
        .map_err(|e| explain.then_some(e))?;
        Ok(Proposal {
            requirements,
            options,
            min_values_relaxed: self.min_values_relaxed || min_values_relaxed,
        })
    }

    /// The claim's requirements with the pod's added. Generic pods add no requirements: no copy
    /// then.
    fn with_pod(&self, data: &PodData) -> Cow<'_, Requirements> {
        if data.requirements.is_empty() {
            Cow::Borrowed(&self.requirements)
        } else {
            let mut r = self.requirements.clone();
            r.add_all(&data.requirements);
            Cow::Owned(r)
        }
    }

    /// [`Topology::allows_domains`] for `pod` here (when it refuses, so does [`Self::can_add`]).
    pub(crate) fn domains_allow(&self, pod: &Pod, data: &PodData, topology: &Topology) -> bool {
        topology.allows_domains(pod, &data.strict_requirements, self.with_pod(data).as_ref())
    }

    /// Commits `pod` with an accepted proposal.
    pub(crate) fn add(&mut self, pod: &Pod, proposal: Proposal, template: &Template) {
        self.requirements = proposal.requirements;
        self.checked_against = self.requirements.clone();
        self.options = proposal.options;
        self.min_values_relaxed = proposal.min_values_relaxed;
        self.requests.merge(&pod.requests);
        self.dense_requests = Dense::new(&self.requests);
        self.host_ports.extend(pod.host_ports.iter().cloned());
        self.pods.push(pod.uid.clone());
        let all_leaders_remain = self.leaders.iter().all(|&leader| {
            self.options.iter().any(|g| {
                g.instance_types
                    .iter()
                    .any(|it| Arc::as_ptr(it).addr() == leader)
            })
        });
        if !all_leaders_remain {
            (self.headroom, self.leaders) = headroom::of(template, &self.options);
        }
    }

    /// All remaining instance-type options.
    pub(crate) fn instance_types(&self) -> impl Iterator<Item = &Arc<InstanceType>> + '_ {
        self.options.iter().flat_map(|g| g.instance_types.iter())
    }
}

fn resources_error(total: &Resources) -> String {
    let cpu = total.get_or_zero(&crate::resources::ResourceName::CPU);
    let hint = if cpu >= Quantity::from_value(1_000_000) {
        " (the CPU request is at least 1M cores: did you mean m rather than M?)"
    } else {
        ""
    };
    format!(
        "no instance type has enough resources for {}{hint}",
        describe(total)
    )
}

fn describe(resources: &Resources) -> String {
    let parts: Vec<String> = resources
        .iter()
        .map(|(n, q)| format!("{}: {q}", n.as_str()))
        .collect();
    format!("{{{}}}", parts.join(", "))
}

/// Keeps the instance types that satisfy `requirements`, hold `total` plus their group's
/// daemon overhead, and have an available offering compatible with `requirements` (through
/// [`filter_instance_types`]); groups whose daemons' host ports collide with the pod's are
/// skipped. `checked_against` are requirements every option already passed.
pub(crate) fn filter(
    ctx: &FilterContext<'_>,
    options: &[GroupOptions],
    requirements: &mut Requirements,
    total: &Resources,
    pod: &Pod,
    checked_against: Option<&Requirements>,
) -> Result<(Vec<GroupOptions>, bool), String> {
    let usable: Vec<(usize, &GroupOptions, &Resources)> = options
        .iter()
        .filter_map(|g| {
            let overhead = ctx.template.overheads.get(g.group)?;
            let conflict = pod
                .host_ports
                .iter()
                .any(|p| overhead.host_ports.iter().any(|d| d.conflicts(p)));
            (!conflict).then_some((g.group, g, &overhead.requests))
        })
        .collect();
    let groups: Vec<FilterGroup<'_, Arc<InstanceType>>> = usable
        .iter()
        .map(|(_, g, overhead)| FilterGroup::new(overhead, &g.instance_types))
        .collect();
    let input = FilterInput {
        requests: total,
        pod_requests: &pod.requests,
        well_known: ctx.well_known,
        min_values_policy: ctx.min_values_policy,
        checked_against,
    };
    let mut kept = Vec::new();
    let outcome = filter_instance_types(&groups, requirements, &input, &mut kept)
        .map_err(|e| e.to_string())?;
    let options = usable
        .iter()
        .zip(kept)
        .filter(|(_, its)| !its.is_empty())
        .map(|((group, _, _), instance_types)| GroupOptions {
            group: *group,
            instance_types,
        })
        .collect();
    Ok((options, outcome.min_values_relaxed))
}
