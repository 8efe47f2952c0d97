//! What a node costs: the price of the offering a NodeClaim's Machine runs on, as the
//! controller prices it, and where that price came from.
//!
//! Responsibility: answer "what does this node cost, and why" with the same catalogue (price
//! annotations, NodeClass `spec.prices`) and the same NodeOverlay evaluation the provisioner
//! and consolidation use, so a report (`simulate`'s cost) cannot disagree with the decisions.
//! Inputs: a NodeClaim (its Machine, NodeClass reference, `karpenter.sh/nodepool` label), the
//! caches, the NodeOverlay store.
//! Outputs: [`NodePrice`].

use std::collections::HashMap;
use std::sync::Arc;

use api::NodeClaim;
use api::well_known::labels::NODEPOOL;
use cloudprovider::CloudProviderError;
use kube::ResourceExt as _;

use crate::instance_types::{Catalogue, MachineDeploymentRef};

use super::reads::offering_for;
use super::{ClusterApiProvider, deployment_of};

/// The price of one node and its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePrice {
    /// The node group its Machine belongs to.
    pub group: MachineDeploymentRef,
    /// Price per hour; `None` when unpriced or when the group's offering is not in the
    /// NodeClass's catalogue any more.
    pub price: Option<f64>,
    /// Where the price came from: `NodeOverlay <name>`, `annotation`, `legacy annotation`,
    /// `nodeclass spec.prices[i]`, `none (0)`, or why there is no offering.
    pub source: String,
}

fn label<'a>(nc: &'a NodeClaim, key: &str) -> Option<&'a str> {
    nc.labels().get(key).map(String::as_str)
}

impl ClusterApiProvider {
    /// What each of `node_claims`' nodes costs per hour and where the price came from: its
    /// Machine's node group, that group's offering in its NodeClass's catalogue (the one its
    /// launch is described by), with the NodeOverlays of its NodePool applied (gate on).
    /// `Ok(None)` when the NodeClaim has no Machine or the Machine belongs to no node group;
    /// an error when its NodeClass cannot be read or used, or the caches are not ready. Each
    /// NodeClass's catalogue is built once per call.
    pub async fn node_prices(
        &self,
        node_claims: &[NodeClaim],
    ) -> Vec<Result<Option<NodePrice>, CloudProviderError>> {
        let mut catalogues: HashMap<String, Result<Arc<Catalogue>, CloudProviderError>> =
            HashMap::new();
        let mut out = Vec::with_capacity(node_claims.len());
        for nc in node_claims {
            let class = &nc.spec.node_class_ref.name;
            if !catalogues.contains_key(class) {
                let built = match self.nodeclass(class).await {
                    Ok(nodeclass) => self.catalogue(&nodeclass.spec).await,
                    Err(e) => Err(e),
                };
                catalogues.insert(class.clone(), built);
            }
            let catalogue = match catalogues.get(class) {
                Some(Ok(c)) => Arc::clone(c),
                Some(Err(e)) => {
                    out.push(Err(e.clone()));
                    continue;
                }
                None => continue,
            };
            out.push(self.price_in(nc, &catalogue).await);
        }
        out
    }

    async fn price_in(
        &self,
        nc: &NodeClaim,
        catalogue: &Catalogue,
    ) -> Result<Option<NodePrice>, CloudProviderError> {
        let Some(machine) = self.find_machine(nc).await? else {
            return Ok(None);
        };
        let Some(group) = deployment_of(&machine) else {
            return Ok(None);
        };
        // The group's offering, as its launch is described (`reads::offering_for`).
        let found = offering_for(catalogue, &group).map(|(e, o, origin)| (e.name(), o, origin));
        let Some((name, offering, origin)) = found else {
            return Ok(Some(NodePrice {
                source: format!(
                    "none: {} has no offering in ClusterAPINodeClass {}",
                    group.key(),
                    nc.spec.node_class_ref.name
                ),
                group,
                price: None,
            }));
        };
        let overlaid = label(nc, NODEPOOL).and_then(|pool| {
            let evaluated = self.overlays()?.current()?;
            let (price, overlay) = evaluated.pool(pool)?.overlaid_price(name, offering)?;
            Some((price, format!("NodeOverlay {overlay}")))
        });
        Ok(Some(match overlaid {
            Some((price, source)) => NodePrice {
                group,
                price: Some(price),
                source,
            },
            None => NodePrice {
                group,
                price: offering.known_price(),
                source: origin.price_source.to_string(),
            },
        }))
    }
}
