//! The printer columns of Cluster API's CRDs.
//!
//! Responsibility: the `additionalPrinterColumns` CAPI v1.14's CRDs give MachineDeployments,
//! MachineSets, Machines and MachinePools in `v1beta1` and in `v1beta2` (names, types, JSONPaths, priorities
//! and descriptions as in its generated CRDs).
//! Inputs: a kind and a version. Outputs: [`Column`]s. Pure data.

use crate::convert::capi::{CapiKind, CapiVersion};

/// A printer column: name, type, JSONPath, priority, description.
pub type Column = (&'static str, &'static str, &'static str, i64, &'static str);

const MD_V1BETA1: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "Desired",
        "integer",
        ".spec.replicas",
        10,
        "Total number of machines desired by this MachineDeployment",
    ),
    (
        "Replicas",
        "integer",
        ".status.replicas",
        0,
        "Total number of non-terminated machines targeted by this MachineDeployment",
    ),
    (
        "Ready",
        "integer",
        ".status.readyReplicas",
        0,
        "Total number of ready machines targeted by this MachineDeployment",
    ),
    (
        "Updated",
        "integer",
        ".status.updatedReplicas",
        0,
        "Total number of non-terminated machines targeted by this deployment that have the desired template spec",
    ),
    (
        "Unavailable",
        "integer",
        ".status.unavailableReplicas",
        0,
        "Total number of unavailable machines targeted by this MachineDeployment",
    ),
    (
        "Phase",
        "string",
        ".status.phase",
        0,
        "MachineDeployment status such as ScalingUp/ScalingDown/Running/Failed/Unknown",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of MachineDeployment",
    ),
    (
        "Version",
        "string",
        ".spec.template.spec.version",
        0,
        "Kubernetes version associated with this MachineDeployment",
    ),
];

const MD_V1BETA2: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "Available",
        "string",
        ".status.conditions[?(@.type==\"Available\")].status",
        0,
        "Cluster pass all availability checks",
    ),
    (
        "Desired",
        "integer",
        ".spec.replicas",
        0,
        "The desired number of machines",
    ),
    (
        "Current",
        "integer",
        ".status.replicas",
        0,
        "The number of machines",
    ),
    (
        "Ready",
        "integer",
        ".status.readyReplicas",
        0,
        "The number of machines with Ready condition true",
    ),
    (
        "Available",
        "integer",
        ".status.availableReplicas",
        0,
        "The number of machines with Available condition true",
    ),
    (
        "Up-to-date",
        "integer",
        ".status.upToDateReplicas",
        0,
        "The number of machines with UpToDate condition true",
    ),
    (
        "Paused",
        "string",
        ".status.conditions[?(@.type==\"Paused\")].status",
        10,
        "Reconciliation paused",
    ),
    (
        "Phase",
        "string",
        ".status.phase",
        0,
        "MachineDeployment status such as ScalingUp/ScalingDown/Running/Failed/Unknown",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of MachineDeployment",
    ),
    (
        "Version",
        "string",
        ".spec.template.spec.version",
        0,
        "Kubernetes version associated with this MachineDeployment",
    ),
];

const MS_V1BETA1: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "Desired",
        "integer",
        ".spec.replicas",
        10,
        "Total number of machines desired by this machineset",
    ),
    (
        "Replicas",
        "integer",
        ".status.replicas",
        0,
        "Total number of non-terminated machines targeted by this machineset",
    ),
    (
        "Ready",
        "integer",
        ".status.readyReplicas",
        0,
        "Total number of ready machines targeted by this machineset.",
    ),
    (
        "Available",
        "integer",
        ".status.availableReplicas",
        0,
        "Total number of available machines (ready for at least minReadySeconds)",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of MachineSet",
    ),
    (
        "Version",
        "string",
        ".spec.template.spec.version",
        0,
        "Kubernetes version associated with this MachineSet",
    ),
];

const MS_V1BETA2: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "Desired",
        "integer",
        ".spec.replicas",
        0,
        "The desired number of machines",
    ),
    (
        "Current",
        "integer",
        ".status.replicas",
        0,
        "The number of machines",
    ),
    (
        "Ready",
        "integer",
        ".status.readyReplicas",
        0,
        "The number of machines with Ready condition true",
    ),
    (
        "Available",
        "integer",
        ".status.availableReplicas",
        0,
        "The number of machines with Available condition true",
    ),
    (
        "Up-to-date",
        "integer",
        ".status.upToDateReplicas",
        0,
        "The number of machines with UpToDate condition true",
    ),
    (
        "Paused",
        "string",
        ".status.conditions[?(@.type==\"Paused\")].status",
        10,
        "Reconciliation paused",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of MachineSet",
    ),
    (
        "Version",
        "string",
        ".spec.template.spec.version",
        0,
        "Kubernetes version associated with this MachineSet",
    ),
];

const MACHINE_V1BETA1: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "NodeName",
        "string",
        ".status.nodeRef.name",
        0,
        "Node name associated with this machine",
    ),
    ("ProviderID", "string", ".spec.providerID", 0, "Provider ID"),
    (
        "Phase",
        "string",
        ".status.phase",
        0,
        "Machine status such as Terminating/Pending/Running/Failed etc",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of Machine",
    ),
    (
        "Version",
        "string",
        ".spec.version",
        0,
        "Kubernetes version associated with this Machine",
    ),
];

const MACHINE_V1BETA2: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "Node Name",
        "string",
        ".status.nodeRef.name",
        0,
        "Node name associated with this machine",
    ),
    (
        "Provider ID",
        "string",
        ".spec.providerID",
        10,
        "Provider ID",
    ),
    (
        "Failure domain",
        "string",
        ".status.failureDomain",
        0,
        "The failure domain where the Machine has been scheduled",
    ),
    (
        "Ready",
        "string",
        ".status.conditions[?(@.type==\"Ready\")].status",
        0,
        "Machine pass all readiness checks",
    ),
    (
        "Available",
        "string",
        ".status.conditions[?(@.type==\"Available\")].status",
        0,
        "Machine is Ready for at least MinReadySeconds",
    ),
    (
        "Up-to-date",
        "string",
        ".status.conditions[?(@.type==\"UpToDate\")].status",
        0,
        " Machine spec matches the spec of the Machine's owner resource, e.g. MachineDeployment",
    ),
    (
        "Internal-IP",
        "string",
        ".status.addresses[?(@.type==\"InternalIP\")].address",
        10,
        "Internal IP of the machine",
    ),
    (
        "External-IP",
        "string",
        ".status.addresses[?(@.type==\"ExternalIP\")].address",
        10,
        "External IP of the machine",
    ),
    (
        "OS-Image",
        "string",
        ".status.nodeInfo.osImage",
        10,
        "OS Image reported by the node",
    ),
    (
        "Paused",
        "string",
        ".status.conditions[?(@.type==\"Paused\")].status",
        10,
        "Reconciliation paused",
    ),
    (
        "Phase",
        "string",
        ".status.phase",
        0,
        "Machine status such as Terminating/Pending/Running/Failed etc",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of Machine",
    ),
    (
        "Version",
        "string",
        ".spec.version",
        0,
        "Kubernetes version associated with this Machine",
    ),
];

const MP_V1BETA1: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "Desired",
        "integer",
        ".spec.replicas",
        10,
        "Total number of machines desired by this MachinePool",
    ),
    (
        "Replicas",
        "string",
        ".status.replicas",
        0,
        "MachinePool replicas count",
    ),
    (
        "Phase",
        "string",
        ".status.phase",
        0,
        "MachinePool status such as Terminating/Pending/Provisioning/Running/Failed etc",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of MachinePool",
    ),
    (
        "Version",
        "string",
        ".spec.template.spec.version",
        0,
        "Kubernetes version associated with this MachinePool",
    ),
];

const MP_V1BETA2: &[Column] = &[
    ("Cluster", "string", ".spec.clusterName", 0, "Cluster"),
    (
        "Desired",
        "integer",
        ".spec.replicas",
        0,
        "The desired number of machines",
    ),
    (
        "Current",
        "integer",
        ".status.replicas",
        0,
        "The number of machines",
    ),
    (
        "Ready",
        "integer",
        ".status.readyReplicas",
        0,
        "The number of machines with Ready condition true",
    ),
    (
        "Available",
        "integer",
        ".status.availableReplicas",
        0,
        "The number of machines with Available condition true",
    ),
    (
        "Up-to-date",
        "integer",
        ".status.upToDateReplicas",
        0,
        "The number of machines with UpToDate condition true",
    ),
    (
        "Paused",
        "string",
        ".status.conditions[?(@.type==\"Paused\")].status",
        10,
        "Reconciliation paused",
    ),
    (
        "Phase",
        "string",
        ".status.phase",
        0,
        "MachinePool status such as Terminating/Pending/Provisioning/Running/Failed etc",
    ),
    (
        "Age",
        "date",
        ".metadata.creationTimestamp",
        0,
        "Time duration since creation of MachinePool",
    ),
    (
        "Version",
        "string",
        ".spec.template.spec.version",
        0,
        "Kubernetes version associated with this MachinePool",
    ),
];

/// CAPI v1.14's printer columns of a kind in a version.
pub fn columns(kind: CapiKind, version: CapiVersion) -> &'static [Column] {
    match (kind, version) {
        (CapiKind::MachineDeployment, CapiVersion::V1beta1) => MD_V1BETA1,
        (CapiKind::MachineDeployment, CapiVersion::V1beta2) => MD_V1BETA2,
        (CapiKind::MachineSet, CapiVersion::V1beta1) => MS_V1BETA1,
        (CapiKind::MachineSet, CapiVersion::V1beta2) => MS_V1BETA2,
        (CapiKind::Machine, CapiVersion::V1beta1) => MACHINE_V1BETA1,
        (CapiKind::Machine, CapiVersion::V1beta2) => MACHINE_V1BETA2,
        (CapiKind::MachinePool, CapiVersion::V1beta1) => MP_V1BETA1,
        (CapiKind::MachinePool, CapiVersion::V1beta2) => MP_V1BETA2,
    }
}
