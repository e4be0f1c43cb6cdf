//! The answers the layer makes itself (429, 400, 503, or their gRPC
//! statuses) and the RateLimit fields it adds to the inner service's answers.

use crate::headers::{RateLimitFields, insert_fields, ratelimit_fields_each};
use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use slidelog_core::{Decision, Detailed, InputError, JointDecision, Limit, LimitState};
use std::sync::Arc;
use std::time::Duration;

/// A response body the layer can make its own answers with.
///
/// The layer keeps the inner service's body type, so it must be able to build
/// one from text. Implemented for `String`, `http_body_util::Full<Bytes>`,
/// `axum::body::Body` (feature `axum`) and `tonic::body::Body` (feature
/// `tonic`); implement it for your own body type to use another.
#[diagnostic::on_unimplemented(
    message = "the rate limit layer cannot build its answers (429, 503) with the response body `{Self}`",
    label = "the inner service answers with this body type",
    note = "for axum enable slidelog's `axum` feature: slidelog = {{ version = \"0.1\", features = [\"axum\"] }}",
    note = "for tonic enable slidelog's `tonic` feature; for another body type implement `slidelog::middleware::RejectionBody` for it"
)]
pub trait RejectionBody: Sized {
    /// Returns a body holding `text` (possibly empty).
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

/// Makes the HTTP answer to a rejection (see
/// [`RateLimitLayer::on_rejection`](super::RateLimitLayer::on_rejection)).
pub(crate) type RejectionHook = Arc<dyn Fn(&Rejection) -> Response<String> + Send + Sync>;

/// gRPC status codes the layer answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GrpcCode {
    InvalidArgument = 3,
    ResourceExhausted = 8,
    Internal = 13,
    Unavailable = 14,
}

/// Why the layer answered a request itself, without the inner service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RejectionKind {
    /// Over the limit: 429 (gRPC RESOURCE_EXHAUSTED), with `Retry-After`.
    Limited,
    /// The request costs more than its limit ever admits (its cost is above a
    /// limit's `max`, or above the limiter's bounds), or its body is longer
    /// than the layer reads to count it: 413 (gRPC INVALID_ARGUMENT).
    /// Waiting does not help.
    TooCostly,
    /// No usable key, a cost of 0, or a body that cannot be read: 400 (gRPC
    /// INVALID_ARGUMENT).
    BadRequest,
    /// The store failed under fail-closed, or is full: 503 (gRPC
    /// UNAVAILABLE).
    Unavailable,
    /// The layer's own configuration does not fit its limiter (e.g. a
    /// route's limit above the limiter's `bounds`): 500 (gRPC INTERNAL),
    /// with the reason. A bug of the service, not of the client. (A cost
    /// list of the wrong length is refused when the layer is built.)
    Misconfigured,
}

/// An answer the layer makes without calling the inner service. A
/// [`RateLimitLayer::on_rejection`](super::RateLimitLayer::on_rejection) hook
/// sees it and may make its own HTTP response (e.g. a JSON body); the layer
/// then adds `RateLimit-Policy`, `RateLimit` and `Retry-After` to it.
#[derive(Debug, Clone)]
pub struct Rejection {
    kind: RejectionKind,
    message: String,
    /// The decision with every limit's state, for [`RejectionKind::Limited`].
    each: Option<Detailed>,
    limits: Option<Arc<[Limit]>>,
    /// Seconds to wait before trying again (a full store says when a log expires).
    retry_after_ms: Option<u64>,
    /// The RateLimit fields, when the layer lists its limits by key
    /// (several keys, or stacked layers): formatted by the layer.
    keyed: Option<Box<RateLimitFields>>,
}

impl Rejection {
    /// Why the request was refused.
    pub fn kind(&self) -> RejectionKind {
        self.kind
    }

    /// Returns the HTTP status of the default answer.
    pub fn status(&self) -> StatusCode {
        match self.kind {
            RejectionKind::Limited => StatusCode::TOO_MANY_REQUESTS,
            RejectionKind::TooCostly => StatusCode::PAYLOAD_TOO_LARGE,
            RejectionKind::BadRequest => StatusCode::BAD_REQUEST,
            RejectionKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            RejectionKind::Misconfigured => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn grpc(&self) -> GrpcCode {
        match self.kind {
            RejectionKind::Limited => GrpcCode::ResourceExhausted,
            RejectionKind::TooCostly | RejectionKind::BadRequest => GrpcCode::InvalidArgument,
            RejectionKind::Unavailable => GrpcCode::Unavailable,
            RejectionKind::Misconfigured => GrpcCode::Internal,
        }
    }

    /// Returns the reason, in words (the default answer's body).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Returns the decision, for [`RejectionKind::Limited`].
    pub fn decision(&self) -> Option<&Decision> {
        self.each.as_ref().map(|each| &each.decision)
    }

    /// Returns every limit's state, in the route's order, for
    /// [`RejectionKind::Limited`] (empty otherwise): what a JSON body lists
    /// (a store that reports only the deciding limit leaves the others'
    /// counts empty).
    pub fn limit_states(&self) -> &[LimitState] {
        self.each.as_ref().map_or(&[], |each| &each.limits)
    }

    /// Returns the wait before the same request may be admitted, when known.
    pub fn retry_after(&self) -> Option<Duration> {
        self.decision()
            .filter(|d| !d.allowed)
            .map(|d| d.retry_after())
            .or(self.retry_after_ms.map(Duration::from_millis))
    }

    /// Returns an HTTP response with this rejection's status, `content_type` (left
    /// out if it is not a valid header value) and `body`: what an
    /// [`on_rejection`](super::RateLimitLayer::on_rejection) hook returns.
    ///
    /// ```
    /// use slidelog::middleware::Rejection;
    /// fn json(r: &Rejection) -> http::Response<String> {
    ///     let wait = r.retry_after().unwrap_or_default().as_secs();
    ///     r.response("application/json", format!(r#"{{"error":"{:?}","retry_after_s":{wait}}}"#, r.kind()))
    /// }
    /// ```
    pub fn response(&self, content_type: &str, body: impl Into<String>) -> Response<String> {
        let mut response = Response::new(body.into());
        *response.status_mut() = self.status();
        if let Ok(v) = HeaderValue::from_str(content_type) {
            response.headers_mut().insert(CONTENT_TYPE, v);
        }
        response
    }

    /// 429 / RESOURCE_EXHAUSTED with `Retry-After` and the RateLimit fields.
    pub(crate) fn limited(each: Detailed, limits: Arc<[Limit]>) -> Self {
        let name = each
            .deciding()
            .and_then(|s| s.limit.name())
            .map_or(String::new(), |name| format!("{name}: "));
        Self::limited_as(each, limits, name)
    }

    /// 429 of a joint decision whose limits are listed by key (`keys[i]`
    /// names check `i`): the refusing key's decision, waiting as long as
    /// the longest wait of the refusing keys (`Retry-After`).
    pub(crate) fn limited_joint(
        joint: &JointDecision,
        keys: &[&str],
        limits: Arc<[Limit]>,
    ) -> Self {
        let fields = crate::headers::ratelimit_fields_joint(joint, keys);
        let mut each = joint.deciding().clone();
        let wait = joint.checks.iter().map(|c| c.decision.retry_after_ms).max();
        each.decision.retry_after_ms = wait.unwrap_or(each.decision.retry_after_ms);
        let at = joint.refused_by.map_or(0, |r| r.check);
        let mut name = keys.get(at).map_or(String::new(), |k| (*k).to_owned());
        if let Some(limit) = each.deciding().and_then(|s| s.limit.name()) {
            name = format!("{name}.{limit}");
        }
        Self {
            keyed: Some(Box::new(fields)),
            ..Self::limited_as(each, limits, format!("{name}: "))
        }
    }

    fn limited_as(each: Detailed, limits: Arc<[Limit]>, name: String) -> Self {
        let decision = &each.decision;
        Self {
            kind: RejectionKind::Limited,
            message: format!(
                "rate limit exceeded: {name}{} per {} ms; retry after {} s",
                decision.limit,
                decision.window_ms,
                crate::headers::ceil_secs(decision.retry_after_ms).max(1)
            ),
            each: Some(each),
            limits: Some(limits),
            retry_after_ms: None,
            keyed: None,
        }
    }

    fn plain(kind: RejectionKind, message: String) -> Self {
        Self {
            kind,
            message,
            each: None,
            limits: None,
            retry_after_ms: None,
            keyed: None,
        }
    }

    /// This refusal of a limited request with its policy listed by key
    /// (`policy`, formatted by the layer).
    pub(crate) fn with_policy(mut self, policy: String) -> Self {
        if self.limits.is_some() && self.keyed.is_none() {
            self.keyed = Some(Box::new(RateLimitFields {
                policy,
                ratelimit: None,
                retry_after: None,
            }));
        }
        self
    }

    /// 400 / INVALID_ARGUMENT: no usable key.
    pub(crate) fn bad_key(why: impl std::fmt::Display) -> Self {
        Self::plain(
            RejectionKind::BadRequest,
            format!("cannot identify the client for rate limiting: {why}"),
        )
    }

    /// Returns the answer to a request the limiter refused as input: a key out of
    /// bounds (400), a cost no limit admits (413), a cost function that does
    /// not fit its limits (500).
    pub(crate) fn input(error: &InputError, limits: Arc<[Limit]>) -> Self {
        use slidelog_core::BoundError;
        let (kind, message) = match error {
            InputError::Cost { got: 0, .. } | InputError::LimitCost { got: 0, .. } => (
                RejectionKind::BadRequest,
                format!("request with a cost of 0 (every request costs at least 1): {error}"),
            ),
            InputError::Cost { .. } | InputError::LimitCost { .. } => (
                RejectionKind::TooCostly,
                format!("request too costly to ever be admitted: {error}"),
            ),
            InputError::Bound(BoundError::Cost { .. }) => (
                RejectionKind::TooCostly,
                format!("request too costly to ever be admitted: {error}"),
            ),
            InputError::EmptyKey | InputError::KeyTooLong { .. } => {
                return Self::bad_key(error);
            }
            _ => (
                RejectionKind::Misconfigured,
                format!("the rate limit layer's cost does not fit its limits: {error}"),
            ),
        };
        Self {
            limits: Some(limits),
            ..Self::plain(kind, message)
        }
    }

    /// Returns the answer to a body that could not be counted.
    pub(crate) fn cost(error: &super::CostError) -> Self {
        let kind = match error {
            super::CostError::BodyTooLarge { .. } => RejectionKind::TooCostly,
            super::CostError::Body(_) => RejectionKind::BadRequest,
        };
        Self::plain(kind, error.to_string())
    }

    /// 503 / UNAVAILABLE: the store failed and the policy is fail-closed, or
    /// it is full (with the time until a log expires, bounded:
    /// [`StoreError::full_retry_after_secs`](slidelog_core::StoreError::full_retry_after_secs)).
    pub(crate) fn unavailable(error: &slidelog_core::StoreError) -> Self {
        let retry_after_ms = error.full_retry_after_secs().map(|s| s * 1_000);
        Self {
            retry_after_ms,
            ..Self::plain(
                RejectionKind::Unavailable,
                format!("rate limiter unavailable: {error}"),
            )
        }
    }

    /// Returns the RateLimit fields this answer carries: all of them for a rejection
    /// over the limit, the policy for another refusal of a limited request.
    fn fields(&self) -> Option<RateLimitFields> {
        if let Some(keyed) = &self.keyed {
            return Some((**keyed).clone());
        }
        let limits = self.limits.as_deref()?;
        Some(match &self.each {
            Some(each) => ratelimit_fields_each(each),
            None => RateLimitFields {
                policy: crate::headers::policy_value(limits),
                ratelimit: None,
                retry_after: None,
            },
        })
    }

    /// Returns the HTTP answer (the hook's, when there is one), or for a gRPC request
    /// a trailers-only gRPC answer (HTTP 200 with `grpc-status`), which gRPC
    /// clients read as a status rather than as a transport failure.
    pub(crate) fn into_response<B: RejectionBody>(
        self,
        grpc: bool,
        hook: Option<&RejectionHook>,
    ) -> Response<B> {
        let mut response = if grpc {
            let mut response = Response::new(B::from_text(String::new()));
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            headers.insert("grpc-status", HeaderValue::from(self.grpc() as u16));
            if let Ok(message) = HeaderValue::from_str(&grpc_message(&self.message)) {
                headers.insert("grpc-message", message);
            }
            response
        } else if let Some(hook) = hook {
            hook(&self).map(B::from_text)
        } else {
            let mut response =
                self.response("text/plain; charset=utf-8", format!("{}\n", self.message));
            *response.status_mut() = self.status();
            response.map(B::from_text)
        };
        let headers = response.headers_mut();
        if let Some(fields) = self.fields() {
            insert_fields(headers, &fields);
        }
        if let (None, Some(wait)) = (&self.each, self.retry_after()) {
            let secs = crate::headers::ceil_secs(wait.as_millis() as u64).max(1);
            headers.insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
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

/// Returns true for gRPC requests (`content-type: application/grpc…`).
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
        let down = slidelog_core::StoreError::Unavailable("down".into());
        let r: Response<String> = Rejection::unavailable(&down).into_response(true, None);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["grpc-status"], "14");
        assert_eq!(r.headers()[CONTENT_TYPE], "application/grpc");
        assert!(r.body().is_empty());
        let r: Response<String> = Rejection::bad_key("no x-api-key").into_response(false, None);
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert!(r.body().contains("no x-api-key"));
    }
}
