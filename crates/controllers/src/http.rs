//! The health and metrics HTTP server (spec §6 `--metrics-port`, `--health-probe-port`; §7).
//!
//! Responsibility: an axum [`router`] serving
//! - `GET /healthz`: 200 `ok` while the liveness check returns `Ok` (`run`: every
//!   long-running task of [`crate::liveness::Liveness`] still runs), else 500 with its reason
//!   (the tasks that stopped);
//! - `GET /readyz`: 200 `ok` when the readiness check returns `Ok`, else 503 with its reason
//!   (`run`: the caches listed, the CRDs it needs are served, and on the leader the Cluster
//!   API caches synced — see `karpenter_capi::probes`);
//! - `GET /metrics`: [`Metrics::encode`] as OpenMetrics text.
//!
//! [`bind`] binds a listener (port 0 picks a free port) and returns the bound address with the
//! serving future; [`serve`] does both and serves until the process ends. The binary may serve
//! one router on both ports or split them.
//!
//! Inputs: the [`Metrics`], a liveness and a readiness closure, an address. Outputs: HTTP responses.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};

use crate::metrics::Metrics;

/// The content type of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The readiness check of `/readyz`: `Err(reason)` while not ready.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The liveness check of `/healthz`: `Err(reason)` once the process should be restarted.
pub type LiveCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    live: LiveCheck,
    ready: ReadyCheck,
}

/// The routes `/healthz`, `/readyz` and `/metrics`.
pub fn router(metrics: Arc<Metrics>, live: LiveCheck, ready: ReadyCheck) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState {
            metrics,
            live,
            ready,
        })
}

async fn healthz(State(state): State<AppState>) -> Response {
    match (state.live)() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => (StatusCode::INTERNAL_SERVER_ERROR, reason).into_response(),
    }
}

async fn readyz(State(state): State<AppState>) -> Response {
    match (state.ready)() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
    }
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)],
        state.metrics.encode(),
    )
        .into_response()
}

/// Binds `addr` and returns the bound address (useful with port 0) and the future that serves
/// `router` on it until the process ends.
///
/// # Errors
/// When the address cannot be bound.
pub async fn bind(
    addr: SocketAddr,
    router: Router,
) -> std::io::Result<(SocketAddr, impl Future<Output = std::io::Result<()>> + Send)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, async move { axum::serve(listener, router).await }))
}

/// Binds `addr` and serves `router` until the process ends.
///
/// # Errors
/// When the address cannot be bound or serving fails.
pub async fn serve(addr: SocketAddr, router: Router) -> std::io::Result<()> {
    let (bound, serving) = bind(addr, router).await?;
    tracing::info!(address = %bound, "serving health and metrics");
    serving.await
}
