//! The composition of karpenter-capi, shared by the binary, the end-to-end tests and the
//! benchmarks.
//!
//! Responsibility:
//! - [`api_counter`]: counting a client's API requests (benchmarks);
//! - [`chaos`]: the randomized safety suite (`bench chaos` and its tests);
//! - [`doctor`]: `karpenter-capi doctor`, what blocks provisioning in a real installation;
//! - [`connect`]: clients for the workload and management clusters (TLS, every kubeconfig
//!   authentication, the management URL flags), checked once with errors naming the source;
//! - [`in_flight`]: the bound on each client's outstanding requests (their connections);
//! - [`operator`]: every controller wired to a workload and a management cluster;
//! - [`probes`]: `/healthz` (every long-running task alive) and `/readyz` (caches synced,
//!   CRDs served) of `run`;
//! - [`process`]: this process's CPU and RSS;
//! - [`rate_limit`]: the clients' token bucket (`--kube-client-qps`, `--kube-client-burst`);
//! - [`scenario`] and [`simulate`]: the `simulate` command's scenarios and runner.
//!
//! Inputs: clients, configuration, scenarios. Outputs: running controllers and summaries.

pub mod api_counter;
pub mod chaos;
pub mod connect;
pub mod doctor;
pub mod feature_gates;
pub mod in_flight;
pub mod operator;
pub mod probes;
pub mod process;
pub mod rate_limit;
pub mod scenario;
pub mod simulate;
