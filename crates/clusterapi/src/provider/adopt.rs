//! Adoption: a Machine made for replicas we raised that nobody claimed, whose Node has joined,
//! gets a NodeClaim instead of being collected from under its pods.
//!
//! Responsibility: [`ClusterApiProvider::adopt`]. Such Machines come from a `RollingUpdate`
//! rollout Cluster API drives itself (it replaces claimed Machines with new, unclaimed ones)
//! or from a Machine that came after its launch gave up. Left alone they run outside
//! Karpenter: no NodeClaim, no consolidation, and the collector would take them as surplus
//! once the rollout ends, evicting whatever runs there. Adopted, they are ordinary nodes:
//! consolidation removes them within the disruption budgets if nothing needs them.
//!
//! The NodeClaim comes from the first NodePool (highest `weight`, then name) that is not
//! static, not being deleted, uses a NodeClass selecting the MachineDeployment, has no
//! `NoExecute` taint (the running pods would be evicted) and admits the instance type's labels;
//! its template minus the startup taints (the Node is up already), pinned to the instance
//! type, with the binding annotation `karpenter.cluster.x-k8s.io/machine` and
//! `karpenter.cluster.x-k8s.io/adopted`. Its name is derived from the Machine, so a pass
//! interrupted after the create finds it again. Then the Machine is claimed for its UID by
//! the usual compare-and-set, while this process holds the Machine against its own creates.
//! If the claim cannot be made (someone else claimed it), the NodeClaim loses its binding
//! annotation and is deleted; termination only removes a Machine claimed by its own UID.
//! Inputs: the Machine, its MachineDeployment, NodePools and NodeClasses. Outputs: the
//! NodeClaim's name, or why not.

use std::collections::BTreeMap;

use api::well_known::annotations::MACHINE;
use api::well_known::labels::{INSTANCE_TYPE, NODEPOOL};
use api::{ClusterAPINodeClass, Machine, MachineDeployment, NodeClaim, NodePool};
use cloudprovider::CloudProviderError;
use cloudprovider::convert::requirements_of;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use scheduling::requirements::Requirements;
use serde_json::{Value, json};

use super::claim::Claiming;
use super::{ClusterApiProvider, annotation, cache, claimable, status_code, transient};
use crate::instance_types::{MachineDeploymentInput, MachineDeploymentRef, build_catalogue};
use crate::selection::select;

/// NodeClaim annotation: the NodeClaim was made for a Machine Cluster API created on its own.
pub const ADOPTED: &str = "karpenter.cluster.x-k8s.io/adopted";

/// The NodeClaim name for Machine `m` (a valid name of at most 63 characters).
fn adopted_name(m: &Machine) -> String {
    let name = m.metadata.name.as_deref().unwrap_or_default();
    let mut out = format!("adopted-{name}");
    out.truncate(63);
    out.trim_end_matches(['-', '.']).to_owned()
}

impl ClusterApiProvider {
    /// Give `m` (unclaimed, of `md`, Node joined) a NodeClaim. `Ok(None)`: no NodePool can
    /// take it, or it was claimed meanwhile.
    ///
    /// # Errors
    /// Transient API failures.
    pub(crate) async fn adopt(
        &self,
        m: &Machine,
        md: &MachineDeployment,
        cluster: &str,
        pools: &[NodePool],
        classes: &[ClusterAPINodeClass],
    ) -> Result<Option<String>, CloudProviderError> {
        let r = cache::machine_ref(m);
        let md_ref = MachineDeploymentRef::of(md);
        let Some(_held) = Claiming::take(&self.claiming, &r) else {
            return Ok(None);
        };
        let Some(nc) = self.adoption_claim(m, md, pools, classes).await else {
            tracing::warn!(machine = %r, machine_deployment = %md_ref,
                "an unclaimed Machine runs a Node, but no NodePool can adopt it (none uses a NodeClass selecting its MachineDeployment, admits its instance type and has no NoExecute taint)");
            return Ok(None);
        };
        let api: Api<NodeClaim> = Api::all(self.workload.clone());
        let name = nc.metadata.name.clone().unwrap_or_default();
        let created = match api.create(&PostParams::default(), &nc).await {
            Ok(created) => created,
            Err(e) if status_code(&e) == Some(409) => api
                .get(&name)
                .await
                .map_err(|e| transient("get NodeClaim", e))?,
            Err(e) => return Err(transient("create NodeClaim", e)),
        };
        let uid = created.metadata.uid.clone().unwrap_or_default();
        for _ in 0..3 {
            let fresh = self
                .machines_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get Machine", e))?;
            let Some(fresh) = fresh else {
                break;
            };
            if annotation(&fresh.metadata, super::CLAIMED_BY_UID) == Some(uid.as_str()) {
                return Ok(Some(name));
            }
            if !claimable(&fresh, &md_ref) {
                break;
            }
            let rv = fresh.metadata.resource_version.clone().unwrap_or_default();
            match self.claim_at(&r, &rv, &name, &uid, cluster).await {
                Ok(_) => {
                    self.claimed
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(r.clone());
                    tracing::info!(machine = %r, nodeclaim = %name, machine_deployment = %md_ref,
                        "adopted a Machine Cluster API made on its own");
                    return Ok(Some(name));
                }
                Err(e) if status_code(&e) == Some(409) => {}
                Err(e) => return Err(transient("claim Machine", e)),
            }
        }
        // Not ours after all: unbind the NodeClaim, then delete it.
        let unbind = json!({"metadata": {"annotations": {MACHINE: null}}});
        let _ = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&unbind))
            .await;
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => return Err(transient("delete NodeClaim", e)),
        }
        Ok(None)
    }

    /// The NodeClaim adopting `m`, from the first NodePool that can take it.
    async fn adoption_claim(
        &self,
        m: &Machine,
        md: &MachineDeployment,
        pools: &[NodePool],
        classes: &[ClusterAPINodeClass],
    ) -> Option<NodeClaim> {
        let template = self.templates.of(md).await;
        let mut pools: Vec<&NodePool> = pools
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && p.spec.replicas.is_none())
            .collect();
        pools.sort_by_key(|p| (-p.spec.weight.unwrap_or(0), p.metadata.name.clone()));
        for pool in pools {
            let spec = &pool.spec.template.spec;
            let Some(class) = classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(spec.node_class_ref.name.as_str()))
            else {
                continue;
            };
            let selects = select(
                std::slice::from_ref(md),
                class.spec.scalable_resource_selector.as_ref(),
                &self.config.scope,
            )
            .is_ok_and(|s| !s.is_empty());
            if !selects
                || spec
                    .taints
                    .iter()
                    .flatten()
                    .any(|t| t.effect == api::common::TaintEffect::NoExecute)
            {
                continue;
            }
            let input = match &template {
                Some(t) => MachineDeploymentInput::new(md).with_infrastructure_template(t),
                None => MachineDeploymentInput::new(md),
            };
            let Ok(catalogue) = build_catalogue(&class.spec, &[input]) else {
                continue;
            };
            let Some((entry, origin)) = catalogue
                .entries()
                .iter()
                .find_map(|e| e.offerings().next().map(|(_, o)| (e, o)))
            else {
                continue;
            };
            let labels = entry.node_labels(origin);
            let Some(nc) = claim_from(pool, m, entry.name(), &labels) else {
                continue;
            };
            let admits = requirements_of(&nc).is_ok_and(|wanted| {
                wanted.is_compatible(&Requirements::from_labels(&labels), &self.well_known)
            });
            if admits {
                return Some(nc);
            }
        }
        None
    }
}

/// The adoption NodeClaim of `m` from `pool`'s template, pinned to `instance_type`.
fn claim_from(
    pool: &NodePool,
    m: &Machine,
    instance_type: &str,
    labels: &BTreeMap<String, String>,
) -> Option<NodeClaim> {
    let template = &pool.spec.template;
    let pool_name = pool.metadata.name.clone()?;
    let mut meta_labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    meta_labels.insert(NODEPOOL.to_owned(), pool_name);
    // The Node's labels the NodeClaim would otherwise overwrite stay as they are.
    meta_labels.retain(|k, v| labels.get(k).is_none_or(|have| have == v));
    let mut annotations = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(MACHINE.to_owned(), cache::machine_ref(m).to_string());
    annotations.insert(ADOPTED.to_owned(), "true".to_owned());
    let mut spec = serde_json::to_value(&template.spec).ok()?;
    let map = spec.as_object_mut()?;
    map.remove("startupTaints");
    let requirements = map
        .entry("requirements")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = requirements {
        list.retain(|r| r.get("key").and_then(Value::as_str) != Some(INSTANCE_TYPE));
        list.push(json!({"key": INSTANCE_TYPE, "operator": "In", "values": [instance_type]}));
    }
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": adopted_name(m), "labels": meta_labels, "annotations": annotations},
        "spec": spec,
    }))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adopted_names_are_valid_and_bounded() {
        let mut m = Machine::default();
        m.metadata.name = Some("md-abcde-xyz12".into());
        assert_eq!(adopted_name(&m), "adopted-md-abcde-xyz12");
        m.metadata.name = Some(format!("{}-{}", "a".repeat(54), "b".repeat(10)));
        let long = adopted_name(&m);
        assert!(long.len() <= 63, "{long}");
        assert!(!long.ends_with('-'), "{long}");
    }
}
