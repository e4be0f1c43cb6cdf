//! The client token of a gRPC call: a service around the Envoy rate limit
//! service that answers `UNAUTHENTICATED` to a call without a valid
//! `authorization: Bearer <token>` and passes the others on.

use super::Auth;
use axum::http::{Request, Response};
use futures::future::{Either, Ready, ready};
use std::convert::Infallible;
use std::task::{Context, Poll};
use tower::Service;

/// Wraps a gRPC service; without token files every call passes.
#[derive(Debug, Clone)]
pub struct GrpcAuth<S> {
    inner: S,
    auth: Option<Auth>,
}

impl<S> GrpcAuth<S> {
    /// Wraps `inner`, checking calls against `auth` (none: no check).
    pub fn new(inner: S, auth: Option<Auth>) -> Self {
        let auth = auth.filter(Auth::guards_api);
        Self { inner, auth }
    }
}

impl<S, B> Service<Request<B>> for GrpcAuth<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>, Error = Infallible>,
{
    type Response = Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Either<S::Future, Ready<Result<Self::Response, Infallible>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let refused = (self.auth.as_ref()).and_then(|auth| auth.refuse_grpc(request.headers()));
        match refused {
            None => Either::Left(self.inner.call(request)),
            Some(status) => Either::Right(ready(Ok(status.into_http()))),
        }
    }
}
