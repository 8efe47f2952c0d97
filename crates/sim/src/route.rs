//! URL paths.
//!
//! Responsibility: parse a request path into what it addresses: a discovery document, a
//! resource collection, one object, or one object's subresource, for both the core group
//! (`/api/v1/…`) and named groups (`/apis/<group>/<version>/…`), namespaced
//! (`…/namespaces/<ns>/<resource>/…`) or not, including the legacy `…/watch/…` form.
//! Inputs: a path. Outputs: a [`Route`], or `None` for paths the server does not serve.

use crate::state::Endpoint;

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/readyz`, `/livez`.
    Health,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1`, `/apis/<group>/<version>`.
    GroupVersion {
        /// Group.
        group: String,
        /// Version.
        version: String,
    },
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`.
    OpenApiGroupVersion {
        /// Group.
        group: String,
        /// Version.
        version: String,
    },
    /// Any other `/openapi/…` path (not served).
    OpenApiOther,
    /// A resource path.
    Resource {
        /// The collection.
        ep: Endpoint,
        /// The object, if addressed.
        name: Option<String>,
        /// The subresource, if addressed.
        sub: Option<String>,
        /// Whether the legacy `/watch/` prefix was used.
        watch: bool,
    },
}

/// Parse a path.
pub fn parse(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Some(Route::Version),
        ["healthz" | "readyz" | "livez", ..] => Some(Route::Health),
        ["openapi", "v3"] => Some(Route::OpenApiIndex),
        ["openapi", "v3", "api", version] => Some(Route::OpenApiGroupVersion {
            group: String::new(),
            version: (*version).to_owned(),
        }),
        ["openapi", "v3", "apis", group, version] => Some(Route::OpenApiGroupVersion {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
        }),
        ["openapi", ..] => Some(Route::OpenApiOther),
        ["api"] => Some(Route::CoreVersions),
        ["api", version] => Some(Route::GroupVersion {
            group: String::new(),
            version: (*version).to_owned(),
        }),
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis"] => Some(Route::Groups),
        ["apis", group] => Some(Route::Group((*group).to_owned())),
        ["apis", group, version] => Some(Route::GroupVersion {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
        }),
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
        _ => None,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    let (watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let (namespace, rest) = match rest {
        ["namespaces", _, "status" | "finalize"] => (None, rest),
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some((*ns).to_owned()), tail),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (plural, None, None),
        [plural, name] => (plural, Some((*name).to_owned()), None),
        [plural, name, sub] => (plural, Some((*name).to_owned()), Some((*sub).to_owned())),
        _ => return None,
    };
    Some(Route::Resource {
        ep: Endpoint {
            group: group.to_owned(),
            version: version.to_owned(),
            plural: (*plural).to_owned(),
            namespace,
        },
        name,
        sub,
        watch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> (Endpoint, Option<String>, Option<String>, bool) {
        match parse(path).unwrap() {
            Route::Resource {
                ep,
                name,
                sub,
                watch,
            } => (ep, name, sub, watch),
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(parse("/api"), Some(Route::CoreVersions));
        assert_eq!(parse("/apis/"), Some(Route::Groups));
        assert_eq!(parse("/apis/apps"), Some(Route::Group("apps".into())));
        assert!(matches!(parse("/api/v1"), Some(Route::GroupVersion { .. })));
        assert_eq!(parse("/version"), Some(Route::Version));
        assert_eq!(parse("/nope"), None);
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let (ep, name, sub, _) = res("/api/v1/namespaces/default/pods/p/status");
        assert_eq!(ep, Endpoint::namespaced("", "v1", "pods", "default"));
        assert_eq!(
            (name.as_deref(), sub.as_deref()),
            (Some("p"), Some("status"))
        );
        let (ep, name, _, _) = res("/api/v1/namespaces/kube-system");
        assert_eq!(ep, Endpoint::cluster("", "v1", "namespaces"));
        assert_eq!(name.as_deref(), Some("kube-system"));
        let (ep, name, sub, _) = res("/api/v1/namespaces/x/status");
        assert_eq!(ep.plural, "namespaces");
        assert_eq!(
            (name.as_deref(), sub.as_deref()),
            (Some("x"), Some("status"))
        );
        let (ep, name, _, watch) = res("/apis/apps/v1/watch/namespaces/d/deployments");
        assert!(watch);
        assert_eq!(ep, Endpoint::namespaced("apps", "v1", "deployments", "d"));
        assert_eq!(name, None);
        let (ep, _, _, _) = res("/apis/karpenter.sh/v1/nodepools/default/scale");
        assert_eq!(ep, Endpoint::cluster("karpenter.sh", "v1", "nodepools"));
        assert!(parse("/api/v1/namespaces/d/pods/p/status/extra").is_none());
    }
}
