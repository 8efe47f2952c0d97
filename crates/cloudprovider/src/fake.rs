//! [`FakeCloudProvider`]: a recording, in-memory CloudProvider for core tests.
//!
//! Responsibility: behave like a well-mannered provider without any cluster — Create picks the
//! cheapest compatible offering of its configured instance types and binds a fake instance;
//! providerIDs arrive only when the test says so ([`FakeCloudProvider::assign_provider_id`])
//! unless [`FakeCloudProvider::assign_on_create`] is set; Delete marks the instance
//! terminating, then reports it gone. Every call is recorded ([`Call`]) and an error can be
//! queued per method ([`FakeCloudProvider::inject_error`]).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use api::{NodeClaim, NodePool};
use scheduling::instance_type::InstanceType;
use scheduling::labels::{CAPACITY_TYPE, INSTANCE_TYPE, TOPOLOGY_ZONE, WellKnownLabels};

use crate::convert::{compatible_offerings, requests_of, requirements_of};
use crate::types::normalize_provider_id;
use crate::{CloudProvider, CloudProviderError, Launch, ObjectRef};

/// A CloudProvider method, for recording and error injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// [`CloudProvider::create`].
    Create,
    /// [`CloudProvider::get_launch`].
    GetLaunch,
    /// [`CloudProvider::get`].
    Get,
    /// [`CloudProvider::list`].
    List,
    /// [`CloudProvider::delete`].
    Delete,
    /// [`CloudProvider::get_instance_types`].
    GetInstanceTypes,
    /// [`CloudProvider::is_drifted`].
    IsDrifted,
    /// [`CloudProvider::remediated_elsewhere`].
    RemediatedElsewhere,
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Which method.
    pub method: Method,
    /// The NodeClaim, NodePool or providerID it was called with (empty for `list`).
    pub argument: String,
}

#[derive(Debug, Default)]
struct State {
    instance_types: Vec<Arc<InstanceType>>,
    calls: Vec<Call>,
    errors: HashMap<Method, VecDeque<CloudProviderError>>,
    /// By NodeClaim name.
    launches: BTreeMap<String, Launch>,
    drifted: HashMap<String, String>,
    repair: crate::RepairPolicies,
    /// By NodeClaim name: who remediates it instead.
    remediators: HashMap<String, String>,
    next_id: u64,
    assign_on_create: bool,
}

/// The recording fake. Cheap to share behind an `Arc`.
#[derive(Debug, Default)]
pub struct FakeCloudProvider {
    state: Mutex<State>,
    well_known: WellKnownLabels,
}

impl FakeCloudProvider {
    /// A fake offering `instance_types`.
    #[must_use]
    pub fn new(instance_types: Vec<Arc<InstanceType>>) -> Self {
        let fake = Self::default();
        fake.lock().instance_types = instance_types;
        fake
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn enter(&self, method: Method, argument: &str) -> Result<(), CloudProviderError> {
        let mut state = self.lock();
        state.calls.push(Call {
            method,
            argument: argument.to_owned(),
        });
        match state.errors.get_mut(&method).and_then(VecDeque::pop_front) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Replace the instance types.
    pub fn set_instance_types(&self, instance_types: Vec<Arc<InstanceType>>) {
        self.lock().instance_types = instance_types;
    }

    /// Make the next call of `method` fail with `error` (errors queue up in order).
    pub fn inject_error(&self, method: Method, error: CloudProviderError) {
        self.lock()
            .errors
            .entry(method)
            .or_default()
            .push_back(error);
    }

    /// Give every new launch a providerID immediately.
    pub fn assign_on_create(&self, enabled: bool) {
        self.lock().assign_on_create = enabled;
    }

    /// The providerID arrives for the launch of NodeClaim `node_claim` (returns it; `None` if
    /// there is no such launch). Idempotent.
    pub fn assign_provider_id(&self, node_claim: &str) -> Option<String> {
        let mut state = self.lock();
        let launch = state.launches.get_mut(node_claim)?;
        if launch.provider_id.is_none() {
            launch.provider_id = Some(format!("fake:///{}", launch.machine.name));
        }
        launch.provider_id.clone()
    }

    /// Report `reason` as the drift of NodeClaim `node_claim`.
    pub fn set_drifted(&self, node_claim: &str, reason: &str) {
        self.lock()
            .drifted
            .insert(node_claim.to_owned(), reason.to_owned());
    }

    /// Repair with `policies` (the default: none).
    pub fn set_repair_policies(&self, policies: crate::RepairPolicies) {
        self.lock().repair = policies;
    }

    /// Report `remediator` as remediating NodeClaim `node_claim` itself.
    pub fn set_remediated_elsewhere(&self, node_claim: &str, remediator: &str) {
        self.lock()
            .remediators
            .insert(node_claim.to_owned(), remediator.to_owned());
    }

    /// Every call so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// How many calls of `method` were made.
    #[must_use]
    pub fn count(&self, method: Method) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    /// The current launches, by NodeClaim name.
    #[must_use]
    pub fn launches(&self) -> BTreeMap<String, Launch> {
        self.lock().launches.clone()
    }

    fn launch(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        let name = node_claim.metadata.name.clone().unwrap_or_default();
        let requirements = requirements_of(node_claim)?;
        let requests = requests_of(node_claim)?;
        let mut state = self.lock();
        if let Some(existing) = state.launches.get(&name) {
            return Ok(existing.clone());
        }
        let its = &state.instance_types;
        let choice = compatible_offerings(its, &requirements, &requests, &self.well_known)
            .into_iter()
            .next()
            .ok_or_else(|| {
                CloudProviderError::InsufficientCapacity(format!(
                    "no instance type satisfies NodeClaim {name}"
                ))
            })?;
        let (it, offering) = its
            .get(choice.instance_type)
            .and_then(|it| Some((Arc::clone(it), it.offerings().get(choice.offering)?.clone())))
            .ok_or_else(|| CloudProviderError::Transient("stale choice".into()))?;
        let zone = offering.zone().map(str::to_owned);
        let capacity_type = offering.capacity_type().unwrap_or_default().to_owned();
        let mut labels = BTreeMap::from([
            (INSTANCE_TYPE.to_owned(), it.name().to_owned()),
            (CAPACITY_TYPE.to_owned(), capacity_type.clone()),
        ]);
        if let Some(zone) = &zone {
            labels.insert(TOPOLOGY_ZONE.to_owned(), zone.clone());
        }
        state.next_id += 1;
        let machine = ObjectRef::new("fake", &format!("instance-{}", state.next_id));
        let launch = Launch {
            provider_id: state
                .assign_on_create
                .then(|| format!("fake:///{}", machine.name)),
            machine,
            node_claim: Some(name.clone()),
            instance_type: it.name().to_owned(),
            zone,
            capacity_type,
            capacity: it.capacity().clone(),
            allocatable: it.allocatable().clone(),
            labels,
            annotations: BTreeMap::new(),
            deleting: false,
            instance_deleting: false,
        };
        state.launches.insert(name, launch.clone());
        Ok(launch)
    }
}

fn name_of(node_claim: &NodeClaim) -> String {
    node_claim.metadata.name.clone().unwrap_or_default()
}

impl CloudProvider for FakeCloudProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        self.enter(Method::Create, &name_of(node_claim))?;
        self.launch(node_claim)
    }

    async fn get_launch(&self, node_claim: &NodeClaim) -> Result<Launch, CloudProviderError> {
        let name = name_of(node_claim);
        self.enter(Method::GetLaunch, &name)?;
        self.lock()
            .launches
            .get(&name)
            .cloned()
            .ok_or(CloudProviderError::NodeClaimNotFound(name))
    }

    async fn get(&self, provider_id: &str) -> Result<Launch, CloudProviderError> {
        self.enter(Method::Get, provider_id)?;
        let wanted = normalize_provider_id(provider_id);
        self.lock()
            .launches
            .values()
            .find(|l| {
                l.provider_id
                    .as_deref()
                    .is_some_and(|p| normalize_provider_id(p) == wanted)
            })
            .cloned()
            .ok_or_else(|| CloudProviderError::NodeClaimNotFound(provider_id.to_owned()))
    }

    async fn list(&self) -> Result<Vec<Launch>, CloudProviderError> {
        self.enter(Method::List, "")?;
        Ok(self.lock().launches.values().cloned().collect())
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let name = name_of(node_claim);
        self.enter(Method::Delete, &name)?;
        let mut state = self.lock();
        match state.launches.get_mut(&name) {
            None => Err(CloudProviderError::NodeClaimNotFound(name)),
            Some(launch) if launch.deleting => {
                state.launches.remove(&name);
                Err(CloudProviderError::NodeClaimNotFound(name))
            }
            Some(launch) => {
                launch.deleting = true;
                Ok(())
            }
        }
    }

    async fn get_instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let name = node_pool.metadata.name.clone().unwrap_or_default();
        self.enter(Method::GetInstanceTypes, &name)?;
        Ok(self.lock().instance_types.clone())
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let name = name_of(node_claim);
        self.enter(Method::IsDrifted, &name)?;
        Ok(self.lock().drifted.get(&name).cloned())
    }

    fn repair_policies(&self) -> crate::RepairPolicies {
        self.lock().repair.clone()
    }

    async fn remediated_elsewhere(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let name = name_of(node_claim);
        self.enter(Method::RemediatedElsewhere, &name)?;
        Ok(self.lock().remediators.get(&name).cloned())
    }

    fn name(&self) -> &'static str {
        "fake"
    }
}
