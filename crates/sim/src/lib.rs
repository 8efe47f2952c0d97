//! `sim`: an in-memory Kubernetes API server for controller and end-to-end tests.
//!
//! The real controller talks to it over HTTP exactly as to kube-apiserver — in-process through
//! [`Sim::router`] (a tower `Service`, so `kube::Client::new(sim.router(), "default")` needs no
//! TCP), or over `http://127.0.0.1:<port>` with a kubeconfig for `kubectl` and `kube::Config`
//! ([`serve`]). The `world` crate (`crates/world`) adds what a cluster pair would run —
//! Cluster API in a management cluster; kube-scheduler, kubelets and workload controllers in a
//! workload cluster — as controllers that only use `kube::Client`s, against sim or a real
//! kube-apiserver ([`realk8s`]).
//!
//! Modules, from pure logic to I/O:
//! - [`error`]: `Status` errors; [`object`]: JSON field access; [`selectors`]: label and field
//!   selectors; [`patch`]: patches; [`managed`]: managed fields and server-side apply; [`scale`]: the Scale view;
//!   [`options`]: query parameters; [`route`]: URL paths; [`schema`]: CRD schema pruning and
//!   defaulting; [`deletion`]: `DeleteOptions`, grace periods, delete plans; [`rng`]: the
//!   seeded random numbers.
//! - [`registry`], [`builtins`], [`crd`]: the served resource types; [`convert`]: versions
//!   (Cluster API's v1beta1 ↔ v1beta2 conversion in [`convert::capi`]).
//! - [`semantics`]: generic-registry write rules; [`store`]: objects, resourceVersions, watch
//!   history.
//! - [`pdb`]: disruption budget arithmetic.
//! - [`state`], [`lifecycle`], [`gc`], [`subresources`], [`eviction`], [`watch`]: operations on
//!   the locked state; [`answer`]: what they hand back out of the lock (list pages, write
//!   answers), encoded after it is let go; [`access_review`]: the `authorization.k8s.io` reviews (never stored); [`sim`]: the shared server value; [`fault`]: fault injection.
//! - [`discovery`], [`openapi`], [`table`], [`http`]: the HTTP API; [`server`]: TCP serving and
//!   kubeconfig files.
//! - [`crds`]: the CustomResourceDefinitions the simulated clusters serve (Cluster API's, as a
//!   management cluster of one release or another; ours) and installing them through a client.
//!
//! Fidelity notes (what is approximated or missing; each module says more). The differential
//! suite (`tests/differential.rs`) checks the API against a real kube-apiserver;
//! `DIFFERENCES.md` lists what differs on purpose.
//! - Objects are JSON; CRD schemas prune and default ([`schema`]); built-in kinds get a few
//!   defaults (pods, deployments, namespaces) and the validation clients trip over (decoding,
//!   names, pod containers, workload selectors — [`builtin_validation`] — and immutable
//!   fields on update, [`update_validation`]).
//! - A `continue` page lists the objects as of the first page's resourceVersion, rebuilt from
//!   the watch history (410 once that is compacted); `resourceVersionMatch` is ignored.
//! - Strategic merge patch and managed fields are approximations ([`patch`], [`managed`]).
//! - The garbage collector ([`gc`]), CRD and namespace cleanup run synchronously inside the
//!   request that triggers them; graceful pod deletion waits for a delete with a shorter grace
//!   period (kubelet-lite's) or the server's timer ([`lifecycle`]).
//! - Request bodies are JSON, YAML, or — for the built-in kinds sim serves, their
//!   `DeleteOptions`/`Eviction` and the access reviews, as client-go's typed clients (`kubectl
//!   create …`, `kubectl drain`, `kubectl auth can-i`) send them — protobuf ([`protobuf`]: an
//!   unknown kind or field number is 415, never dropped); CBOR gets 415. Answers are always
//!   JSON.
//! - No authentication, authorization, admission webhooks, or aggregated discovery: every
//!   request is allowed, and access reviews say so ([`access_review`]).

pub mod access_review;
pub mod answer;
pub mod builtin_schemas;
pub mod builtin_validation;
pub mod builtins;
pub mod convert;
pub mod crd;
pub mod crds;
pub mod deletion;
pub mod discovery;
pub mod error;
pub mod eviction;
pub mod fault;
pub mod feed;
pub mod gc;
pub mod http;
pub mod lifecycle;
pub mod managed;
pub mod object;
pub mod openapi;
pub mod options;
pub mod patch;
pub mod pdb;
pub mod printers;
pub mod protobuf;
pub mod realk8s;
pub mod registry;
pub mod rng;
pub mod route;
pub mod scale;
pub mod schema;
pub mod selectors;
pub mod semantics;
pub mod server;
pub mod sim;
pub mod state;
pub mod store;
pub mod subresources;
pub mod table;
pub mod update_validation;
pub mod validation;
pub mod watch;

pub use error::{ApiError, ApiResult};
pub use server::{RunningServer, serve, serve_pair};
pub use sim::{Sim, SimConfig};
pub use state::{Answer, Endpoint};
