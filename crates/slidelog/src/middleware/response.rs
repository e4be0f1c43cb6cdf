//! The answers the layer makes itself (429, 400, 503, or their gRPC
//! statuses) and the RateLimit fields it adds to the inner service's answers.

use crate::headers::{RateLimitFields, ratelimit_fields};
use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use slidelog_core::{Decision, Limit};

/// `RateLimit-Policy` (lower case: HTTP/2 field names).
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// A response body the layer can make its own answers with.
///
/// The layer keeps the inner service's body type, so it must be able to build
/// one from text. Implemented for `String`, `http_body_util::Full<Bytes>`,
/// `axum::body::Body` (feature `axum`) and `tonic::body::Body` (feature
/// `tonic`); implement it for your own body type to use another.
pub trait RejectionBody: Sized {
    /// A body holding `text` (possibly empty).
    fn from_text(text: String) -> Self;
}

impl RejectionBody for String {
    fn from_text(text: String) -> Self {
        text
    }
}

impl RejectionBody for http_body_util::Full<Bytes> {
    fn from_text(text: String) -> Self {
        Self::new(Bytes::from(text))
    }
}

#[cfg(feature = "axum")]
impl RejectionBody for axum::body::Body {
    fn from_text(text: String) -> Self {
        Self::from(text)
    }
}

#[cfg(feature = "tonic")]
impl RejectionBody for tonic::body::Body {
    fn from_text(text: String) -> Self {
        if text.is_empty() {
            Self::default()
        } else {
            Self::new(text)
        }
    }
}

/// gRPC status codes the layer answers with.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GrpcCode {
    InvalidArgument = 3,
    ResourceExhausted = 8,
    Unavailable = 14,
}

/// An answer the layer makes without calling the inner service.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) grpc: GrpcCode,
    pub(crate) message: String,
    pub(crate) fields: Option<RateLimitFields>,
}

impl Refusal {
    /// 429 / RESOURCE_EXHAUSTED with `Retry-After` and the RateLimit fields.
    pub(crate) fn limited(decision: &Decision, limits: &[Limit]) -> Self {
        let fields = ratelimit_fields(decision, limits);
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            grpc: GrpcCode::ResourceExhausted,
            message: format!(
                "rate limit exceeded: {} per {} ms; retry after {} s",
                decision.limit,
                decision.window_ms,
                fields.retry_after.as_deref().unwrap_or("1")
            ),
            fields: Some(fields),
        }
    }

    /// 400 / INVALID_ARGUMENT: no usable key.
    pub(crate) fn bad_key(why: impl std::fmt::Display) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            grpc: GrpcCode::InvalidArgument,
            message: format!("cannot identify the client for rate limiting: {why}"),
            fields: None,
        }
    }

    /// 503 / UNAVAILABLE: the store failed and the policy is fail-closed.
    pub(crate) fn unavailable(error: impl std::fmt::Display) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            grpc: GrpcCode::Unavailable,
            message: format!("rate limiter unavailable: {error}"),
            fields: None,
        }
    }

    /// The HTTP answer, or for a gRPC request a trailers-only gRPC answer
    /// (HTTP 200 with `grpc-status`), which gRPC clients read as a status
    /// rather than as a transport failure.
    pub(crate) fn into_response<B: RejectionBody>(self, grpc: bool) -> Response<B> {
        let body = if grpc {
            String::new()
        } else {
            format!("{}\n", self.message)
        };
        let mut response = Response::new(B::from_text(body));
        if grpc {
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            headers.insert("grpc-status", HeaderValue::from(self.grpc as u16));
            if let Ok(message) = HeaderValue::from_str(&grpc_message(&self.message)) {
                headers.insert("grpc-message", message);
            }
        } else {
            *response.status_mut() = self.status;
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
        }
        if let Some(fields) = &self.fields {
            insert_fields(response.headers_mut(), fields);
        }
        response
    }
}

/// Adds `RateLimit-Policy`, `RateLimit` and (when rejected) `Retry-After`.
pub(crate) fn insert_fields(headers: &mut HeaderMap, fields: &RateLimitFields) {
    // The values are ASCII digits, letters, quotes and `;=,-`: always valid.
    if let Ok(v) = HeaderValue::from_str(&fields.policy) {
        headers.insert(RATELIMIT_POLICY, v);
    }
    if let Some(Ok(v)) = fields.ratelimit.as_deref().map(HeaderValue::from_str) {
        headers.insert(RATELIMIT, v);
    }
    if let Some(Ok(v)) = fields.retry_after.as_deref().map(HeaderValue::from_str) {
        headers.insert(RETRY_AFTER, v);
    }
}

/// `grpc-message` is percent-encoded outside printable ASCII and `%`.
fn grpc_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// True for gRPC requests (`content-type: application/grpc…`).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(grpc_message("a b%c\né"), "a b%25c%0A%C3%A9");
    }

    #[test]
    fn grpc_refusals_are_trailers_only_answers() {
        let r: Response<String> = Refusal::unavailable("down").into_response(true);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["grpc-status"], "14");
        assert_eq!(r.headers()[CONTENT_TYPE], "application/grpc");
        assert!(r.body().is_empty());
        let r: Response<String> = Refusal::bad_key("no x-api-key").into_response(false);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert!(r.body().contains("no x-api-key"));
    }
}
