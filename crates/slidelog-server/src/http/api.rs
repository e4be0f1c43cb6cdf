//! The handlers of the HTTP API (docs/design.md §5): check, peek, reset, health,
//! readiness and metrics.

use super::body::{BodyCap, DecisionBody, JsonBytes, Text};
use super::call::{client_now, decision_error};
use super::error::ApiError;
use crate::app::App;
use crate::auth::AdminGuard;
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request as HttpRequest, State};
use axum::http::{HeaderValue, StatusCode, header};
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
    let policy = super::policy::resolve(app, &body)?;
    let request = body.to_request_under(super::policy::limits(&policy))?;
    drop(body);
    let each = app
        .limiter()
        .decide_each_at(&request, mode, now)
        .await
        .map_err(|e| decision_error(app, e))?;
    super::policy::refuse_degraded(&policy, each.decision.degraded)?;
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

/// `DELETE /v1/keys/{key}`: delete the key's log. An admin operation
/// ([`AdminGuard`]).
pub async fn reset(
    _: AdminGuard,
    State(app): State<App>,
    key: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
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
