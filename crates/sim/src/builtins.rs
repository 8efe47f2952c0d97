//! The built-in resource types.
//!
//! Responsibility: the table of Kubernetes' own resources the simulator serves, with the names,
//! scope, subresources and field labels kube-apiserver v1.33 gives them.
//! Inputs: none. Outputs: [`all`], a list of [`ResourceDef`]s.

use crate::error::GroupResource;
use crate::registry::{Conversion, ResourceDef, ScalePaths, Special};

/// Builder defaults for one built-in resource.
struct B {
    def: ResourceDef,
}

impl B {
    fn new(group: &str, version: &str, plural: &str, kind: &str, namespaced: bool) -> Self {
        Self {
            def: ResourceDef {
                group: group.to_owned(),
                versions: vec![version.to_owned()],
                plural: plural.to_owned(),
                singular: kind.to_lowercase(),
                kind: kind.to_owned(),
                namespaced,
                short_names: Vec::new(),
                categories: Vec::new(),
                status: false,
                scale: None,
                generation: false,
                create_on_update: false,
                reset_status_on_create: false,
                custom: false,
                field_labels: Vec::new(),
                columns: Vec::new(),
                version_columns: std::collections::BTreeMap::new(),
                schemas: std::collections::BTreeMap::new(),
                store: GroupResource::new(group, plural),
                conversion: Conversion::None,
                special: Special::None,
            },
        }
    }
    fn short(mut self, names: &[&str]) -> Self {
        self.def.short_names = names.iter().map(|s| (*s).to_owned()).collect();
        self
    }
    fn categories(mut self, c: &[&str]) -> Self {
        self.def.categories = c.iter().map(|s| (*s).to_owned()).collect();
        self
    }
    /// Has a status subresource written by controllers.
    fn status(mut self) -> Self {
        self.def.status = true;
        self.def.reset_status_on_create = true;
        self
    }
    fn generation(mut self) -> Self {
        self.def.generation = true;
        self
    }
    fn scale(mut self) -> Self {
        self.def.scale = Some(ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
            selector_from_spec: true,
        });
        self
    }
    fn fields(mut self, f: &[&str]) -> Self {
        self.def.field_labels = f.iter().map(|s| (*s).to_owned()).collect();
        self
    }
    fn special(mut self, s: Special) -> Self {
        self.def.special = s;
        self
    }
    fn create_on_update(mut self) -> Self {
        self.def.create_on_update = true;
        self
    }
}

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const EVENT_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

/// Every built-in resource type.
pub fn all() -> Vec<ResourceDef> {
    let mut nodes = B::new("", "v1", "nodes", "Node", false)
        .short(&["no"])
        .fields(&["spec.unschedulable"]);
    // Nodes accept their status on create (the kubelet registers with it).
    nodes.def.status = true;
    let mut events_v1 = B::new("events.k8s.io", "v1", "events", "Event", true)
        .short(&["ev"])
        .fields(EVENT_V1_FIELDS)
        .create_on_update();
    events_v1.def.store = GroupResource::new("", "events");
    events_v1.def.conversion = Conversion::EventsV1;
    let mut namespaces = B::new("", "v1", "namespaces", "Namespace", false)
        .short(&["ns"])
        .fields(&["status.phase"])
        .special(Special::Namespace);
    namespaces.def.status = true;
    let mut pods = B::new("", "v1", "pods", "Pod", true)
        .short(&["po"])
        .categories(&["all"])
        .status()
        .special(Special::Pod)
        .fields(&[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ]);
    // Pods keep what the creator set in status apart from the phase the server defaults.
    pods.def.reset_status_on_create = true;
    vec![
        namespaces.def,
        nodes.def,
        pods.def,
        B::new("", "v1", "events", "Event", true)
            .short(&["ev"])
            .fields(EVENT_FIELDS)
            .create_on_update()
            .def,
        events_v1.def,
        B::new("", "v1", "configmaps", "ConfigMap", true)
            .short(&["cm"])
            .def,
        B::new("", "v1", "secrets", "Secret", true)
            .fields(&["type"])
            .def,
        // kube-apiserver bumps a PodTemplate's generation when its template changes.
        B::new("", "v1", "podtemplates", "PodTemplate", true)
            .generation()
            .def,
        B::new("", "v1", "serviceaccounts", "ServiceAccount", true)
            .short(&["sa"])
            .def,
        B::new("coordination.k8s.io", "v1", "leases", "Lease", true)
            .create_on_update()
            .def,
        B::new("apps", "v1", "deployments", "Deployment", true)
            .short(&["deploy"])
            .categories(&["all"])
            .status()
            .generation()
            .scale()
            .def,
        B::new("apps", "v1", "replicasets", "ReplicaSet", true)
            .short(&["rs"])
            .categories(&["all"])
            .status()
            .generation()
            .scale()
            .def,
        B::new("apps", "v1", "statefulsets", "StatefulSet", true)
            .short(&["sts"])
            .categories(&["all"])
            .status()
            .generation()
            .scale()
            .def,
        B::new("apps", "v1", "daemonsets", "DaemonSet", true)
            .short(&["ds"])
            .categories(&["all"])
            .status()
            .generation()
            .def,
        B::new("batch", "v1", "jobs", "Job", true)
            .categories(&["all"])
            .status()
            .generation()
            .def,
        B::new(
            "policy",
            "v1",
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            true,
        )
        .short(&["pdb"])
        .status()
        .generation()
        .def,
        B::new("batch", "v1", "cronjobs", "CronJob", true)
            .short(&["cj"])
            .categories(&["all"])
            .status()
            .generation()
            .def,
        B::new("", "v1", "services", "Service", true)
            .short(&["svc"])
            .categories(&["all"])
            .status()
            .def,
        B::new(
            "",
            "v1",
            "persistentvolumeclaims",
            "PersistentVolumeClaim",
            true,
        )
        .short(&["pvc"])
        .status()
        .def,
        B::new("", "v1", "persistentvolumes", "PersistentVolume", false)
            .short(&["pv"])
            .status()
            .def,
        B::new("", "v1", "resourcequotas", "ResourceQuota", true)
            .short(&["quota"])
            .status()
            .def,
        B::new(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "EndpointSlice",
            true,
        )
        .def,
        B::new("networking.k8s.io", "v1", "ingresses", "Ingress", true)
            .short(&["ing"])
            .status()
            .generation()
            .def,
        B::new(
            "scheduling.k8s.io",
            "v1",
            "priorityclasses",
            "PriorityClass",
            false,
        )
        .short(&["pc"])
        .def,
        B::new(
            "storage.k8s.io",
            "v1",
            "storageclasses",
            "StorageClass",
            false,
        )
        .short(&["sc"])
        .def,
        B::new("rbac.authorization.k8s.io", "v1", "roles", "Role", true).def,
        B::new(
            "rbac.authorization.k8s.io",
            "v1",
            "rolebindings",
            "RoleBinding",
            true,
        )
        .def,
        B::new(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
        )
        .def,
        B::new(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
        )
        .def,
        B::new(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
        )
        .short(&["crd", "crds"])
        .categories(&["api-extensions"])
        .status()
        .generation()
        .special(Special::Crd)
        .def,
        review("selfsubjectaccessreviews", "SelfSubjectAccessReview", false),
        review("selfsubjectrulesreviews", "SelfSubjectRulesReview", false),
        review("subjectaccessreviews", "SubjectAccessReview", false),
        review(
            "localsubjectaccessreviews",
            "LocalSubjectAccessReview",
            true,
        ),
    ]
}

/// An `authorization.k8s.io/v1` access review: create-only, never stored.
fn review(plural: &str, kind: &str, namespaced: bool) -> ResourceDef {
    B::new("authorization.k8s.io", "v1", plural, kind, namespaced)
        .special(Special::AccessReview)
        .def
}

/// The built-in definition of `kind` (tests; the first built-in when unknown).
#[cfg(test)]
pub(crate) fn def(kind: &str) -> ResourceDef {
    all()
        .into_iter()
        .find(|d| d.kind == kind)
        .unwrap_or_else(|| all().remove(0))
}
