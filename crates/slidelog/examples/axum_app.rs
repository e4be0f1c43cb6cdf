//! An axum app on Redis: `/search` 100 a minute per API key, `/upload` 10 a
//! minute per client IP. Each layer counts in its own namespace, so an API
//! key that equals a client IP never touches that IP's upload count. Fail-open
//! (the default): the app starts and serves while Redis is down, and limits
//! exactly as soon as Redis answers.
//!
//! ```text
//! cargo run -p slidelog --example axum_app       # SLIDELOG_STORE=memory:// without Redis
//! curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/search
//! ```

use axum::{Router, routing::get, routing::post};
use slidelog::middleware::{Header, PeerIp};
use slidelog::{Limiter, RateLimitLayer};

/// The routes, each behind its own limit.
pub fn app(limiter: &Limiter) -> Result<Router, Box<dyn std::error::Error>> {
    let key = Header::named("x-api-key")?;
    let per_key = RateLimitLayer::new(limiter.clone(), key, "100/minute".parse()?);
    let per_ip = RateLimitLayer::new(limiter.clone(), PeerIp::new(), "10/minute".parse()?);
    Ok(Router::new()
        .route("/search", get(|| async { "results\n" }).layer(per_key))
        .route("/upload", post(|| async { "stored\n" }).layer(per_ip)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("SLIDELOG_STORE").unwrap_or("redis://127.0.0.1:6379".into());
    let app = app(&Limiter::from_url(&url).await?)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    let peers = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
    Ok(axum::serve(listener, peers).await?)
}
