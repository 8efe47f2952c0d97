//! Well-known label keys and values, key aliases, restricted label domains and label syntax checks.
//!
//! Responsibility: everything the scheduler needs to know about label *keys* before it reasons
//! about requirements: which keys Karpenter understands without a definition (the well-known
//! set), which legacy aliases are rewritten, which keys users may not set, and whether a key or
//! value is syntactically valid for Kubernetes.
//!
//! Inputs: label keys and values as plain strings; a [`WellKnownLabels`] value describing the
//! well-known set (core defaults, optionally extended by the infrastructure provider).
//! Outputs: constants, normalised keys, booleans and typed [`LabelError`]/[`RestrictedLabelError`]
//! values. No global mutable state: a provider extends the set by building its own value (see
//! [`WellKnownLabels::cluster_api`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// The Karpenter API group; also a restricted label domain.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
/// Owning NodePool name.
pub const NODE_POOL: &str = "karpenter.sh/nodepool";
/// Capacity type (`on-demand`, `spot`, `reserved`).
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// `"true"` once the node registered.
pub const NODE_REGISTERED: &str = "karpenter.sh/registered";
/// `"true"` once the node initialised.
pub const NODE_INITIALIZED: &str = "karpenter.sh/initialized";
/// `"true"` on a Node: registration does not copy NodeClaim taints onto it.
pub const NODE_DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";
/// Topology zone.
pub const TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Topology region.
pub const TOPOLOGY_REGION: &str = "topology.kubernetes.io/region";
/// Instance type.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// CPU architecture.
pub const ARCH: &str = "kubernetes.io/arch";
/// Operating system.
pub const OS: &str = "kubernetes.io/os";
/// Windows build.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
/// Hostname (restricted: only Karpenter sets it).
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// Capacity type value: on-demand.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// Capacity type value: spot.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// Capacity type value: reserved.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
/// Architecture value: amd64.
pub const ARCH_AMD64: &str = "amd64";
/// Architecture value: arm64.
pub const ARCH_ARM64: &str = "arm64";
/// OS value: linux.
pub const OS_LINUX: &str = "linux";
/// OS value: windows.
pub const OS_WINDOWS: &str = "windows";

/// The Cluster API provider's label domain (restricted except its well-known keys).
pub const CLUSTER_API_GROUP: &str = "karpenter.cluster.x-k8s.io";
/// Provider well-known key: instance size.
pub const CAPI_INSTANCE_SIZE: &str = "karpenter.cluster.x-k8s.io/instance-size";
/// Provider well-known key: instance family.
pub const CAPI_INSTANCE_FAMILY: &str = "karpenter.cluster.x-k8s.io/instance-family";
/// Provider well-known key: instance memory.
pub const CAPI_INSTANCE_MEMORY: &str = "karpenter.cluster.x-k8s.io/instance-memory";
/// Provider well-known key: instance CPU.
pub const CAPI_INSTANCE_CPU: &str = "karpenter.cluster.x-k8s.io/instance-cpu";
/// Provider well-known key: memory capacity.
pub const CAPI_CAPACITY_MEMORY: &str = "capacity.karpenter.cluster.x-k8s.io/memory";
/// Provider well-known key: CPU capacity.
pub const CAPI_CAPACITY_CPU: &str = "capacity.karpenter.cluster.x-k8s.io/cpu";

/// Core's well-known keys (may be used without being defined by a NodePool).
pub const DEFAULT_WELL_KNOWN: [&str; 8] = [
    NODE_POOL,
    TOPOLOGY_ZONE,
    TOPOLOGY_REGION,
    INSTANCE_TYPE,
    ARCH,
    OS,
    CAPACITY_TYPE,
    WINDOWS_BUILD,
];

/// Legacy keys rewritten to their current spelling when a requirement is built: `(alias, key)`.
pub const LABEL_ALIASES: [(&str, &str); 5] = [
    ("failure-domain.beta.kubernetes.io/zone", TOPOLOGY_ZONE),
    ("beta.kubernetes.io/arch", ARCH),
    ("beta.kubernetes.io/os", OS),
    ("beta.kubernetes.io/instance-type", INSTANCE_TYPE),
    ("failure-domain.beta.kubernetes.io/region", TOPOLOGY_REGION),
];

/// The well-known key a legacy alias stands for, or `None` when `key` is not an alias.
#[must_use]
pub fn alias_target(key: &str) -> Option<&'static str> {
    LABEL_ALIASES
        .iter()
        .find(|(alias, _)| *alias == key)
        .map(|(_, normalized)| *normalized)
}

/// Rewrites a legacy alias to its well-known key; any other key is returned unchanged.
#[must_use]
pub fn normalize_key(key: &str) -> &str {
    alias_target(key).unwrap_or(key)
}

/// The domain (prefix before the first `/`) of a label key, or `""` when it has none.
#[must_use]
pub fn label_domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(domain, _)| domain)
}

fn domain_matches(domain: &str, parent: &str) -> bool {
    domain == parent
        || domain
            .strip_suffix(parent)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// A key the user may not set in NodePool labels or requirements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "using label {key} is not allowed as it might interfere with the internal provisioning logic; \
     specify a well known label or a custom label that does not use a restricted domain"
)]
pub struct RestrictedLabelError {
    /// The offending key.
    pub key: String,
}

/// The well-known label set and the label restrictions that go with it.
///
/// Build it once (core defaults via [`Default`], or [`WellKnownLabels::cluster_api`]) and pass it
/// by reference. All sets are ordered, so every iteration is deterministic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WellKnownLabels {
    keys: BTreeSet<Arc<str>>,
    restricted_domains: BTreeSet<Arc<str>>,
    domain_exceptions: BTreeSet<Arc<str>>,
    restricted_keys: BTreeSet<Arc<str>>,
    known_values: BTreeMap<Arc<str>, BTreeSet<Arc<str>>>,
}

impl Default for WellKnownLabels {
    /// Core Karpenter: [`DEFAULT_WELL_KNOWN`], restricted domain `karpenter.sh`, restricted key
    /// `kubernetes.io/hostname`, domain exceptions `node.kubernetes.io` and
    /// `node-restriction.kubernetes.io`, capacity-type values `on-demand`/`spot`/`reserved`.
    fn default() -> Self {
        let set = |items: &[&str]| items.iter().map(|s| Arc::<str>::from(*s)).collect();
        Self {
            keys: set(&DEFAULT_WELL_KNOWN),
            restricted_domains: set(&[KARPENTER_GROUP]),
            domain_exceptions: set(&["node.kubernetes.io", "node-restriction.kubernetes.io"]),
            restricted_keys: set(&[HOSTNAME]),
            known_values: BTreeMap::from([(
                Arc::from(CAPACITY_TYPE),
                set(&[
                    CAPACITY_TYPE_ON_DEMAND,
                    CAPACITY_TYPE_SPOT,
                    CAPACITY_TYPE_RESERVED,
                ]),
            )]),
        }
    }
}

impl WellKnownLabels {
    /// Core defaults plus the Cluster API provider's restricted domain and well-known keys.
    #[must_use]
    pub fn cluster_api() -> Self {
        [
            CAPI_INSTANCE_SIZE,
            CAPI_INSTANCE_FAMILY,
            CAPI_INSTANCE_MEMORY,
            CAPI_INSTANCE_CPU,
            CAPI_CAPACITY_MEMORY,
            CAPI_CAPACITY_CPU,
        ]
        .into_iter()
        .fold(
            Self::default().with_restricted_domain(CLUSTER_API_GROUP),
            Self::with_key,
        )
    }

    /// Adds a well-known key (e.g. a provider's reservation-id label).
    #[must_use]
    pub fn with_key(mut self, key: &str) -> Self {
        self.keys.insert(Arc::from(key));
        self
    }

    /// Adds a restricted label domain (the domain and all its subdomains).
    #[must_use]
    pub fn with_restricted_domain(mut self, domain: &str) -> Self {
        self.restricted_domains.insert(Arc::from(domain));
        self
    }

    /// Adds a domain (and its subdomains) that is never restricted, even below a restricted one.
    #[must_use]
    pub fn with_domain_exception(mut self, domain: &str) -> Self {
        self.domain_exceptions.insert(Arc::from(domain));
        self
    }

    /// Declares the only meaningful values of a key (checked by requirement validation).
    #[must_use]
    pub fn with_known_values(mut self, key: &str, values: &[&str]) -> Self {
        self.known_values.insert(
            Arc::from(key),
            values.iter().map(|v| Arc::<str>::from(*v)).collect(),
        );
        self
    }

    /// Whether `key` is well known.
    #[must_use]
    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    /// The well-known keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.keys.iter().map(|k| &**k)
    }

    /// The known values of `key`, if the key has a closed value set.
    #[must_use]
    pub fn known_values(&self, key: &str) -> Option<&BTreeSet<Arc<str>>> {
        self.known_values.get(key)
    }

    /// Whether `key` is restricted: not well known, and either in a restricted domain (and not in
    /// an excepted one) or one of the restricted keys (`kubernetes.io/hostname`).
    #[must_use]
    pub fn is_restricted_label(&self, key: &str) -> bool {
        if self.contains(key) {
            return false;
        }
        let domain = label_domain(key);
        if self
            .domain_exceptions
            .iter()
            .any(|d| domain_matches(domain, d))
        {
            return false;
        }
        self.restricted_domains
            .iter()
            .any(|d| domain_matches(domain, d))
            || self.restricted_keys.contains(key)
    }

    /// [`Self::is_restricted_label`] as a typed error.
    ///
    /// # Errors
    /// [`RestrictedLabelError`] when the key is restricted.
    pub fn check_restricted(&self, key: &str) -> Result<(), RestrictedLabelError> {
        if self.is_restricted_label(key) {
            Err(RestrictedLabelError {
                key: key.to_owned(),
            })
        } else {
            Ok(())
        }
    }

    /// Whether `key` is one of the exact restricted keys (not domains), e.g. the hostname label.
    #[must_use]
    pub fn is_restricted_key(&self, key: &str) -> bool {
        self.restricted_keys.contains(key)
    }
}

/// Why a label key or value is syntactically invalid (Kubernetes qualified-name / label-value
/// rules).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    /// The name part (after the optional `prefix/`) is empty.
    #[error("{0:?}: name part must be non-empty")]
    EmptyName(String),
    /// The name part is longer than 63 characters.
    #[error("{0:?}: name part must be no more than 63 characters")]
    NameTooLong(String),
    /// The name part has a bad character or does not start/end alphanumerically.
    #[error(
        "{0:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must \
         start and end with an alphanumeric character"
    )]
    InvalidName(String),
    /// `/name` with nothing before the slash.
    #[error("{0:?}: prefix part must be non-empty")]
    EmptyPrefix(String),
    /// The prefix is not a lowercase RFC 1123 subdomain of at most 253 characters.
    #[error("{0:?}: prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters")]
    InvalidPrefix(String),
    /// More than one `/`.
    #[error("{0:?}: a qualified name must have at most one '/'")]
    TooManySlashes(String),
    /// A label value longer than 63 characters.
    #[error("{0:?}: must be no more than 63 characters")]
    ValueTooLong(String),
    /// A label value with a bad character or bad first/last character.
    #[error(
        "{0:?}: a valid label must be an empty string or consist of alphanumeric characters, \
         '-', '_' or '.', and must start and end with an alphanumeric character"
    )]
    InvalidValue(String),
}

const MAX_NAME_LEN: usize = 63;
const MAX_SUBDOMAIN_LEN: usize = 253;

fn is_name_like(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN_LEN
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            b.first().is_some_and(alnum)
                && b.last().is_some_and(alnum)
                && b.iter().all(|c| alnum(c) || *c == b'-')
        })
}

/// Checks a label key (or taint key) against the Kubernetes qualified-name rules:
/// `[prefix/]name`, prefix a DNS-1123 subdomain, name at most 63 alphanumerics, `-`, `_`, `.`
/// starting and ending alphanumerically.
///
/// # Errors
/// The first [`LabelError`] found.
pub fn validate_qualified_name(key: &str) -> Result<(), LabelError> {
    let owned = || key.to_owned();
    let name = match key.split_once('/') {
        None => key,
        Some((_, name)) if name.contains('/') => return Err(LabelError::TooManySlashes(owned())),
        Some(("", _)) => return Err(LabelError::EmptyPrefix(owned())),
        Some((prefix, name)) => {
            if !is_dns1123_subdomain(prefix) {
                return Err(LabelError::InvalidPrefix(owned()));
            }
            name
        }
    };
    if name.is_empty() {
        Err(LabelError::EmptyName(owned()))
    } else if name.len() > MAX_NAME_LEN {
        Err(LabelError::NameTooLong(owned()))
    } else if !is_name_like(name) {
        Err(LabelError::InvalidName(owned()))
    } else {
        Ok(())
    }
}

/// Checks a label value: empty, or at most 63 alphanumerics, `-`, `_`, `.` starting and ending
/// alphanumerically.
///
/// # Errors
/// [`LabelError::ValueTooLong`] or [`LabelError::InvalidValue`].
pub fn validate_label_value(value: &str) -> Result<(), LabelError> {
    if value.len() > MAX_NAME_LEN {
        Err(LabelError::ValueTooLong(value.to_owned()))
    } else if !value.is_empty() && !is_name_like(value) {
        Err(LabelError::InvalidValue(value.to_owned()))
    } else {
        Ok(())
    }
}

/// Display helper listing values like Go's `%v` of a string slice: `[a b c]`.
pub(crate) struct SpaceList<'a, T>(pub(crate) &'a [T]);

impl<T: AsRef<str>> fmt::Display for SpaceList<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            f.write_str(v.as_ref())?;
        }
        f.write_str("]")
    }
}
