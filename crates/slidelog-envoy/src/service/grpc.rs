//! The tonic `RateLimitService` around [`RateLimiter`], and a server of it.

use super::RateLimiter;
use crate::proto::{RateLimitRequest, RateLimitResponse, RateLimitService};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

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
/// cache of small blocks (issue 26: it was ~1.4 KB).
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

/// Serves `RateLimitService` on `listener` until `shutdown` completes.
pub async fn serve_grpc(
    listener: tokio::net::TcpListener,
    limiter: Arc<RateLimiter>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .add_service(GrpcService::new(limiter).into_server())
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown,
        )
        .await
}
