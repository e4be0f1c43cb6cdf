//! A tonic service limited per client address: the standard gRPC health
//! service behind the rate limit layer, 5 calls per second per client IP.
//! Over the limit, calls fail with RESOURCE_EXHAUSTED and carry `retry-after`
//! and the RateLimit fields as metadata.
//!
//! Run (store URL from `SLIDELOG_STORE`, default `memory://`):
//!
//! ```text
//! cargo run -p slidelog --example tonic_per_client
//! grpcurl -plaintext 127.0.0.1:50051 grpc.health.v1.Health/Check
//! ```

use slidelog::middleware::{PeerIp, RateLimitLayer, RouteLimits};
use slidelog::{Limit, Limiter};
use std::time::Duration;
use tonic::transport::Server;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = std::env::var("SLIDELOG_STORE").unwrap_or_else(|_| "memory://".into());
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:50051".into());

    let limiter = Limiter::builder()
        .timeout(Duration::from_millis(50))
        .fail_open()
        .open(&store, Default::default())
        .await?;
    let routes = RouteLimits::new([Limit::per(5, Duration::from_secs(1))?])?;
    // Behind a proxy, trust it to name the client:
    // PeerIp::new().trust_proxies(["10.0.0.1".parse()?])
    let layer = RateLimitLayer::new(limiter, PeerIp::new(), routes);

    let (_reporter, health) = tonic_health::server::health_reporter();
    println!("gRPC health service on {addr} (store {store})");
    Server::builder()
        .layer(layer)
        .add_service(health)
        .serve(addr.parse()?)
        .await?;
    Ok(())
}
