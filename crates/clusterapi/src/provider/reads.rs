//! Reads: NodeClasses and their catalogues, the Machine of a NodeClaim, and Get / List /
//! instance types / drift, all described with the NodeClass that selects the Machine.
//!
//! Responsibility: everything the provider answers without writing, from the caches (Machines,
//! MachineDeployments, ClusterAPINodeClasses; an object a cache has not seen yet is read).
//! Inputs: the Machine cache, the MachineDeployment and NodeClass caches, NodeClaims.
//! Outputs: [`Launch`]es, instance types, drift reasons.

use std::collections::HashMap;
use std::sync::Arc;

use api::nodeclass::ClusterAPINodeClassSpec;
use api::well_known::annotations::MACHINE;
use api::well_known::capi::KARPENTER_MEMBER;
use api::{ClusterAPINodeClass, Machine, MachineDeployment, MachineSet, NodeClaim, NodePool};
use cloudprovider::{CloudProviderError, Launch};
use kube::api::Api;
use scheduling::instance_type::{InstanceType, Offering};

use crate::instance_types::{
    Catalogue, CatalogueEntry, MachineDeploymentInput, MachineDeploymentRef, OfferingOrigin,
    build_catalogue,
};
use crate::selection::select;

use super::{
    CLAIMED_BY, ClusterApiProvider, annotation, bound_machine, cache, claim_cluster, deployment_of,
    has_label, synced, terminating, transient,
};

pub(super) fn launch_of(
    m: &Machine,
    described: Option<(&CatalogueEntry, &OfferingOrigin)>,
) -> Launch {
    let mut launch = Launch::bare(cache::machine_ref(m));
    launch
        .annotations
        .insert(MACHINE.to_owned(), launch.machine.to_string());
    launch.provider_id = m.spec.fields.provider_id.clone().filter(|p| !p.is_empty());
    launch.node_claim = annotation(&m.metadata, CLAIMED_BY).map(str::to_owned);
    launch.deleting = terminating(m);
    launch.instance_deleting = m.metadata.deletion_timestamp.is_some();
    if let Some((entry, origin)) = described {
        launch.instance_type = entry.name().to_owned();
        launch.zone = Some(origin.zone.clone()).filter(|z| !z.is_empty());
        launch.capacity_type.clone_from(&origin.capacity_type);
        launch.capacity = entry.instance_type().capacity().clone();
        launch.allocatable = entry.instance_type().allocatable().clone();
        launch.labels = entry.node_labels(origin);
    }
    launch
}

/// The catalogue entry and offering of `md` alone (with its infrastructure template).
fn describe(
    md: &MachineDeployment,
    template: Option<&serde_json::Value>,
    spec: &ClusterAPINodeClassSpec,
) -> Option<Catalogue> {
    build_catalogue(spec, &[input(md, template)]).ok()
}

/// `md` as the catalogue builder's input, with its template if known.
fn input<'a>(
    md: &'a MachineDeployment,
    template: Option<&'a serde_json::Value>,
) -> MachineDeploymentInput<'a> {
    let input = MachineDeploymentInput::new(md);
    match template {
        Some(template) => input.with_infrastructure_template(template),
        None => input,
    }
}

fn entry_for<'a>(
    catalogue: &'a Catalogue,
    md: &MachineDeploymentRef,
) -> Option<(&'a CatalogueEntry, &'a OfferingOrigin)> {
    offering_for(catalogue, md).map(|(entry, _, origin)| (entry, origin))
}

/// The catalogue entry, offering and origin node group `md` backs (the first, as a launch on
/// it is described).
pub(super) fn offering_for<'a>(
    catalogue: &'a Catalogue,
    md: &MachineDeploymentRef,
) -> Option<(&'a CatalogueEntry, &'a Offering, &'a OfferingOrigin)> {
    catalogue.entries().iter().find_map(|e| {
        e.offerings()
            .find(|(_, o)| &o.machine_deployment == md)
            .map(|(offering, o)| (e, offering, o))
    })
}

impl ClusterApiProvider {
    /// The ClusterAPINodeClass `name`: the cache's copy, else (not listed yet) read.
    pub(super) async fn nodeclass(
        &self,
        name: &str,
    ) -> Result<ClusterAPINodeClass, CloudProviderError> {
        synced(&self.classes).await?;
        if let Some(class) = self.classes.get("", name) {
            return Ok((*class).clone());
        }
        let api: Api<ClusterAPINodeClass> = Api::all(self.workload.clone());
        match api.get_opt(name).await {
            Ok(Some(nc)) => Ok(nc),
            Ok(None) => Err(CloudProviderError::NodeClassNotReady(format!(
                "ClusterAPINodeClass {name} not found"
            ))),
            Err(e) => Err(transient("get ClusterAPINodeClass", e)),
        }
    }

    /// The catalogue of `spec` over the cached node groups; the same `Arc` as the last caller's
    /// when nothing it is built from has changed ([`super::catalogue_memo`]).
    pub(super) async fn catalogue(
        &self,
        spec: &ClusterAPINodeClassSpec,
    ) -> Result<Arc<Catalogue>, CloudProviderError> {
        let mds = self.machine_deployments().await?;
        let selected = select(
            mds.iter().map(AsRef::as_ref),
            spec.scalable_resource_selector.as_ref(),
            &self.config.scope,
        )
        .map_err(|e| CloudProviderError::NodeClassNotReady(e.to_string()))?;
        let templates =
            futures::future::join_all(selected.iter().map(|md| self.templates.of(md))).await;
        let sets = self.sets.all();
        let sets: Vec<&MachineSet> = sets.iter().map(AsRef::as_ref).collect();
        let inputs: Vec<_> = selected
            .iter()
            .zip(&templates)
            .map(|(md, template)| {
                input(md, template.as_ref())
                    .with_launch_failed(
                        self.recent_launch_failure(&MachineDeploymentRef::of(md))
                            .is_some(),
                    )
                    .with_scale_up_blocked(crate::scale_up::blocked(md, &sets).is_some())
            })
            .collect();
        let key = super::catalogue_memo::Key::of(spec, &inputs);
        if let Some(known) = key.as_ref().and_then(|k| self.catalogues.get(k)) {
            return Ok(known);
        }
        let built = Arc::new(
            build_catalogue(spec, &inputs)
                .map_err(|e| CloudProviderError::NodeClassNotReady(e.to_string()))?,
        );
        if let Some(key) = key {
            self.catalogues.remember(key, &built);
        }
        Ok(built)
    }

    /// Describe the Machine `m` (its MD from the cache; `spec` the NodeClass, if known).
    pub(super) async fn launch_for(
        &self,
        m: &Machine,
        spec: Option<&ClusterAPINodeClassSpec>,
    ) -> Launch {
        let Some(md_ref) = deployment_of(m) else {
            return launch_of(m, None);
        };
        let md = self.machine_deployment(&md_ref).await.ok().flatten();
        let default = ClusterAPINodeClassSpec::default();
        let template = match &md {
            Some(md) => self.templates.of(md).await,
            None => None,
        };
        let catalogue = md
            .as_ref()
            .and_then(|md| describe(md, template.as_ref(), spec.unwrap_or(&default)));
        launch_of(m, catalogue.as_ref().and_then(|c| entry_for(c, &md_ref)))
    }

    pub(super) async fn spec_of(&self, nc: &NodeClaim) -> Option<ClusterAPINodeClassSpec> {
        self.nodeclass(&nc.spec.node_class_ref.name)
            .await
            .ok()
            .map(|c| c.spec)
    }

    /// Every ClusterAPINodeClass not being deleted, by name (empty when unreadable: callers
    /// fall back to the default spec).
    async fn node_classes(&self) -> Vec<ClusterAPINodeClass> {
        let mut classes: Vec<ClusterAPINodeClass> = self
            .all_node_classes()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .collect();
        classes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        classes
    }

    /// Every ClusterAPINodeClass of the workload cluster, deleting ones included.
    ///
    /// # Errors
    /// Transient, when they cannot be listed.
    pub(crate) async fn all_node_classes(
        &self,
    ) -> Result<Vec<ClusterAPINodeClass>, CloudProviderError> {
        synced(&self.classes).await?;
        Ok(self.classes.all().iter().map(|c| (**c).clone()).collect())
    }

    /// Whether one of `classes` selects `md` (member, in scope, matching its selector).
    pub(crate) fn selected(&self, classes: &[ClusterAPINodeClass], md: &MachineDeployment) -> bool {
        self.spec_selecting(classes, md).is_some()
    }

    /// The spec of the first NodeClass (by name) that selects `md`.
    fn spec_selecting<'a>(
        &self,
        classes: &'a [ClusterAPINodeClass],
        md: &MachineDeployment,
    ) -> Option<&'a ClusterAPINodeClassSpec> {
        classes.iter().map(|c| &c.spec).find(|spec| {
            select(
                std::slice::from_ref(md),
                spec.scalable_resource_selector.as_ref(),
                &self.config.scope,
            )
            .is_ok_and(|s| !s.is_empty())
        })
    }

    /// The Machine of `nc`: providerID index, binding annotation (read fresh), UID claim.
    pub(super) async fn find_machine(
        &self,
        nc: &NodeClaim,
    ) -> Result<Option<Machine>, CloudProviderError> {
        self.ready().await?;
        if let Some(pid) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref())
            && let Some(m) = self.cache.by_provider_id(pid)
        {
            return Ok(Some((*m).clone()));
        }
        if let Some(r) = bound_machine(nc) {
            // The cache's copy when it has one (no request while a launch waits for its
            // providerID); else a read (the claim may be newer than the cache).
            if let Some(m) = self.cache.get(&r) {
                return Ok(Some((*m).clone()));
            }
            return self
                .machines_api(&r.namespace)
                .get_opt(&r.name)
                .await
                .map_err(|e| transient("get Machine", e));
        }
        let uid = nc.metadata.uid.as_deref().unwrap_or_default();
        Ok(self
            .claimed_for(uid)
            .filter(|_| !uid.is_empty())
            .map(|m| (*m).clone()))
    }

    pub(super) async fn launch_of_node_claim(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Launch, CloudProviderError> {
        let name = node_claim.metadata.name.clone().unwrap_or_default();
        let m = self.find_machine(node_claim).await?.ok_or_else(|| {
            CloudProviderError::NodeClaimNotFound(format!("no Machine for NodeClaim {name}"))
        })?;
        // Prefer the cache's copy: it carries the latest providerID without a request.
        let m = self
            .cache
            .get(&cache::machine_ref(&m))
            .map_or(m, |c| (*c).clone());
        // Cluster API gave up on the Machine before it had an instance: the launch cannot
        // complete. Not found, so the lifecycle deletes the NodeClaim now (its termination
        // removes the Machine) instead of waiting out the registration TTL, and the
        // MachineDeployment is unavailable for the TTL so the pods go elsewhere.
        if super::failed(&m)
            && m.spec
                .fields
                .provider_id
                .as_deref()
                .is_none_or(str::is_empty)
        {
            let status = m.status.as_ref();
            let why = format!(
                "Machine {}/{} failed before it had an instance: {}{}{}",
                m.metadata.namespace.as_deref().unwrap_or_default(),
                m.metadata.name.as_deref().unwrap_or_default(),
                status.and_then(|s| s.failure_reason()).unwrap_or("Failed"),
                if status.and_then(|s| s.failure_message()).is_some() {
                    ": "
                } else {
                    ""
                },
                status.and_then(|s| s.failure_message()).unwrap_or_default(),
            );
            if let Some(md) = super::deployment_of(&m) {
                self.launch_failed(&md, &why);
            }
            return Err(CloudProviderError::NodeClaimNotFound(why));
        }
        let spec = self.spec_of(node_claim).await;
        Ok(self.launch_for(&m, spec.as_ref()).await)
    }

    pub(super) async fn launch_by_provider_id(
        &self,
        provider_id: &str,
    ) -> Result<Launch, CloudProviderError> {
        if provider_id.trim().is_empty() {
            return Err(CloudProviderError::NodeClaimNotFound(
                "empty providerID".into(),
            ));
        }
        self.ready().await?;
        let m = self
            .cache
            .by_provider_id(provider_id)
            .ok_or_else(|| CloudProviderError::NodeClaimNotFound(provider_id.to_owned()))?;
        // Describe it with the NodeClass of its NodeClaim, else the one selecting its MD.
        let claimed_by = annotation(&m.metadata, CLAIMED_BY).map(str::to_owned);
        let mut spec = None;
        if let Some(name) = claimed_by {
            let api: Api<NodeClaim> = Api::all(self.workload.clone());
            if let Ok(Some(nc)) = api.get_opt(&name).await {
                spec = self.spec_of(&nc).await;
            }
        }
        if spec.is_none()
            && let Some(md_ref) = deployment_of(&m)
            && let Ok(Some(md)) = self.machine_deployment(&md_ref).await
        {
            let classes = self.node_classes().await;
            spec = self.spec_selecting(&classes, &md).cloned();
        }
        Ok(self.launch_for(&m, spec.as_ref()).await)
    }

    /// Every Machine carrying the member label, except those a NodeClaim of another workload
    /// cluster claimed.
    pub(super) async fn launches(&self) -> Result<Vec<Launch>, CloudProviderError> {
        self.ready().await?;
        let cluster = self.cluster_id().await?;
        let mds = self.machine_deployments().await?;
        let default = ClusterAPINodeClassSpec::default();
        let classes = self.node_classes().await;
        let mut by_ref: HashMap<MachineDeploymentRef, Option<Catalogue>> = HashMap::new();
        for md in mds.iter().map(AsRef::as_ref) {
            let spec = self.spec_selecting(&classes, md).unwrap_or(&default);
            let template = self.templates.of(md).await;
            by_ref.insert(
                MachineDeploymentRef::of(md),
                describe(md, template.as_ref(), spec),
            );
        }
        let mut launches: Vec<Launch> = self
            .cache
            .machines()
            .iter()
            .filter(|m| has_label(&m.metadata, KARPENTER_MEMBER))
            .filter(|m| claim_cluster(m).is_none_or(|c| c == cluster))
            .map(|m| {
                let described = deployment_of(m).and_then(|md| {
                    by_ref
                        .get(&md)
                        .and_then(Option::as_ref)
                        .and_then(|c| entry_for(c, &md))
                });
                launch_of(m, described)
            })
            .collect();
        launches.sort_by(|a, b| a.machine.cmp(&b.machine));
        Ok(launches)
    }

    pub(super) async fn instance_types_of(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let nodeclass = self
            .nodeclass(&node_pool.spec.template.spec.node_class_ref.name)
            .await?;
        Ok(self.catalogue(&nodeclass.spec).await?.instance_types())
    }

    pub(super) async fn drift_of(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let name = node_claim.metadata.name.clone().unwrap_or_default();
        let m = self.find_machine(node_claim).await?.ok_or_else(|| {
            CloudProviderError::NodeClaimNotFound(format!("no Machine for NodeClaim {name}"))
        })?;
        let Some(md_ref) = deployment_of(&m) else {
            return Ok(Some(crate::drift::MACHINE_DEPLOYMENT_NOT_FOUND.to_owned()));
        };
        let md = match self.machine_deployment(&md_ref).await? {
            Some(md) => md,
            None => return Ok(Some(crate::drift::MACHINE_DEPLOYMENT_NOT_FOUND.to_owned())),
        };
        // A stand-alone MachineSet's template is the group's own: only the version tells.
        let set_name = super::machinesets::machine_set_of(&m)
            .filter(|_| md_ref.kind == api::GroupKind::MachineDeployment);
        let machine_set = match set_name {
            Some(set) => self.machine_set(&md_ref.namespace, set).await?,
            None => None,
        };
        let nodeclass = self.nodeclass(&node_claim.spec.node_class_ref.name).await?;
        let selected = select(
            std::slice::from_ref(md.as_ref()),
            nodeclass.spec.scalable_resource_selector.as_ref(),
            &self.config.scope,
        )
        .map(|s| !s.is_empty())
        .unwrap_or(false);
        Ok(
            crate::drift::drift_reason(&m, machine_set.as_deref(), &md, selected)
                .map(str::to_owned),
        )
    }

    /// The MachineDeployment of `node_claim`'s Machine and its room above the min-size
    /// annotation (`spec.replicas` − min; mid-rollout at most what the MachineSet a scale-down
    /// lands in holds), and a hold while a rollout makes the Machine's exact removal impossible
    /// ([`super::machinesets::ScaleDownTarget::hold`], from the MachineSet cache); `None` when
    /// the NodeClaim has no Machine or the Machine no MachineDeployment.
    pub(super) async fn removal_room_of(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<cloudprovider::RemovalRoom>, CloudProviderError> {
        let Some(m) = self.find_machine(node_claim).await? else {
            return Ok(None);
        };
        let Some(md_ref) = deployment_of(&m) else {
            return Ok(None);
        };
        let Some(md) = self.machine_deployment(&md_ref).await? else {
            return Ok(None);
        };
        let min = super::scale::min_size(&md)?;
        let replicas = md.spec.replicas.unwrap_or(0);
        let mut room = replicas.saturating_sub(min);
        super::synced(&self.sets).await?;
        let target = self.cached_scale_down_target(&md_ref, &md);
        if target.rolling_out() && target.takes(&m) {
            room = room.min(target.room());
        }
        Ok(Some(cloudprovider::RemovalRoom {
            group: md_ref.key(),
            min: u32::try_from(min).unwrap_or(0),
            room: u32::try_from(room).unwrap_or(0),
            hold: target.hold(&md_ref, &m),
        }))
    }
}
