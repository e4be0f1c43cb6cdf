//! The handlers of the HTTP API (docs/design.md §5): check, peek, reset, health,
//! readiness and metrics.

use super::body::{BodyCap, DecisionBody, JsonBytes, Text};
use super::call::{client_now, decision_error};
use super::error::ApiError;
use crate::app::App;
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request as HttpRequest, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use slidelog::Mode;

/// `POST /v1/check`: decide and record.
pub async fn check<B>(app: App, req: axum::http::Request<B>, cap: BodyCap) -> Response
where
    B: axum::body::HttpBody<Data = axum::body::Bytes>,
    B::Error: Into<axum::BoxError>,
{
    decide(app, JsonBytes::read(req, cap).await, Mode::Record).await
}

/// `POST /v1/peek`: decide, record nothing.
pub async fn peek(app: App, req: HttpRequest, cap: BodyCap) -> Response {
    decide(app, JsonBytes::read(req, cap).await, Mode::Peek).await
}

async fn decide(app: App, body: Result<JsonBytes, ApiError>, mode: Mode) -> Response {
    match decide_inner(&app, body, mode).await {
        Ok(response) => response,
        Err(error) => {
            if let Some(field) = error.field {
                app.metrics().bad_request(field);
            }
            error.into_response()
        }
    }
}

async fn decide_inner(
    app: &App,
    body: Result<JsonBytes, ApiError>,
    mode: Mode,
) -> Result<Response, ApiError> {
    let JsonBytes(bytes) = body?;
    // The key and names borrowed from the body's bytes.
    let body: DecisionBody<Text<'_>> = match super::joint::parse_body(&bytes)? {
        super::joint::Parsed::Single(body) => body,
        super::joint::Parsed::Joint(body) => return super::joint::decide(app, body, mode).await,
    };
    let now = client_now(app, body.now_ms)?;
    let request = body.to_request()?;
    drop(body);
    let each = app
        .limiter()
        .decide_each_at(&request, mode, now)
        .await
        .map_err(|e| decision_error(app, e))?;
    // A blocked key's answer carries the block's reason: read only then
    // (one more store call on a refusal that needs no log read).
    let reason = match each.decision.blocked {
        true => reason_of(app, request.key()).await,
        false => None,
    };
    // The answer and its header fields written straight from the decision
    // (the same bytes as `Answer` and `slidelog::headers::insert_each`).
    Ok(super::respond::decision_because(
        &each,
        &request,
        app.limiter().receipt_key(),
        reason.as_deref(),
    ))
}

/// `DELETE /v1/keys/{key}`: delete the key's log. Needs the admin token
/// when one is configured.
pub async fn reset(
    State(app): State<App>,
    headers: HeaderMap,
    key: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    if let Some(token) = &app.config().admin_token {
        authorize(&headers, token.expose())?;
    }
    let Path(key) = key.map_err(|rejection| {
        app.metrics().bad_request("key");
        path_error(&rejection)
    })?;
    slidelog_core::limit::validate_key(&key).map_err(|e| {
        app.metrics().bad_request("key");
        ApiError::bad_request("key", e.to_string())
    })?;
    let existed = app.limiter().reset(&key).await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("reset failed: {e}"),
        )
    })?;
    tracing::info!(key_bytes = key.len(), existed, "key reset");
    Ok(Json(serde_json::json!({ "key": key, "deleted": existed })).into_response())
}

/// The answer to a key the path cannot give (percent-encoded bytes that
/// are not UTF-8, as `%FF`): axum's rejection, whose answer is plain text,
/// as the API's JSON error with the same status.
pub(super) fn path_error(rejection: &PathRejection) -> ApiError {
    let status = rejection.status();
    let message = format!(
        "the key in the path must be 1 to 512 bytes of UTF-8, percent-encoded: {}",
        rejection.body_text()
    );
    if status == StatusCode::BAD_REQUEST {
        ApiError::bad_request("key", message)
    } else {
        ApiError::new(status, message)
    }
}

/// Checks `Authorization: Bearer <token>` in constant time.
pub(super) fn authorize(headers: &HeaderMap, token: &str) -> Result<(), ApiError> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this endpoint needs the admin token: send `Authorization: Bearer <token>`",
        )
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .ok_or_else(unauthorized)?;
    if constant_time_eq(given.as_bytes(), token.as_bytes()) {
        Ok(())
    } else {
        Err(unauthorized())
    }
}

/// Compares without an early exit, so timing does not reveal how many
/// leading bytes of a guess were right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// `GET /healthz`: the process answers.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// `GET /readyz`: the store answers a ping within its timeout; 503 otherwise.
pub async fn readyz(State(app): State<App>) -> Result<Json<serde_json::Value>, ApiError> {
    if let Some(cause) = crate::preflight::standing_misconfiguration(app.limiter()).await {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: the {} store refuses slidelog's configuration: {cause}",
                app.store_kind()
            ),
        ));
    }
    match app.limiter().ping().await {
        Ok(()) => Ok(Json(
            serde_json::json!({ "status": "ready", "store": app.store_kind() }),
        )),
        Err(e) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "not ready: the {} store does not answer: {e}",
                app.store_kind()
            ),
        )),
    }
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(app): State<App>) -> Response {
    let mut response = app.metrics().render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// The reason of `key`'s block, for a blocked key's answer (`None` when it
/// expired meanwhile or the store did not answer).
pub async fn reason_of(app: &App, key: &str) -> Option<String> {
    let block = app.limiter().block_of(key).await.ok()??;
    Some(block.reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer tok"),
        );
        assert!(authorize(&h, "tok").is_ok());
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic tok"));
        assert!(authorize(&h, "tok").is_err());
        assert!(authorize(&HeaderMap::new(), "tok").is_err());
    }
}
