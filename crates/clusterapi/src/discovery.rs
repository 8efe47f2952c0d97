//! Which Cluster API group and version to speak to the management cluster.
//!
//! Responsibility: ask the management cluster's discovery which versions of the Cluster API
//! group it serves and pick one: the one the operator asked for (`CAPI_VERSION`, as the
//! cluster-autoscaler names it), else the server's preferred version when its shape is known
//! (`v1beta2` on Cluster API v1.11+, `v1beta1` before), else the newest known version it
//! serves. The group is `cluster.x-k8s.io` unless `CAPI_GROUP` names another (a distribution
//! that serves Cluster API's kinds under its own group).
//! Inputs: a management client, a [`CapiSelection`]. Outputs: an [`api::CapiVersion`] or a
//! [`DiscoveryError`] that says what is served and what to set.

use api::CapiVersion;

/// What the operator asked for (`--capi-group` / `CAPI_GROUP`, `--capi-version` /
/// `CAPI_VERSION`); unset fields are discovered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapiSelection {
    /// The group (default `cluster.x-k8s.io`).
    pub group: Option<String>,
    /// The version (default: the preferred one, when known).
    pub version: Option<String>,
}

/// Why no version could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// The management cluster does not serve the group at all.
    #[error(
        "the management cluster serves no API group {group}: install Cluster API there, or point \
         --cluster-api-kubeconfig at the cluster that runs it (or set CAPI_GROUP)"
    )]
    GroupNotServed {
        /// The group.
        group: String,
    },
    /// The requested version is not served.
    #[error("CAPI_VERSION={version} is not served by the management cluster; {group} serves {}", served.join(", "))]
    VersionNotServed {
        /// The group.
        group: String,
        /// The requested version.
        version: String,
        /// The versions served.
        served: Vec<String>,
    },
    /// Only versions whose shape is unknown are served.
    #[error(
        "{group} serves only {} — karpenter-capi reads v1beta2 and v1beta1; set CAPI_VERSION to \
         one of them if it is served under another name", served.join(", ")
    )]
    NoKnownVersion {
        /// The group.
        group: String,
        /// The versions served.
        served: Vec<String>,
    },
    /// Discovery itself failed.
    #[error("cannot discover the API groups of the management cluster: {0}")]
    Api(String),
}

/// Pick the version of `group`, which serves `served` (preferred: `preferred`), honouring
/// `requested`.
///
/// # Errors
/// [`DiscoveryError::GroupNotServed`] when `served` is empty, else
/// [`DiscoveryError::VersionNotServed`] or [`DiscoveryError::NoKnownVersion`].
pub fn choose(
    group: &str,
    preferred: Option<&str>,
    served: &[String],
    requested: Option<&str>,
) -> Result<CapiVersion, DiscoveryError> {
    if served.is_empty() {
        return Err(DiscoveryError::GroupNotServed {
            group: group.to_owned(),
        });
    }
    if let Some(v) = requested {
        return if served.iter().any(|s| s == v) {
            Ok(CapiVersion::new(group, v))
        } else {
            Err(DiscoveryError::VersionNotServed {
                group: group.to_owned(),
                version: v.to_owned(),
                served: served.to_vec(),
            })
        };
    }
    if let Some(p) = preferred.filter(|p| CapiVersion::KNOWN.contains(p)) {
        return Ok(CapiVersion::new(group, p));
    }
    CapiVersion::KNOWN
        .iter()
        .find(|k| served.iter().any(|s| s == *k))
        .map(|k| CapiVersion::new(group, *k))
        .ok_or_else(|| DiscoveryError::NoKnownVersion {
            group: group.to_owned(),
            served: served.to_vec(),
        })
}

/// Ask `management`'s discovery and [`choose`].
///
/// # Errors
/// See [`choose`]; [`DiscoveryError::Api`] when the group list cannot be read.
pub async fn discover(
    management: &kube::Client,
    selection: &CapiSelection,
) -> Result<CapiVersion, DiscoveryError> {
    let group = selection
        .group
        .as_deref()
        .filter(|g| !g.is_empty())
        .unwrap_or(CapiVersion::GROUP);
    let groups = management
        .list_api_groups()
        .await
        .map_err(|e| DiscoveryError::Api(e.to_string()))?;
    let found = groups.groups.iter().find(|g| g.name == group);
    let served: Vec<String> = found
        .map(|g| g.versions.iter().map(|v| v.version.clone()).collect())
        .unwrap_or_default();
    let preferred = found
        .and_then(|g| g.preferred_version.as_ref())
        .map(|v| v.version.as_str());
    let requested = selection.version.as_deref().filter(|v| !v.is_empty());
    choose(group, preferred, &served, requested)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_preferred_version_wins_when_known() {
        let both = served(&["v1beta2", "v1beta1"]);
        assert_eq!(
            choose("cluster.x-k8s.io", Some("v1beta2"), &both, None),
            Ok(CapiVersion::v1beta2())
        );
        assert_eq!(
            choose(
                "cluster.x-k8s.io",
                Some("v1beta1"),
                &served(&["v1beta1"]),
                None
            ),
            Ok(CapiVersion::v1beta1())
        );
        // An unknown preferred version: the newest known one served.
        assert_eq!(
            choose(
                "cluster.x-k8s.io",
                Some("v1"),
                &served(&["v1", "v1beta1"]),
                None
            ),
            Ok(CapiVersion::v1beta1())
        );
    }

    #[test]
    fn a_requested_version_must_be_served() {
        let both = served(&["v1beta2", "v1beta1"]);
        assert_eq!(
            choose("cluster.x-k8s.io", Some("v1beta2"), &both, Some("v1beta1")),
            Ok(CapiVersion::v1beta1())
        );
        let err = choose(
            "cluster.x-k8s.io",
            Some("v1beta1"),
            &served(&["v1beta1"]),
            Some("v1beta2"),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "CAPI_VERSION=v1beta2 is not served by the management cluster; cluster.x-k8s.io serves v1beta1"
        );
        // Another group and version, as a distribution may serve them.
        assert_eq!(
            choose("capi.example.com", None, &served(&["v1"]), Some("v1")),
            Ok(CapiVersion::new("capi.example.com", "v1"))
        );
    }

    #[test]
    fn nothing_known_or_nothing_served_says_so() {
        let err = choose("cluster.x-k8s.io", Some("v1"), &served(&["v1"]), None).unwrap_err();
        assert!(err.to_string().contains("set CAPI_VERSION"), "{err}");
        let err = choose("cluster.x-k8s.io", None, &[], None).unwrap_err();
        assert!(
            err.to_string()
                .contains("serves no API group cluster.x-k8s.io"),
            "{err}"
        );
    }
}
