//! Cluster API's own conversion of MachineDeployments, MachineSets, Machines and MachinePools between
//! `cluster.x-k8s.io/v1beta1` (the spoke) and `cluster.x-k8s.io/v1beta2` (the hub), as CAPI
//! v1.14's conversion webhook does it — on JSON, so that a field neither version knows stays
//! where it is in both directions.
//!
//! Responsibility: the field mapping of CAPI's conversion functions, read from its v1.14
//! source (`api/core/v1beta1/conversion.go` and the hub/spoke `ConvertTo`/`ConvertFrom`):
//! - MachineDeployment spec: `strategy.type` ↔ `rollout.strategy.type`,
//!   `strategy.rollingUpdate.{maxSurge,maxUnavailable}` ↔ `rollout.strategy.rollingUpdate.…`,
//!   `strategy.rollingUpdate.deletePolicy` ↔ `deletion.order`, `strategy.remediation.maxInFlight`
//!   ↔ `remediation.maxInFlight`, `rolloutAfter` ↔ `rollout.after`, `minReadySeconds` ↔
//!   `template.spec.minReadySeconds`, `machineNamingStrategy` ↔ `machineNaming`;
//!   `progressDeadlineSeconds` and `revisionHistoryLimit` have no v1beta2 field and are dropped,
//!   as CAPI drops them.
//! - MachineSet spec: `deletePolicy` ↔ `deletion.order`, `minReadySeconds` and
//!   `machineNamingStrategy` likewise.
//! - MachinePool spec: `minReadySeconds` likewise (no naming strategy); status as a
//!   MachineSet's (deprecated counters `readyReplicas`, `availableReplicas`,
//!   `unavailableReplicas`) plus a Machine's `bootstrapReady`/`infrastructureReady`.
//! - Machine specs (a Machine's `spec`, a template's `spec.template.spec`): references
//!   (`infrastructureRef`, `bootstrap.configRef`) `{apiVersion, kind, name, namespace, …}` ↔
//!   `{apiGroup, kind, name}` — going back, the version is the caller's choice for the group and
//!   kind (CAPI asks the referenced CRD's contract labels) and the namespace the object's;
//!   `nodeDrainTimeout`/`nodeVolumeDetachTimeout`/`nodeDeletionTimeout` (Go durations) ↔
//!   `deletion.node…TimeoutSeconds` (whole seconds).
//! - Status: v1beta1 `conditions` and replica counters (`readyReplicas`, `availableReplicas`,
//!   `updatedReplicas`, `unavailableReplicas`, `fullyLabeledReplicas`), `failureReason`,
//!   `failureMessage` ↔ v1beta2 `status.deprecated.v1beta1.…`; v1beta1 `status.v1beta2.{conditions,
//!   readyReplicas, availableReplicas, upToDateReplicas}` ↔ v1beta2 `status.…`; Machine
//!   `bootstrapReady`/`infrastructureReady` ↔ `initialization.{bootstrapDataSecretCreated,
//!   infrastructureProvisioned}`, `nodeRef` `{apiVersion, kind, name, uid}` ↔ `{name}` (going
//!   back: `apiVersion: v1`, `kind: Node`), phase `Updating` → `Running`.
//! - Lossless round trips: [`with_conversion_data`] puts the hub (everything but `metadata`) in
//!   the spoke's `cluster.x-k8s.io/conversion-data` annotation, as CAPI's `MarshalData` does;
//!   [`to_v1beta2`] takes it off again and restores from it what v1beta1 cannot hold — a
//!   Machine's `spec.minReadySeconds`, `status.failureDomain` and `Updating` phase (CAPI's
//!   `ConvertTo` restores these the same way).
//!
//! Inputs: an object as JSON in one version; for v1beta2 → v1beta1, the `apiVersion` to give a
//! referenced group and kind. Outputs: the object in the other version. Pure.

use serde_json::{Map, Value, json};

use crate::object;

/// The Cluster API group.
pub const GROUP: &str = "cluster.x-k8s.io";

/// The annotation CAPI keeps the hub in on a spoke object.
pub const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";

/// A version of the Cluster API group that CAPI converts between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CapiVersion {
    /// `v1beta1`: served by CAPI ≤ v1.10 as storage, by v1.11+ as the deprecated spoke.
    V1beta1,
    /// `v1beta2`: the hub and storage version since CAPI v1.11.
    V1beta2,
}

impl CapiVersion {
    /// The version name (`v1beta2`).
    pub fn name(self) -> &'static str {
        match self {
            CapiVersion::V1beta1 => "v1beta1",
            CapiVersion::V1beta2 => "v1beta2",
        }
    }

    /// A version name (`v1beta1`, `v1beta2`), if it is one of these.
    pub fn parse(version: &str) -> Option<Self> {
        match version {
            "v1beta1" => Some(CapiVersion::V1beta1),
            "v1beta2" => Some(CapiVersion::V1beta2),
            _ => None,
        }
    }

    /// The version of an object's `apiVersion` (`cluster.x-k8s.io/v1beta1`), if it is one.
    pub fn of(obj: &Value) -> Option<Self> {
        let api_version = obj.get("apiVersion")?.as_str()?;
        let (group, version) = api_version.split_once('/')?;
        (group == GROUP).then(|| Self::parse(version)).flatten()
    }

    /// `cluster.x-k8s.io/<version>`.
    pub fn api_version(self) -> String {
        format!("{GROUP}/{}", self.name())
    }
}

/// A kind CAPI converts between its versions here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CapiKind {
    /// `MachineDeployment`.
    MachineDeployment,
    /// `MachineSet`.
    MachineSet,
    /// `Machine`.
    Machine,
    /// `MachinePool`.
    MachinePool,
}

impl CapiKind {
    /// Every kind.
    pub const ALL: [CapiKind; 4] = [
        CapiKind::MachineDeployment,
        CapiKind::MachineSet,
        CapiKind::Machine,
        CapiKind::MachinePool,
    ];

    /// The kind of a `kind` name, if it is one of these.
    pub fn from_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.kind() == kind)
    }

    /// The kind name.
    pub fn kind(self) -> &'static str {
        match self {
            CapiKind::MachineDeployment => "MachineDeployment",
            CapiKind::MachineSet => "MachineSet",
            CapiKind::Machine => "Machine",
            CapiKind::MachinePool => "MachinePool",
        }
    }

    /// The resource (plural) name.
    pub fn plural(self) -> &'static str {
        match self {
            CapiKind::MachineDeployment => "machinedeployments",
            CapiKind::MachineSet => "machinesets",
            CapiKind::Machine => "machines",
            CapiKind::MachinePool => "machinepools",
        }
    }

    /// Where the Machine spec is: a Machine's `spec`, a template's `spec.template.spec`.
    fn machine_spec(self) -> &'static str {
        match self {
            CapiKind::Machine => "spec",
            _ => "spec.template.spec",
        }
    }
}

/// How a moved value changes on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    /// It does not.
    Same,
    /// v1beta1 Go duration string ↔ v1beta2 whole seconds.
    Duration,
}

/// A field that lives at one path in v1beta1 and at another in v1beta2.
#[derive(Debug)]
struct Move {
    v1beta1: String,
    v1beta2: String,
    value: Change,
}

fn mv(v1beta1: &str, v1beta2: &str) -> Move {
    Move {
        v1beta1: v1beta1.to_owned(),
        v1beta2: v1beta2.to_owned(),
        value: Change::Same,
    }
}

/// The fields of `kind` that move between the versions.
fn moves(kind: CapiKind) -> Vec<Move> {
    let mut m = Vec::new();
    match kind {
        CapiKind::MachineDeployment => {
            m.push(mv("spec.strategy.type", "spec.rollout.strategy.type"));
            for f in ["maxSurge", "maxUnavailable"] {
                m.push(mv(
                    &format!("spec.strategy.rollingUpdate.{f}"),
                    &format!("spec.rollout.strategy.rollingUpdate.{f}"),
                ));
            }
            m.push(mv(
                "spec.strategy.rollingUpdate.deletePolicy",
                "spec.deletion.order",
            ));
            m.push(mv(
                "spec.strategy.remediation.maxInFlight",
                "spec.remediation.maxInFlight",
            ));
            m.push(mv("spec.rolloutAfter", "spec.rollout.after"));
        }
        CapiKind::MachineSet => m.push(mv("spec.deletePolicy", "spec.deletion.order")),
        CapiKind::Machine | CapiKind::MachinePool => {}
    }
    if kind != CapiKind::Machine {
        m.push(mv(
            "spec.minReadySeconds",
            "spec.template.spec.minReadySeconds",
        ));
    }
    if matches!(kind, CapiKind::MachineDeployment | CapiKind::MachineSet) {
        m.push(mv("spec.machineNamingStrategy", "spec.machineNaming"));
    }
    let spec = kind.machine_spec();
    for t in [
        "nodeDrainTimeout",
        "nodeVolumeDetachTimeout",
        "nodeDeletionTimeout",
    ] {
        m.push(Move {
            v1beta1: format!("{spec}.{t}"),
            v1beta2: format!("{spec}.deletion.{t}Seconds"),
            value: Change::Duration,
        });
    }
    let deprecated: &[&str] = match kind {
        CapiKind::MachineDeployment => &[
            "conditions",
            "readyReplicas",
            "availableReplicas",
            "updatedReplicas",
            "unavailableReplicas",
        ],
        CapiKind::MachineSet => &[
            "conditions",
            "readyReplicas",
            "availableReplicas",
            "fullyLabeledReplicas",
            "failureReason",
            "failureMessage",
        ],
        CapiKind::Machine => &["conditions", "failureReason", "failureMessage"],
        CapiKind::MachinePool => &[
            "conditions",
            "readyReplicas",
            "availableReplicas",
            "unavailableReplicas",
            "failureReason",
            "failureMessage",
        ],
    };
    for f in deprecated {
        m.push(mv(
            &format!("status.{f}"),
            &format!("status.deprecated.v1beta1.{f}"),
        ));
    }
    let current: &[&str] = match kind {
        CapiKind::Machine => &["conditions"],
        _ => &[
            "conditions",
            "readyReplicas",
            "availableReplicas",
            "upToDateReplicas",
        ],
    };
    for f in current {
        m.push(mv(&format!("status.v1beta2.{f}"), &format!("status.{f}")));
    }
    if matches!(kind, CapiKind::Machine | CapiKind::MachinePool) {
        m.push(mv(
            "status.bootstrapReady",
            "status.initialization.bootstrapDataSecretCreated",
        ));
        m.push(mv(
            "status.infrastructureReady",
            "status.initialization.infrastructureProvisioned",
        ));
    }
    m
}

/// The fields the other version has no place for, dropped on the way as CAPI drops them: the
/// v1beta1 ones going up; the v1beta2 ones going down (kept in the conversion data).
fn dropped(kind: CapiKind, way: Way) -> &'static [&'static str] {
    match (kind, way) {
        (CapiKind::MachineDeployment, Way::Up) => {
            &["spec.progressDeadlineSeconds", "spec.revisionHistoryLimit"]
        }
        (CapiKind::Machine, Way::Down) => &["spec.minReadySeconds", "status.failureDomain"],
        _ => &[],
    }
}

fn keys(path: &str) -> Vec<&str> {
    path.split('.').collect()
}

/// The object at `path`, if every step is an object.
fn walk_mut<'a>(obj: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = obj.as_object_mut()?;
    for key in path {
        cur = cur.get_mut(*key)?.as_object_mut()?;
    }
    Some(cur)
}

/// Remove the empty objects along `path`, deepest first (never the root).
fn prune(obj: &mut Value, path: &[&str]) {
    for depth in (1..=path.len()).rev() {
        let Some((last, parents)) = path.get(..depth).and_then(<[&str]>::split_last) else {
            continue;
        };
        let Some(parent) = walk_mut(obj, parents) else {
            continue;
        };
        if parent
            .get(*last)
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            parent.remove(*last);
        } else {
            return;
        }
    }
}

/// Remove and return the value at `path`, then remove the objects that left empty.
fn take(obj: &mut Value, path: &str) -> Option<Value> {
    let keys = keys(path);
    let (last, parents) = keys.split_last()?;
    let taken = walk_mut(obj, parents).and_then(|p| p.remove(*last));
    prune(obj, parents);
    taken
}

/// Which way a conversion goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Up,
    Down,
}

/// Move every field of `kind` to where the other version keeps it: all are taken first, then
/// placed, so fields that trade places (v1beta1 `status.conditions` ↔ `status.v1beta2.conditions`)
/// do not meet.
fn move_fields(kind: CapiKind, obj: &mut Value, way: Way) {
    let taken: Vec<(String, Value)> = moves(kind)
        .into_iter()
        .filter_map(|m| {
            let (from, to) = match way {
                Way::Up => (&m.v1beta1, m.v1beta2.clone()),
                Way::Down => (&m.v1beta2, m.v1beta1.clone()),
            };
            let v = take(obj, from)?;
            let v = match (m.value, way) {
                (Change::Same, _) => v,
                (Change::Duration, Way::Up) => duration_to_seconds(&v).map_or(v, |s| json!(s)),
                (Change::Duration, Way::Down) => {
                    v.as_i64().map_or(v, |s| json!(seconds_to_duration(s)))
                }
            };
            Some((to, v))
        })
        .collect();
    for (to, v) in taken {
        object::set_path(obj, &to, v);
    }
}

/// The references of a Machine spec.
fn refs(kind: CapiKind) -> [String; 2] {
    let spec = kind.machine_spec();
    [
        format!("{spec}.infrastructureRef"),
        format!("{spec}.bootstrap.configRef"),
    ]
}

fn ref_mut<'a>(obj: &'a mut Value, path: &str) -> Option<&'a mut Map<String, Value>> {
    walk_mut(obj, &keys(path))
}

/// A v1beta1 `ObjectReference` as a v1beta2 `ContractVersionedObjectReference`: the group of
/// its `apiVersion`; namespace, uid, resourceVersion and fieldPath have no place.
fn reference_up(r: &mut Map<String, Value>) {
    if let Some(api_version) = r.remove("apiVersion") {
        let group = api_version
            .as_str()
            .and_then(|v| v.rsplit_once('/'))
            .map_or("", |(g, _)| g);
        r.insert("apiGroup".into(), json!(group));
    }
    for gone in ["namespace", "uid", "resourceVersion", "fieldPath"] {
        r.remove(gone);
    }
}

/// A v1beta2 reference as a v1beta1 `ObjectReference` in namespace `ns`, its `apiVersion`
/// chosen by `api_version_of(group, kind)`.
fn reference_down(
    r: &mut Map<String, Value>,
    ns: &str,
    api_version_of: &dyn Fn(&str, &str) -> String,
) {
    let group = r
        .remove("apiGroup")
        .and_then(|g| g.as_str().map(str::to_owned))
        .unwrap_or_default();
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or_default();
    r.insert("apiVersion".into(), json!(api_version_of(&group, kind)));
    if !ns.is_empty() {
        r.insert("namespace".into(), json!(ns));
    }
}

/// A v1beta1 object as v1beta2 (the annotation [`with_conversion_data`] left on it restores
/// what v1beta1 cannot hold, and goes).
pub fn to_v1beta2(kind: CapiKind, mut obj: Value) -> Value {
    let restored = take_conversion_data(&mut obj);
    for path in dropped(kind, Way::Up) {
        take(&mut obj, path);
    }
    for path in refs(kind) {
        if let Some(r) = ref_mut(&mut obj, &path) {
            reference_up(r);
        }
    }
    if kind == CapiKind::Machine
        && let Some(node) = ref_mut(&mut obj, "status.nodeRef")
    {
        for gone in [
            "apiVersion",
            "kind",
            "namespace",
            "uid",
            "resourceVersion",
            "fieldPath",
        ] {
            node.remove(gone);
        }
    }
    move_fields(kind, &mut obj, Way::Up);
    if kind == CapiKind::Machine
        && let Some(hub) = restored
    {
        restore_machine(&mut obj, &hub);
    }
    object::as_map(&mut obj).insert(
        "apiVersion".into(),
        json!(CapiVersion::V1beta2.api_version()),
    );
    obj
}

/// A v1beta2 object as v1beta1, references given the `apiVersion` `api_version_of(group, kind)`
/// names. No conversion data is added (see [`with_conversion_data`]).
pub fn to_v1beta1(
    kind: CapiKind,
    mut obj: Value,
    api_version_of: &dyn Fn(&str, &str) -> String,
) -> Value {
    let ns = object::namespace(&obj).to_owned();
    for path in dropped(kind, Way::Down) {
        take(&mut obj, path);
    }
    move_fields(kind, &mut obj, Way::Down);
    for path in refs(kind) {
        if let Some(r) = ref_mut(&mut obj, &path)
            && ["apiGroup", "kind", "name"]
                .iter()
                .any(|k| r.contains_key(*k))
        {
            reference_down(r, &ns, api_version_of);
        }
    }
    if kind == CapiKind::Machine {
        if let Some(node) = ref_mut(&mut obj, "status.nodeRef")
            && node
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty())
        {
            node.insert("apiVersion".into(), json!("v1"));
            node.insert("kind".into(), json!("Node"));
        }
        if let Some(status) = ref_mut(&mut obj, "status")
            && status.get("phase").and_then(Value::as_str) == Some("Updating")
        {
            status.insert("phase".into(), json!("Running"));
        }
    }
    object::as_map(&mut obj).insert(
        "apiVersion".into(),
        json!(CapiVersion::V1beta1.api_version()),
    );
    obj
}

/// Convert between the versions (nothing to do when `from == to`).
pub fn convert(
    kind: CapiKind,
    obj: Value,
    from: CapiVersion,
    to: CapiVersion,
    api_version_of: &dyn Fn(&str, &str) -> String,
) -> Value {
    match (from, to) {
        (CapiVersion::V1beta1, CapiVersion::V1beta2) => to_v1beta2(kind, obj),
        (CapiVersion::V1beta2, CapiVersion::V1beta1) => to_v1beta1(kind, obj, api_version_of),
        _ => obj,
    }
}

/// `spoke` with `hub` (all but its metadata) in the conversion-data annotation.
pub fn with_conversion_data(mut spoke: Value, hub: &Value) -> Value {
    let mut data = hub.as_object().cloned().unwrap_or_default();
    data.remove("metadata");
    let meta = object::metadata_mut(&mut spoke);
    let annotations = object::as_map(meta.entry("annotations").or_insert_with(|| json!({})));
    annotations.insert(
        CONVERSION_DATA.into(),
        json!(Value::Object(data).to_string()),
    );
    spoke
}

/// Remove the conversion-data annotation (and an annotations map it leaves empty); the hub it
/// held, if it parses.
fn take_conversion_data(obj: &mut Value) -> Option<Value> {
    let annotations = walk_mut(obj, &["metadata", "annotations"])?;
    let data = annotations.remove(CONVERSION_DATA)?;
    prune(obj, &["metadata", "annotations"]);
    serde_json::from_str(data.as_str()?).ok()
}

/// What a v1beta1 Machine cannot hold, back from the hub it was served from.
fn restore_machine(obj: &mut Value, hub: &Value) {
    for path in [".spec.minReadySeconds", ".status.failureDomain"] {
        if let Some(v) = object::get_path(hub, path) {
            object::set_path(obj, path, v.clone());
        }
    }
    if object::get_path(hub, ".status.phase").and_then(Value::as_str) == Some("Updating")
        && object::get_path(obj, ".status.phase").and_then(Value::as_str) == Some("Running")
    {
        object::set_path(obj, ".status.phase", json!("Updating"));
    }
}

/// Whole seconds of a Go duration (`1m30s`, `1.5h`, `300ms`), truncated as CAPI's
/// `ConvertToSeconds` does and capped at `i32::MAX`.
pub fn duration_to_seconds(v: &Value) -> Option<i64> {
    let seconds = api::common::go_duration_seconds(v.as_str()?.trim())?.trunc();
    // Truncated and clamped to the i32 range first, so the cast is exact.
    #[allow(clippy::cast_possible_truncation)]
    Some(seconds.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i64)
}

/// Whole seconds as Go prints a `time.Duration` (`0s`, `10s`, `1m30s`, `1h0m0s`).
pub fn seconds_to_duration(seconds: i64) -> String {
    if seconds == 0 {
        return "0s".into();
    }
    let sign = if seconds < 0 { "-" } else { "" };
    let n = seconds.unsigned_abs();
    let (h, m, s) = (n / 3600, n % 3600 / 60, n % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}s")
    } else {
        format!("{sign}{s}s")
    }
}

/// A Cluster API resource in a version.
pub fn capi_resource(kind: CapiKind, version: CapiVersion) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: GROUP.to_owned(),
        version: version.name().to_owned(),
        api_version: version.api_version(),
        kind: kind.kind().to_owned(),
        plural: kind.plural().to_owned(),
    }
}
