//! Helpers shared by the layer tests: serve an axum app on a free loopback
//! port (with the peer address available to the layer), and fire requests
//! from many concurrent clients.
#![allow(dead_code)]

use axum::Router;
use std::net::SocketAddr;

/// Serves `app` on 127.0.0.1:0 with `ConnectInfo<SocketAddr>`; returns its
/// base URL. The server runs until the test's runtime ends.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("axum server");
    });
    format!("http://{addr}")
}

/// A client that does not pool beyond what the test needs.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .expect("reqwest client")
}

/// Sends `n` GETs to `url` at once (released together by a barrier) and
/// returns their status codes.
pub async fn concurrent_gets(url: &str, n: usize, headers: &[(&str, &str)]) -> Vec<u16> {
    let client = client();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(n));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let client = client.clone();
            let barrier = barrier.clone();
            let mut request = client.get(url);
            for (k, v) in headers {
                request = request.header(*k, *v);
            }
            tokio::spawn(async move {
                barrier.wait().await;
                request.send().await.expect("request").status().as_u16()
            })
        })
        .collect();
    let mut codes = Vec::with_capacity(n);
    for t in tasks {
        codes.push(t.await.expect("task"));
    }
    codes
}

/// How many of `codes` equal `code`.
pub fn count(codes: &[u16], code: u16) -> usize {
    codes.iter().filter(|c| **c == code).count()
}
