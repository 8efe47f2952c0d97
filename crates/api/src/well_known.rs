//! Every well-known label, annotation, taint, finalizer and condition name the system uses.
//!
//! Responsibility: one place for these strings, spelled exactly as upstream Karpenter
//! (kubernetes-sigs/karpenter) and Cluster API spell them, so no other module writes a literal.
//! Where we chose a key of our own (in the `karpenter.cluster.x-k8s.io` domain) the doc says so.

/// Labels on NodeClaims and Nodes (and the well-known node labels scheduling understands).
///
/// The node-label keys the scheduler reasons about live in [`scheduling::labels`]; they are
/// re-exported here under the names the controllers use, so each string exists once.
pub mod labels {
    pub use scheduling::labels::{
        ARCH, CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT,
        CAPI_CAPACITY_CPU as CAPACITY_CPU, CAPI_CAPACITY_MEMORY as CAPACITY_MEMORY,
        CAPI_INSTANCE_CPU as INSTANCE_CPU, CAPI_INSTANCE_FAMILY as INSTANCE_FAMILY,
        CAPI_INSTANCE_MEMORY as INSTANCE_MEMORY, CAPI_INSTANCE_SIZE as INSTANCE_SIZE, HOSTNAME,
        INSTANCE_TYPE, NODE_DO_NOT_SYNC_TAINTS as DO_NOT_SYNC_TAINTS,
        NODE_INITIALIZED as INITIALIZED, NODE_POOL as NODEPOOL, NODE_REGISTERED as REGISTERED, OS,
        TOPOLOGY_REGION as REGION, TOPOLOGY_ZONE as ZONE, WINDOWS_BUILD,
    };

    /// Put on a Node (value `karpenter`) when termination taints it.
    pub const EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: &str =
        "node.kubernetes.io/exclude-from-external-load-balancers";
    /// The node-class label put on NodeClaims and Nodes of this provider:
    /// `<nodeClassRef.group>/<lowercase(kind)>` = nodeClassRef.name. Its presence on a Node marks
    /// the Node as managed by us.
    pub const NODECLASS: &str = "karpenter.cluster.x-k8s.io/clusterapinodeclass";
}

/// Annotations on Pods, Nodes, NodeClaims and NodePools.
pub mod annotations {
    /// On a Pod (`"true"` or a duration) or Node/NodeClaim (`"true"`): block voluntary disruption.
    pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
    /// Hash of the NodePool template, on NodePools and NodeClaims (static drift).
    pub const NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
    /// Version of the hash algorithm of [`NODEPOOL_HASH`].
    pub const NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
    /// RFC 3339 time after which a terminating NodeClaim's pods are deleted regardless.
    pub const NODECLAIM_TERMINATION_TIMESTAMP: &str =
        "karpenter.sh/nodeclaim-termination-timestamp";
    /// `"true"` / `"false"`: whether the scheduler relaxed minValues for this NodeClaim.
    pub const NODECLAIM_MIN_VALUES_RELAXED: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
    /// NodeClaim: a NodeOverlay set the price of one of its instance types' offerings.
    pub const PRICE_OVERLAY_APPLIED: &str = "karpenter.sh/price-overlay-applied";
    /// NodeClaim: a NodeOverlay added extended resources to one of its instance types.
    pub const CAPACITY_OVERLAY_APPLIED: &str = "karpenter.sh/capacity-overlay-applied";
    /// The Machine (`namespace/name`) a NodeClaim is bound to. Our own key: upstream's
    /// [`LEGACY_MACHINE`] collides with the annotation CAPI puts on Nodes.
    pub const MACHINE: &str = "karpenter.cluster.x-k8s.io/machine";
    /// Upstream provider's NodeClaim → Machine annotation; read for compatibility, never written.
    pub const LEGACY_MACHINE: &str = "cluster.x-k8s.io/machine";
}

/// Taint keys.
pub mod taints {
    /// `karpenter.sh/disrupted:NoSchedule`: the node is being disrupted or terminated.
    pub const DISRUPTED: &str = "karpenter.sh/disrupted";
    /// `karpenter.sh/unregistered:NoExecute`: the node's bootstrap sets it, registration removes it.
    pub const UNREGISTERED: &str = "karpenter.sh/unregistered";
    /// Node lifecycle taints Kubernetes itself sets.
    pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
    /// See [`NOT_READY`].
    pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    /// `node.kubernetes.io/unschedulable:NoSchedule`: the node is cordoned (`spec.unschedulable`);
    /// the node lifecycle controller sets it, and kube-scheduler refuses a cordoned node to a pod
    /// that does not tolerate it even before the taint is there.
    pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
    /// Set until the cloud controller manager initialized the node.
    pub const CLOUD_PROVIDER_UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
    /// Prefix of readiness taints (any key under it is ephemeral).
    pub const READINESS_PREFIX: &str = "readiness.k8s.io/";
}

/// Finalizers.
pub mod finalizers {
    /// On NodeClaims (before launch) and Nodes (at registration): Karpenter's termination flow.
    pub const TERMINATION: &str = "karpenter.sh/termination";
}

/// Status condition types and reasons.
pub mod conditions {
    /// Root condition of every object.
    pub const READY: &str = "Ready";
    /// NodeClaim: the provider's Create succeeded.
    pub const LAUNCHED: &str = "Launched";
    /// NodeClaim: the Node joined and was synced.
    pub const REGISTERED: &str = "Registered";
    /// NodeClaim: the Node is Ready, startup taints gone, resources registered.
    pub const INITIALIZED: &str = "Initialized";
    /// NodeClaim: the node no longer matches its NodePool / NodeClass.
    pub const DRIFTED: &str = "Drifted";
    /// NodeClaim: may be consolidated (consolidateAfter elapsed).
    pub const CONSOLIDATABLE: &str = "Consolidatable";
    /// NodeClaim: a disruption command selected it.
    pub const DISRUPTION_REASON: &str = "DisruptionReason";
    /// NodeClaim: its Node has been drained.
    pub const DRAINED: &str = "Drained";
    /// NodeClaim: no blocking VolumeAttachments remain.
    pub const VOLUMES_DETACHED: &str = "VolumesDetached";
    /// NodeClaim: the provider's Delete has been called.
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
    /// NodeClaim: node shape checks passed.
    pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
    /// NodePool: runtime validation passed.
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    /// NodePool: the referenced NodeClass exists and is Ready.
    pub const NODE_CLASS_READY: &str = "NodeClassReady";
    /// NodePool: recent launches registered.
    pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";

    /// Reasons.
    pub mod reasons {
        /// NodeOverlay ValidationSucceeded: runtime validation failed.
        pub const RUNTIME_VALIDATION: &str = "RuntimeValidation";
        /// NodeOverlay ValidationSucceeded: an overlay of the same weight sets the same thing.
        pub const CONFLICT: &str = "Conflict";
        /// A missing dependent condition materialised as Unknown.
        pub const AWAITING_RECONCILIATION: &str = "AwaitingReconciliation";
        /// Ready is False because a dependent is False.
        pub const UNHEALTHY_DEPENDENTS: &str = "UnhealthyDependents";
        /// Ready is Unknown because a dependent is not yet known.
        pub const RECONCILING_DEPENDENTS: &str = "ReconcilingDependents";
        /// Launched: the provider's Create failed.
        pub const LAUNCH_FAILED: &str = "LaunchFailed";
        /// Registered / Initialized: the Node has not joined.
        pub const NODE_NOT_FOUND: &str = "NodeNotFound";
        /// Registered: several Nodes carry the NodeClaim's providerID.
        pub const MULTIPLE_NODES_FOUND: &str = "MultipleNodesFound";
        /// Initialized: the Node is not Ready.
        pub const NODE_NOT_READY: &str = "NodeNotReady";
        /// Initialized: startup taints remain.
        pub const STARTUP_TAINTS_EXIST: &str = "StartupTaintsExist";
        /// Initialized: known ephemeral taints remain.
        pub const KNOWN_EPHEMERAL_TAINTS_EXIST: &str = "KnownEphemeralTaintsExist";
        /// Initialized: a requested extended resource is not in allocatable yet.
        pub const RESOURCE_NOT_REGISTERED: &str = "ResourceNotRegistered";
        /// Drained: draining in progress.
        pub const DRAINING: &str = "Draining";
        /// NodePool NodeClassReady: the NodeClass does not exist.
        pub const NODE_CLASS_NOT_FOUND: &str = "NodeClassNotFound";
        /// NodePool NodeClassReady: the NodeClass is being deleted.
        pub const NODE_CLASS_TERMINATING: &str = "NodeClassTerminating";
        /// NodePool NodeClassReady: the NodeClass' readiness is unknown.
        pub const NODE_CLASS_READINESS_UNKNOWN: &str = "NodeClassReadinessUnknown";
        /// NodePool ValidationSucceeded False.
        pub const NODEPOOL_VALIDATION_FAILED: &str = "NodePoolValidationFailed";
        /// Drift reasons.
        pub const NODEPOOL_DRIFTED: &str = "NodePoolDrifted";
        /// Drift reasons.
        pub const REQUIREMENTS_DRIFTED: &str = "RequirementsDrifted";
        /// Drift reasons.
        pub const INSTANCE_TYPE_NOT_FOUND: &str = "InstanceTypeNotFound";
    }
}

/// CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`, gate `CapacityBuffer`): the annotations on
/// their virtual pods and their condition types and reasons, as upstream Karpenter writes them.
pub mod capacity_buffer {
    /// On a virtual pod: `"true"`.
    pub const FAKE_POD: &str = "karpenter.sh/capacity-buffer-fake-pod";
    /// On a virtual pod: its buffer's name.
    pub const NAME: &str = "karpenter.sh/capacity-buffer-name";
    /// On a virtual pod: its buffer's namespace.
    pub const NAMESPACE: &str = "karpenter.sh/capacity-buffer-namespace";
    /// Condition: the chunk shape and count are resolved.
    pub const READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
    /// Condition: where the last provisioning pass put the virtual pods.
    pub const PROVISIONING: &str = "Provisioning";

    /// Reasons.
    pub mod reasons {
        /// ReadyForProvisioning True.
        pub const RESOLVED: &str = "Resolved";
        /// ReadyForProvisioning False: no reference, an unsupported kind, an invalid template.
        pub const RESOLUTION_FAILED: &str = "ResolutionFailed";
        /// ReadyForProvisioning False: the PodTemplate does not exist.
        pub const POD_TEMPLATE_NOT_FOUND: &str = "PodTemplateNotFound";
        /// ReadyForProvisioning False: the workload does not exist.
        pub const SCALABLE_REF_NOT_FOUND: &str = "ScalableRefNotFound";
        /// Provisioning False: ReadyForProvisioning is not True.
        pub const NOT_READY_FOR_PROVISIONING: &str = "NotReadyForProvisioning";
        /// Provisioning False: zero chunks.
        pub const BUFFER_EMPTY: &str = "BufferEmpty";
        /// Provisioning False: some virtual pods needed new nodes or fit nowhere.
        pub const REQUIRES_NEW_CAPACITY: &str = "RequiresNewCapacity";
        /// Provisioning True: every virtual pod fits on existing nodes.
        pub const FITS_EXISTING_CAPACITY: &str = "FitsExistingCapacity";
    }
}

/// Cluster API keys (management cluster) and the cluster-autoscaler annotations we read.
pub mod capi {
    /// Label on MachineDeployments that opts them in (any value), and on Machines we claimed.
    pub const KARPENTER_MEMBER: &str = "node.cluster.x-k8s.io/karpenter-member";
    /// Label CAPI puts on Machines: the owning MachineDeployment's name.
    pub const DEPLOYMENT_NAME: &str = "cluster.x-k8s.io/deployment-name";
    /// Label CAPI puts on Machines: the owning MachineSet's name.
    pub const SET_NAME: &str = "cluster.x-k8s.io/set-name";
    /// Label CAPI puts on MachinePool Machines (and the provider on their InfraMachines): the
    /// owning MachinePool's name.
    pub const POOL_NAME: &str = "cluster.x-k8s.io/pool-name";
    /// Label CAPI puts on its objects: the Cluster's name.
    pub const CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
    /// Machine annotation: delete this Machine first when replicas drop.
    pub const DELETE_MACHINE: &str = "cluster.x-k8s.io/delete-machine";
    /// Annotation that pauses reconciliation of a CAPI object.
    pub const PAUSED: &str = "cluster.x-k8s.io/paused";
    /// Machine annotation (any value): MachineHealthChecks do not remediate this Machine.
    pub const SKIP_REMEDIATION: &str = "cluster.x-k8s.io/skip-remediation";
    /// The kind that health-checks and remediates Machines.
    pub const MACHINE_HEALTH_CHECK: &str = "MachineHealthCheck";
    /// MachineDeployment annotation: the largest replica count autoscalers may set.
    pub const MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
    /// MachineDeployment annotation: the smallest replica count autoscalers may set.
    pub const MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
    /// MachineSet annotation: the MachineDeployment revision it belongs to.
    pub const REVISION: &str = "machinedeployment.clusters.x-k8s.io/revision";
    /// MachineSet annotation: `"true"` keeps the MachineSet from creating Machines (CAPI sets it
    /// on the old MachineSets of an `OnDelete` rollout).
    pub const DISABLE_MACHINE_CREATE: &str = "cluster.x-k8s.io/disable-machine-create";
    /// MachineSet label: the hash of the Machine template it stamps out.
    pub const MACHINE_TEMPLATE_HASH: &str = "machine-template-hash";
    /// Node annotations CAPI sets.
    pub const NODE_MACHINE: &str = "cluster.x-k8s.io/machine";
    /// Node annotations CAPI sets.
    pub const NODE_CLUSTER_NAME: &str = "cluster.x-k8s.io/cluster-name";
    /// Node annotations CAPI sets.
    pub const NODE_CLUSTER_NAMESPACE: &str = "cluster.x-k8s.io/cluster-namespace";
    /// Our price annotation on a MachineDeployment: the hourly price of one of its nodes, a
    /// decimal number (e.g. `"0.192"`).
    pub const PRICE: &str = "karpenter.cluster.x-k8s.io/price";
    /// The price annotation upstream's e2e manifests use; accepted when [`PRICE`] is absent.
    pub const LEGACY_PRICE: &str = "cluster.x-k8s.io/machine-current-price";
    /// Label domains CAPI copies from Machines to Nodes (a domain equal to or ending in these;
    /// `node-role.kubernetes.io` only exactly).
    pub const PROPAGATED_LABEL_DOMAINS: &[&str] = &[
        "node-role.kubernetes.io",
        "node-restriction.kubernetes.io",
        "node.cluster.x-k8s.io",
    ];

    /// The cluster-autoscaler scale-from-zero capacity annotations on MachineDeployments.
    pub mod capacity {
        /// CPU quantity.
        pub const CPU: &str = "capacity.cluster-autoscaler.kubernetes.io/cpu";
        /// Memory quantity.
        pub const MEMORY: &str = "capacity.cluster-autoscaler.kubernetes.io/memory";
        /// Ephemeral storage quantity (`ephemeral-storage`).
        pub const EPHEMERAL_DISK: &str = "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk";
        /// Pod capacity (integer; default 110).
        pub const MAX_PODS: &str = "capacity.cluster-autoscaler.kubernetes.io/maxPods";
        /// GPU count (integer), with [`GPU_TYPE`].
        pub const GPU_COUNT: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-count";
        /// GPU resource name, e.g. `nvidia.com/gpu`.
        pub const GPU_TYPE: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-type";
        /// Node labels: `k1=v1,k2=v2`.
        pub const LABELS: &str = "capacity.cluster-autoscaler.kubernetes.io/labels";
        /// Node taints: `k1=v1:NoSchedule,k2:NoExecute`.
        pub const TAINTS: &str = "capacity.cluster-autoscaler.kubernetes.io/taints";
        /// Default pod capacity when [`MAX_PODS`] is absent.
        pub const DEFAULT_MAX_PODS: i64 = 110;
    }
}

/// Resource names: see [`scheduling::resources::ResourceName`] (`CPU`, `MEMORY`,
/// `EPHEMERAL_STORAGE`, `PODS`, and the NodePool limit `NODES`).
pub use scheduling::resources::ResourceName;

/// Event reasons.
pub mod events {
    /// A pod could not be scheduled (on the Pod).
    pub const FAILED_SCHEDULING: &str = "FailedScheduling";
    /// A NodePool's template left no instance type (on the NodePool).
    pub const NO_COMPATIBLE_INSTANCE_TYPES: &str = "NoCompatibleInstanceTypes";
    /// The provider ran out of capacity (on the NodeClaim).
    pub const INSUFFICIENT_CAPACITY_ERROR: &str = "InsufficientCapacityError";
    /// A Node registered without the unregistered taint.
    pub const UNREGISTERED_TAINT_MISSING: &str = "UnregisteredTaintMissing";
    /// Where a pod is expected to land (on the Pod).
    pub const NOMINATED: &str = "Nominated";
    /// The NodeClass cannot launch (on the NodeClaim).
    pub const NODE_CLASS_NOT_READY: &str = "NodeClassNotReady";
    /// Pods still wait to be evicted, or an eviction was refused (on the Node).
    pub const FAILED_DRAINING: &str = "FailedDraining";
    /// A pod was evicted by drain (on the Pod).
    pub const EVICTED: &str = "Evicted";
    /// A pod was deleted because the termination grace period ran out (on the Pod).
    pub const DISRUPTED: &str = "Disrupted";
    /// The NodeClaim's termination grace period will force pod deletion (on NodeClaim/Node).
    pub const TERMINATION_GRACE_PERIOD_EXPIRING: &str = "TerminationGracePeriodExpiring";
    /// A node cannot be disrupted now, and why (on Node and NodeClaim).
    pub const DISRUPTION_BLOCKED: &str = "DisruptionBlocked";
    /// A node cannot be consolidated, and why (on Node and NodeClaim).
    pub const UNCONSOLIDATABLE: &str = "Unconsolidatable";
    /// A Balanced NodePool approved a consolidation move, with its score (on the candidates'
    /// Node and NodeClaim).
    pub const CONSOLIDATION_APPROVED: &str = "ConsolidationApproved";
    /// A consolidation command was decided for the node, before its validation (on the
    /// candidates' Node and NodeClaim).
    pub const CONSOLIDATION_CANDIDATE: &str = "ConsolidationCandidate";
    /// A consolidation command was abandoned at validation, and why (on the candidates' Node
    /// and NodeClaim).
    pub const CONSOLIDATION_REJECTED: &str = "ConsolidationRejected";
    /// Disruption launched a replacement (on the candidate's Node and NodeClaim).
    pub const DISRUPTION_LAUNCHING: &str = "DisruptionLaunching";
    /// Disruption waits for a replacement to initialize (on Node and NodeClaim).
    pub const DISRUPTION_WAITING_READINESS: &str = "DisruptionWaitingReadiness";
    /// Disruption deletes the node (on Node and NodeClaim).
    pub const DISRUPTION_TERMINATING: &str = "DisruptionTerminating";
}
