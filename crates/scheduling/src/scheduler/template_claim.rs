//! A NodeClaim straight from a NodePool's template, for no pod in particular: what a static
//! NodePool keeps `replicas` of (spec §4.10) and what replaces a drifted node of one (§5.6
//! StaticDrift).
//!
//! Responsibility: the template's requirements (pool requirements ∩ template labels ∩
//! `karpenter.sh/nodepool`) without the simulation-only keys, and every instance type that
//! could serve them with an available offering, cheapest first and truncated like a planned
//! NodeClaim's; no pods and no requests (upstream's static NodeClaims carry none either), so
//! the provider picks the cheapest option.
//! Inputs: a [`NodePool`], [`Options`]. Outputs: a [`PlannedNodeClaim`], or why the pool has
//! nothing to offer ([`DroppedPool`]). Pure.

use std::collections::BTreeMap;

use crate::labels::{HOSTNAME, NODE_INITIALIZED, NODE_REGISTERED};
use crate::requirements::Requirements;

use super::input::{NodePool, Options, PlannedNodeClaim};
use super::template::{self, DroppedPool};

/// A NodeClaim for `pool`'s template alone.
///
/// # Errors
/// The pool's [`DroppedPool`] reason when no instance type fits its requirements (or its
/// minValues, under the strict policy).
pub fn template_node_claim(
    pool: &NodePool,
    options: &Options,
) -> Result<PlannedNodeClaim, DroppedPool> {
    let (templates, dropped) = template::build(
        std::slice::from_ref(pool),
        &[],
        &[],
        &BTreeMap::new(),
        &options.well_known,
        options.min_values_policy,
    );
    let Some(template) = templates.into_iter().next() else {
        return Err(dropped.into_iter().next().unwrap_or_else(|| DroppedPool {
            name: pool.name.clone(),
            reason: "NodePool requirements filtered out all compatible available instance types"
                .into(),
        }));
    };
    let mut requirements = Requirements::new();
    for req in template.requirements.iter() {
        if ![HOSTNAME, NODE_REGISTERED, NODE_INITIALIZED].contains(&req.key()) {
            requirements.add(req.clone());
        }
    }
    // Without daemons there is one overhead group; several would each be ordered by price.
    let mut instance_types: Vec<_> = template
        .options
        .into_iter()
        .flat_map(|g| g.instance_types)
        .collect();
    crate::instance_type::order_by_price(&mut instance_types, &requirements, &options.well_known);
    instance_types.truncate(options.max_instance_types);
    Ok(PlannedNodeClaim {
        node_pool: template.pool,
        requirements,
        instance_types,
        requests: crate::resources::Resources::default(),
        labels: template.labels,
        taints: template.taints,
        startup_taints: template.startup_taints,
        pods: Vec::new(),
        min_values_relaxed: false,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fixtures::{FakeInstanceType, default_offerings, fake_well_known_labels};
    use crate::instance_type::InstanceType;
    use crate::labels::{INSTANCE_TYPE, NODE_POOL};
    use crate::requirements::Requirement;

    fn priced(types: &[(&str, f64)]) -> Vec<Arc<InstanceType>> {
        types
            .iter()
            .map(|(name, price)| {
                let mut it = FakeInstanceType::new(name);
                for o in default_offerings(*price) {
                    it = it.offering(o);
                }
                Arc::new(it.build().unwrap())
            })
            .collect()
    }

    fn pool(instance_types: Vec<Arc<InstanceType>>, requirements: Requirements) -> NodePool {
        NodePool {
            name: "static".into(),
            weight: 0,
            requirements,
            labels: BTreeMap::from([(Arc::from("team"), Arc::from("a"))]),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            limits: None,
            instance_types,
        }
    }

    #[test]
    fn carries_every_compatible_instance_type_cheapest_first() {
        let its = priced(&[("big", 4.0), ("small", 1.0), ("mid", 2.0)]);
        let mut reqs = Requirements::new();
        reqs.add(Requirement::not_in(INSTANCE_TYPE, ["mid"]));
        let options = Options {
            well_known: fake_well_known_labels(),
            ..Options::default()
        };
        let planned = template_node_claim(&pool(its, reqs), &options).unwrap();
        let names: Vec<&str> = planned.instance_types.iter().map(|it| it.name()).collect();
        assert_eq!(names, ["small", "big"]);
        assert_eq!(&*planned.node_pool, "static");
        assert!(planned.pods.is_empty());
        assert!(planned.requests.is_empty());
        assert_eq!(planned.labels.get("team").map(|v| &**v), Some("a"));
        assert!(planned.requirements.get(NODE_POOL).is_some());
        assert!(planned.requirements.get(NODE_REGISTERED).is_none());
        assert!(planned.requirements.get(NODE_INITIALIZED).is_none());
    }

    #[test]
    fn a_pool_nothing_fits_says_why() {
        let its = priced(&[("small", 1.0)]);
        let mut reqs = Requirements::new();
        reqs.add(Requirement::in_values(INSTANCE_TYPE, ["gpu"]));
        let options = Options {
            well_known: fake_well_known_labels(),
            ..Options::default()
        };
        let err = template_node_claim(&pool(its, reqs), &options).unwrap_err();
        assert!(
            err.reason.contains("filtered out all compatible"),
            "{}",
            err.reason
        );
    }
}
