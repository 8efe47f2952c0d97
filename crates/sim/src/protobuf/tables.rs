//! The protobuf field tables of the kinds [`super`] decodes: one `const` per message, each
//! field as `(number, JSON name, type, cardinality)`.
//!
//! The numbers and names are facts of Kubernetes' wire format (the `generated.proto` of
//! `k8s.io/api` core/v1, apps/v1, batch/v1, policy/v1, networking/v1, scheduling/v1, rbac/v1,
//! authorization/v1 and of `k8s.io/apimachinery`); `Card::Ptr` marks the fields that are Go pointers, whose zero
//! value is meaningful. Only the messages reachable from the kinds of `super::root` are here.

use super::Card::{Inline, Many, Map, One, Ptr};
use super::{Field, Ty};

pub(super) const APPS_DAEMON_SET: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(APPS_DAEMON_SET_SPEC), One),
    (3, "status", Ty::Msg(APPS_DAEMON_SET_STATUS), One),
];
pub(super) const APPS_DAEMON_SET_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (3, "lastTransitionTime", Ty::Time, One),
    (4, "reason", Ty::Str, One),
    (5, "message", Ty::Str, One),
];
pub(super) const APPS_DAEMON_SET_SPEC: &[Field] = &[
    (1, "selector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (2, "template", Ty::Msg(CORE_POD_TEMPLATE_SPEC), One),
    (
        3,
        "updateStrategy",
        Ty::Msg(APPS_DAEMON_SET_UPDATE_STRATEGY),
        One,
    ),
    (4, "minReadySeconds", Ty::Int, One),
    (6, "revisionHistoryLimit", Ty::Int, Ptr),
];
pub(super) const APPS_DAEMON_SET_STATUS: &[Field] = &[
    (1, "currentNumberScheduled", Ty::Int, One),
    (2, "numberMisscheduled", Ty::Int, One),
    (3, "desiredNumberScheduled", Ty::Int, One),
    (4, "numberReady", Ty::Int, One),
    (5, "observedGeneration", Ty::Int, One),
    (6, "updatedNumberScheduled", Ty::Int, One),
    (7, "numberAvailable", Ty::Int, One),
    (8, "numberUnavailable", Ty::Int, One),
    (9, "collisionCount", Ty::Int, Ptr),
    (10, "conditions", Ty::Msg(APPS_DAEMON_SET_CONDITION), Many),
];
pub(super) const APPS_DAEMON_SET_UPDATE_STRATEGY: &[Field] = &[
    (1, "type", Ty::Str, One),
    (
        2,
        "rollingUpdate",
        Ty::Msg(APPS_ROLLING_UPDATE_DAEMON_SET),
        Ptr,
    ),
];
pub(super) const APPS_DEPLOYMENT: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(APPS_DEPLOYMENT_SPEC), One),
    (3, "status", Ty::Msg(APPS_DEPLOYMENT_STATUS), One),
];
pub(super) const APPS_DEPLOYMENT_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (6, "lastUpdateTime", Ty::Time, One),
    (7, "lastTransitionTime", Ty::Time, One),
    (4, "reason", Ty::Str, One),
    (5, "message", Ty::Str, One),
];
pub(super) const APPS_DEPLOYMENT_SPEC: &[Field] = &[
    (1, "replicas", Ty::Int, Ptr),
    (2, "selector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (3, "template", Ty::Msg(CORE_POD_TEMPLATE_SPEC), One),
    (4, "strategy", Ty::Msg(APPS_DEPLOYMENT_STRATEGY), One),
    (5, "minReadySeconds", Ty::Int, One),
    (6, "revisionHistoryLimit", Ty::Int, Ptr),
    (7, "paused", Ty::Bool, One),
    (9, "progressDeadlineSeconds", Ty::Int, Ptr),
];
pub(super) const APPS_DEPLOYMENT_STATUS: &[Field] = &[
    (1, "observedGeneration", Ty::Int, One),
    (2, "replicas", Ty::Int, One),
    (3, "updatedReplicas", Ty::Int, One),
    (7, "readyReplicas", Ty::Int, One),
    (4, "availableReplicas", Ty::Int, One),
    (5, "unavailableReplicas", Ty::Int, One),
    (9, "terminatingReplicas", Ty::Int, Ptr),
    (6, "conditions", Ty::Msg(APPS_DEPLOYMENT_CONDITION), Many),
    (8, "collisionCount", Ty::Int, Ptr),
];
pub(super) const APPS_DEPLOYMENT_STRATEGY: &[Field] = &[
    (1, "type", Ty::Str, One),
    (
        2,
        "rollingUpdate",
        Ty::Msg(APPS_ROLLING_UPDATE_DEPLOYMENT),
        Ptr,
    ),
];
pub(super) const APPS_REPLICA_SET: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(APPS_REPLICA_SET_SPEC), One),
    (3, "status", Ty::Msg(APPS_REPLICA_SET_STATUS), One),
];
pub(super) const APPS_REPLICA_SET_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (3, "lastTransitionTime", Ty::Time, One),
    (4, "reason", Ty::Str, One),
    (5, "message", Ty::Str, One),
];
pub(super) const APPS_REPLICA_SET_SPEC: &[Field] = &[
    (1, "replicas", Ty::Int, Ptr),
    (4, "minReadySeconds", Ty::Int, One),
    (2, "selector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (3, "template", Ty::Msg(CORE_POD_TEMPLATE_SPEC), One),
];
pub(super) const APPS_REPLICA_SET_STATUS: &[Field] = &[
    (1, "replicas", Ty::Int, One),
    (2, "fullyLabeledReplicas", Ty::Int, One),
    (4, "readyReplicas", Ty::Int, One),
    (5, "availableReplicas", Ty::Int, One),
    (7, "terminatingReplicas", Ty::Int, Ptr),
    (3, "observedGeneration", Ty::Int, One),
    (6, "conditions", Ty::Msg(APPS_REPLICA_SET_CONDITION), Many),
];
pub(super) const APPS_ROLLING_UPDATE_DAEMON_SET: &[Field] = &[
    (1, "maxUnavailable", Ty::IntOrStr, Ptr),
    (2, "maxSurge", Ty::IntOrStr, Ptr),
];
pub(super) const APPS_ROLLING_UPDATE_DEPLOYMENT: &[Field] = &[
    (1, "maxUnavailable", Ty::IntOrStr, Ptr),
    (2, "maxSurge", Ty::IntOrStr, Ptr),
];
pub(super) const APPS_ROLLING_UPDATE_STATEFUL_SET_STRATEGY: &[Field] = &[
    (1, "partition", Ty::Int, Ptr),
    (2, "maxUnavailable", Ty::IntOrStr, Ptr),
];
pub(super) const APPS_STATEFUL_SET: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(APPS_STATEFUL_SET_SPEC), One),
    (3, "status", Ty::Msg(APPS_STATEFUL_SET_STATUS), One),
];
pub(super) const APPS_STATEFUL_SET_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (3, "lastTransitionTime", Ty::Time, One),
    (4, "reason", Ty::Str, One),
    (5, "message", Ty::Str, One),
];
pub(super) const APPS_STATEFUL_SET_ORDINALS: &[Field] = &[(1, "start", Ty::Int, One)];
pub(super) const APPS_STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY: &[Field] = &[
    (1, "whenDeleted", Ty::Str, One),
    (2, "whenScaled", Ty::Str, One),
];
pub(super) const APPS_STATEFUL_SET_SPEC: &[Field] = &[
    (1, "replicas", Ty::Int, Ptr),
    (2, "selector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (3, "template", Ty::Msg(CORE_POD_TEMPLATE_SPEC), One),
    (
        4,
        "volumeClaimTemplates",
        Ty::Msg(CORE_PERSISTENT_VOLUME_CLAIM),
        Many,
    ),
    (5, "serviceName", Ty::Str, One),
    (6, "podManagementPolicy", Ty::Str, One),
    (
        7,
        "updateStrategy",
        Ty::Msg(APPS_STATEFUL_SET_UPDATE_STRATEGY),
        One,
    ),
    (8, "revisionHistoryLimit", Ty::Int, Ptr),
    (9, "minReadySeconds", Ty::Int, One),
    (
        10,
        "persistentVolumeClaimRetentionPolicy",
        Ty::Msg(APPS_STATEFUL_SET_PERSISTENT_VOLUME_CLAIM_RETENTION_POLICY),
        Ptr,
    ),
    (11, "ordinals", Ty::Msg(APPS_STATEFUL_SET_ORDINALS), Ptr),
];
pub(super) const APPS_STATEFUL_SET_STATUS: &[Field] = &[
    (1, "observedGeneration", Ty::Int, One),
    (2, "replicas", Ty::Int, One),
    (3, "readyReplicas", Ty::Int, One),
    (4, "currentReplicas", Ty::Int, One),
    (5, "updatedReplicas", Ty::Int, One),
    (6, "currentRevision", Ty::Str, One),
    (7, "updateRevision", Ty::Str, One),
    (9, "collisionCount", Ty::Int, Ptr),
    (10, "conditions", Ty::Msg(APPS_STATEFUL_SET_CONDITION), Many),
    (11, "availableReplicas", Ty::Int, One),
];
pub(super) const APPS_STATEFUL_SET_UPDATE_STRATEGY: &[Field] = &[
    (1, "type", Ty::Str, One),
    (
        2,
        "rollingUpdate",
        Ty::Msg(APPS_ROLLING_UPDATE_STATEFUL_SET_STRATEGY),
        Ptr,
    ),
];
pub(super) const AUTHZ_FIELD_SELECTOR_ATTRIBUTES: &[Field] = &[
    (1, "rawSelector", Ty::Str, One),
    (
        2,
        "requirements",
        Ty::Msg(META_FIELD_SELECTOR_REQUIREMENT),
        Many,
    ),
];
pub(super) const AUTHZ_LABEL_SELECTOR_ATTRIBUTES: &[Field] = &[
    (1, "rawSelector", Ty::Str, One),
    (
        2,
        "requirements",
        Ty::Msg(META_LABEL_SELECTOR_REQUIREMENT),
        Many,
    ),
];
pub(super) const AUTHZ_LOCAL_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(AUTHZ_SUBJECT_ACCESS_REVIEW_SPEC), One),
    (
        3,
        "status",
        Ty::Msg(AUTHZ_SUBJECT_ACCESS_REVIEW_STATUS),
        One,
    ),
];
pub(super) const AUTHZ_NON_RESOURCE_ATTRIBUTES: &[Field] =
    &[(1, "path", Ty::Str, One), (2, "verb", Ty::Str, One)];
pub(super) const AUTHZ_NON_RESOURCE_RULE: &[Field] = &[
    (1, "verbs", Ty::Str, Many),
    (2, "nonResourceURLs", Ty::Str, Many),
];
pub(super) const AUTHZ_RESOURCE_ATTRIBUTES: &[Field] = &[
    (1, "namespace", Ty::Str, One),
    (2, "verb", Ty::Str, One),
    (3, "group", Ty::Str, One),
    (4, "version", Ty::Str, One),
    (5, "resource", Ty::Str, One),
    (6, "subresource", Ty::Str, One),
    (7, "name", Ty::Str, One),
    (
        8,
        "fieldSelector",
        Ty::Msg(AUTHZ_FIELD_SELECTOR_ATTRIBUTES),
        Ptr,
    ),
    (
        9,
        "labelSelector",
        Ty::Msg(AUTHZ_LABEL_SELECTOR_ATTRIBUTES),
        Ptr,
    ),
];
pub(super) const AUTHZ_RESOURCE_RULE: &[Field] = &[
    (1, "verbs", Ty::Str, Many),
    (2, "apiGroups", Ty::Str, Many),
    (3, "resources", Ty::Str, Many),
    (4, "resourceNames", Ty::Str, Many),
];
pub(super) const AUTHZ_SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (
        2,
        "spec",
        Ty::Msg(AUTHZ_SELF_SUBJECT_ACCESS_REVIEW_SPEC),
        One,
    ),
    (
        3,
        "status",
        Ty::Msg(AUTHZ_SUBJECT_ACCESS_REVIEW_STATUS),
        One,
    ),
];
pub(super) const AUTHZ_SELF_SUBJECT_ACCESS_REVIEW_SPEC: &[Field] = &[
    (
        1,
        "resourceAttributes",
        Ty::Msg(AUTHZ_RESOURCE_ATTRIBUTES),
        Ptr,
    ),
    (
        2,
        "nonResourceAttributes",
        Ty::Msg(AUTHZ_NON_RESOURCE_ATTRIBUTES),
        Ptr,
    ),
];
pub(super) const AUTHZ_SELF_SUBJECT_RULES_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (
        2,
        "spec",
        Ty::Msg(AUTHZ_SELF_SUBJECT_RULES_REVIEW_SPEC),
        One,
    ),
    (3, "status", Ty::Msg(AUTHZ_SUBJECT_RULES_REVIEW_STATUS), One),
];
pub(super) const AUTHZ_SELF_SUBJECT_RULES_REVIEW_SPEC: &[Field] = &[(1, "namespace", Ty::Str, One)];
pub(super) const AUTHZ_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(AUTHZ_SUBJECT_ACCESS_REVIEW_SPEC), One),
    (
        3,
        "status",
        Ty::Msg(AUTHZ_SUBJECT_ACCESS_REVIEW_STATUS),
        One,
    ),
];
pub(super) const AUTHZ_SUBJECT_ACCESS_REVIEW_SPEC: &[Field] = &[
    (
        1,
        "resourceAttributes",
        Ty::Msg(AUTHZ_RESOURCE_ATTRIBUTES),
        Ptr,
    ),
    (
        2,
        "nonResourceAttributes",
        Ty::Msg(AUTHZ_NON_RESOURCE_ATTRIBUTES),
        Ptr,
    ),
    (3, "user", Ty::Str, One),
    (4, "groups", Ty::Str, Many),
    (5, "extra", Ty::Items, Map),
    (6, "uid", Ty::Str, One),
];
pub(super) const AUTHZ_SUBJECT_ACCESS_REVIEW_STATUS: &[Field] = &[
    (1, "allowed", Ty::Bool, One),
    (4, "denied", Ty::Bool, One),
    (2, "reason", Ty::Str, One),
    (3, "evaluationError", Ty::Str, One),
];
pub(super) const AUTHZ_SUBJECT_RULES_REVIEW_STATUS: &[Field] = &[
    (1, "resourceRules", Ty::Msg(AUTHZ_RESOURCE_RULE), Many),
    (
        2,
        "nonResourceRules",
        Ty::Msg(AUTHZ_NON_RESOURCE_RULE),
        Many,
    ),
    (3, "incomplete", Ty::Bool, One),
    (4, "evaluationError", Ty::Str, One),
];
pub(super) const BATCH_CRON_JOB: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(BATCH_CRON_JOB_SPEC), One),
    (3, "status", Ty::Msg(BATCH_CRON_JOB_STATUS), One),
];
pub(super) const BATCH_CRON_JOB_SPEC: &[Field] = &[
    (1, "schedule", Ty::Str, One),
    (8, "timeZone", Ty::Str, Ptr),
    (2, "startingDeadlineSeconds", Ty::Int, Ptr),
    (3, "concurrencyPolicy", Ty::Str, One),
    (4, "suspend", Ty::Bool, Ptr),
    (5, "jobTemplate", Ty::Msg(BATCH_JOB_TEMPLATE_SPEC), One),
    (6, "successfulJobsHistoryLimit", Ty::Int, Ptr),
    (7, "failedJobsHistoryLimit", Ty::Int, Ptr),
];
pub(super) const BATCH_CRON_JOB_STATUS: &[Field] = &[
    (1, "active", Ty::Msg(CORE_OBJECT_REFERENCE), Many),
    (4, "lastScheduleTime", Ty::Time, Ptr),
    (5, "lastSuccessfulTime", Ty::Time, Ptr),
];
pub(super) const BATCH_JOB: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(BATCH_JOB_SPEC), One),
    (3, "status", Ty::Msg(BATCH_JOB_STATUS), One),
];
pub(super) const BATCH_JOB_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (3, "lastProbeTime", Ty::Time, One),
    (4, "lastTransitionTime", Ty::Time, One),
    (5, "reason", Ty::Str, One),
    (6, "message", Ty::Str, One),
];
pub(super) const BATCH_JOB_SCHEDULING_CONFIGURATION: &[Field] = &[];
pub(super) const BATCH_JOB_SPEC: &[Field] = &[
    (1, "parallelism", Ty::Int, Ptr),
    (2, "completions", Ty::Int, Ptr),
    (3, "activeDeadlineSeconds", Ty::Int, Ptr),
    (
        11,
        "podFailurePolicy",
        Ty::Msg(BATCH_POD_FAILURE_POLICY),
        Ptr,
    ),
    (16, "successPolicy", Ty::Msg(BATCH_SUCCESS_POLICY), Ptr),
    (7, "backoffLimit", Ty::Int, Ptr),
    (12, "backoffLimitPerIndex", Ty::Int, Ptr),
    (13, "maxFailedIndexes", Ty::Int, Ptr),
    (4, "selector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (5, "manualSelector", Ty::Bool, Ptr),
    (6, "template", Ty::Msg(CORE_POD_TEMPLATE_SPEC), One),
    (8, "ttlSecondsAfterFinished", Ty::Int, Ptr),
    (9, "completionMode", Ty::Str, Ptr),
    (10, "suspend", Ty::Bool, Ptr),
    (14, "podReplacementPolicy", Ty::Str, Ptr),
    (15, "managedBy", Ty::Str, Ptr),
    (
        17,
        "scheduling",
        Ty::Msg(BATCH_JOB_SCHEDULING_CONFIGURATION),
        Ptr,
    ),
];
pub(super) const BATCH_JOB_STATUS: &[Field] = &[
    (1, "conditions", Ty::Msg(BATCH_JOB_CONDITION), Many),
    (2, "startTime", Ty::Time, Ptr),
    (3, "completionTime", Ty::Time, Ptr),
    (4, "active", Ty::Int, One),
    (5, "succeeded", Ty::Int, One),
    (6, "failed", Ty::Int, One),
    (11, "terminating", Ty::Int, Ptr),
    (7, "completedIndexes", Ty::Str, One),
    (10, "failedIndexes", Ty::Str, Ptr),
    (
        8,
        "uncountedTerminatedPods",
        Ty::Msg(BATCH_UNCOUNTED_TERMINATED_PODS),
        Ptr,
    ),
    (9, "ready", Ty::Int, Ptr),
];
pub(super) const BATCH_JOB_TEMPLATE_SPEC: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(BATCH_JOB_SPEC), One),
];
pub(super) const BATCH_POD_FAILURE_POLICY: &[Field] =
    &[(1, "rules", Ty::Msg(BATCH_POD_FAILURE_POLICY_RULE), Many)];
pub(super) const BATCH_POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT: &[Field] = &[
    (1, "containerName", Ty::Str, Ptr),
    (2, "operator", Ty::Str, One),
    (3, "values", Ty::Int, Many),
];
pub(super) const BATCH_POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN: &[Field] =
    &[(1, "type", Ty::Str, One), (2, "status", Ty::Str, One)];
pub(super) const BATCH_POD_FAILURE_POLICY_RULE: &[Field] = &[
    (1, "action", Ty::Str, One),
    (
        2,
        "onExitCodes",
        Ty::Msg(BATCH_POD_FAILURE_POLICY_ON_EXIT_CODES_REQUIREMENT),
        Ptr,
    ),
    (
        3,
        "onPodConditions",
        Ty::Msg(BATCH_POD_FAILURE_POLICY_ON_POD_CONDITIONS_PATTERN),
        Many,
    ),
];
pub(super) const BATCH_SUCCESS_POLICY: &[Field] =
    &[(1, "rules", Ty::Msg(BATCH_SUCCESS_POLICY_RULE), Many)];
pub(super) const BATCH_SUCCESS_POLICY_RULE: &[Field] = &[
    (1, "succeededIndexes", Ty::Str, Ptr),
    (2, "succeededCount", Ty::Int, Ptr),
];
pub(super) const BATCH_UNCOUNTED_TERMINATED_PODS: &[Field] = &[
    (1, "succeeded", Ty::Str, Many),
    (2, "failed", Ty::Str, Many),
];
pub(super) const CORE_AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: &[Field] = &[
    (1, "volumeID", Ty::Str, One),
    (2, "fsType", Ty::Str, One),
    (3, "partition", Ty::Int, One),
    (4, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_AFFINITY: &[Field] = &[
    (1, "nodeAffinity", Ty::Msg(CORE_NODE_AFFINITY), Ptr),
    (2, "podAffinity", Ty::Msg(CORE_POD_AFFINITY), Ptr),
    (3, "podAntiAffinity", Ty::Msg(CORE_POD_ANTI_AFFINITY), Ptr),
];
pub(super) const CORE_APP_ARMOR_PROFILE: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "localhostProfile", Ty::Str, Ptr),
];
pub(super) const CORE_ATTACHED_VOLUME: &[Field] =
    &[(1, "name", Ty::Str, One), (2, "devicePath", Ty::Str, One)];
pub(super) const CORE_AZURE_DISK_VOLUME_SOURCE: &[Field] = &[
    (1, "diskName", Ty::Str, One),
    (2, "diskURI", Ty::Str, One),
    (3, "cachingMode", Ty::Str, Ptr),
    (4, "fsType", Ty::Str, Ptr),
    (5, "readOnly", Ty::Bool, Ptr),
    (6, "kind", Ty::Str, Ptr),
];
pub(super) const CORE_AZURE_FILE_VOLUME_SOURCE: &[Field] = &[
    (1, "secretName", Ty::Str, One),
    (2, "shareName", Ty::Str, One),
    (3, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_CSI_VOLUME_SOURCE: &[Field] = &[
    (1, "driver", Ty::Str, One),
    (2, "readOnly", Ty::Bool, Ptr),
    (3, "fsType", Ty::Str, Ptr),
    (4, "volumeAttributes", Ty::Str, Map),
    (
        5,
        "nodePublishSecretRef",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        Ptr,
    ),
];
pub(super) const CORE_CAPABILITIES: &[Field] =
    &[(1, "add", Ty::Str, Many), (2, "drop", Ty::Str, Many)];
pub(super) const CORE_CEPH_FS_VOLUME_SOURCE: &[Field] = &[
    (1, "monitors", Ty::Str, Many),
    (2, "path", Ty::Str, One),
    (3, "user", Ty::Str, One),
    (4, "secretFile", Ty::Str, One),
    (5, "secretRef", Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE), Ptr),
    (6, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_CINDER_VOLUME_SOURCE: &[Field] = &[
    (1, "volumeID", Ty::Str, One),
    (2, "fsType", Ty::Str, One),
    (3, "readOnly", Ty::Bool, One),
    (4, "secretRef", Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE), Ptr),
];
pub(super) const CORE_CLIENT_IP_CONFIG: &[Field] = &[(1, "timeoutSeconds", Ty::Int, Ptr)];
pub(super) const CORE_CLUSTER_TRUST_BUNDLE_PROJECTION: &[Field] = &[
    (1, "name", Ty::Str, Ptr),
    (2, "signerName", Ty::Str, Ptr),
    (3, "labelSelector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (5, "optional", Ty::Bool, Ptr),
    (4, "path", Ty::Str, One),
    (6, "user", Ty::Int, Ptr),
];
pub(super) const CORE_CONFIG_MAP: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (4, "immutable", Ty::Bool, Ptr),
    (2, "data", Ty::Str, Map),
    (3, "binaryData", Ty::Bytes, Map),
];
pub(super) const CORE_CONFIG_MAP_ENV_SOURCE: &[Field] = &[
    (
        1,
        "localObjectReference",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        One,
    ),
    (2, "optional", Ty::Bool, Ptr),
];
pub(super) const CORE_CONFIG_MAP_KEY_SELECTOR: &[Field] = &[
    (
        1,
        "localObjectReference",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        One,
    ),
    (2, "key", Ty::Str, One),
    (3, "optional", Ty::Bool, Ptr),
];
pub(super) const CORE_CONFIG_MAP_NODE_CONFIG_SOURCE: &[Field] = &[
    (1, "namespace", Ty::Str, One),
    (2, "name", Ty::Str, One),
    (3, "uid", Ty::Str, One),
    (4, "resourceVersion", Ty::Str, One),
    (5, "kubeletConfigKey", Ty::Str, One),
];
pub(super) const CORE_CONFIG_MAP_PROJECTION: &[Field] = &[
    (
        1,
        "localObjectReference",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        One,
    ),
    (2, "items", Ty::Msg(CORE_KEY_TO_PATH), Many),
    (4, "optional", Ty::Bool, Ptr),
];
pub(super) const CORE_CONFIG_MAP_VOLUME_SOURCE: &[Field] = &[
    (
        1,
        "localObjectReference",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        One,
    ),
    (2, "items", Ty::Msg(CORE_KEY_TO_PATH), Many),
    (3, "defaultMode", Ty::Int, Ptr),
    (4, "optional", Ty::Bool, Ptr),
    (5, "defaultUser", Ty::Int, Ptr),
];
pub(super) const CORE_CONTAINER: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "image", Ty::Str, One),
    (3, "command", Ty::Str, Many),
    (4, "args", Ty::Str, Many),
    (5, "workingDir", Ty::Str, One),
    (6, "ports", Ty::Msg(CORE_CONTAINER_PORT), Many),
    (19, "envFrom", Ty::Msg(CORE_ENV_FROM_SOURCE), Many),
    (7, "env", Ty::Msg(CORE_ENV_VAR), Many),
    (8, "resources", Ty::Msg(CORE_RESOURCE_REQUIREMENTS), One),
    (
        23,
        "resizePolicy",
        Ty::Msg(CORE_CONTAINER_RESIZE_POLICY),
        Many,
    ),
    (24, "restartPolicy", Ty::Str, Ptr),
    (
        25,
        "restartPolicyRules",
        Ty::Msg(CORE_CONTAINER_RESTART_RULE),
        Many,
    ),
    (9, "volumeMounts", Ty::Msg(CORE_VOLUME_MOUNT), Many),
    (21, "volumeDevices", Ty::Msg(CORE_VOLUME_DEVICE), Many),
    (10, "livenessProbe", Ty::Msg(CORE_PROBE), Ptr),
    (11, "readinessProbe", Ty::Msg(CORE_PROBE), Ptr),
    (22, "startupProbe", Ty::Msg(CORE_PROBE), Ptr),
    (12, "lifecycle", Ty::Msg(CORE_LIFECYCLE), Ptr),
    (13, "terminationMessagePath", Ty::Str, One),
    (20, "terminationMessagePolicy", Ty::Str, One),
    (14, "imagePullPolicy", Ty::Str, One),
    (15, "securityContext", Ty::Msg(CORE_SECURITY_CONTEXT), Ptr),
    (16, "stdin", Ty::Bool, One),
    (17, "stdinOnce", Ty::Bool, One),
    (18, "tty", Ty::Bool, One),
];
pub(super) const CORE_CONTAINER_EXTENDED_RESOURCE_REQUEST: &[Field] = &[
    (1, "containerName", Ty::Str, One),
    (2, "resourceName", Ty::Str, One),
    (3, "requestName", Ty::Str, One),
];
pub(super) const CORE_CONTAINER_IMAGE: &[Field] =
    &[(1, "names", Ty::Str, Many), (2, "sizeBytes", Ty::Int, One)];
pub(super) const CORE_CONTAINER_PORT: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "hostPort", Ty::Int, One),
    (3, "containerPort", Ty::Int, One),
    (4, "protocol", Ty::Str, One),
    (5, "hostIP", Ty::Str, One),
];
pub(super) const CORE_CONTAINER_RESIZE_POLICY: &[Field] = &[
    (1, "resourceName", Ty::Str, One),
    (2, "restartPolicy", Ty::Str, One),
];
pub(super) const CORE_CONTAINER_RESTART_RULE: &[Field] = &[
    (1, "action", Ty::Str, One),
    (
        2,
        "exitCodes",
        Ty::Msg(CORE_CONTAINER_RESTART_RULE_ON_EXIT_CODES),
        Ptr,
    ),
];
pub(super) const CORE_CONTAINER_RESTART_RULE_ON_EXIT_CODES: &[Field] =
    &[(1, "operator", Ty::Str, One), (2, "values", Ty::Int, Many)];
pub(super) const CORE_CONTAINER_STATE: &[Field] = &[
    (1, "waiting", Ty::Msg(CORE_CONTAINER_STATE_WAITING), Ptr),
    (2, "running", Ty::Msg(CORE_CONTAINER_STATE_RUNNING), Ptr),
    (
        3,
        "terminated",
        Ty::Msg(CORE_CONTAINER_STATE_TERMINATED),
        Ptr,
    ),
];
pub(super) const CORE_CONTAINER_STATE_RUNNING: &[Field] = &[(1, "startedAt", Ty::Time, One)];
pub(super) const CORE_CONTAINER_STATE_TERMINATED: &[Field] = &[
    (1, "exitCode", Ty::Int, One),
    (2, "signal", Ty::Int, One),
    (3, "reason", Ty::Str, One),
    (4, "message", Ty::Str, One),
    (5, "startedAt", Ty::Time, One),
    (6, "finishedAt", Ty::Time, One),
    (7, "containerID", Ty::Str, One),
];
pub(super) const CORE_CONTAINER_STATE_WAITING: &[Field] =
    &[(1, "reason", Ty::Str, One), (2, "message", Ty::Str, One)];
pub(super) const CORE_CONTAINER_STATUS: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "state", Ty::Msg(CORE_CONTAINER_STATE), One),
    (3, "lastState", Ty::Msg(CORE_CONTAINER_STATE), One),
    (4, "ready", Ty::Bool, One),
    (5, "restartCount", Ty::Int, One),
    (6, "image", Ty::Str, One),
    (7, "imageID", Ty::Str, One),
    (8, "containerID", Ty::Str, One),
    (9, "started", Ty::Bool, Ptr),
    (10, "allocatedResources", Ty::Quantity, Map),
    (11, "resources", Ty::Msg(CORE_RESOURCE_REQUIREMENTS), Ptr),
    (12, "volumeMounts", Ty::Msg(CORE_VOLUME_MOUNT_STATUS), Many),
    (13, "user", Ty::Msg(CORE_CONTAINER_USER), Ptr),
    (
        14,
        "allocatedResourcesStatus",
        Ty::Msg(CORE_RESOURCE_STATUS),
        Many,
    ),
    (15, "stopSignal", Ty::Str, Ptr),
];
pub(super) const CORE_CONTAINER_USER: &[Field] =
    &[(1, "linux", Ty::Msg(CORE_LINUX_CONTAINER_USER), Ptr)];
pub(super) const CORE_DAEMON_ENDPOINT: &[Field] = &[(1, "Port", Ty::Int, One)];
pub(super) const CORE_DOWNWARD_API_PROJECTION: &[Field] =
    &[(1, "items", Ty::Msg(CORE_DOWNWARD_API_VOLUME_FILE), Many)];
pub(super) const CORE_DOWNWARD_API_VOLUME_FILE: &[Field] = &[
    (1, "path", Ty::Str, One),
    (2, "fieldRef", Ty::Msg(CORE_OBJECT_FIELD_SELECTOR), Ptr),
    (
        3,
        "resourceFieldRef",
        Ty::Msg(CORE_RESOURCE_FIELD_SELECTOR),
        Ptr,
    ),
    (4, "mode", Ty::Int, Ptr),
    (5, "user", Ty::Int, Ptr),
];
pub(super) const CORE_DOWNWARD_API_VOLUME_SOURCE: &[Field] = &[
    (1, "items", Ty::Msg(CORE_DOWNWARD_API_VOLUME_FILE), Many),
    (2, "defaultMode", Ty::Int, Ptr),
    (3, "defaultUser", Ty::Int, Ptr),
];
pub(super) const CORE_EMPTY_DIR_VOLUME_SOURCE: &[Field] = &[
    (1, "medium", Ty::Str, One),
    (2, "sizeLimit", Ty::Quantity, Ptr),
    (3, "mode", Ty::Int, Ptr),
];
pub(super) const CORE_ENV_FROM_SOURCE: &[Field] = &[
    (1, "prefix", Ty::Str, One),
    (2, "configMapRef", Ty::Msg(CORE_CONFIG_MAP_ENV_SOURCE), Ptr),
    (3, "secretRef", Ty::Msg(CORE_SECRET_ENV_SOURCE), Ptr),
];
pub(super) const CORE_ENV_VAR: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "value", Ty::Str, One),
    (3, "valueFrom", Ty::Msg(CORE_ENV_VAR_SOURCE), Ptr),
];
pub(super) const CORE_ENV_VAR_SOURCE: &[Field] = &[
    (1, "fieldRef", Ty::Msg(CORE_OBJECT_FIELD_SELECTOR), Ptr),
    (
        2,
        "resourceFieldRef",
        Ty::Msg(CORE_RESOURCE_FIELD_SELECTOR),
        Ptr,
    ),
    (
        3,
        "configMapKeyRef",
        Ty::Msg(CORE_CONFIG_MAP_KEY_SELECTOR),
        Ptr,
    ),
    (4, "secretKeyRef", Ty::Msg(CORE_SECRET_KEY_SELECTOR), Ptr),
    (5, "fileKeyRef", Ty::Msg(CORE_FILE_KEY_SELECTOR), Ptr),
];
pub(super) const CORE_EPHEMERAL_CONTAINER: &[Field] = &[
    (
        1,
        "ephemeralContainerCommon",
        Ty::Msg(CORE_EPHEMERAL_CONTAINER_COMMON),
        One,
    ),
    (2, "targetContainerName", Ty::Str, One),
];
pub(super) const CORE_EPHEMERAL_CONTAINER_COMMON: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "image", Ty::Str, One),
    (3, "command", Ty::Str, Many),
    (4, "args", Ty::Str, Many),
    (5, "workingDir", Ty::Str, One),
    (6, "ports", Ty::Msg(CORE_CONTAINER_PORT), Many),
    (19, "envFrom", Ty::Msg(CORE_ENV_FROM_SOURCE), Many),
    (7, "env", Ty::Msg(CORE_ENV_VAR), Many),
    (8, "resources", Ty::Msg(CORE_RESOURCE_REQUIREMENTS), One),
    (
        23,
        "resizePolicy",
        Ty::Msg(CORE_CONTAINER_RESIZE_POLICY),
        Many,
    ),
    (24, "restartPolicy", Ty::Str, Ptr),
    (
        25,
        "restartPolicyRules",
        Ty::Msg(CORE_CONTAINER_RESTART_RULE),
        Many,
    ),
    (9, "volumeMounts", Ty::Msg(CORE_VOLUME_MOUNT), Many),
    (21, "volumeDevices", Ty::Msg(CORE_VOLUME_DEVICE), Many),
    (10, "livenessProbe", Ty::Msg(CORE_PROBE), Ptr),
    (11, "readinessProbe", Ty::Msg(CORE_PROBE), Ptr),
    (22, "startupProbe", Ty::Msg(CORE_PROBE), Ptr),
    (12, "lifecycle", Ty::Msg(CORE_LIFECYCLE), Ptr),
    (13, "terminationMessagePath", Ty::Str, One),
    (20, "terminationMessagePolicy", Ty::Str, One),
    (14, "imagePullPolicy", Ty::Str, One),
    (15, "securityContext", Ty::Msg(CORE_SECURITY_CONTEXT), Ptr),
    (16, "stdin", Ty::Bool, One),
    (17, "stdinOnce", Ty::Bool, One),
    (18, "tty", Ty::Bool, One),
];
pub(super) const CORE_EPHEMERAL_VOLUME_SOURCE: &[Field] = &[(
    1,
    "volumeClaimTemplate",
    Ty::Msg(CORE_PERSISTENT_VOLUME_CLAIM_TEMPLATE),
    Ptr,
)];
pub(super) const CORE_EVENT: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "involvedObject", Ty::Msg(CORE_OBJECT_REFERENCE), One),
    (3, "reason", Ty::Str, One),
    (4, "message", Ty::Str, One),
    (5, "source", Ty::Msg(CORE_EVENT_SOURCE), One),
    (6, "firstTimestamp", Ty::Time, One),
    (7, "lastTimestamp", Ty::Time, One),
    (8, "count", Ty::Int, One),
    (9, "type", Ty::Str, One),
    (10, "eventTime", Ty::MicroTime, One),
    (11, "series", Ty::Msg(CORE_EVENT_SERIES), Ptr),
    (12, "action", Ty::Str, One),
    (13, "related", Ty::Msg(CORE_OBJECT_REFERENCE), Ptr),
    (14, "reportingComponent", Ty::Str, One),
    (15, "reportingInstance", Ty::Str, One),
];
pub(super) const CORE_EVENT_SERIES: &[Field] = &[
    (1, "count", Ty::Int, One),
    (2, "lastObservedTime", Ty::MicroTime, One),
];
pub(super) const CORE_EVENT_SOURCE: &[Field] =
    &[(1, "component", Ty::Str, One), (2, "host", Ty::Str, One)];
pub(super) const CORE_EVICTION_RESPONDER: &[Field] =
    &[(1, "name", Ty::Str, One), (2, "priority", Ty::Int, Ptr)];
pub(super) const CORE_EXEC_ACTION: &[Field] = &[(1, "command", Ty::Str, Many)];
pub(super) const CORE_FC_VOLUME_SOURCE: &[Field] = &[
    (1, "targetWWNs", Ty::Str, Many),
    (2, "lun", Ty::Int, Ptr),
    (3, "fsType", Ty::Str, One),
    (4, "readOnly", Ty::Bool, One),
    (5, "wwids", Ty::Str, Many),
];
pub(super) const CORE_FILE_KEY_SELECTOR: &[Field] = &[
    (1, "volumeName", Ty::Str, One),
    (2, "path", Ty::Str, One),
    (3, "key", Ty::Str, One),
    (4, "optional", Ty::Bool, Ptr),
];
pub(super) const CORE_FLEX_VOLUME_SOURCE: &[Field] = &[
    (1, "driver", Ty::Str, One),
    (2, "fsType", Ty::Str, One),
    (3, "secretRef", Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE), Ptr),
    (4, "readOnly", Ty::Bool, One),
    (5, "options", Ty::Str, Map),
];
pub(super) const CORE_FLOCKER_VOLUME_SOURCE: &[Field] = &[
    (1, "datasetName", Ty::Str, One),
    (2, "datasetUUID", Ty::Str, One),
];
pub(super) const CORE_GCE_PERSISTENT_DISK_VOLUME_SOURCE: &[Field] = &[
    (1, "pdName", Ty::Str, One),
    (2, "fsType", Ty::Str, One),
    (3, "partition", Ty::Int, One),
    (4, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_GRPC_ACTION: &[Field] = &[
    (1, "port", Ty::Int, One),
    (2, "service", Ty::Str, Ptr),
    (3, "mode", Ty::Str, Ptr),
];
pub(super) const CORE_GIT_REPO_VOLUME_SOURCE: &[Field] = &[
    (1, "repository", Ty::Str, One),
    (2, "revision", Ty::Str, One),
    (3, "directory", Ty::Str, One),
];
pub(super) const CORE_GLUSTERFS_VOLUME_SOURCE: &[Field] = &[
    (1, "endpoints", Ty::Str, One),
    (2, "path", Ty::Str, One),
    (3, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_HTTP_GET_ACTION: &[Field] = &[
    (1, "path", Ty::Str, One),
    (2, "port", Ty::IntOrStr, One),
    (3, "host", Ty::Str, One),
    (4, "scheme", Ty::Str, One),
    (5, "httpHeaders", Ty::Msg(CORE_HTTP_HEADER), Many),
    (6, "protocol", Ty::Str, Ptr),
];
pub(super) const CORE_HTTP_HEADER: &[Field] =
    &[(1, "name", Ty::Str, One), (2, "value", Ty::Str, One)];
pub(super) const CORE_HOST_ALIAS: &[Field] =
    &[(1, "ip", Ty::Str, One), (2, "hostnames", Ty::Str, Many)];
pub(super) const CORE_HOST_IP: &[Field] = &[(1, "ip", Ty::Str, One)];
pub(super) const CORE_HOST_PATH_VOLUME_SOURCE: &[Field] =
    &[(1, "path", Ty::Str, One), (2, "type", Ty::Str, Ptr)];
pub(super) const CORE_ISCSI_VOLUME_SOURCE: &[Field] = &[
    (1, "targetPortal", Ty::Str, One),
    (2, "iqn", Ty::Str, One),
    (3, "lun", Ty::Int, One),
    (4, "iscsiInterface", Ty::Str, One),
    (5, "fsType", Ty::Str, One),
    (6, "readOnly", Ty::Bool, One),
    (7, "portals", Ty::Str, Many),
    (8, "chapAuthDiscovery", Ty::Bool, One),
    (11, "chapAuthSession", Ty::Bool, One),
    (10, "secretRef", Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE), Ptr),
    (12, "initiatorName", Ty::Str, Ptr),
];
pub(super) const CORE_IMAGE_VOLUME_SOURCE: &[Field] = &[
    (1, "reference", Ty::Str, One),
    (2, "pullPolicy", Ty::Str, One),
];
pub(super) const CORE_IMAGE_VOLUME_STATUS: &[Field] = &[(1, "imageRef", Ty::Str, One)];
pub(super) const CORE_KEY_TO_PATH: &[Field] = &[
    (1, "key", Ty::Str, One),
    (2, "path", Ty::Str, One),
    (3, "mode", Ty::Int, Ptr),
    (4, "user", Ty::Int, Ptr),
];
pub(super) const CORE_LIFECYCLE: &[Field] = &[
    (1, "postStart", Ty::Msg(CORE_LIFECYCLE_HANDLER), Ptr),
    (2, "preStop", Ty::Msg(CORE_LIFECYCLE_HANDLER), Ptr),
    (3, "stopSignal", Ty::Str, Ptr),
];
pub(super) const CORE_LIFECYCLE_HANDLER: &[Field] = &[
    (1, "exec", Ty::Msg(CORE_EXEC_ACTION), Ptr),
    (2, "httpGet", Ty::Msg(CORE_HTTP_GET_ACTION), Ptr),
    (3, "tcpSocket", Ty::Msg(CORE_TCP_SOCKET_ACTION), Ptr),
    (4, "sleep", Ty::Msg(CORE_SLEEP_ACTION), Ptr),
];
pub(super) const CORE_LINUX_CONTAINER_USER: &[Field] = &[
    (1, "uid", Ty::Int, One),
    (2, "gid", Ty::Int, One),
    (3, "supplementalGroups", Ty::Int, Many),
];
pub(super) const CORE_LOAD_BALANCER_INGRESS: &[Field] = &[
    (1, "ip", Ty::Str, One),
    (2, "hostname", Ty::Str, One),
    (3, "ipMode", Ty::Str, Ptr),
    (4, "ports", Ty::Msg(CORE_PORT_STATUS), Many),
];
pub(super) const CORE_LOAD_BALANCER_STATUS: &[Field] =
    &[(1, "ingress", Ty::Msg(CORE_LOAD_BALANCER_INGRESS), Many)];
pub(super) const CORE_LOCAL_OBJECT_REFERENCE: &[Field] = &[(1, "name", Ty::Str, One)];
pub(super) const CORE_MODIFY_VOLUME_STATUS: &[Field] = &[
    (1, "targetVolumeAttributesClassName", Ty::Str, One),
    (2, "status", Ty::Str, One),
];
pub(super) const CORE_NFS_VOLUME_SOURCE: &[Field] = &[
    (1, "server", Ty::Str, One),
    (2, "path", Ty::Str, One),
    (3, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_NAMESPACE: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_NAMESPACE_SPEC), One),
    (3, "status", Ty::Msg(CORE_NAMESPACE_STATUS), One),
];
pub(super) const CORE_NAMESPACE_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (4, "lastTransitionTime", Ty::Time, One),
    (5, "reason", Ty::Str, One),
    (6, "message", Ty::Str, One),
];
pub(super) const CORE_NAMESPACE_SPEC: &[Field] = &[(1, "finalizers", Ty::Str, Many)];
pub(super) const CORE_NAMESPACE_STATUS: &[Field] = &[
    (1, "phase", Ty::Str, One),
    (2, "conditions", Ty::Msg(CORE_NAMESPACE_CONDITION), Many),
];
pub(super) const CORE_NODE: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_NODE_SPEC), One),
    (3, "status", Ty::Msg(CORE_NODE_STATUS), One),
];
pub(super) const CORE_NODE_ADDRESS: &[Field] =
    &[(1, "type", Ty::Str, One), (2, "address", Ty::Str, One)];
pub(super) const CORE_NODE_AFFINITY: &[Field] = &[
    (
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::Msg(CORE_NODE_SELECTOR),
        Ptr,
    ),
    (
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::Msg(CORE_PREFERRED_SCHEDULING_TERM),
        Many,
    ),
];
pub(super) const CORE_NODE_ALLOCATABLE_MAPPED_RESOURCES: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "quantity", Ty::Quantity, Ptr),
];
pub(super) const CORE_NODE_ALLOCATABLE_OVERHEAD_RESOURCES: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "perPod", Ty::Quantity, Ptr),
    (3, "perContainer", Ty::Quantity, Ptr),
];
pub(super) const CORE_NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS: &[Field] = &[
    (1, "resourceClaimName", Ty::Str, One),
    (2, "containers", Ty::Str, Many),
    (
        4,
        "mapping",
        Ty::Msg(CORE_NODE_ALLOCATABLE_MAPPED_RESOURCES),
        Many,
    ),
    (
        5,
        "overhead",
        Ty::Msg(CORE_NODE_ALLOCATABLE_OVERHEAD_RESOURCES),
        Many,
    ),
];
pub(super) const CORE_NODE_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (3, "lastHeartbeatTime", Ty::Time, One),
    (4, "lastTransitionTime", Ty::Time, One),
    (5, "reason", Ty::Str, One),
    (6, "message", Ty::Str, One),
];
pub(super) const CORE_NODE_CONFIG_SOURCE: &[Field] = &[(
    2,
    "configMap",
    Ty::Msg(CORE_CONFIG_MAP_NODE_CONFIG_SOURCE),
    Ptr,
)];
pub(super) const CORE_NODE_CONFIG_STATUS: &[Field] = &[
    (1, "assigned", Ty::Msg(CORE_NODE_CONFIG_SOURCE), Ptr),
    (2, "active", Ty::Msg(CORE_NODE_CONFIG_SOURCE), Ptr),
    (3, "lastKnownGood", Ty::Msg(CORE_NODE_CONFIG_SOURCE), Ptr),
    (4, "error", Ty::Str, One),
];
pub(super) const CORE_NODE_DAEMON_ENDPOINTS: &[Field] =
    &[(1, "kubeletEndpoint", Ty::Msg(CORE_DAEMON_ENDPOINT), One)];
pub(super) const CORE_NODE_FEATURES: &[Field] = &[(1, "supplementalGroupsPolicy", Ty::Bool, Ptr)];
pub(super) const CORE_NODE_POD_PREEMPTION_POLICY: &[Field] =
    &[(1, "disableResizePreemption", Ty::Str, Many)];
pub(super) const CORE_NODE_RUNTIME_HANDLER: &[Field] = &[
    (1, "name", Ty::Str, One),
    (
        2,
        "features",
        Ty::Msg(CORE_NODE_RUNTIME_HANDLER_FEATURES),
        Ptr,
    ),
];
pub(super) const CORE_NODE_RUNTIME_HANDLER_FEATURES: &[Field] = &[
    (1, "recursiveReadOnlyMounts", Ty::Bool, Ptr),
    (2, "userNamespaces", Ty::Bool, Ptr),
];
pub(super) const CORE_NODE_SELECTOR: &[Field] = &[(
    1,
    "nodeSelectorTerms",
    Ty::Msg(CORE_NODE_SELECTOR_TERM),
    Many,
)];
pub(super) const CORE_NODE_SELECTOR_REQUIREMENT: &[Field] = &[
    (1, "key", Ty::Str, One),
    (2, "operator", Ty::Str, One),
    (3, "values", Ty::Str, Many),
];
pub(super) const CORE_NODE_SELECTOR_TERM: &[Field] = &[
    (
        1,
        "matchExpressions",
        Ty::Msg(CORE_NODE_SELECTOR_REQUIREMENT),
        Many,
    ),
    (
        2,
        "matchFields",
        Ty::Msg(CORE_NODE_SELECTOR_REQUIREMENT),
        Many,
    ),
];
pub(super) const CORE_NODE_SPEC: &[Field] = &[
    (1, "podCIDR", Ty::Str, One),
    (7, "podCIDRs", Ty::Str, Many),
    (3, "providerID", Ty::Str, One),
    (4, "unschedulable", Ty::Bool, One),
    (5, "taints", Ty::Msg(CORE_TAINT), Many),
    (6, "configSource", Ty::Msg(CORE_NODE_CONFIG_SOURCE), Ptr),
    (2, "externalID", Ty::Str, One),
    (
        8,
        "podPreemptionPolicy",
        Ty::Msg(CORE_NODE_POD_PREEMPTION_POLICY),
        Ptr,
    ),
];
pub(super) const CORE_NODE_STATUS: &[Field] = &[
    (1, "capacity", Ty::Quantity, Map),
    (2, "allocatable", Ty::Quantity, Map),
    (3, "phase", Ty::Str, One),
    (4, "conditions", Ty::Msg(CORE_NODE_CONDITION), Many),
    (5, "addresses", Ty::Msg(CORE_NODE_ADDRESS), Many),
    (
        6,
        "daemonEndpoints",
        Ty::Msg(CORE_NODE_DAEMON_ENDPOINTS),
        One,
    ),
    (7, "nodeInfo", Ty::Msg(CORE_NODE_SYSTEM_INFO), One),
    (8, "images", Ty::Msg(CORE_CONTAINER_IMAGE), Many),
    (9, "volumesInUse", Ty::Str, Many),
    (10, "volumesAttached", Ty::Msg(CORE_ATTACHED_VOLUME), Many),
    (11, "config", Ty::Msg(CORE_NODE_CONFIG_STATUS), Ptr),
    (
        12,
        "runtimeHandlers",
        Ty::Msg(CORE_NODE_RUNTIME_HANDLER),
        Many,
    ),
    (13, "features", Ty::Msg(CORE_NODE_FEATURES), Ptr),
    (14, "declaredFeatures", Ty::Str, Many),
];
pub(super) const CORE_NODE_SWAP_STATUS: &[Field] = &[(1, "capacity", Ty::Int, Ptr)];
pub(super) const CORE_NODE_SYSTEM_INFO: &[Field] = &[
    (1, "machineID", Ty::Str, One),
    (2, "systemUUID", Ty::Str, One),
    (3, "bootID", Ty::Str, One),
    (4, "kernelVersion", Ty::Str, One),
    (5, "osImage", Ty::Str, One),
    (6, "containerRuntimeVersion", Ty::Str, One),
    (7, "kubeletVersion", Ty::Str, One),
    (8, "kubeProxyVersion", Ty::Str, One),
    (9, "operatingSystem", Ty::Str, One),
    (10, "architecture", Ty::Str, One),
    (11, "swap", Ty::Msg(CORE_NODE_SWAP_STATUS), Ptr),
];
pub(super) const CORE_OBJECT_FIELD_SELECTOR: &[Field] = &[
    (1, "apiVersion", Ty::Str, One),
    (2, "fieldPath", Ty::Str, One),
];
pub(super) const CORE_OBJECT_REFERENCE: &[Field] = &[
    (1, "kind", Ty::Str, One),
    (2, "namespace", Ty::Str, One),
    (3, "name", Ty::Str, One),
    (4, "uid", Ty::Str, One),
    (5, "apiVersion", Ty::Str, One),
    (6, "resourceVersion", Ty::Str, One),
    (7, "fieldPath", Ty::Str, One),
];
pub(super) const CORE_PERSISTENT_VOLUME_CLAIM: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_PERSISTENT_VOLUME_CLAIM_SPEC), One),
    (
        3,
        "status",
        Ty::Msg(CORE_PERSISTENT_VOLUME_CLAIM_STATUS),
        One,
    ),
];
pub(super) const CORE_PERSISTENT_VOLUME_CLAIM_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (3, "lastProbeTime", Ty::Time, One),
    (4, "lastTransitionTime", Ty::Time, One),
    (5, "reason", Ty::Str, One),
    (6, "message", Ty::Str, One),
];
pub(super) const CORE_PERSISTENT_VOLUME_CLAIM_SPEC: &[Field] = &[
    (1, "accessModes", Ty::Str, Many),
    (4, "selector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (
        2,
        "resources",
        Ty::Msg(CORE_VOLUME_RESOURCE_REQUIREMENTS),
        One,
    ),
    (3, "volumeName", Ty::Str, One),
    (5, "storageClassName", Ty::Str, Ptr),
    (6, "volumeMode", Ty::Str, Ptr),
    (
        7,
        "dataSource",
        Ty::Msg(CORE_TYPED_LOCAL_OBJECT_REFERENCE),
        Ptr,
    ),
    (
        8,
        "dataSourceRef",
        Ty::Msg(CORE_TYPED_OBJECT_REFERENCE),
        Ptr,
    ),
    (9, "volumeAttributesClassName", Ty::Str, Ptr),
];
pub(super) const CORE_PERSISTENT_VOLUME_CLAIM_STATUS: &[Field] = &[
    (1, "phase", Ty::Str, One),
    (2, "accessModes", Ty::Str, Many),
    (3, "capacity", Ty::Quantity, Map),
    (
        4,
        "conditions",
        Ty::Msg(CORE_PERSISTENT_VOLUME_CLAIM_CONDITION),
        Many,
    ),
    (5, "allocatedResources", Ty::Quantity, Map),
    (7, "allocatedResourceStatuses", Ty::Str, Map),
    (8, "currentVolumeAttributesClassName", Ty::Str, Ptr),
    (
        9,
        "modifyVolumeStatus",
        Ty::Msg(CORE_MODIFY_VOLUME_STATUS),
        Ptr,
    ),
    (10, "healthStatus", Ty::Msg(CORE_VOLUME_HEALTH_STATUS), Ptr),
];
pub(super) const CORE_PERSISTENT_VOLUME_CLAIM_TEMPLATE: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_PERSISTENT_VOLUME_CLAIM_SPEC), One),
];
pub(super) const CORE_PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: &[Field] = &[
    (1, "claimName", Ty::Str, One),
    (2, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: &[Field] =
    &[(1, "pdID", Ty::Str, One), (2, "fsType", Ty::Str, One)];
pub(super) const CORE_POD: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_POD_SPEC), One),
    (3, "status", Ty::Msg(CORE_POD_STATUS), One),
];
pub(super) const CORE_POD_AFFINITY: &[Field] = &[
    (
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::Msg(CORE_POD_AFFINITY_TERM),
        Many,
    ),
    (
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::Msg(CORE_WEIGHTED_POD_AFFINITY_TERM),
        Many,
    ),
];
pub(super) const CORE_POD_AFFINITY_TERM: &[Field] = &[
    (1, "labelSelector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (2, "namespaces", Ty::Str, Many),
    (3, "topologyKey", Ty::Str, One),
    (4, "namespaceSelector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (5, "matchLabelKeys", Ty::Str, Many),
    (6, "mismatchLabelKeys", Ty::Str, Many),
];
pub(super) const CORE_POD_ANTI_AFFINITY: &[Field] = &[
    (
        1,
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::Msg(CORE_POD_AFFINITY_TERM),
        Many,
    ),
    (
        2,
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::Msg(CORE_WEIGHTED_POD_AFFINITY_TERM),
        Many,
    ),
];
pub(super) const CORE_POD_CERTIFICATE_PROJECTION: &[Field] = &[
    (1, "signerName", Ty::Str, One),
    (2, "keyType", Ty::Str, One),
    (3, "maxExpirationSeconds", Ty::Int, Ptr),
    (4, "credentialBundlePath", Ty::Str, One),
    (5, "keyPath", Ty::Str, One),
    (6, "certificateChainPath", Ty::Str, One),
    (7, "userAnnotations", Ty::Str, Map),
    (8, "user", Ty::Int, Ptr),
];
pub(super) const CORE_POD_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (7, "observedGeneration", Ty::Int, One),
    (2, "status", Ty::Str, One),
    (3, "lastProbeTime", Ty::Time, One),
    (4, "lastTransitionTime", Ty::Time, One),
    (5, "reason", Ty::Str, One),
    (6, "message", Ty::Str, One),
];
pub(super) const CORE_POD_DNS_CONFIG: &[Field] = &[
    (1, "nameservers", Ty::Str, Many),
    (2, "searches", Ty::Str, Many),
    (3, "options", Ty::Msg(CORE_POD_DNS_CONFIG_OPTION), Many),
];
pub(super) const CORE_POD_DNS_CONFIG_OPTION: &[Field] =
    &[(1, "name", Ty::Str, One), (2, "value", Ty::Str, Ptr)];
pub(super) const CORE_POD_EXTENDED_RESOURCE_CLAIM_STATUS: &[Field] = &[
    (
        1,
        "requestMappings",
        Ty::Msg(CORE_CONTAINER_EXTENDED_RESOURCE_REQUEST),
        Many,
    ),
    (2, "resourceClaimName", Ty::Str, One),
];
pub(super) const CORE_POD_IP: &[Field] = &[(1, "ip", Ty::Str, One)];
pub(super) const CORE_POD_OS: &[Field] = &[(1, "name", Ty::Str, One)];
pub(super) const CORE_POD_READINESS_GATE: &[Field] = &[(1, "conditionType", Ty::Str, One)];
pub(super) const CORE_POD_RESOURCE_CLAIM: &[Field] = &[
    (1, "name", Ty::Str, One),
    (3, "resourceClaimName", Ty::Str, Ptr),
    (4, "resourceClaimTemplateName", Ty::Str, Ptr),
];
pub(super) const CORE_POD_RESOURCE_CLAIM_STATUS: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "resourceClaimName", Ty::Str, Ptr),
];
pub(super) const CORE_POD_SCHEDULING_GATE: &[Field] = &[(1, "name", Ty::Str, One)];
pub(super) const CORE_POD_SCHEDULING_GROUP: &[Field] = &[(1, "podGroupName", Ty::Str, Ptr)];
pub(super) const CORE_POD_SECURITY_CONTEXT: &[Field] = &[
    (1, "seLinuxOptions", Ty::Msg(CORE_SE_LINUX_OPTIONS), Ptr),
    (
        8,
        "windowsOptions",
        Ty::Msg(CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS),
        Ptr,
    ),
    (2, "runAsUser", Ty::Int, Ptr),
    (6, "runAsGroup", Ty::Int, Ptr),
    (3, "runAsNonRoot", Ty::Bool, Ptr),
    (4, "supplementalGroups", Ty::Int, Many),
    (12, "supplementalGroupsPolicy", Ty::Str, Ptr),
    (5, "fsGroup", Ty::Int, Ptr),
    (7, "sysctls", Ty::Msg(CORE_SYSCTL), Many),
    (9, "fsGroupChangePolicy", Ty::Str, Ptr),
    (10, "seccompProfile", Ty::Msg(CORE_SECCOMP_PROFILE), Ptr),
    (11, "appArmorProfile", Ty::Msg(CORE_APP_ARMOR_PROFILE), Ptr),
    (13, "seLinuxChangePolicy", Ty::Str, Ptr),
];
pub(super) const CORE_POD_SPEC: &[Field] = &[
    (1, "volumes", Ty::Msg(CORE_VOLUME), Many),
    (20, "initContainers", Ty::Msg(CORE_CONTAINER), Many),
    (2, "containers", Ty::Msg(CORE_CONTAINER), Many),
    (
        34,
        "ephemeralContainers",
        Ty::Msg(CORE_EPHEMERAL_CONTAINER),
        Many,
    ),
    (3, "restartPolicy", Ty::Str, One),
    (4, "terminationGracePeriodSeconds", Ty::Int, Ptr),
    (5, "activeDeadlineSeconds", Ty::Int, Ptr),
    (6, "dnsPolicy", Ty::Str, One),
    (7, "nodeSelector", Ty::Str, Map),
    (8, "serviceAccountName", Ty::Str, One),
    (9, "serviceAccount", Ty::Str, One),
    (21, "automountServiceAccountToken", Ty::Bool, Ptr),
    (10, "nodeName", Ty::Str, One),
    (11, "hostNetwork", Ty::Bool, One),
    (12, "hostPID", Ty::Bool, One),
    (13, "hostIPC", Ty::Bool, One),
    (27, "shareProcessNamespace", Ty::Bool, Ptr),
    (
        14,
        "securityContext",
        Ty::Msg(CORE_POD_SECURITY_CONTEXT),
        Ptr,
    ),
    (
        15,
        "imagePullSecrets",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        Many,
    ),
    (16, "hostname", Ty::Str, One),
    (17, "subdomain", Ty::Str, One),
    (18, "affinity", Ty::Msg(CORE_AFFINITY), Ptr),
    (19, "schedulerName", Ty::Str, One),
    (22, "tolerations", Ty::Msg(CORE_TOLERATION), Many),
    (23, "hostAliases", Ty::Msg(CORE_HOST_ALIAS), Many),
    (24, "priorityClassName", Ty::Str, One),
    (25, "priority", Ty::Int, Ptr),
    (26, "dnsConfig", Ty::Msg(CORE_POD_DNS_CONFIG), Ptr),
    (28, "readinessGates", Ty::Msg(CORE_POD_READINESS_GATE), Many),
    (29, "runtimeClassName", Ty::Str, Ptr),
    (30, "enableServiceLinks", Ty::Bool, Ptr),
    (31, "preemptionPolicy", Ty::Str, Ptr),
    (32, "overhead", Ty::Quantity, Map),
    (
        33,
        "topologySpreadConstraints",
        Ty::Msg(CORE_TOPOLOGY_SPREAD_CONSTRAINT),
        Many,
    ),
    (35, "setHostnameAsFQDN", Ty::Bool, Ptr),
    (36, "os", Ty::Msg(CORE_POD_OS), Ptr),
    (37, "hostUsers", Ty::Bool, Ptr),
    (
        38,
        "schedulingGates",
        Ty::Msg(CORE_POD_SCHEDULING_GATE),
        Many,
    ),
    (39, "resourceClaims", Ty::Msg(CORE_POD_RESOURCE_CLAIM), Many),
    (40, "resources", Ty::Msg(CORE_RESOURCE_REQUIREMENTS), Ptr),
    (41, "hostnameOverride", Ty::Str, Ptr),
    (
        43,
        "schedulingGroup",
        Ty::Msg(CORE_POD_SCHEDULING_GROUP),
        Ptr,
    ),
    (
        44,
        "evictionResponders",
        Ty::Msg(CORE_EVICTION_RESPONDER),
        Many,
    ),
];
pub(super) const CORE_POD_STATUS: &[Field] = &[
    (17, "observedGeneration", Ty::Int, One),
    (1, "phase", Ty::Str, One),
    (2, "conditions", Ty::Msg(CORE_POD_CONDITION), Many),
    (3, "message", Ty::Str, One),
    (4, "reason", Ty::Str, One),
    (11, "nominatedNodeName", Ty::Str, One),
    (5, "hostIP", Ty::Str, One),
    (16, "hostIPs", Ty::Msg(CORE_HOST_IP), Many),
    (6, "podIP", Ty::Str, One),
    (12, "podIPs", Ty::Msg(CORE_POD_IP), Many),
    (7, "startTime", Ty::Time, Ptr),
    (
        10,
        "initContainerStatuses",
        Ty::Msg(CORE_CONTAINER_STATUS),
        Many,
    ),
    (8, "containerStatuses", Ty::Msg(CORE_CONTAINER_STATUS), Many),
    (9, "qosClass", Ty::Str, One),
    (
        13,
        "ephemeralContainerStatuses",
        Ty::Msg(CORE_CONTAINER_STATUS),
        Many,
    ),
    (14, "resize", Ty::Str, One),
    (
        15,
        "resourceClaimStatuses",
        Ty::Msg(CORE_POD_RESOURCE_CLAIM_STATUS),
        Many,
    ),
    (
        18,
        "extendedResourceClaimStatus",
        Ty::Msg(CORE_POD_EXTENDED_RESOURCE_CLAIM_STATUS),
        Ptr,
    ),
    (19, "allocatedResources", Ty::Quantity, Map),
    (20, "resources", Ty::Msg(CORE_RESOURCE_REQUIREMENTS), Ptr),
    (
        21,
        "nodeAllocatableResourceClaimStatuses",
        Ty::Msg(CORE_NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS),
        Many,
    ),
    (22, "volumeHealth", Ty::Msg(CORE_POD_VOLUME_HEALTH), Many),
];
pub(super) const CORE_POD_TEMPLATE_SPEC: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_POD_SPEC), One),
];
pub(super) const CORE_POD_VOLUME_HEALTH: &[Field] = &[
    (1, "name", Ty::Str, One),
    (
        2,
        "healthConditions",
        Ty::Msg(CORE_VOLUME_HEALTH_CONDITION),
        Many,
    ),
    (3, "lastTransitionTime", Ty::Time, One),
];
pub(super) const CORE_PORT_STATUS: &[Field] = &[
    (1, "port", Ty::Int, One),
    (2, "protocol", Ty::Str, One),
    (3, "error", Ty::Str, Ptr),
];
pub(super) const CORE_PORTWORX_VOLUME_SOURCE: &[Field] = &[
    (1, "volumeID", Ty::Str, One),
    (2, "fsType", Ty::Str, One),
    (3, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_PREFERRED_SCHEDULING_TERM: &[Field] = &[
    (1, "weight", Ty::Int, One),
    (2, "preference", Ty::Msg(CORE_NODE_SELECTOR_TERM), One),
];
pub(super) const CORE_PROBE: &[Field] = &[
    (1, "handler", Ty::Msg(CORE_PROBE_HANDLER), Inline),
    (2, "initialDelaySeconds", Ty::Int, One),
    (3, "timeoutSeconds", Ty::Int, One),
    (4, "periodSeconds", Ty::Int, One),
    (5, "successThreshold", Ty::Int, One),
    (6, "failureThreshold", Ty::Int, One),
    (7, "terminationGracePeriodSeconds", Ty::Int, Ptr),
];
pub(super) const CORE_PROBE_HANDLER: &[Field] = &[
    (1, "exec", Ty::Msg(CORE_EXEC_ACTION), Ptr),
    (2, "httpGet", Ty::Msg(CORE_HTTP_GET_ACTION), Ptr),
    (3, "tcpSocket", Ty::Msg(CORE_TCP_SOCKET_ACTION), Ptr),
    (4, "grpc", Ty::Msg(CORE_GRPC_ACTION), Ptr),
];
pub(super) const CORE_PROJECTED_VOLUME_SOURCE: &[Field] = &[
    (1, "sources", Ty::Msg(CORE_VOLUME_PROJECTION), Many),
    (2, "defaultMode", Ty::Int, Ptr),
    (3, "defaultUser", Ty::Int, Ptr),
];
pub(super) const CORE_QUOBYTE_VOLUME_SOURCE: &[Field] = &[
    (1, "registry", Ty::Str, One),
    (2, "volume", Ty::Str, One),
    (3, "readOnly", Ty::Bool, One),
    (4, "user", Ty::Str, One),
    (5, "group", Ty::Str, One),
    (6, "tenant", Ty::Str, One),
];
pub(super) const CORE_RBD_VOLUME_SOURCE: &[Field] = &[
    (1, "monitors", Ty::Str, Many),
    (2, "image", Ty::Str, One),
    (3, "fsType", Ty::Str, One),
    (4, "pool", Ty::Str, One),
    (5, "user", Ty::Str, One),
    (6, "keyring", Ty::Str, One),
    (7, "secretRef", Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE), Ptr),
    (8, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_RESOURCE_CLAIM: &[Field] =
    &[(1, "name", Ty::Str, One), (2, "request", Ty::Str, One)];
pub(super) const CORE_RESOURCE_FIELD_SELECTOR: &[Field] = &[
    (1, "containerName", Ty::Str, One),
    (2, "resource", Ty::Str, One),
    (3, "divisor", Ty::Quantity, One),
];
pub(super) const CORE_RESOURCE_HEALTH: &[Field] = &[
    (1, "resourceID", Ty::Str, One),
    (2, "health", Ty::Str, One),
    (6, "message", Ty::Str, Ptr),
];
pub(super) const CORE_RESOURCE_QUOTA: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_RESOURCE_QUOTA_SPEC), One),
    (3, "status", Ty::Msg(CORE_RESOURCE_QUOTA_STATUS), One),
];
pub(super) const CORE_RESOURCE_QUOTA_SPEC: &[Field] = &[
    (1, "hard", Ty::Quantity, Map),
    (2, "scopes", Ty::Str, Many),
    (3, "scopeSelector", Ty::Msg(CORE_SCOPE_SELECTOR), Ptr),
];
pub(super) const CORE_RESOURCE_QUOTA_STATUS: &[Field] = &[
    (1, "hard", Ty::Quantity, Map),
    (2, "used", Ty::Quantity, Map),
];
pub(super) const CORE_RESOURCE_REQUIREMENTS: &[Field] = &[
    (1, "limits", Ty::Quantity, Map),
    (2, "requests", Ty::Quantity, Map),
    (3, "claims", Ty::Msg(CORE_RESOURCE_CLAIM), Many),
];
pub(super) const CORE_RESOURCE_STATUS: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "resources", Ty::Msg(CORE_RESOURCE_HEALTH), Many),
];
pub(super) const CORE_SE_LINUX_OPTIONS: &[Field] = &[
    (1, "user", Ty::Str, One),
    (2, "role", Ty::Str, One),
    (3, "type", Ty::Str, One),
    (4, "level", Ty::Str, One),
];
pub(super) const CORE_SCALE_IO_VOLUME_SOURCE: &[Field] = &[
    (1, "gateway", Ty::Str, One),
    (2, "system", Ty::Str, One),
    (3, "secretRef", Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE), Ptr),
    (4, "sslEnabled", Ty::Bool, One),
    (5, "protectionDomain", Ty::Str, One),
    (6, "storagePool", Ty::Str, One),
    (7, "storageMode", Ty::Str, One),
    (8, "volumeName", Ty::Str, One),
    (9, "fsType", Ty::Str, One),
    (10, "readOnly", Ty::Bool, One),
];
pub(super) const CORE_SCOPE_SELECTOR: &[Field] = &[(
    1,
    "matchExpressions",
    Ty::Msg(CORE_SCOPED_RESOURCE_SELECTOR_REQUIREMENT),
    Many,
)];
pub(super) const CORE_SCOPED_RESOURCE_SELECTOR_REQUIREMENT: &[Field] = &[
    (1, "scopeName", Ty::Str, One),
    (2, "operator", Ty::Str, One),
    (3, "values", Ty::Str, Many),
];
pub(super) const CORE_SECCOMP_PROFILE: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "localhostProfile", Ty::Str, Ptr),
];
pub(super) const CORE_SECRET: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (5, "immutable", Ty::Bool, Ptr),
    (2, "data", Ty::Bytes, Map),
    (4, "stringData", Ty::Str, Map),
    (3, "type", Ty::Str, One),
];
pub(super) const CORE_SECRET_ENV_SOURCE: &[Field] = &[
    (
        1,
        "localObjectReference",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        One,
    ),
    (2, "optional", Ty::Bool, Ptr),
];
pub(super) const CORE_SECRET_KEY_SELECTOR: &[Field] = &[
    (
        1,
        "localObjectReference",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        One,
    ),
    (2, "key", Ty::Str, One),
    (3, "optional", Ty::Bool, Ptr),
];
pub(super) const CORE_SECRET_PROJECTION: &[Field] = &[
    (
        1,
        "localObjectReference",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        One,
    ),
    (2, "items", Ty::Msg(CORE_KEY_TO_PATH), Many),
    (4, "optional", Ty::Bool, Ptr),
];
pub(super) const CORE_SECRET_VOLUME_SOURCE: &[Field] = &[
    (1, "secretName", Ty::Str, One),
    (2, "items", Ty::Msg(CORE_KEY_TO_PATH), Many),
    (3, "defaultMode", Ty::Int, Ptr),
    (4, "optional", Ty::Bool, Ptr),
    (5, "defaultUser", Ty::Int, Ptr),
];
pub(super) const CORE_SECURITY_CONTEXT: &[Field] = &[
    (1, "capabilities", Ty::Msg(CORE_CAPABILITIES), Ptr),
    (2, "privileged", Ty::Bool, Ptr),
    (3, "seLinuxOptions", Ty::Msg(CORE_SE_LINUX_OPTIONS), Ptr),
    (
        10,
        "windowsOptions",
        Ty::Msg(CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS),
        Ptr,
    ),
    (4, "runAsUser", Ty::Int, Ptr),
    (8, "runAsGroup", Ty::Int, Ptr),
    (5, "runAsNonRoot", Ty::Bool, Ptr),
    (6, "readOnlyRootFilesystem", Ty::Bool, Ptr),
    (7, "allowPrivilegeEscalation", Ty::Bool, Ptr),
    (9, "procMount", Ty::Str, Ptr),
    (11, "seccompProfile", Ty::Msg(CORE_SECCOMP_PROFILE), Ptr),
    (12, "appArmorProfile", Ty::Msg(CORE_APP_ARMOR_PROFILE), Ptr),
];
pub(super) const CORE_SERVICE: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(CORE_SERVICE_SPEC), One),
    (3, "status", Ty::Msg(CORE_SERVICE_STATUS), One),
];
pub(super) const CORE_SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "secrets", Ty::Msg(CORE_OBJECT_REFERENCE), Many),
    (
        3,
        "imagePullSecrets",
        Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE),
        Many,
    ),
    (4, "automountServiceAccountToken", Ty::Bool, Ptr),
];
pub(super) const CORE_SERVICE_ACCOUNT_TOKEN_PROJECTION: &[Field] = &[
    (1, "audience", Ty::Str, One),
    (2, "expirationSeconds", Ty::Int, Ptr),
    (3, "path", Ty::Str, One),
    (4, "user", Ty::Int, Ptr),
];
pub(super) const CORE_SERVICE_PORT: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "protocol", Ty::Str, One),
    (6, "appProtocol", Ty::Str, Ptr),
    (3, "port", Ty::Int, One),
    (4, "targetPort", Ty::IntOrStr, One),
    (5, "nodePort", Ty::Int, One),
];
pub(super) const CORE_SERVICE_SPEC: &[Field] = &[
    (1, "ports", Ty::Msg(CORE_SERVICE_PORT), Many),
    (2, "selector", Ty::Str, Map),
    (3, "clusterIP", Ty::Str, One),
    (18, "clusterIPs", Ty::Str, Many),
    (4, "type", Ty::Str, One),
    (5, "externalIPs", Ty::Str, Many),
    (7, "sessionAffinity", Ty::Str, One),
    (8, "loadBalancerIP", Ty::Str, One),
    (9, "loadBalancerSourceRanges", Ty::Str, Many),
    (10, "externalName", Ty::Str, One),
    (11, "externalTrafficPolicy", Ty::Str, One),
    (12, "healthCheckNodePort", Ty::Int, One),
    (13, "publishNotReadyAddresses", Ty::Bool, One),
    (
        14,
        "sessionAffinityConfig",
        Ty::Msg(CORE_SESSION_AFFINITY_CONFIG),
        Ptr,
    ),
    (19, "ipFamilies", Ty::Str, Many),
    (17, "ipFamilyPolicy", Ty::Str, Ptr),
    (20, "allocateLoadBalancerNodePorts", Ty::Bool, Ptr),
    (21, "loadBalancerClass", Ty::Str, Ptr),
    (22, "internalTrafficPolicy", Ty::Str, Ptr),
    (23, "trafficDistribution", Ty::Str, Ptr),
];
pub(super) const CORE_SERVICE_STATUS: &[Field] = &[
    (1, "loadBalancer", Ty::Msg(CORE_LOAD_BALANCER_STATUS), One),
    (2, "conditions", Ty::Msg(META_CONDITION), Many),
];
pub(super) const CORE_SESSION_AFFINITY_CONFIG: &[Field] =
    &[(1, "clientIP", Ty::Msg(CORE_CLIENT_IP_CONFIG), Ptr)];
pub(super) const CORE_SLEEP_ACTION: &[Field] = &[(1, "seconds", Ty::Int, One)];
pub(super) const CORE_STORAGE_OS_VOLUME_SOURCE: &[Field] = &[
    (1, "volumeName", Ty::Str, One),
    (2, "volumeNamespace", Ty::Str, One),
    (3, "fsType", Ty::Str, One),
    (4, "readOnly", Ty::Bool, One),
    (5, "secretRef", Ty::Msg(CORE_LOCAL_OBJECT_REFERENCE), Ptr),
];
pub(super) const CORE_SYSCTL: &[Field] = &[(1, "name", Ty::Str, One), (2, "value", Ty::Str, One)];
pub(super) const CORE_TCP_SOCKET_ACTION: &[Field] =
    &[(1, "port", Ty::IntOrStr, One), (2, "host", Ty::Str, One)];
pub(super) const CORE_TAINT: &[Field] = &[
    (1, "key", Ty::Str, One),
    (2, "value", Ty::Str, One),
    (3, "effect", Ty::Str, One),
    (4, "timeAdded", Ty::Time, Ptr),
];
pub(super) const CORE_TOLERATION: &[Field] = &[
    (1, "key", Ty::Str, One),
    (2, "operator", Ty::Str, One),
    (3, "value", Ty::Str, One),
    (4, "effect", Ty::Str, One),
    (5, "tolerationSeconds", Ty::Int, Ptr),
];
pub(super) const CORE_TOPOLOGY_SPREAD_CONSTRAINT: &[Field] = &[
    (1, "maxSkew", Ty::Int, One),
    (2, "topologyKey", Ty::Str, One),
    (3, "whenUnsatisfiable", Ty::Str, One),
    (4, "labelSelector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (5, "minDomains", Ty::Int, Ptr),
    (6, "nodeAffinityPolicy", Ty::Str, Ptr),
    (7, "nodeTaintsPolicy", Ty::Str, Ptr),
    (8, "matchLabelKeys", Ty::Str, Many),
];
pub(super) const CORE_TYPED_LOCAL_OBJECT_REFERENCE: &[Field] = &[
    (1, "apiGroup", Ty::Str, Ptr),
    (2, "kind", Ty::Str, One),
    (3, "name", Ty::Str, One),
];
pub(super) const CORE_TYPED_OBJECT_REFERENCE: &[Field] = &[
    (1, "apiGroup", Ty::Str, Ptr),
    (2, "kind", Ty::Str, One),
    (3, "name", Ty::Str, One),
    (4, "namespace", Ty::Str, Ptr),
];
pub(super) const CORE_VOLUME: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "volumeSource", Ty::Msg(CORE_VOLUME_SOURCE), Inline),
];
pub(super) const CORE_VOLUME_DEVICE: &[Field] =
    &[(1, "name", Ty::Str, One), (2, "devicePath", Ty::Str, One)];
pub(super) const CORE_VOLUME_HEALTH_CONDITION: &[Field] = &[
    (1, "status", Ty::Str, One),
    (2, "reason", Ty::Str, One),
    (3, "message", Ty::Str, One),
];
pub(super) const CORE_VOLUME_HEALTH_STATUS: &[Field] = &[
    (
        1,
        "healthConditions",
        Ty::Msg(CORE_VOLUME_HEALTH_CONDITION),
        Many,
    ),
    (2, "lastTransitionTime", Ty::Time, One),
];
pub(super) const CORE_VOLUME_MOUNT: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "readOnly", Ty::Bool, One),
    (7, "recursiveReadOnly", Ty::Str, Ptr),
    (3, "mountPath", Ty::Str, One),
    (4, "subPath", Ty::Str, One),
    (5, "mountPropagation", Ty::Str, Ptr),
    (6, "subPathExpr", Ty::Str, One),
    (8, "bindMountOptions", Ty::Str, Many),
];
pub(super) const CORE_VOLUME_MOUNT_STATUS: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "mountPath", Ty::Str, One),
    (3, "readOnly", Ty::Bool, One),
    (4, "recursiveReadOnly", Ty::Str, Ptr),
    (5, "volumeStatus", Ty::Msg(CORE_VOLUME_STATUS), Ptr),
];
pub(super) const CORE_VOLUME_PROJECTION: &[Field] = &[
    (1, "secret", Ty::Msg(CORE_SECRET_PROJECTION), Ptr),
    (2, "downwardAPI", Ty::Msg(CORE_DOWNWARD_API_PROJECTION), Ptr),
    (3, "configMap", Ty::Msg(CORE_CONFIG_MAP_PROJECTION), Ptr),
    (
        4,
        "serviceAccountToken",
        Ty::Msg(CORE_SERVICE_ACCOUNT_TOKEN_PROJECTION),
        Ptr,
    ),
    (
        5,
        "clusterTrustBundle",
        Ty::Msg(CORE_CLUSTER_TRUST_BUNDLE_PROJECTION),
        Ptr,
    ),
    (
        6,
        "podCertificate",
        Ty::Msg(CORE_POD_CERTIFICATE_PROJECTION),
        Ptr,
    ),
];
pub(super) const CORE_VOLUME_RESOURCE_REQUIREMENTS: &[Field] = &[
    (1, "limits", Ty::Quantity, Map),
    (2, "requests", Ty::Quantity, Map),
];
pub(super) const CORE_VOLUME_SOURCE: &[Field] = &[
    (1, "hostPath", Ty::Msg(CORE_HOST_PATH_VOLUME_SOURCE), Ptr),
    (2, "emptyDir", Ty::Msg(CORE_EMPTY_DIR_VOLUME_SOURCE), Ptr),
    (
        3,
        "gcePersistentDisk",
        Ty::Msg(CORE_GCE_PERSISTENT_DISK_VOLUME_SOURCE),
        Ptr,
    ),
    (
        4,
        "awsElasticBlockStore",
        Ty::Msg(CORE_AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE),
        Ptr,
    ),
    (5, "gitRepo", Ty::Msg(CORE_GIT_REPO_VOLUME_SOURCE), Ptr),
    (6, "secret", Ty::Msg(CORE_SECRET_VOLUME_SOURCE), Ptr),
    (7, "nfs", Ty::Msg(CORE_NFS_VOLUME_SOURCE), Ptr),
    (8, "iscsi", Ty::Msg(CORE_ISCSI_VOLUME_SOURCE), Ptr),
    (9, "glusterfs", Ty::Msg(CORE_GLUSTERFS_VOLUME_SOURCE), Ptr),
    (
        10,
        "persistentVolumeClaim",
        Ty::Msg(CORE_PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE),
        Ptr,
    ),
    (11, "rbd", Ty::Msg(CORE_RBD_VOLUME_SOURCE), Ptr),
    (12, "flexVolume", Ty::Msg(CORE_FLEX_VOLUME_SOURCE), Ptr),
    (13, "cinder", Ty::Msg(CORE_CINDER_VOLUME_SOURCE), Ptr),
    (14, "cephfs", Ty::Msg(CORE_CEPH_FS_VOLUME_SOURCE), Ptr),
    (15, "flocker", Ty::Msg(CORE_FLOCKER_VOLUME_SOURCE), Ptr),
    (
        16,
        "downwardAPI",
        Ty::Msg(CORE_DOWNWARD_API_VOLUME_SOURCE),
        Ptr,
    ),
    (17, "fc", Ty::Msg(CORE_FC_VOLUME_SOURCE), Ptr),
    (18, "azureFile", Ty::Msg(CORE_AZURE_FILE_VOLUME_SOURCE), Ptr),
    (19, "configMap", Ty::Msg(CORE_CONFIG_MAP_VOLUME_SOURCE), Ptr),
    (
        20,
        "vsphereVolume",
        Ty::Msg(CORE_VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE),
        Ptr,
    ),
    (21, "quobyte", Ty::Msg(CORE_QUOBYTE_VOLUME_SOURCE), Ptr),
    (22, "azureDisk", Ty::Msg(CORE_AZURE_DISK_VOLUME_SOURCE), Ptr),
    (
        23,
        "photonPersistentDisk",
        Ty::Msg(CORE_PHOTON_PERSISTENT_DISK_VOLUME_SOURCE),
        Ptr,
    ),
    (26, "projected", Ty::Msg(CORE_PROJECTED_VOLUME_SOURCE), Ptr),
    (
        24,
        "portworxVolume",
        Ty::Msg(CORE_PORTWORX_VOLUME_SOURCE),
        Ptr,
    ),
    (25, "scaleIO", Ty::Msg(CORE_SCALE_IO_VOLUME_SOURCE), Ptr),
    (27, "storageos", Ty::Msg(CORE_STORAGE_OS_VOLUME_SOURCE), Ptr),
    (28, "csi", Ty::Msg(CORE_CSI_VOLUME_SOURCE), Ptr),
    (29, "ephemeral", Ty::Msg(CORE_EPHEMERAL_VOLUME_SOURCE), Ptr),
    (30, "image", Ty::Msg(CORE_IMAGE_VOLUME_SOURCE), Ptr),
];
pub(super) const CORE_VOLUME_STATUS: &[Field] =
    &[(1, "image", Ty::Msg(CORE_IMAGE_VOLUME_STATUS), Ptr)];
pub(super) const CORE_VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: &[Field] = &[
    (1, "volumePath", Ty::Str, One),
    (2, "fsType", Ty::Str, One),
    (3, "storagePolicyName", Ty::Str, One),
    (4, "storagePolicyID", Ty::Str, One),
];
pub(super) const CORE_WEIGHTED_POD_AFFINITY_TERM: &[Field] = &[
    (1, "weight", Ty::Int, One),
    (2, "podAffinityTerm", Ty::Msg(CORE_POD_AFFINITY_TERM), One),
];
pub(super) const CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS: &[Field] = &[
    (1, "gmsaCredentialSpecName", Ty::Str, Ptr),
    (2, "gmsaCredentialSpec", Ty::Str, Ptr),
    (3, "runAsUserName", Ty::Str, Ptr),
    (4, "hostProcess", Ty::Bool, Ptr),
];
pub(super) const META_CONDITION: &[Field] = &[
    (1, "type", Ty::Str, One),
    (2, "status", Ty::Str, One),
    (3, "observedGeneration", Ty::Int, One),
    (4, "lastTransitionTime", Ty::Time, One),
    (5, "reason", Ty::Str, One),
    (6, "message", Ty::Str, One),
];
pub(super) const META_DELETE_OPTIONS: &[Field] = &[
    (1, "gracePeriodSeconds", Ty::Int, Ptr),
    (2, "preconditions", Ty::Msg(META_PRECONDITIONS), Ptr),
    (3, "orphanDependents", Ty::Bool, Ptr),
    (4, "propagationPolicy", Ty::Str, Ptr),
    (5, "dryRun", Ty::Str, Many),
    (
        6,
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        Ty::Bool,
        Ptr,
    ),
];
pub(super) const META_FIELD_SELECTOR_REQUIREMENT: &[Field] = &[
    (1, "key", Ty::Str, One),
    (2, "operator", Ty::Str, One),
    (3, "values", Ty::Str, Many),
];
pub(super) const META_LABEL_SELECTOR: &[Field] = &[
    (1, "matchLabels", Ty::Str, Map),
    (
        2,
        "matchExpressions",
        Ty::Msg(META_LABEL_SELECTOR_REQUIREMENT),
        Many,
    ),
];
pub(super) const META_LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    (1, "key", Ty::Str, One),
    (2, "operator", Ty::Str, One),
    (3, "values", Ty::Str, Many),
];
pub(super) const META_MANAGED_FIELDS_ENTRY: &[Field] = &[
    (1, "manager", Ty::Str, One),
    (2, "operation", Ty::Str, One),
    (3, "apiVersion", Ty::Str, One),
    (4, "time", Ty::Time, Ptr),
    (6, "fieldsType", Ty::Str, One),
    (7, "fieldsV1", Ty::Raw, Ptr),
    (8, "subresource", Ty::Str, One),
];
pub(super) const META_OBJECT_META: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "generateName", Ty::Str, One),
    (3, "namespace", Ty::Str, One),
    (4, "selfLink", Ty::Str, One),
    (5, "uid", Ty::Str, One),
    (6, "resourceVersion", Ty::Str, One),
    (7, "generation", Ty::Int, One),
    (8, "creationTimestamp", Ty::Time, One),
    (9, "deletionTimestamp", Ty::Time, Ptr),
    (10, "deletionGracePeriodSeconds", Ty::Int, Ptr),
    (11, "labels", Ty::Str, Map),
    (12, "annotations", Ty::Str, Map),
    (13, "ownerReferences", Ty::Msg(META_OWNER_REFERENCE), Many),
    (14, "finalizers", Ty::Str, Many),
    (
        17,
        "managedFields",
        Ty::Msg(META_MANAGED_FIELDS_ENTRY),
        Many,
    ),
];
pub(super) const META_OWNER_REFERENCE: &[Field] = &[
    (5, "apiVersion", Ty::Str, One),
    (1, "kind", Ty::Str, One),
    (3, "name", Ty::Str, One),
    (4, "uid", Ty::Str, One),
    (6, "controller", Ty::Bool, Ptr),
    (7, "blockOwnerDeletion", Ty::Bool, Ptr),
];
pub(super) const META_PRECONDITIONS: &[Field] = &[
    (1, "uid", Ty::Str, Ptr),
    (2, "resourceVersion", Ty::Str, Ptr),
];
pub(super) const NET_HTTP_INGRESS_PATH: &[Field] = &[
    (1, "path", Ty::Str, One),
    (3, "pathType", Ty::Str, Ptr),
    (2, "backend", Ty::Msg(NET_INGRESS_BACKEND), One),
];
pub(super) const NET_HTTP_INGRESS_RULE_VALUE: &[Field] =
    &[(1, "paths", Ty::Msg(NET_HTTP_INGRESS_PATH), Many)];
pub(super) const NET_INGRESS: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(NET_INGRESS_SPEC), One),
    (3, "status", Ty::Msg(NET_INGRESS_STATUS), One),
];
pub(super) const NET_INGRESS_BACKEND: &[Field] = &[
    (4, "service", Ty::Msg(NET_INGRESS_SERVICE_BACKEND), Ptr),
    (
        3,
        "resource",
        Ty::Msg(CORE_TYPED_LOCAL_OBJECT_REFERENCE),
        Ptr,
    ),
];
pub(super) const NET_INGRESS_LOAD_BALANCER_INGRESS: &[Field] = &[
    (1, "ip", Ty::Str, One),
    (2, "hostname", Ty::Str, One),
    (4, "ports", Ty::Msg(NET_INGRESS_PORT_STATUS), Many),
];
pub(super) const NET_INGRESS_LOAD_BALANCER_STATUS: &[Field] = &[(
    1,
    "ingress",
    Ty::Msg(NET_INGRESS_LOAD_BALANCER_INGRESS),
    Many,
)];
pub(super) const NET_INGRESS_PORT_STATUS: &[Field] = &[
    (1, "port", Ty::Int, One),
    (2, "protocol", Ty::Str, One),
    (3, "error", Ty::Str, Ptr),
];
pub(super) const NET_INGRESS_RULE: &[Field] = &[
    (1, "host", Ty::Str, One),
    (
        2,
        "ingressRuleValue",
        Ty::Msg(NET_INGRESS_RULE_VALUE),
        Inline,
    ),
];
pub(super) const NET_INGRESS_RULE_VALUE: &[Field] =
    &[(1, "http", Ty::Msg(NET_HTTP_INGRESS_RULE_VALUE), Ptr)];
pub(super) const NET_INGRESS_SERVICE_BACKEND: &[Field] = &[
    (1, "name", Ty::Str, One),
    (2, "port", Ty::Msg(NET_SERVICE_BACKEND_PORT), One),
];
pub(super) const NET_INGRESS_SPEC: &[Field] = &[
    (4, "ingressClassName", Ty::Str, Ptr),
    (1, "defaultBackend", Ty::Msg(NET_INGRESS_BACKEND), Ptr),
    (2, "tls", Ty::Msg(NET_INGRESS_TLS), Many),
    (3, "rules", Ty::Msg(NET_INGRESS_RULE), Many),
];
pub(super) const NET_INGRESS_STATUS: &[Field] = &[(
    1,
    "loadBalancer",
    Ty::Msg(NET_INGRESS_LOAD_BALANCER_STATUS),
    One,
)];
pub(super) const NET_INGRESS_TLS: &[Field] =
    &[(1, "hosts", Ty::Str, Many), (2, "secretName", Ty::Str, One)];
pub(super) const NET_SERVICE_BACKEND_PORT: &[Field] =
    &[(1, "name", Ty::Str, One), (2, "number", Ty::Int, One)];
pub(super) const POLICY_EVICTION: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "deleteOptions", Ty::Msg(META_DELETE_OPTIONS), Ptr),
];
pub(super) const POLICY_POD_DISRUPTION_BUDGET: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "spec", Ty::Msg(POLICY_POD_DISRUPTION_BUDGET_SPEC), One),
    (
        3,
        "status",
        Ty::Msg(POLICY_POD_DISRUPTION_BUDGET_STATUS),
        One,
    ),
];
pub(super) const POLICY_POD_DISRUPTION_BUDGET_SPEC: &[Field] = &[
    (1, "minAvailable", Ty::IntOrStr, Ptr),
    (2, "selector", Ty::Msg(META_LABEL_SELECTOR), Ptr),
    (3, "maxUnavailable", Ty::IntOrStr, Ptr),
    (4, "unhealthyPodEvictionPolicy", Ty::Str, Ptr),
];
pub(super) const POLICY_POD_DISRUPTION_BUDGET_STATUS: &[Field] = &[
    (1, "observedGeneration", Ty::Int, One),
    (2, "disruptedPods", Ty::Time, Map),
    (3, "disruptionsAllowed", Ty::Int, One),
    (4, "currentHealthy", Ty::Int, One),
    (5, "desiredHealthy", Ty::Int, One),
    (6, "expectedPods", Ty::Int, One),
    (7, "conditions", Ty::Msg(META_CONDITION), Many),
];
pub(super) const RBAC_AGGREGATION_RULE: &[Field] = &[(
    1,
    "clusterRoleSelectors",
    Ty::Msg(META_LABEL_SELECTOR),
    Many,
)];
pub(super) const RBAC_CLUSTER_ROLE: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "rules", Ty::Msg(RBAC_POLICY_RULE), Many),
    (3, "aggregationRule", Ty::Msg(RBAC_AGGREGATION_RULE), Ptr),
];
pub(super) const RBAC_CLUSTER_ROLE_BINDING: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "subjects", Ty::Msg(RBAC_SUBJECT), Many),
    (3, "roleRef", Ty::Msg(RBAC_ROLE_REF), One),
];
pub(super) const RBAC_POLICY_RULE: &[Field] = &[
    (1, "verbs", Ty::Str, Many),
    (2, "apiGroups", Ty::Str, Many),
    (3, "resources", Ty::Str, Many),
    (4, "resourceNames", Ty::Str, Many),
    (5, "nonResourceURLs", Ty::Str, Many),
];
pub(super) const RBAC_ROLE: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "rules", Ty::Msg(RBAC_POLICY_RULE), Many),
];
pub(super) const RBAC_ROLE_BINDING: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "subjects", Ty::Msg(RBAC_SUBJECT), Many),
    (3, "roleRef", Ty::Msg(RBAC_ROLE_REF), One),
];
pub(super) const RBAC_ROLE_REF: &[Field] = &[
    (1, "apiGroup", Ty::Str, One),
    (2, "kind", Ty::Str, One),
    (3, "name", Ty::Str, One),
];
pub(super) const RBAC_SUBJECT: &[Field] = &[
    (1, "kind", Ty::Str, One),
    (2, "apiGroup", Ty::Str, One),
    (3, "name", Ty::Str, One),
    (4, "namespace", Ty::Str, One),
];
pub(super) const SCHED_PRIORITY_CLASS: &[Field] = &[
    (1, "metadata", Ty::Msg(META_OBJECT_META), One),
    (2, "value", Ty::Int, One),
    (3, "globalDefault", Ty::Bool, One),
    (4, "description", Ty::Str, One),
    (5, "preemptionPolicy", Ty::Str, Ptr),
];
