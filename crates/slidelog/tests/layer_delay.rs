//! `RateLimitLayer::delay_up_to`: a request over the limit is held until it
//! fits (in arrival order) instead of refused, up to the bound; past the
//! bound it is refused at once, with the usual 429.

mod common;

use axum::{Router, routing::get};
use common::{client, serve};
use slidelog::middleware::Header;
use slidelog::{Limiter, RateLimitLayer};
use std::time::{Duration, Instant};

async fn app(bound: Duration) -> String {
    let key = Header::named("x-api-key").unwrap();
    let layer =
        RateLimitLayer::new(Limiter::memory(), key, "2/300ms".parse().unwrap()).delay_up_to(bound);
    serve(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await
}

#[tokio::test]
async fn requests_over_the_limit_wait_for_room_up_to_the_bound() {
    let base = app(Duration::from_secs(2)).await;
    let http = client();
    let started = Instant::now();
    let sends = (0..6).map(|_| http.get(&base).header("x-api-key", "a").send());
    let answers = futures_join(sends).await;
    let took = started.elapsed();
    for r in &answers {
        assert_eq!(r.as_ref().unwrap().status(), 200);
    }
    // Six at two per 300 ms: the last two fit 600 ms after the first two.
    assert!(took >= Duration::from_millis(600), "{took:?}");
    assert!(took < Duration::from_millis(1_500), "{took:?}");
}

#[tokio::test]
async fn past_the_bound_the_request_is_refused_at_once() {
    let base = app(Duration::from_millis(100)).await;
    let http = client();
    let send = || http.get(&base).header("x-api-key", "b").send();
    assert_eq!(send().await.unwrap().status(), 200);
    assert_eq!(send().await.unwrap().status(), 200);
    let started = Instant::now();
    let r = send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    assert!(
        started.elapsed() < Duration::from_millis(90),
        "{:?}",
        started.elapsed()
    );
}

/// Awaits every future, concurrently.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}
