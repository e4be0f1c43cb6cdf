//! An axum app limited per API key on Redis.
//!
//! Every request must carry `x-api-key`; each key gets 10 requests per second
//! and 1,000 per hour, `POST /orders` 2 per second, and `/healthz` is not
//! limited. Over the limit, the app answers 429 with `Retry-After` and the
//! IETF RateLimit fields; under it, the RateLimit fields are added.
//!
//! Run (Redis URL from `SLIDELOG_STORE`, default `redis://127.0.0.1:6379`;
//! `memory://` runs without Redis):
//!
//! ```text
//! cargo run -p slidelog --example axum_api_key
//! curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/
//! ```

use axum::Router;
use axum::routing::{get, post};
use slidelog::middleware::{Header, RateLimitLayer, RouteLimits};
use slidelog::url::StoreOptions;
use slidelog::{Limit, Limiter};
use std::net::SocketAddr;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = std::env::var("SLIDELOG_STORE").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());

    // A Redis outage must not take the API down: fail open (requests pass,
    // marked degraded) and never wait more than 50 ms for Redis.
    let limiter = Limiter::builder()
        .timeout(Duration::from_millis(50))
        .fail_open()
        .open(&store, StoreOptions::default().prefix("example:rl:"))
        .await?;

    let second = Duration::from_secs(1);
    let hour = Duration::from_secs(3600);
    let routes = RouteLimits::new([Limit::per(10, second)?, Limit::per(1_000, hour)?])?
        .route_method(http::Method::POST, "/orders", [Limit::per(2, second)?])?
        .unlimited("/healthz");
    let layer = RateLimitLayer::new(limiter, Header::named("x-api-key")?, routes);

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route("/orders", post(|| async { "order placed\n" }))
        .route("/healthz", get(|| async { "ok\n" }))
        .layer(layer);

    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "listening on http://{} (store {store})",
        listener.local_addr()?
    );
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
