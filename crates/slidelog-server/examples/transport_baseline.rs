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
//! The gRPC side runs on `tonic::transport::Server`, the stack most tonic
//! services run on (and the floor BENCHMARKS.md's service ratios are set against).
//! With `BASELINE_GRPC=hyper` it runs on hyper alone instead, straight to
//! the generated server, as `serve` now serves its gRPC port
//! (`slidelog_server::server::serve_grpc`, without serve's keep-alive
//! pings, connection limits and client deadlines): the floor of the
//! transport, to see what serve's own work costs above it.
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
    let on_hyper = std::env::var("BASELINE_GRPC").is_ok_and(|v| v == "hyper");
    let grpc_server = async move {
        if on_hyper {
            serve_grpc_on_hyper(grpc).await
        } else {
            tonic::transport::Server::builder()
                .tcp_nodelay(true)
                .add_service(RateLimitServiceServer::new(AlwaysOk))
                .serve(grpc)
                .await
                .map_err(anyhow::Error::from)
        }
    };
    let stack = if on_hyper { "hyper" } else { "tonic" };
    eprintln!("baseline listening: http {http}, grpc {grpc} ({stack})");
    tokio::select! {
        r = http_server => r?,
        r = grpc_server => r?,
    }
    Ok(())
}

/// `AlwaysOk` on HTTP/2 connections of hyper's, without tonic's server.
async fn serve_grpc_on_hyper(addr: SocketAddr) -> anyhow::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder;
    use hyper_util::service::TowerToHyperService;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let builder = Builder::new(TokioExecutor::new()).http2_only();
    let service = RateLimitServiceServer::new(AlwaysOk);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let conn = builder
            .serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service.clone()))
            .into_owned();
        tokio::spawn(conn);
    }
}
