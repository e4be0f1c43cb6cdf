//! A peer-like baseline for the latency benchmark (`scripts/bench/tail.sh`):
//! the two protocols `slidelog serve` speaks, HTTP/1.1 `POST /v1/check`
//! (axum) and Envoy's `ShouldRateLimit` (tonic), both with `TCP_NODELAY`,
//! answered at once with a fixed "allowed": no limiter, no store, no
//! metrics. Its latency tail is what the transport stacks and the machine
//! give, so whatever slidelog adds shows beside it, in the same run, with
//! the same client.
//!
//! It installs serve's log subscriber (`tracing_subscriber::fmt`, filtered by
//! `RUST_LOG`, default `info`, written to stderr:
//! `slidelog_server::cli::init_logs`, the one serve calls). That is for fairness, not for its logs:
//! h2, hyper and tonic open spans and events on every request, and with no
//! subscriber installed `tracing`'s `log` fallback (the crates enable its
//! `log` feature) builds and tests a `log` record for each span (`Span::log`,
//! `Span::record_all`) on every request. That cost the baseline ~11,600
//! user-space instructions per gRPC request (h2's spans; callgrind,
//! `scripts/bench/grpc_callgrind.sh`: 76,356 -> 64,782 per request with the
//! subscriber, whose filter disables those callsites once), 15% of it; on
//! HTTP it is within noise (`scripts/bench/service_callgrind.sh`: 26,536 ->
//! 26,746). Without it the baseline's gRPC side pays for something serve
//! does not, and serve's ratio to it is flattered.
//!
//! ```sh
//! cargo run --release -p slidelog-server --example transport_baseline -- 127.0.0.1:8081 127.0.0.1:8082
//! ```

use axum::Json;
use axum::body::Bytes;
use axum::routing::post;
use slidelog_envoy::proto::{
    RateLimitRequest, RateLimitResponse, RateLimitService, RateLimitServiceServer,
    rate_limit_response::Code,
};
use std::net::SocketAddr;

/// Answers every `ShouldRateLimit` with OK.
struct AlwaysOk;

#[tonic::async_trait]
impl RateLimitService for AlwaysOk {
    async fn should_rate_limit(
        &self,
        _request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            ..RateLimitResponse::default()
        }))
    }
}

/// The shape of an admitted `/v1/check` answer, with fixed numbers.
async fn check(_body: Bytes) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "allowed": true, "limit": 10_000_000, "window_ms": 60_000, "count": 1,
        "remaining": 9_999_999, "retry_after_ms": 0, "reset_after_ms": 60_000
    }))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Serve's log subscriber (default `--log-format text`): see the module doc.
    slidelog_server::cli::init_logs(slidelog_server::cli::LogFormat::Text);
    let mut args = std::env::args().skip(1);
    let http: SocketAddr = args.next().unwrap_or("127.0.0.1:8081".into()).parse()?;
    let grpc: SocketAddr = args.next().unwrap_or("127.0.0.1:8082".into()).parse()?;
    let listener = tokio::net::TcpListener::bind(http).await?;
    let router = axum::Router::new().route("/v1/check", post(check));
    let http_server = async move {
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        axum::serve(listener, router).await
    };
    let grpc_server = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(RateLimitServiceServer::new(AlwaysOk))
        .serve(grpc);
    eprintln!("baseline listening: http {http}, grpc {grpc}");
    tokio::select! {
        r = http_server => r?,
        r = grpc_server => r?,
    }
    Ok(())
}
