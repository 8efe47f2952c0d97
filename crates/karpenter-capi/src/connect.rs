//! Connecting to the workload and management clusters.
//!
//! Responsibility: turn what the user gave (a kubeconfig file, the in-cluster service account,
//! or for the management cluster a URL with a token, token file and CA) into a `kube::Client`,
//! and check it once against `/version` so a wrong CA, an expired certificate, a refused token
//! or a failing exec plugin is one clear error naming the source and the cause — not a hang or
//! a retry loop later.
//!
//! Everything kube's kubeconfig loader supports works: HTTPS with the kubeconfig's CA (or
//! `insecure-skip-tls-verify` only when the kubeconfig says so), client certificates, bearer
//! tokens and `tokenFile`s (re-read as they rotate), exec credential plugins, auth-provider
//! tokens, `proxy-url`, and the in-cluster service account.
//!
//! kube's transparent retry of 429/503/504 (`Config::default_retry`) is switched off: every
//! controller classifies API errors itself and backs off (the style's error policy), and the
//! transparent retry hides what must be seen at once — an eviction refused by a
//! PodDisruptionBudget is a 429 that the termination controller reports as `FailedDraining`.
//! The in-process `sim` clients have no such layer either, so both backends behave alike.
//!
//! TLS is rustls with the **ring** crypto provider, installed process-wide by
//! [`install_crypto_provider`] before any client exists: ring needs only a C compiler to build
//! (no cmake, no system OpenSSL) and is the provider kube documents for rustls.
//!
//! [`connect_limited`] adds client-side rate limiting ([`crate::rate_limit`]; `run`'s
//! `--kube-client-qps` / `--kube-client-burst`). Every client built here bounds its outstanding
//! requests ([`crate::in_flight`]).
//!
//! Inputs: paths, URLs, tokens, a rate limit. Outputs: clients, or errors that name the source.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::in_flight::InFlightLimit;
use crate::rate_limit::RateLimit;

/// Installs rustls' ring provider as the process default (idempotent). Call before building a
/// client; kube's TLS setup uses the process default.
pub fn install_crypto_provider() {
    // Err means a provider is already installed: ours, from an earlier call.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Where a cluster's credentials come from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// The in-cluster service account, else `$KUBECONFIG` / `~/.kube/config`.
    Default,
    /// `--cluster-api-url` with its token and CA flags.
    Url(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Kubeconfig(p) => write!(f, "kubeconfig {}", p.display()),
            Source::Default => f.write_str("in-cluster service account or default kubeconfig"),
            Source::Url(u) => write!(f, "--cluster-api-url {u}"),
        }
    }
}

/// The management cluster given by URL (`--cluster-api-url` and friends).
#[derive(Debug, Clone, Default)]
pub struct UrlCredentials {
    /// The API server URL.
    pub url: String,
    /// A bearer token.
    pub token: Option<String>,
    /// A file holding the bearer token (re-read when it changes).
    pub token_file: Option<PathBuf>,
    /// PEM CA bundle (the text itself).
    pub certificate_authority_data: Option<String>,
    /// Do not verify the server's certificate.
    pub skip_tls_verify: bool,
}

/// A `kube::Config` for the kubeconfig at `path` (its current context).
///
/// # Errors
/// The file cannot be read or does not describe a usable cluster; the message names it.
pub async fn config_from_kubeconfig(path: &Path) -> anyhow::Result<kube::Config> {
    // Opened here first: kube's own read error repeats the OS error under its source.
    std::fs::File::open(path)
        .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("invalid kubeconfig {}", path.display()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .with_context(|| format!("invalid kubeconfig {}", path.display()))
}

/// A client for the kubeconfig at `path` (not yet checked against the server).
///
/// # Errors
/// See [`config_from_kubeconfig`]; TLS material that cannot be loaded.
pub async fn client_from_kubeconfig(path: &Path) -> anyhow::Result<kube::Client> {
    install_crypto_provider();
    let config = config_from_kubeconfig(path).await?;
    Ok(kube::client::ClientBuilder::try_from(without_retry(config))
        .with_context(|| format!("cannot build a client from kubeconfig {}", path.display()))?
        .with_layer(&InFlightLimit::DEFAULT)
        .build())
}

/// `config` without kube's transparent retry (see the module docs).
#[must_use]
pub fn without_retry(mut config: kube::Config) -> kube::Config {
    config.default_retry = false;
    config
}

/// A `kube::Config` from a URL and its credentials.
///
/// # Errors
/// Contradicting or malformed flags.
pub fn config_from_url(creds: &UrlCredentials) -> anyhow::Result<kube::Config> {
    if creds.skip_tls_verify && creds.certificate_authority_data.is_some() {
        bail!(
            "--cluster-api-skip-tls-verify and --cluster-api-certificate-authority-data exclude each other"
        );
    }
    if creds.token.is_some() && creds.token_file.is_some() {
        bail!("--cluster-api-token and --cluster-api-token-file exclude each other");
    }
    let uri: http::Uri = creds
        .url
        .parse()
        .with_context(|| format!("invalid --cluster-api-url {:?}", creds.url))?;
    if uri.scheme_str() != Some("https") && uri.scheme_str() != Some("http") {
        bail!(
            "invalid --cluster-api-url {:?}: the scheme must be https (or http)",
            creds.url
        );
    }
    let mut config = kube::Config::new(uri);
    config.accept_invalid_certs = creds.skip_tls_verify;
    if let Some(token) = &creds.token {
        config.auth_info.token = Some(token.clone().into());
    }
    if let Some(file) = &creds.token_file {
        std::fs::metadata(file)
            .with_context(|| format!("cannot read --cluster-api-token-file {}", file.display()))?;
        config.auth_info.token_file = Some(file.display().to_string());
    }
    if let Some(pem) = &creds.certificate_authority_data {
        let certs = pem_blocks(pem);
        if certs.is_empty() {
            bail!("--cluster-api-certificate-authority-data holds no PEM certificate");
        }
        config.root_cert = Some(certs);
    }
    Ok(config)
}

/// DER bytes of every `CERTIFICATE` block of a PEM text.
#[must_use]
pub fn pem_blocks(pem: &str) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in pem.lines().map(str::trim) {
        if line == "-----BEGIN CERTIFICATE-----" {
            current = Some(String::new());
        } else if line == "-----END CERTIFICATE-----" {
            if let Some(body) = current.take()
                && let Ok(der) = base64::engine::general_purpose::STANDARD.decode(body)
            {
                out.push(der);
            }
        } else if let Some(body) = current.as_mut() {
            body.push_str(line);
        }
    }
    out
}

/// Build a client from `source` and check it with a `GET /version` (within `timeout`), so a
/// bad CA, certificate, token or plugin fails here with `role`, the source and the cause.
///
/// # Errors
/// The client cannot be built or the server does not answer; the message says which cluster
/// (`role`), where its credentials came from and why.
pub async fn connect(
    role: &str,
    source: &Source,
    creds: Option<&UrlCredentials>,
    timeout: Duration,
) -> anyhow::Result<kube::Client> {
    connect_limited(role, source, creds, timeout, None).await
}

/// [`connect`] with every request of the client rate-limited by `limit` (its own token
/// bucket, [`RateLimit`]); `None`: unlimited.
///
/// # Errors
/// As [`connect`].
pub async fn connect_limited(
    role: &str,
    source: &Source,
    creds: Option<&UrlCredentials>,
    timeout: Duration,
    limit: Option<RateLimit>,
) -> anyhow::Result<kube::Client> {
    connect_as(role, source, creds, timeout, limit, None).await
}

/// A user (and groups) to act as: the `Impersonate-User` / `Impersonate-Group` headers, as
/// `kubectl --as` / `--as-group` send them (`doctor` checks the controller's permissions
/// this way).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impersonate {
    /// The user, e.g. `system:serviceaccount:karpenter:karpenter-capi`.
    pub user: String,
    /// Groups (none: the server derives a service account's groups itself).
    pub groups: Vec<String>,
}

/// [`connect_limited`], acting as `impersonate` when given.
///
/// # Errors
/// As [`connect`].
pub async fn connect_as(
    role: &str,
    source: &Source,
    creds: Option<&UrlCredentials>,
    timeout: Duration,
    limit: Option<RateLimit>,
    impersonate: Option<&Impersonate>,
) -> anyhow::Result<kube::Client> {
    install_crypto_provider();
    let config = match (source, creds) {
        (Source::Kubeconfig(path), _) => config_from_kubeconfig(path).await,
        (Source::Url(_), Some(creds)) => config_from_url(creds),
        (Source::Url(url), None) => Err(anyhow::anyhow!("no credentials for {url}")),
        (Source::Default, _) => kube::Config::infer().await.map_err(|e| {
            anyhow::anyhow!(
                "not in a cluster and no usable kubeconfig (set --kubeconfig or KUBECONFIG): {e}"
            )
        }),
    }
    .with_context(|| format!("{role} cluster ({source})"))?;
    let mut config = config;
    if let Some(who) = impersonate {
        config.auth_info.impersonate = Some(who.user.clone());
        config.auth_info.impersonate_groups = (!who.groups.is_empty()).then(|| who.groups.clone());
    }
    let server = config.cluster_url.to_string();
    let builder = kube::client::ClientBuilder::try_from(without_retry(config))
        .with_context(|| format!("{role} cluster ({source}): cannot build a client"))?
        .with_layer(&InFlightLimit::DEFAULT);
    let client = match limit {
        Some(limit) => builder.with_layer(&limit).build(),
        None => builder.build(),
    };
    match tokio::time::timeout(timeout, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(e)) => Err(anyhow::Error::new(e)).with_context(|| {
            format!("{role} cluster ({source}): cannot reach the API server at {server}")
        }),
        Err(_) => bail!(
            "{role} cluster ({source}): the API server at {server} did not answer within {timeout:?}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_blocks_are_decoded() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_blocks(pem), vec![vec![0, 1, 2]]);
        assert!(pem_blocks("nothing").is_empty());
    }

    #[test]
    fn url_flags_that_exclude_each_other_are_refused() {
        let both = UrlCredentials {
            url: "https://h:6443".into(),
            skip_tls_verify: true,
            certificate_authority_data: Some("x".into()),
            ..UrlCredentials::default()
        };
        assert!(config_from_url(&both).is_err());
        let tokens = UrlCredentials {
            url: "https://h:6443".into(),
            token: Some("t".into()),
            token_file: Some("/nonexistent".into()),
            ..UrlCredentials::default()
        };
        let err = config_from_url(&tokens).unwrap_err().to_string();
        assert!(err.contains("exclude each other"), "{err}");
        let scheme = UrlCredentials {
            url: "ftp://h".into(),
            ..UrlCredentials::default()
        };
        assert!(config_from_url(&scheme).is_err());
    }
}
