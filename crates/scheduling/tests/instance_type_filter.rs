//! The per-NodeClaim instance-type filter: what it keeps, the error for each cause, minValues
//! policies, daemon-overhead groups and the changed-keys fast path.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use scheduling::fixtures::{fake_instance_types, fake_well_known_labels};
use scheduling::instance_type::{
    FilterFailure, FilterGroup, FilterInput, InstanceType, InstanceTypeFilterError,
    InstanceTypeSpec, MinValuesPolicy, Offering, Overhead, filter_instance_types,
};
use scheduling::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, TOPOLOGY_ZONE, WellKnownLabels};
use scheduling::requirements::{Requirement, Requirements};
use scheduling::resources::Resources;

fn list(pairs: &[(&str, &str)]) -> Resources {
    Resources::parse(pairs.iter().copied()).unwrap()
}

/// An instance type whose requirements allow all three zones and both capacity types, whatever
/// its offerings, so requirement and offering checks can fail independently.
fn it(name: &str, arch: &str, cpu: &str, offering_zones: &[&str]) -> Arc<InstanceType> {
    let requirements = [
        Requirement::in_values(INSTANCE_TYPE, [name]),
        Requirement::in_values(ARCH, [arch]),
        Requirement::in_values(TOPOLOGY_ZONE, ["z1", "z2", "z3"]),
        Requirement::in_values(CAPACITY_TYPE, ["spot", "on-demand"]),
    ]
    .into_iter()
    .collect();
    let mut offerings: Vec<Offering> = offering_zones
        .iter()
        .map(|z| Offering::new("on-demand", z, 1.0))
        .collect();
    offerings.push(Offering::new("spot", "z3", 0.5).with_available(false));
    Arc::new(
        InstanceType::new(InstanceTypeSpec {
            name: Arc::from(name),
            requirements,
            offerings,
            capacity: list(&[("cpu", cpu), ("memory", "16Gi"), ("pods", "110")]),
            overhead: Overhead::default(),
        })
        .unwrap(),
    )
}

struct Case {
    requirements: Requirements,
    requests: Resources,
    policy: MinValuesPolicy,
    well_known: WellKnownLabels,
}

impl Case {
    fn new(requirements: &[Requirement], requests: &[(&str, &str)]) -> Self {
        Self {
            requirements: requirements.iter().cloned().collect(),
            requests: list(requests),
            policy: MinValuesPolicy::Strict,
            well_known: fake_well_known_labels(),
        }
    }

    fn run_groups(
        &mut self,
        groups: &[FilterGroup<'_, Arc<InstanceType>>],
        checked_against: Option<&Requirements>,
    ) -> Result<Vec<Vec<String>>, InstanceTypeFilterError> {
        let input = FilterInput {
            requests: &self.requests,
            pod_requests: &self.requests,
            well_known: &self.well_known,
            min_values_policy: self.policy,
            checked_against,
        };
        let mut kept = Vec::new();
        let outcome = filter_instance_types(groups, &mut self.requirements, &input, &mut kept)?;
        assert_eq!(outcome.kept, kept.iter().map(Vec::len).sum::<usize>());
        Ok(kept
            .iter()
            .map(|g| g.iter().map(|it| it.name().to_owned()).collect())
            .collect())
    }

    fn run(&mut self, its: &[Arc<InstanceType>]) -> Result<Vec<String>, InstanceTypeFilterError> {
        Ok(self
            .run_groups(&[FilterGroup::without_overhead(its)], None)?
            .concat())
    }

    fn fail(&mut self, its: &[Arc<InstanceType>]) -> InstanceTypeFilterError {
        self.run(its).expect_err("the filter should keep nothing")
    }
}

fn arm() -> Requirement {
    Requirement::in_values(ARCH, ["arm64"])
}

fn zone3() -> Requirement {
    Requirement::in_values(TOPOLOGY_ZONE, ["z3"])
}

#[test]
fn keeps_instance_types_that_fit_intersect_and_have_an_offering_in_order() {
    let its = fake_instance_types(10).unwrap();
    let test_zone_3 = || Requirement::in_values(TOPOLOGY_ZONE, ["test-zone-3"]);
    let mut case = Case::new(
        &[test_zone_3()],
        &[("cpu", "3"), ("memory", "1Gi"), ("pods", "1")],
    );
    let kept = case.run(&its).unwrap();
    let expected: Vec<String> = (3..10).map(|i| format!("fake-it-{i}")).collect();
    assert_eq!(kept, expected);
    // Spot is only offered in zones 1 and 2.
    let mut spot_z3 = Case::new(
        &[
            test_zone_3(),
            Requirement::in_values(CAPACITY_TYPE, ["spot"]),
        ],
        &[("cpu", "1")],
    );
    let error = spot_z3.fail(&its);
    assert_eq!(error.reason(), FilterFailure::Offering);
}

#[test]
fn no_criterion_met_names_all_three() {
    let its = [it("a", "amd64", "1", &["z1"])];
    let error = Case::new(&[arm(), zone3()], &[("cpu", "2")]).fail(&its);
    assert_eq!(
        error.reason(),
        FilterFailure::RequirementsResourcesAndOffering
    );
    let message = error.to_string();
    assert!(
        message.starts_with(
            "no instance type met the scheduling requirements or had enough resources or had a \
             required offering, requirements="
        ),
        "{message}"
    );
    assert!(
        message.contains("kubernetes.io/arch In [arm64]"),
        "{message}"
    );
    assert!(message.ends_with("resources={cpu: 2}"), "{message}");
}

#[test]
fn requirements_and_resources_unmet() {
    let its = [it("a", "amd64", "1", &["z1", "z3"])];
    let error = Case::new(&[arm(), zone3()], &[("cpu", "2")]).fail(&its);
    assert_eq!(error.reason(), FilterFailure::RequirementsAndResources);
    assert!(
        error.to_string().starts_with(
            "no instance type met the scheduling requirements or had enough resources,"
        )
    );
}

#[test]
fn requirements_and_offering_unmet() {
    let its = [it("a", "amd64", "4", &["z1"])];
    let error = Case::new(&[arm(), zone3()], &[("cpu", "2")]).fail(&its);
    assert_eq!(error.reason(), FilterFailure::RequirementsAndOffering);
    assert!(error.to_string().starts_with(
        "no instance type met the scheduling requirements or had a required offering,"
    ));
}

#[test]
fn resources_and_offering_unmet() {
    let its = [it("a", "amd64", "1", &["z1"])];
    let error = Case::new(&[zone3()], &[("cpu", "2")]).fail(&its);
    assert_eq!(error.reason(), FilterFailure::ResourcesAndOffering);
    assert!(
        error
            .to_string()
            .starts_with("no instance type had enough resources or had a required offering,")
    );
}

#[test]
fn requirements_alone_unmet() {
    let its = [it("a", "amd64", "4", &["z3"])];
    let error = Case::new(&[arm()], &[("cpu", "2")]).fail(&its);
    assert_eq!(error.reason(), FilterFailure::Requirements);
    assert!(
        error
            .to_string()
            .starts_with("no instance type met the scheduling requirements,")
    );
}

#[test]
fn resources_alone_unmet_with_a_typo_hint_for_a_million_cores() {
    let its = [
        it("a", "amd64", "4", &["z3"]),
        it("b", "amd64", "8", &["z1"]),
    ];
    let error = Case::new(&[], &[("cpu", "9")]).fail(&its);
    assert_eq!(error.reason(), FilterFailure::Resources);
    let message = error.to_string();
    assert!(
        message.starts_with("no instance type had enough resources,"),
        "{message}"
    );
    assert!(!message.contains("typo"), "{message}");
    let typo = Case::new(&[], &[("cpu", "1M")]).fail(&its).to_string();
    assert!(typo.ends_with("resources={cpu: 1M} (CPU request >= 1 million cores, m vs M typo?)"));
    let both = Case::new(&[arm()], &[("cpu", "2M")]).fail(&its).to_string();
    assert!(both.contains("m vs M typo?"), "{both}");
}

#[test]
fn offering_alone_unmet() {
    let its = [it("a", "amd64", "4", &["z1", "z2"])];
    let error = Case::new(&[zone3()], &[("cpu", "2")]).fail(&its);
    assert_eq!(error.reason(), FilterFailure::Offering);
    assert!(
        error
            .to_string()
            .starts_with("no instance type had a required offering,")
    );
}

#[test]
fn pairs_met_by_single_instance_types_point_at_the_missing_criterion() {
    // Each candidate is named after what it meets: r(equirements), f(its), o(ffering).
    let rf = it("rf", "amd64", "4", &["z1"]);
    let fo = it("fo", "arm64", "4", &["z3"]);
    let ro = it("ro", "amd64", "1", &["z3"]);
    let f = it("f", "arm64", "4", &["z1"]);
    let r = it("r", "amd64", "1", &["z1"]);
    let o = it("o", "arm64", "1", &["z3"]);
    let amd_z3 = || {
        Case::new(
            &[Requirement::in_values(ARCH, ["amd64"]), zone3()],
            &[("cpu", "2")],
        )
    };
    let cases = [
        (
            vec![rf.clone(), fo.clone()],
            FilterFailure::OfferingOfThoseFitting,
        ),
        (
            vec![fo.clone(), ro.clone()],
            FilterFailure::RequirementsOfThoseFitting,
        ),
        (
            vec![ro.clone(), f.clone()],
            FilterFailure::ResourcesOfThoseCompatible,
        ),
        (vec![r, f, o], FilterFailure::Combination),
    ];
    for (its, expected) in cases {
        let error = amd_z3().fail(&its);
        assert_eq!(error.reason(), expected, "{its:?}");
        let flags = error.flags();
        assert!(flags.requirements && flags.resources && flags.offering);
    }
    let message = amd_z3().fail(&[rf, fo]).to_string();
    assert!(
        message.starts_with(
            "no instance type meeting the scheduling requirements with enough resources had a \
             required offering,"
        ),
        "{message}"
    );
}

#[test]
fn strict_min_values_failure_clears_the_result_and_names_min_values() {
    let its = fake_instance_types(5).unwrap();
    let min3 = Requirement::exists(INSTANCE_TYPE).with_min_values(Some(3));
    let mut case = Case::new(std::slice::from_ref(&min3), &[("cpu", "3500m")]);
    let error = case.run(&its).unwrap_err();
    assert_eq!(error.reason(), FilterFailure::MinValues);
    assert_eq!(error.min_values().unwrap().unsatisfied[0].available, 2);
    let message = error.to_string();
    assert!(
        message.starts_with("minValues requirement is not met for label(s)"),
        "{message}"
    );
    assert!(message.contains("requirements=node.kubernetes.io/instance-type Exists minValues 3"));
    let mut enough = Case::new(&[min3], &[("cpu", "2500m")]);
    assert_eq!(enough.run(&its).unwrap().len(), 3);
}

#[test]
fn best_effort_min_values_keeps_the_result_and_lowers_min_values() {
    let its = fake_instance_types(5).unwrap();
    let min3 = Requirement::exists(INSTANCE_TYPE).with_min_values(Some(3));
    let mut case = Case::new(&[min3], &[("cpu", "3500m")]);
    case.policy = MinValuesPolicy::BestEffort;
    let input = FilterInput {
        requests: &case.requests,
        pod_requests: &case.requests,
        well_known: &case.well_known,
        min_values_policy: case.policy,
        checked_against: None,
    };
    let mut kept = Vec::new();
    let groups = [FilterGroup::without_overhead(its.as_slice())];
    let outcome =
        filter_instance_types(&groups, &mut case.requirements, &input, &mut kept).unwrap();
    assert!(outcome.min_values_relaxed);
    assert_eq!(outcome.kept, 2);
    assert_eq!(
        case.requirements.get(INSTANCE_TYPE).unwrap().min_values(),
        Some(2)
    );
}

#[test]
fn daemon_overhead_is_added_per_group_and_shown_as_min_and_max() {
    let its = fake_instance_types(6).unwrap();
    let (small, large) = its.split_at(3);
    let light = list(&[("cpu", "500m")]);
    let heavy = list(&[("cpu", "2")]);
    let mut case = Case::new(&[], &[("cpu", "1500m")]);
    let kept = case
        .run_groups(
            &[
                FilterGroup::new(&light, small),
                FilterGroup::new(&heavy, large),
            ],
            None,
        )
        .unwrap();
    // 1500m + 500m fits fake-it-2 (2900m); 1500m + 2 fits fake-it-3 (3900m) and up.
    assert_eq!(
        kept,
        [
            vec!["fake-it-2".to_owned()],
            vec!["fake-it-3".into(), "fake-it-4".into(), "fake-it-5".into()]
        ]
    );
    let mut too_big = Case::new(&[], &[("cpu", "10")]);
    let error = too_big
        .run_groups(
            &[
                FilterGroup::new(&light, small),
                FilterGroup::new(&heavy, large),
            ],
            None,
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("resources=min={cpu: 10500m}, max={cpu: 12}"),
        "{error}"
    );
    let same = too_big
        .run_groups(
            &[
                FilterGroup::new(&light, small),
                FilterGroup::new(&light, large),
            ],
            None,
        )
        .unwrap_err();
    assert!(
        same.to_string().ends_with("resources={cpu: 10500m}"),
        "{same}"
    );
}

#[test]
fn equal_checked_against_requirements_recheck_only_resources() {
    let its = fake_instance_types(6).unwrap();
    // The promise is trusted: requirement and offering checks are skipped.
    let mut case = Case::new(&[arm()], &[("cpu", "4")]);
    let before: Requirements = [arm()].into_iter().collect();
    let all = [FilterGroup::without_overhead(its.as_slice())];
    let kept = case.run_groups(&all, Some(&before)).unwrap();
    assert_eq!(kept.concat(), ["fake-it-4", "fake-it-5"]);
    let small = [FilterGroup::without_overhead(&its[..4])];
    let error = case.run_groups(&small, Some(&before)).unwrap_err();
    assert_eq!(error.reason(), FilterFailure::RequirementsAndResources);
}

#[test]
fn only_changed_keys_are_rechecked_and_offerings_only_for_offering_keys() {
    let in_z1 = it("in-z1", "amd64", "4", &["z1"]);
    let in_z3 = it("in-z3", "amd64", "4", &["z3"]);
    // Its only offering is unavailable: it passed earlier only by the caller's promise.
    let nowhere = it("nowhere", "amd64", "4", &[]);
    let its = [in_z1, in_z3, nowhere];
    let group = [FilterGroup::without_overhead(its.as_slice())];
    let amd = Requirement::in_values(ARCH, ["amd64"]);
    let before: Requirements = [amd.clone()].into_iter().collect();
    // A new zone requirement re-checks zones and offerings.
    let mut zonal = Case::new(&[amd.clone(), zone3()], &[("cpu", "1")]);
    assert_eq!(
        zonal.run_groups(&group, Some(&before)).unwrap().concat(),
        ["in-z3"]
    );
    // A hostname requirement concerns no instance type or offering: nothing is re-checked.
    let hostname = Requirement::in_values("kubernetes.io/hostname", ["h-1"]);
    let mut placed = Case::new(&[amd.clone(), hostname.clone()], &[("cpu", "1")]);
    let kept = placed.run_groups(&group, Some(&before)).unwrap().concat();
    assert_eq!(kept, ["in-z1", "in-z3", "nowhere"]);
    // A changed arch requirement re-checks arch only.
    let mut arm_now = Case::new(&[arm(), hostname.clone()], &[("cpu", "1")]);
    let error = arm_now.run_groups(&group, Some(&before)).unwrap_err();
    assert_eq!(error.reason(), FilterFailure::Requirements);
    // A requirement dropped since the check voids the promise: everything is re-checked.
    let mut dropped = Case::new(&[hostname], &[("cpu", "1")]);
    let kept = dropped.run_groups(&group, Some(&before)).unwrap().concat();
    assert_eq!(kept, ["in-z1", "in-z3"]);
}

#[test]
fn kept_buffers_are_reused_and_cleared_on_error() {
    let its = fake_instance_types(3).unwrap();
    let requests = list(&[("cpu", "1")]);
    let well_known = fake_well_known_labels();
    let input = FilterInput {
        requests: &requests,
        pod_requests: &requests,
        well_known: &well_known,
        min_values_policy: MinValuesPolicy::Strict,
        checked_against: None,
    };
    let mut kept = vec![
        vec![its[0].clone()],
        vec![its[0].clone()],
        vec![its[0].clone()],
    ];
    let groups = [FilterGroup::without_overhead(its.as_slice())];
    let mut requirements = Requirements::new();
    filter_instance_types(&groups, &mut requirements, &input, &mut kept).unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].len(), 2);
    let mut arm_only: Requirements = [arm()].into_iter().collect();
    filter_instance_types(&groups, &mut arm_only, &input, &mut kept).unwrap_err();
    assert!(kept.iter().all(Vec::is_empty));
}

#[test]
fn groups_left_out_and_empty_groups_keep_nothing() {
    let its = fake_instance_types(2).unwrap();
    let mut case = Case::new(&[], &[("cpu", "1")]);
    let error = case.run_groups(&[], None).unwrap_err();
    assert_eq!(
        error.reason(),
        FilterFailure::RequirementsResourcesAndOffering
    );
    let kept = case
        .run_groups(
            &[
                FilterGroup::without_overhead(&its[..0]),
                FilterGroup::without_overhead(&its),
            ],
            None,
        )
        .unwrap();
    assert_eq!(kept, [Vec::<String>::new(), vec!["fake-it-1".to_owned()]]);
}
