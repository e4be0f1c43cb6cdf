//! The tonic `RateLimitService` around [`RateLimiter`], and a server of it.

use super::RateLimiter;
use crate::proto::{RateLimitRequest, RateLimitResponse, RateLimitService};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The tonic `RateLimitService`.
#[derive(Debug, Clone)]
pub struct GrpcService {
    limiter: Arc<RateLimiter>,
}

impl GrpcService {
    /// Creates the service over `limiter`.
    pub fn new(limiter: Arc<RateLimiter>) -> Self {
        Self { limiter }
    }

    /// Wraps the service for `tonic::transport::Server::add_service`.
    pub fn into_server(self) -> crate::proto::RateLimitServiceServer<Self> {
        crate::proto::RateLimitServiceServer::new(self)
    }
}

/// The future of one call: boxed, as `#[async_trait]` would box it.
type CallFuture<'a> = Pin<
    Box<dyn Future<Output = Result<tonic::Response<RateLimitResponse>, tonic::Status>> + Send + 'a>,
>;

/// Written as `#[async_trait]` expands it, with one difference: the call's
/// future holds the request's message, not the whole `tonic::Request` (its
/// metadata and extensions are dropped before the call, unread), and not
/// twice over (the macro's future keeps its argument and a moved copy). So
/// the boxed future stays small enough for the allocator's per-thread
/// cache of small blocks (it was ~1.4 KB).
impl RateLimitService for GrpcService {
    fn should_rate_limit<'life0, 'async_trait>(
        &'life0 self,
        request: tonic::Request<RateLimitRequest>,
    ) -> CallFuture<'async_trait>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let message = request.into_inner();
        Box::pin(async move {
            let response = self
                .limiter
                .should_rate_limit(&message)
                .await
                .map_err(tonic::Status::from)?;
            Ok(tonic::Response::new(response))
        })
    }
}

/// Most concurrent streams (calls) on one connection: `slidelog serve`'s
/// default `--grpc-max-streams`. tonic's server sets no bound.
pub const GRPC_MAX_STREAMS: u32 = 1_024;
/// Keep-alive ping interval and the time a ping may go unanswered before the
/// connection is closed: `slidelog serve`'s defaults. tonic's server sends
/// no pings, so a peer that went silent would hold its connection forever.
pub const GRPC_KEEPALIVE: (Duration, Duration) = (Duration::from_secs(30), Duration::from_secs(10));
/// Streams a client may make the server reset for protocol errors before
/// the connection is closed with GOAWAY `ENHANCE_YOUR_CALM`: h2's and hyper's
/// default, which tonic's server turns off.
pub const GRPC_MAX_LOCAL_ERROR_RESETS: usize = 1_024;

/// Serves `RateLimitService` on `listener` until `shutdown` completes, on
/// tonic's server with the per-connection bounds above.
///
/// A helper for embedding and tests; like `slidelog serve` it ends a call
/// at the client's `grpc-timeout` and drains calls in flight at shutdown.
/// `slidelog serve` does more for a port that faces untrusted clients: a
/// cap on open connections and a sweep of idle ones (docs/guide/http.md, "The HTTP
/// service", its table of flags).
pub async fn serve_grpc(
    listener: tokio::net::TcpListener,
    limiter: Arc<RateLimiter>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .max_concurrent_streams(GRPC_MAX_STREAMS)
        .http2_keepalive_interval(Some(GRPC_KEEPALIVE.0))
        .http2_keepalive_timeout(Some(GRPC_KEEPALIVE.1))
        .http2_max_local_error_reset_streams(Some(GRPC_MAX_LOCAL_ERROR_RESETS))
        .add_service(GrpcService::new(limiter).into_server())
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown,
        )
        .await
}
