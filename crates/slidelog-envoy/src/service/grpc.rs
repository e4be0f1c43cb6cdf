//! The tonic `RateLimitService` around [`RateLimiter`], and a server of it.

use super::RateLimiter;
use crate::proto::{RateLimitRequest, RateLimitResponse, RateLimitService};
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

#[tonic::async_trait]
impl RateLimitService for GrpcService {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let response = self
            .limiter
            .should_rate_limit(request.get_ref())
            .await
            .map_err(tonic::Status::from)?;
        Ok(tonic::Response::new(response))
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
