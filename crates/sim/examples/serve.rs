//! Serve an empty sim on 127.0.0.1:<port> (first argument, default 0) until Ctrl-C; prints the
//! kubeconfig path. For poking at the server with `kubectl --kubeconfig`.

use std::net::SocketAddr;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let server = sim::serve(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    println!("serving {}", server.url());
    println!("kubeconfig {}", server.kubeconfig_path().display());
    tokio::signal::ctrl_c().await?;
    server.shutdown().await
}
