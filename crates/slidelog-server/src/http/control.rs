//! The admin routes of blocks and overrides (docs/design.md §5.4), each
//! behind [`AdminGuard`] (the admin token when one is set, else loopback
//! callers only, as every admin operation):
//!
//! - `PUT /v1/keys/{key}/block` `{"duration_ms": 600000, "reason": "…"}`
//!   and `DELETE /v1/keys/{key}/block`;
//! - `PUT /v1/keys/{key}/override` `{"limits": [{"max": 2, "window_ms":
//!   60000}], "ttl_ms": 3600000}`, or `{"allow": true}` / `{"deny": true}`
//!   (with an optional `ttl_ms`, default one day), and
//!   `DELETE /v1/keys/{key}/override`.
//!
//! Bad input is a 400 naming the field and its bound; past the cap on
//! blocks and overrides (`--max-blocks`) a 409 naming it.

use super::api::path_error;
use super::body::{BodyCap, Costs, JsonBody, LimitBody};
use super::error::ApiError;
use crate::app::App;
use crate::auth::AdminGuard;
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use slidelog::{Limit, LimiterError, Rule, StoreError};
use std::time::Duration;

/// An override's TTL when the body gives none: one day.
pub const DEFAULT_OVERRIDE_TTL_MS: u64 = 86_400_000;

/// The body of `PUT /v1/keys/{key}/block`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockBody {
    /// How long, 1 ms to 366 days.
    pub duration_ms: u64,
    /// Why (answered to the refused caller), at most 256 bytes.
    #[serde(default)]
    pub reason: String,
}

/// The body of `PUT /v1/keys/{key}/override`: exactly one of `limits`,
/// `allow`, `deny`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideBody {
    /// 1 to 16 limits used in place of the request's (by name where named).
    #[serde(default)]
    pub limits: Option<Vec<LimitBody>>,
    /// Never limited.
    #[serde(default)]
    pub allow: bool,
    /// Always refused.
    #[serde(default)]
    pub deny: bool,
    /// How long, 1 ms to 366 days; default one day.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
}

impl OverrideBody {
    /// The rule the body asks for.
    fn rule(&self) -> Result<Rule, ApiError> {
        match (&self.limits, self.allow, self.deny) {
            (Some(limits), false, false) => limits
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let limit = Limit::new(l.max, l.window_ms)
                        .and_then(|limit| limit.with_block_ms(l.block_ms.unwrap_or(0)));
                    match &l.name {
                        Some(name) => limit.and_then(|limit| limit.named(name)),
                        None => limit,
                    }
                    .map_err(|e| ApiError::bad_request(e.field(), format!("limits[{i}].{e}")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Rule::Limits),
            (None, true, false) => Ok(Rule::Allow),
            (None, false, true) => Ok(Rule::Deny),
            _ => Err(ApiError::bad_request(
                "limits",
                "give exactly one of limits (1 to 16 of {max, window_ms}), \"allow\": true, \"deny\": true",
            )),
        }
    }
}

/// What every admin route extracts: the admin guard (first: nothing else
/// is read for a caller it refuses), the app and the key in the path.
pub type Admin = (AdminGuard, State<App>, Result<Path<String>, PathRejection>);

/// The key in the path, checked.
fn admitted_key(app: &App, key: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    let Path(key) = key.map_err(|rejection| {
        app.metrics().bad_request("key");
        path_error(&rejection)
    })?;
    slidelog::limit::validate_key(&key).map_err(|e| {
        app.metrics().bad_request("key");
        ApiError::bad_request("key", e.to_string())
    })?;
    Ok(key)
}

/// The answer to a limiter error of an admin operation.
fn control_error(app: &App, error: LimiterError) -> ApiError {
    match error {
        LimiterError::Input(e) => {
            app.metrics().bad_request(e.field());
            ApiError::bad_request(e.field(), e.to_string())
        }
        LimiterError::Store(e @ StoreError::Full { .. }) => {
            ApiError::new(StatusCode::CONFLICT, e.to_string())
        }
        LimiterError::Store(e @ StoreError::Unsupported { .. }) => {
            ApiError::new(StatusCode::NOT_IMPLEMENTED, e.to_string())
        }
        LimiterError::Store(e) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("rate limit store unavailable: {e}"),
        ),
    }
}

/// Sets the gauges of what the store holds (best effort: a store that does
/// not answer leaves them as they were).
async fn count_held(app: &App) {
    if let Ok(Some((blocks, overrides))) = app.limiter().control_count().await {
        app.metrics().controls_held(blocks, overrides);
    }
}

/// `PUT /v1/keys/{key}/block`, its body within `cap`.
pub async fn put_block(
    (_, State(app), key): Admin,
    request: Request,
    cap: BodyCap,
) -> Result<Response, ApiError> {
    let key = admitted_key(&app, key)?;
    let JsonBody(body): JsonBody<BlockBody> = JsonBody::read(request, cap, Costs::Check).await?;
    let duration = Duration::from_millis(body.duration_ms);
    let limiter = app.limiter();
    let done = limiter.block(&key, duration, &body.reason).await;
    done.map_err(|e| control_error(&app, e))?;
    count_held(&app).await;
    tracing::info!(
        key_bytes = key.len(),
        duration_ms = body.duration_ms,
        "key blocked"
    );
    let answer = serde_json::json!({
        "key": key, "blocked": true, "duration_ms": body.duration_ms, "reason": body.reason,
    });
    Ok(Json(answer).into_response())
}

/// `DELETE /v1/keys/{key}/block`.
pub async fn delete_block(
    _: AdminGuard,
    State(app): State<App>,
    key: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let key = admitted_key(&app, key)?;
    let had = app.limiter().unblock(&key).await;
    let had = had.map_err(|e| control_error(&app, e))?;
    count_held(&app).await;
    Ok(Json(serde_json::json!({ "key": key, "deleted": had })).into_response())
}

/// `PUT /v1/keys/{key}/override`, its body within `cap`.
pub async fn put_override(
    (_, State(app), key): Admin,
    request: Request,
    cap: BodyCap,
) -> Result<Response, ApiError> {
    let key = admitted_key(&app, key)?;
    let JsonBody(body): JsonBody<OverrideBody> = JsonBody::read(request, cap, Costs::Check).await?;
    let rule = body.rule().inspect_err(|e| {
        if let Some(field) = e.field {
            app.metrics().bad_request(field);
        }
    })?;
    let ttl_ms = body.ttl_ms.unwrap_or(DEFAULT_OVERRIDE_TTL_MS);
    let limiter = app.limiter();
    let done = limiter
        .set_override(&key, rule, Duration::from_millis(ttl_ms))
        .await;
    done.map_err(|e| control_error(&app, e))?;
    count_held(&app).await;
    tracing::info!(key_bytes = key.len(), ttl_ms, "key overridden");
    Ok(Json(serde_json::json!({ "key": key, "ttl_ms": ttl_ms })).into_response())
}

/// `DELETE /v1/keys/{key}/override`.
pub async fn delete_override(
    _: AdminGuard,
    State(app): State<App>,
    key: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let key = admitted_key(&app, key)?;
    let had = app.limiter().remove_override(&key).await;
    let had = had.map_err(|e| control_error(&app, e))?;
    count_held(&app).await;
    Ok(Json(serde_json::json!({ "key": key, "deleted": had })).into_response())
}
