//! What every decision route shares (`POST /v1/check`, `/v1/peek`, their
//! joint form, settle and charge): the time a body asks to be decided at,
//! and the answer when the limiter made no decision. Apart from the routes
//! so that they do not import one another.

use super::body::MAX_NOW_MS;
use super::error::ApiError;
use crate::app::App;
use axum::http::StatusCode;
use slidelog::{LimiterError, Now, StoreError};

/// The time a body asks to be decided at: the server's clock, or its
/// `now_ms` where client time is trusted.
pub(super) fn client_now(app: &App, now_ms: Option<u64>) -> Result<Now, ApiError> {
    match now_ms {
        None => Ok(Now::Server),
        Some(_) if !app.config().trust_client_time => Err(ApiError::bad_request(
            "now_ms",
            "now_ms is refused: this server decides on its own clock \
             (start it with --trust-client-time to accept client time)",
        )),
        Some(ms) if ms > MAX_NOW_MS => Err(ApiError::bad_request(
            "now_ms",
            format!("now_ms must be between 0 and {MAX_NOW_MS} (Unix ms), got {ms}"),
        )),
        Some(ms) => Ok(Now::At(ms)),
    }
}

/// The answer when the limiter gave no decision: bad input (an operator's
/// bound) is 400; a full store is 503 with `Retry-After` = the time until
/// the first held log expires, at most 60 s (docs/design.md §6; not an
/// outage: no policy admits past it); any other store error reached us
/// because the policy is fail-closed.
pub(super) fn decision_error(app: &App, error: LimiterError) -> ApiError {
    match error {
        LimiterError::Input(e) => {
            app.metrics().bad_request(e.field());
            ApiError::bad_request(e.field(), e.to_string())
        }
        LimiterError::Store(e @ StoreError::Full { .. }) => {
            let error = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
            match e.full_retry_after_secs() {
                Some(secs) => error.retry_after(secs),
                None => error,
            }
        }
        LimiterError::Store(e) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("rate limit store unavailable (fail-closed): {e}"),
        ),
    }
}
