//! Counting the API requests a client makes (for `bench e2e`: requests per provisioned node,
//! and whether anything polls while the cluster is idle).
//!
//! Responsibility: [`ApiCounter`], a tower layer for kube's client stack that counts each
//! request by kind — reads (GET, LIST), watches, creates (POST, including subresources such as
//! evictions), updates (PUT, PATCH) and deletes — and by `VERB resource`, and the answers that
//! were errors by `STATUS VERB resource` (a 409 is a write that did nothing); and
//! [`counted_client`], a client for a kubeconfig with the layer in its stack.
//! Inputs: requests passing through. Outputs: [`ApiCounts`] snapshots.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context as TaskContext, Poll};

use anyhow::Context;
use serde::Serialize;

/// Requests by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiCounts {
    /// GETs of one object and LISTs.
    pub reads: u64,
    /// Watch requests (each one long-lived stream).
    pub watches: u64,
    /// POSTs.
    pub creates: u64,
    /// PUTs and PATCHes.
    pub updates: u64,
    /// DELETEs.
    pub deletes: u64,
}

impl ApiCounts {
    /// Creates, updates and deletes.
    #[must_use]
    pub fn writes(&self) -> u64 {
        self.creates + self.updates + self.deletes
    }

    /// `self - earlier`, per kind.
    #[must_use]
    pub fn since(&self, earlier: &ApiCounts) -> ApiCounts {
        ApiCounts {
            reads: self.reads.saturating_sub(earlier.reads),
            watches: self.watches.saturating_sub(earlier.watches),
            creates: self.creates.saturating_sub(earlier.creates),
            updates: self.updates.saturating_sub(earlier.updates),
            deletes: self.deletes.saturating_sub(earlier.deletes),
        }
    }
}

/// A tower layer counting the requests of every client it is added to.
#[derive(Debug, Clone, Default)]
pub struct ApiCounter(
    Arc<[AtomicU64; 5]>,
    Arc<Mutex<BTreeMap<String, u64>>>,
    Arc<Mutex<BTreeMap<String, u64>>>,
);

/// `resource` or `resource/subresource` of an API path (`/api/v1/namespaces/d/pods/p/status`
/// → `pods/status`).
fn resource_of(path: &str) -> String {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match parts.first() {
        Some(&"api") => parts.get(2..),
        Some(&"apis") => parts.get(3..),
        _ => None,
    }
    .unwrap_or_default();
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    match rest {
        [resource] | [resource, _] => (*resource).to_owned(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
        [] => String::new(),
    }
}

impl ApiCounter {
    /// The counts so far by `VERB resource[/subresource]` (watches as `WATCH`).
    #[must_use]
    pub fn by_resource(&self) -> BTreeMap<String, u64> {
        self.1
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The answers so far that were errors (status 400 and above), by
    /// `STATUS VERB resource[/subresource]`.
    #[must_use]
    pub fn failures(&self) -> BTreeMap<String, u64> {
        self.2
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn failed(&self, status: http::StatusCode, key: &str) {
        *self
            .2
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(format!("{} {key}", status.as_u16()))
            .or_default() += 1;
    }

    /// The counts so far.
    #[must_use]
    pub fn counts(&self) -> ApiCounts {
        let [reads, watches, creates, updates, deletes] =
            self.0.each_ref().map(|c| c.load(Ordering::Relaxed));
        ApiCounts {
            reads,
            watches,
            creates,
            updates,
            deletes,
        }
    }

    /// Counts `req`; returns its `VERB resource` key.
    fn count<B>(&self, req: &http::Request<B>) -> String {
        let watch = req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
        let slot = match *req.method() {
            http::Method::GET if watch => 1,
            http::Method::POST => 2,
            http::Method::PUT | http::Method::PATCH => 3,
            http::Method::DELETE => 4,
            _ => 0,
        };
        if let Some(c) = self.0.get(slot) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        let verb = if watch {
            "WATCH"
        } else {
            req.method().as_str()
        };
        let key = format!("{verb} {}", resource_of(req.uri().path()));
        *self
            .1
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
            .or_default() += 1;
        key
    }
}

impl<S> tower::Layer<S> for ApiCounter {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            counter: self.clone(),
        }
    }
}

/// A service counting its requests (see [`ApiCounter`]).
#[derive(Debug, Clone)]
pub struct Counted<S> {
    inner: S,
    counter: ApiCounter,
}

impl<S, B, RB> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let key = self.counter.count(&req);
        let counter = self.counter.clone();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let answer = answer.await;
            if let Ok(response) = &answer
                && (response.status().is_client_error() || response.status().is_server_error())
            {
                counter.failed(response.status(), &key);
            }
            answer
        })
    }
}

/// A client for the kubeconfig at `path` whose requests `counter` counts (no transparent
/// retry and a bound on outstanding requests, as [`crate::connect`]'s clients).
///
/// # Errors
/// The kubeconfig cannot be read or its TLS material loaded; the message names the file.
pub async fn counted_client(path: &Path, counter: &ApiCounter) -> anyhow::Result<kube::Client> {
    crate::connect::install_crypto_provider();
    let config = crate::connect::without_retry(crate::connect::config_from_kubeconfig(path).await?);
    Ok(kube::client::ClientBuilder::try_from(config)
        .with_context(|| format!("cannot build a client from kubeconfig {}", path.display()))?
        .with_layer(&crate::in_flight::InFlightLimit::DEFAULT)
        .with_layer(counter)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_kind() {
        let c = ApiCounter::default();
        let req = |m: http::Method, uri: &str| {
            http::Request::builder()
                .method(m)
                .uri(uri)
                .body(())
                .unwrap()
        };
        c.count(&req(http::Method::GET, "/api/v1/pods"));
        c.count(&req(
            http::Method::GET,
            "/api/v1/pods?watch=true&resourceVersion=1",
        ));
        c.count(&req(
            http::Method::POST,
            "/api/v1/namespaces/d/pods/p/eviction",
        ));
        c.count(&req(http::Method::PATCH, "/api/v1/nodes/n"));
        c.count(&req(http::Method::PUT, "/api/v1/nodes/n"));
        c.count(&req(http::Method::DELETE, "/api/v1/nodes/n"));
        let counts = c.counts();
        assert_eq!(
            counts,
            ApiCounts {
                reads: 1,
                watches: 1,
                creates: 1,
                updates: 2,
                deletes: 1
            }
        );
        assert_eq!(counts.writes(), 4);
        assert_eq!(c.by_resource()["POST pods/eviction"], 1);
        assert_eq!(c.by_resource()["PATCH nodes"], 1);
        assert_eq!(
            resource_of("/apis/cluster.x-k8s.io/v1beta1/namespaces/d/machinedeployments/m/scale"),
            "machinedeployments/scale"
        );
        assert_eq!(
            resource_of("/apis/karpenter.sh/v1/nodeclaims"),
            "nodeclaims"
        );
        assert_eq!(
            counts
                .since(&ApiCounts {
                    reads: 1,
                    ..ApiCounts::default()
                })
                .reads,
            0
        );
    }
}
