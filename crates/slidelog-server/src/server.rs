//! Running the service: serve a router on a bound listener until the shutdown
//! signal, then stop accepting, let in-flight requests finish, and give up on
//! them after a grace period so that the process always exits in time.
//!
//! Both ports share one [`Conns`] (connection cap with eviction of quiet
//! connections, idle timeouts; see [`crate::conns`]). HTTP adds a
//! header-read timeout; gRPC caps concurrent HTTP/2 streams per connection
//! and sends keep-alive pings, closing a connection whose peer stops
//! answering them.

use crate::conns::{Conns, default_max_connections};
use crate::shutdown::Shutdown;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use std::io;
use std::time::Duration;
use tokio::net::TcpListener;

/// Default time in-flight requests get after the shutdown signal.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// Default time a client gets to send a request's headers (which is also
/// how long a kept-alive connection may wait for its next request).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time an HTTP connection may send nothing before it is closed.
pub const DEFAULT_HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a gRPC connection may send nothing (keep-alive ping
/// answers count) before it is closed.
pub const DEFAULT_GRPC_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default cap on concurrent HTTP/2 streams of one gRPC connection.
pub const DEFAULT_GRPC_MAX_STREAMS: u32 = 1_024;
/// Default interval of the gRPC server's HTTP/2 keep-alive pings.
pub const DEFAULT_GRPC_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// Default time a ping may go unanswered before the connection is closed.
pub const DEFAULT_GRPC_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How a server run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every in-flight request finished within the grace period.
    Drained,
    /// The grace period ran out with requests still in flight; they were dropped.
    GraceExpired,
}

/// Connection limits of both ports (flags of `serve`).
#[derive(Debug, Clone)]
pub struct Hygiene {
    /// The connections of both ports, with their cap.
    pub conns: Conns,
    /// Time to receive an HTTP request's headers.
    pub header_timeout: Duration,
    /// An HTTP connection that sends nothing this long is closed.
    pub http_idle_timeout: Duration,
    /// A gRPC connection that sends nothing this long is closed.
    pub grpc_idle_timeout: Duration,
    /// Concurrent HTTP/2 streams per gRPC connection.
    pub grpc_max_streams: u32,
    /// Interval of gRPC keep-alive pings.
    pub grpc_keepalive_interval: Duration,
    /// Time a keep-alive ping may go unanswered.
    pub grpc_keepalive_timeout: Duration,
}

impl Default for Hygiene {
    fn default() -> Self {
        Self {
            conns: Conns::new(default_max_connections()),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            http_idle_timeout: DEFAULT_HTTP_IDLE_TIMEOUT,
            grpc_idle_timeout: DEFAULT_GRPC_IDLE_TIMEOUT,
            grpc_max_streams: DEFAULT_GRPC_MAX_STREAMS,
            grpc_keepalive_interval: DEFAULT_GRPC_KEEPALIVE_INTERVAL,
            grpc_keepalive_timeout: DEFAULT_GRPC_KEEPALIVE_TIMEOUT,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` fires; then finishes the
/// requests in flight for at most `grace`. Default connection limits.
///
/// Tests bind `127.0.0.1:0` and read the port from the listener first.
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    shutdown: Shutdown,
    grace: Duration,
) -> io::Result<Stopped> {
    serve_http_with(listener, router, shutdown, grace, &Hygiene::default()).await
}

/// [`serve_http`] with the given connection limits.
pub async fn serve_http_with(
    listener: TcpListener,
    router: Router,
    shutdown: Shutdown,
    grace: Duration,
    hygiene: &Hygiene,
) -> io::Result<Stopped> {
    let conns = hygiene.conns.clone();
    conns.spawn_idle_sweep("http", hygiene.http_idle_timeout, shutdown.clone().wait());
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(hygiene.header_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let stop = shutdown.clone().wait();
    tokio::pin!(stop);
    loop {
        let io = tokio::select! {
            () = &mut stop => break,
            io = conns.accept(&listener, "http") => io,
        };
        let service = TowerToHyperService::new(router.clone());
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
        });
    }
    // No new connections; in-flight requests get `grace`.
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => Ok(Stopped::Drained),
        () = tokio::time::sleep(grace) => {
            tracing::warn!(grace = ?grace, "grace period over: dropping requests still in flight");
            Ok(Stopped::GraceExpired)
        }
    }
}

/// Serves the Envoy rate limit gRPC API on `listener` until `shutdown`
/// fires, with the connection limits of `hygiene`.
pub async fn serve_grpc(
    listener: TcpListener,
    limiter: std::sync::Arc<slidelog_envoy::RateLimiter>,
    shutdown: Shutdown,
    hygiene: &Hygiene,
) -> Result<(), tonic::transport::Error> {
    let conns = hygiene.conns.clone();
    conns.spawn_idle_sweep("grpc", hygiene.grpc_idle_timeout, shutdown.clone().wait());
    let incoming = futures::stream::unfold((listener, conns), |(listener, conns)| async move {
        let io = conns.accept(&listener, "grpc").await;
        Some((Ok::<_, io::Error>(io), (listener, conns)))
    });
    tonic::transport::Server::builder()
        .max_concurrent_streams(hygiene.grpc_max_streams)
        .http2_keepalive_interval(Some(hygiene.grpc_keepalive_interval))
        .http2_keepalive_timeout(Some(hygiene.grpc_keepalive_timeout))
        .add_service(slidelog_envoy::service::GrpcService::new(limiter).into_server())
        .serve_with_incoming_shutdown(incoming, shutdown.wait())
        .await
}
