//! `sim`: an in-memory Kubernetes API server for controller and end-to-end tests.
//!
//! The real controller talks to it over HTTP exactly as to kube-apiserver — in-process through
//! [`Sim::router`] (a tower `Service`, so `kube::Client::new(sim.router(), "default")` needs no
//! TCP), or over `http://127.0.0.1:<port>` with a kubeconfig for `kubectl` and `kube::Config`
//! ([`serve`]).
//!
//! Modules, from pure logic to I/O:
//! - [`error`]: `Status` errors; [`object`]: JSON field access; [`selectors`]: label and field
//!   selectors; [`patch`], [`apply`]: patches and server-side apply; [`scale`]: the Scale view;
//!   [`options`]: query parameters; [`route`]: URL paths; [`schema`]: CRD schema pruning and
//!   defaulting.
//! - [`registry`], [`builtins`], [`crd`]: the served resource types; [`convert`]: versions.
//! - [`semantics`]: generic-registry write rules; [`store`]: objects, resourceVersions, watch
//!   history.
//! - [`pdb`]: disruption budget arithmetic.
//! - [`state`], [`lifecycle`], [`subresources`], [`eviction`], [`watch`]: operations on the locked state;
//!   [`sim`]: the shared server value.
//! - [`discovery`], [`openapi`], [`table`], [`http`]: the HTTP API; [`server`]: TCP serving and kubeconfig files.

//!
//! Fidelity notes (what is approximated or missing; each module says more):
//! - Objects are JSON; only CRD schemas prune and default ([`schema`]); built-in kinds get a
//!   few defaults (pods, deployments, namespaces) and no validation beyond names.
//! - Lists serve the latest state: a `continue` page shows objects after the last key as they
//!   are now (no MVCC snapshot) under the first page's resourceVersion; `resourceVersionMatch`
//!   is ignored.
//! - Strategic merge patch and server-side apply are approximations ([`patch`], [`apply`]).
//! - Deletes ignore `propagationPolicy` and `gracePeriodSeconds` (no garbage collector, no
//!   graceful pod termination yet); CRD and namespace cleanup happen synchronously.
//! - Request bodies must be JSON or YAML: protobuf/CBOR get 415, so `kubectl create
//!   configmap|deployment …` (typed, protobuf) does not work, while `kubectl apply -f` does.
//! - No authentication, authorization, admission webhooks, or aggregated discovery.

pub mod apply;
pub mod builtins;
pub mod convert;
pub mod crd;
pub mod discovery;
pub mod error;
pub mod eviction;
pub mod http;
pub mod lifecycle;
pub mod object;
pub mod openapi;
pub mod options;
pub mod patch;
pub mod pdb;
pub mod registry;
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
pub mod watch;

pub use error::{ApiError, ApiResult};
pub use server::{RunningServer, serve, serve_pair};
pub use sim::{Sim, SimConfig};
pub use state::Endpoint;
