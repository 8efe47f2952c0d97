//! The health and metrics server over real TCP, read with a minimal HTTP/1.1 client.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use controllers::http::{OPENMETRICS_CONTENT_TYPE, bind, router};
use controllers::liveness::Liveness;
use controllers::metrics::Metrics;
use tokio::net::TcpStream;

/// Writes all of `bytes` (tokio's `io-util` extension traits are not enabled here).
async fn write_all(stream: &TcpStream, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        stream.writable().await.unwrap();
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("write: {e}"),
        }
    }
}

/// Reads until the server closes the connection.
async fn read_to_end(stream: &TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        stream.readable().await.unwrap();
        match stream.try_read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Status code, lowercase headers and body of `GET path`.
async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    write_all(&stream, request.as_bytes()).await;
    let raw = read_to_end(&stream).await;
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, head.to_lowercase(), body.to_owned())
}

#[tokio::test]
async fn health_readiness_and_metrics_are_served() {
    let ready = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ready);
    let live = Liveness::new();
    let provisioner = live.spawn("provisioner", std::future::pending());
    let _watch = live.spawn("Node watch", std::future::pending());
    let checked = live.clone();
    let app = router(
        Arc::new(Metrics::new()),
        Arc::new(move || checked.check()),
        Arc::new(move || {
            if flag.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err("cluster state not synced".to_owned())
            }
        }),
    );
    let (addr, serving) = bind("127.0.0.1:0".parse().unwrap(), app).await.unwrap();
    assert_ne!(addr.port(), 0);
    tokio::spawn(serving);

    let (code, _, body) = get(addr, "/healthz").await;
    assert_eq!((code, body.as_str()), (200, "ok"));

    let (code, _, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503);
    assert!(body.contains("cluster state not synced"), "{body}");
    ready.store(true, Ordering::SeqCst);
    let (code, _, body) = get(addr, "/readyz").await;
    assert_eq!((code, body.as_str()), (200, "ok"));

    let (code, head, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        head.contains(&format!("content-type: {OPENMETRICS_CONTENT_TYPE}")),
        "{head}"
    );
    assert!(body.contains("karpenter_build_info{"), "{body}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");

    let (code, _, _) = get(addr, "/nope").await;
    assert_eq!(code, 404);

    // A controller task that ends makes `/healthz` fail, naming it; the others still serve.
    provisioner.abort();
    let _ = provisioner.await;
    let (code, _, body) = get(addr, "/healthz").await;
    assert_eq!((code, body.as_str()), (500, "tasks stopped: provisioner"));
    let (code, _, _) = get(addr, "/readyz").await;
    assert_eq!(code, 200);
}
