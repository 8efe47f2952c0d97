//! PodDisruptionBudgets as voluntary disruption reads them (spec §5.3, §5.8).
//!
//! Responsibility: which PDBs select a pod (same namespace; a present but empty selector
//! selects every pod, an absent one none, as policy/v1 defines), whether an eviction of the pod
//! could go through now (exactly one PDB, with `status.disruptionsAllowed > 0`, except a pod
//! that is not Ready under `unhealthyPodEvictionPolicy: AlwaysAllow`), and whether a PDB blocks
//! the pod completely (`maxUnavailable` 0 or `"0%"`, or `minAvailable` `"100%"`), so that a
//! simulation does not plan to move it.
//!
//! Inputs: PDBs and pods. Outputs: answers naming the PDB. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The PDBs of the cluster.
#[derive(Debug, Clone, Copy)]
pub struct Pdbs<'a> {
    pdbs: &'a [PodDisruptionBudget],
}

fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expression = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            // An unknown operator selects nothing (the API server rejects such PDBs).
            _ => false,
        }
    });
    by_label && by_expression
}

fn name(pdb: &PodDisruptionBudget) -> String {
    format!(
        "{}/{}",
        pdb.metadata.namespace.as_deref().unwrap_or_default(),
        pdb.metadata.name.as_deref().unwrap_or_default()
    )
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

impl<'a> Pdbs<'a> {
    /// Wraps the cluster's PDBs.
    #[must_use]
    pub fn new(pdbs: &'a [PodDisruptionBudget]) -> Self {
        Self { pdbs }
    }

    /// The PDBs selecting `pod`.
    pub fn matching(&self, pod: &'a Pod) -> impl Iterator<Item = &'a PodDisruptionBudget> + 'a {
        let empty = BTreeMap::new();
        let namespace = pod.metadata.namespace.clone();
        self.pdbs.iter().filter(move |pdb| {
            let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
            pdb.metadata.namespace == namespace
                && pdb
                    .spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .is_some_and(|sel| selects(sel, labels))
        })
    }

    /// Whether an eviction of `pod` could succeed now; the error says which PDB(s) refuse.
    ///
    /// # Errors
    /// A message naming the PDB that allows no disruption, or the PDBs when more than one
    /// selects the pod.
    pub fn can_evict(&self, pod: &'a Pod) -> Result<(), String> {
        let matching: Vec<&PodDisruptionBudget> = self.matching(pod).collect();
        match matching.as_slice() {
            [] => Ok(()),
            [pdb] => {
                let allowed = pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed);
                let always_allow = pdb
                    .spec
                    .as_ref()
                    .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
                    == Some("AlwaysAllow");
                if allowed > 0 || (always_allow && !is_ready(pod)) {
                    Ok(())
                } else {
                    Err(format!("pdb {:?} prevents pod evictions", name(pdb)))
                }
            }
            many => Err(format!(
                "eviction does not support multiple PDBs: {}",
                many.iter()
                    .map(|p| format!("{:?}", name(p)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Whether a PDB selecting `pod` never allows a disruption (`maxUnavailable` 0 or `"0%"`,
    /// `minAvailable` `"100%"`).
    #[must_use]
    pub fn fully_blocks(&self, pod: &'a Pod) -> bool {
        self.matching(pod).any(|pdb| {
            let Some(spec) = pdb.spec.as_ref() else {
                return false;
            };
            matches!(
                spec.max_unavailable.as_ref(),
                Some(IntOrString::Int(0))
            ) || matches!(spec.max_unavailable.as_ref(), Some(IntOrString::String(s)) if s == "0%")
                || matches!(spec.min_available.as_ref(), Some(IntOrString::String(s)) if s == "100%")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn pod(labels: &[(&str, &str)], ready: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("default".into());
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        p.status = Some(k8s_openapi::api::core::v1::PodStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    fn pdb(name: &str, selector: Option<LabelSelector>, allowed: i32) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                selector,
                ..Default::default()
            }),
            status: Some(PodDisruptionBudgetStatus {
                disruptions_allowed: allowed,
                ..Default::default()
            }),
        }
    }

    fn app(v: &str) -> Option<LabelSelector> {
        Some(LabelSelector {
            match_labels: Some([("app".to_owned(), v.to_owned())].into()),
            match_expressions: None,
        })
    }

    #[test]
    fn zero_allowed_blocks_one_allowed_passes_and_two_pdbs_block() {
        let web = pod(&[("app", "web")], true);
        let list = [pdb("web", app("web"), 0)];
        assert_eq!(
            Pdbs::new(&list).can_evict(&web),
            Err("pdb \"default/web\" prevents pod evictions".into())
        );
        let list = [pdb("web", app("web"), 1)];
        assert_eq!(Pdbs::new(&list).can_evict(&web), Ok(()));
        let list = [
            pdb("web", app("web"), 1),
            pdb("all", Some(LabelSelector::default()), 5),
        ];
        assert!(
            Pdbs::new(&list)
                .can_evict(&web)
                .unwrap_err()
                .contains("multiple PDBs")
        );
        let list = [pdb("none", None, 0), pdb("db", app("db"), 0)];
        assert_eq!(
            Pdbs::new(&list).can_evict(&web),
            Ok(()),
            "no selector selects nothing"
        );
    }

    #[test]
    fn always_allow_lets_unready_pods_go_and_expressions_select() {
        let mut p = pdb("web", app("web"), 0);
        if let Some(s) = p.spec.as_mut() {
            s.unhealthy_pod_eviction_policy = Some("AlwaysAllow".into());
        }
        let list = [p];
        assert_eq!(
            Pdbs::new(&list).can_evict(&pod(&[("app", "web")], false)),
            Ok(())
        );
        assert!(
            Pdbs::new(&list)
                .can_evict(&pod(&[("app", "web")], true))
                .is_err()
        );
        let expr = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["batch".into()]),
            }]),
        };
        let list = [pdb("tier", Some(expr), 0)];
        assert!(
            Pdbs::new(&list)
                .can_evict(&pod(&[("tier", "web")], true))
                .is_err()
        );
        assert!(
            Pdbs::new(&list)
                .can_evict(&pod(&[("tier", "batch")], true))
                .is_ok()
        );
    }

    #[test]
    fn fully_blocking_pdbs() {
        let web = pod(&[("app", "web")], true);
        let mut zero = pdb("web", app("web"), 0);
        if let Some(s) = zero.spec.as_mut() {
            s.max_unavailable = Some(IntOrString::String("0%".into()));
        }
        assert!(Pdbs::new(std::slice::from_ref(&zero)).fully_blocks(&web));
        if let Some(s) = zero.spec.as_mut() {
            s.max_unavailable = Some(IntOrString::Int(1));
        }
        assert!(!Pdbs::new(std::slice::from_ref(&zero)).fully_blocks(&web));
        if let Some(s) = zero.spec.as_mut() {
            s.min_available = Some(IntOrString::String("100%".into()));
        }
        assert!(Pdbs::new(std::slice::from_ref(&zero)).fully_blocks(&web));
    }
}
