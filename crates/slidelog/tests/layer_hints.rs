//! What the layer tells a user who set it up wrong: the warning for an
//! unnamed layer on a shared store comes when the layer wraps a service
//! (so `.name(...)` after `new` silences it), once per layer; a `PeerIp`
//! layer on an axum app served without connect info names the fix in its
//! 400.

#[path = "support/counting.rs"]
mod counting;

use axum::{Router, routing::get};
use slidelog::middleware::PeerIp;
use slidelog::{Limiter, RateLimitLayer};
use std::sync::{Arc, Mutex};

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// How many lines hold the unnamed-layer warning.
    fn warnings(&self) -> usize {
        let text = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .filter(|l| l.contains("give it one with .name(...)"))
            .count()
    }
}

#[test]
fn the_unnamed_layer_warning_comes_when_wrapping_and_only_if_still_unnamed() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        // A store the limiter does not hold in process: shared, as Redis.
        let limiter = Limiter::from_store(counting::Counting::new());
        let limits = || "10/minute".parse().unwrap();
        let named = RateLimitLayer::new(limiter.clone(), PeerIp::new(), limits());
        let named = named.name("uploads").unwrap();
        let _: Router = Router::new().route("/a", get(|| async { "" }).layer(named));
        assert_eq!(captured.warnings(), 0, "named after new: no warning");
        let unnamed = RateLimitLayer::new(limiter, PeerIp::new(), limits());
        assert_eq!(captured.warnings(), 0, "not yet used");
        let _: Router = Router::new()
            .route("/b", get(|| async { "" }).layer(unnamed.clone()))
            .route("/c", get(|| async { "" }).layer(unnamed));
        assert_eq!(captured.warnings(), 1, "once, when it wraps a service");
    });
}

#[tokio::test]
async fn a_peer_ip_layer_without_connect_info_names_the_fix() {
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        PeerIp::new(),
        "10/minute".parse().unwrap(),
    );
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Served without `into_make_service_with_connect_info`.
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let r = reqwest::get(format!("http://{addr}/")).await.unwrap();
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(
        body.contains("into_make_service_with_connect_info::<SocketAddr>()"),
        "{body}"
    );
}
