//! Every error the HTTP API answers is `{"error": "…"}` with a 4xx/5xx status,
//! including axum's own rejections (unknown route, wrong method, body too large).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error answer: a status and a message for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong; for bad input it names the field and the bound.
    pub message: String,
    /// The request field at fault, for the bad-request metric.
    pub field: Option<&'static str>,
    /// `Retry-After` in seconds for a 503 (default 1).
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    /// A 400 about `field`.
    pub fn bad_request(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            field: Some(field),
            retry_after_s: None,
        }
    }

    /// Any status, no field.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            field: None,
            retry_after_s: None,
        }
    }

    /// The same error with `Retry-After: secs`.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_s = Some(secs.max(1));
        self
    }
}

#[derive(serde::Serialize)]
struct Body<'a> {
    error: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(Body {
                error: &self.message,
            }),
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            // A hint for well-behaved clients: when the store said when
            // (a full store: its first log to expire), else in a second.
            let secs = self.retry_after_s.unwrap_or(1);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        // Last, as the router's route future adds it to an answer without
        // one (axum's `set_content_length`): here, so that the answers of
        // `POST /v1/check`, which does not go through the router (`Api`),
        // carry the same fields in the same order.
        if let Some(length) = axum::body::HttpBody::size_hint(response.body()).exact() {
            response
                .headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        response
    }
}

/// The answer for a path that no route serves.
pub async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such endpoint: GET /openapi.json describes every route of this API",
    )
}

/// The answer for a known path with the wrong method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this endpoint",
    )
}
