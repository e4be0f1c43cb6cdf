//! The client's deadline of a gRPC call (`grpc-timeout`), as
//! `tonic::transport::Server` honours it: a call still running when the
//! deadline passes is dropped and answered `CANCELLED` ("Timeout expired").
//! `serve` serves gRPC on its own connection loop ([`crate::server::serve_grpc`]),
//! so it keeps this behaviour here. A call without the header, or with one
//! that does not parse, runs unbounded by the client (the store's own
//! timeout, `--store-timeout`, still bounds it), as with tonic.
//!
//! The deadline also goes down to the store: the call runs within
//! [`slidelog::redis::caller_deadline::within`], so a check sent to Redis
//! carries the client's deadline when it is sooner than the store's own,
//! and the script or module command refuses to record past it. A call
//! answered `CANCELLED` therefore leaves no late record (a reply already on
//! its way when the deadline passes is counted,
//! `slidelog_store_late_records_total`).

use axum::http::{HeaderMap, Request, Response};
use futures::FutureExt as _;
use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::Service;

/// The header a gRPC client sends its deadline in.
const GRPC_TIMEOUT: &str = "grpc-timeout";

/// Wraps a gRPC service so that a call ends at its client's deadline.
#[derive(Debug, Clone)]
pub struct ClientDeadline<S> {
    inner: S,
}

impl<S> ClientDeadline<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

/// A call's future, with a deadline or without (boxed only with one).
type Deadlined<F> = futures::future::Either<
    F,
    futures::future::BoxFuture<'static, Result<Response<tonic::body::Body>, Infallible>>,
>;

impl<S, B> Service<Request<B>> for ClientDeadline<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Deadlined<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match client_timeout(request.headers()) {
            None => futures::future::Either::Left(self.inner.call(request)),
            Some(deadline) => {
                let call = self.inner.call(request);
                let at = std::time::Instant::now() + deadline;
                let scoped = slidelog::redis::caller_deadline::within(at, call);
                futures::future::Either::Right(
                    tokio::time::timeout(deadline, scoped)
                        .map(expired_as_cancelled)
                        .boxed(),
                )
            }
        }
    }
}

/// The call's answer, or `CANCELLED` when its deadline passed first
/// (tonic's answer, word for word).
fn expired_as_cancelled(
    outcome: Result<Result<Response<tonic::body::Body>, Infallible>, tokio::time::error::Elapsed>,
) -> Result<Response<tonic::body::Body>, Infallible> {
    outcome.unwrap_or_else(|_| Ok(tonic::Status::cancelled("Timeout expired").into_http()))
}

/// Reads `grpc-timeout` as the gRPC over HTTP/2 protocol defines it: at
/// most 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`). `None` when
/// absent or malformed (ignored, as tonic ignores it).
fn client_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(GRPC_TIMEOUT)?.as_bytes();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // At most 8 digits: no overflow, in any unit.
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout_of(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, value.parse().unwrap());
        client_timeout(&headers)
    }

    #[test]
    fn reads_every_unit_and_ignores_what_the_protocol_does_not_allow() {
        assert_eq!(timeout_of("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout_of("3M"), Some(Duration::from_secs(180)));
        assert_eq!(timeout_of("20S"), Some(Duration::from_secs(20)));
        assert_eq!(timeout_of("20m"), Some(Duration::from_millis(20)));
        assert_eq!(timeout_of("7u"), Some(Duration::from_micros(7)));
        assert_eq!(
            timeout_of("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        assert_eq!(
            timeout_of("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        for bad in ["", "m", "123456789m", "12x", "-1m", "1.5S", "+1S", " 1S"] {
            assert_eq!(timeout_of(bad), None, "{bad:?}");
        }
        assert_eq!(client_timeout(&HeaderMap::new()), None);
    }
}
