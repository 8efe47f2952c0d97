//! The last few catalogues built, shared by every caller that would build the same one again.
//!
//! Responsibility: remember a NodeClass catalogue together with exactly what it was built from —
//! the NodeClass spec and, per selected node group, its UID and `resourceVersion`, its
//! infrastructure template's UID and `resourceVersion`, and the two flags the caller adds
//! (a recent launch failure, a blocked scale-up) — and hand the same `Arc` to the next caller
//! whose inputs are all the same. Any change to any of them (a replica written, an annotation
//! edited, a template's status updated, a flag flipped) is a different key, so what a caller gets
//! is always what `build_catalogue` would return for its inputs. Inputs without a
//! `resourceVersion` (objects that never came from an API server) are never remembered.
//! Why: every launch builds its NodeClass's catalogue and holds it across the wait for its
//! MachineDeployment's lock; a hundred launches at once held a hundred equal copies.
//! Inputs: the spec and the builder's inputs. Outputs: a shared [`Catalogue`], or `None`.

use std::sync::{Arc, Mutex, PoisonError};

use api::nodeclass::ClusterAPINodeClassSpec;

use crate::instance_types::{Catalogue, MachineDeploymentInput};

/// How many catalogues are remembered (one per NodeClass in use, usually).
const REMEMBERED: usize = 4;

/// What one node group contributed to a catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InputVersion {
    uid: String,
    resource_version: String,
    /// The template's UID and `resourceVersion`, when one was given.
    template: Option<(String, String)>,
    launch_failed: bool,
    scale_up_blocked: bool,
}

impl InputVersion {
    /// `None` when `input` cannot be told apart from a changed one by its versions.
    fn of(input: &MachineDeploymentInput<'_>) -> Option<Self> {
        let meta = &input.machine_deployment.metadata;
        let template = match input.infrastructure_template {
            None => None,
            Some(t) => {
                let meta = t.get("metadata")?;
                let field = |k: &str| meta.get(k).and_then(|v| v.as_str()).map(str::to_owned);
                Some((field("uid")?, field("resourceVersion")?))
            }
        };
        (input.in_flight == 0).then_some(())?;
        Some(Self {
            uid: meta.uid.clone()?,
            resource_version: meta.resource_version.clone()?,
            template,
            launch_failed: input.launch_failed,
            scale_up_blocked: input.scale_up_blocked,
        })
    }
}

/// Everything a catalogue was built from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Key {
    spec: ClusterAPINodeClassSpec,
    inputs: Vec<InputVersion>,
}

impl Key {
    /// The key of building `spec` from `inputs`; `None` when an input has no versions.
    pub(super) fn of(
        spec: &ClusterAPINodeClassSpec,
        inputs: &[MachineDeploymentInput<'_>],
    ) -> Option<Self> {
        Some(Self {
            spec: spec.clone(),
            inputs: inputs.iter().map(InputVersion::of).collect::<Option<_>>()?,
        })
    }
}

/// The remembered catalogues, newest last.
#[derive(Debug, Default)]
pub(super) struct CatalogueMemo {
    built: Mutex<Vec<(Key, Arc<Catalogue>)>>,
}

impl CatalogueMemo {
    /// The catalogue built from `key`, if remembered.
    pub(super) fn get(&self, key: &Key) -> Option<Arc<Catalogue>> {
        let built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        built
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, c)| Arc::clone(c))
    }

    /// Remember `catalogue` as built from `key`, forgetting the oldest past [`REMEMBERED`] and
    /// any older one of the same spec (its inputs have changed since).
    pub(super) fn remember(&self, key: Key, catalogue: &Arc<Catalogue>) {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        built.retain(|(k, _)| k.spec != key.spec);
        if built.len() >= REMEMBERED {
            built.remove(0);
        }
        built.push((key, Arc::clone(catalogue)));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use api::MachineDeployment;

    fn md(name: &str, rv: Option<&str>) -> MachineDeployment {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                         "resourceVersion": rv},
            "spec": {"clusterName": "c", "replicas": 1, "selector": {},
                     "template": {"spec": {"clusterName": "c", "bootstrap": {},
                                  "infrastructureRef": {"kind": "DockerMachineTemplate", "name": "t"}}}}
        }))
        .unwrap()
    }

    fn template(rv: Option<&str>) -> serde_json::Value {
        serde_json::json!({"metadata": {"uid": "t-uid", "resourceVersion": rv},
                           "status": {"capacity": {"cpu": "2"}}})
    }

    #[test]
    fn the_same_inputs_share_one_catalogue_and_any_change_is_another_key() {
        let spec = ClusterAPINodeClassSpec::default();
        let (a1, b1) = (md("a", Some("1")), md("b", Some("7")));
        let t = template(Some("3"));
        let inputs = [
            MachineDeploymentInput::new(&a1).with_infrastructure_template(&t),
            MachineDeploymentInput::new(&b1),
        ];
        let key = Key::of(&spec, &inputs).unwrap();
        let memo = CatalogueMemo::default();
        assert!(memo.get(&key).is_none());
        let catalogue = Arc::new(Catalogue::default());
        memo.remember(key.clone(), &catalogue);
        assert!(Arc::ptr_eq(
            &memo.get(&Key::of(&spec, &inputs).unwrap()).unwrap(),
            &catalogue
        ));

        // A replica written (a new resourceVersion), a template updated, a flag set, a group
        // left out, another spec: none of them finds it.
        let a2 = md("a", Some("2"));
        let t4 = template(Some("4"));
        let changed = [
            vec![
                MachineDeploymentInput::new(&a2).with_infrastructure_template(&t),
                inputs[1],
            ],
            vec![
                MachineDeploymentInput::new(&a1).with_infrastructure_template(&t4),
                inputs[1],
            ],
            vec![inputs[0], inputs[1].with_launch_failed(true)],
            vec![inputs[0], inputs[1].with_scale_up_blocked(true)],
            vec![inputs[0]],
            vec![MachineDeploymentInput::new(&a1), inputs[1]],
        ];
        for inputs in &changed {
            assert!(
                memo.get(&Key::of(&spec, inputs).unwrap()).is_none(),
                "{inputs:?}"
            );
        }
        let other = ClusterAPINodeClassSpec {
            kube_reserved: Some(std::collections::BTreeMap::from([(
                "cpu".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
            )])),
            ..ClusterAPINodeClassSpec::default()
        };
        assert!(memo.get(&Key::of(&other, &inputs).unwrap()).is_none());
    }

    #[test]
    fn inputs_without_versions_are_never_remembered() {
        let spec = ClusterAPINodeClassSpec::default();
        let unversioned = md("a", None);
        assert!(Key::of(&spec, &[MachineDeploymentInput::new(&unversioned)]).is_none());
        let versioned = md("a", Some("1"));
        let t = template(None);
        let with_template =
            MachineDeploymentInput::new(&versioned).with_infrastructure_template(&t);
        assert!(Key::of(&spec, &[with_template]).is_none());
        assert!(
            Key::of(
                &spec,
                &[MachineDeploymentInput::new(&versioned).with_in_flight(1)]
            )
            .is_none()
        );
    }

    #[test]
    fn a_newer_catalogue_of_a_spec_replaces_the_older_and_at_most_four_are_kept() {
        let memo = CatalogueMemo::default();
        let mds: Vec<MachineDeployment> = (0..6).map(|i| md("a", Some(&i.to_string()))).collect();
        let specs: Vec<ClusterAPINodeClassSpec> = (0..6)
            .map(|i| ClusterAPINodeClassSpec {
                kube_reserved: Some(std::collections::BTreeMap::from([(
                    "cpu".to_owned(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(format!("{i}")),
                )])),
                ..ClusterAPINodeClassSpec::default()
            })
            .collect();
        let key = |s: usize, m: usize| {
            Key::of(&specs[s], &[MachineDeploymentInput::new(&mds[m])]).unwrap()
        };
        memo.remember(key(0, 0), &Arc::new(Catalogue::default()));
        memo.remember(key(0, 1), &Arc::new(Catalogue::default()));
        assert!(memo.get(&key(0, 0)).is_none());
        assert!(memo.get(&key(0, 1)).is_some());
        for s in 1..6 {
            memo.remember(key(s, s), &Arc::new(Catalogue::default()));
        }
        assert_eq!(memo.built.lock().unwrap().len(), REMEMBERED);
        assert!(memo.get(&key(0, 1)).is_none());
        assert!(memo.get(&key(5, 5)).is_some());
        assert!(memo.get(&key(2, 2)).is_some());
        assert!(memo.get(&key(1, 1)).is_none());
    }
}
