//! Shared helpers: an in-process sim and a kube client talking to it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use sim::{Sim, SimConfig};

/// A fresh sim and a client for it over the in-process tower service.
pub fn client() -> (Sim, kube::Client) {
    client_with(SimConfig::default())
}

/// Same, with settings.
pub fn client_with(config: SimConfig) -> (Sim, kube::Client) {
    let sim = Sim::new(config);
    let client = kube::Client::new(sim.router(), "default");
    (sim, client)
}

/// Create a namespace.
pub async fn namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &ns).await.unwrap();
}

/// An object from JSON.
pub fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// The API error of a kube result.
pub fn api_err<T: std::fmt::Debug>(r: kube::Result<T>) -> kube::core::Status {
    match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}
