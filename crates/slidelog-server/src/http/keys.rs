//! The key browser's routes (admin operations, docs/design.md §5,
//! "Operators' API"): `GET /v1/keys` (listKeys: one bounded page of keys)
//! and `GET /v1/keys/{key}` (getKey: one key's log, and with `?policy=` its
//! state under that policy, as a peek reports it).

use super::error::ApiError;
use crate::app::App;
use crate::auth::AdminGuard;
use crate::browse::{self, BrowseError, DEFAULT_LIMIT, MAX_LIMIT};
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use slidelog::Mode;

/// The query of listKeys and getKey: `prefix`, `cursor`, `limit`, `policy`.
#[derive(Debug, Default)]
struct Query {
    prefix: String,
    cursor: Option<String>,
    limit: usize,
    policy: Option<String>,
}

/// Reads the query, each field checked: `limit` must be 1 to [`MAX_LIMIT`].
fn query(raw: Option<&str>) -> Result<Query, ApiError> {
    let mut q = Query {
        limit: DEFAULT_LIMIT,
        ..Query::default()
    };
    let uri: axum::http::Uri = format!("/?{}", raw.unwrap_or("")).parse().map_err(|e| {
        ApiError::bad_request("query", format!("the query string does not parse: {e}"))
    })?;
    let axum::extract::Query(pairs) =
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri).map_err(|e| {
            ApiError::bad_request("query", format!("the query string does not parse: {e}"))
        })?;
    for (name, value) in pairs {
        match name.as_str() {
            "prefix" => q.prefix = value,
            "cursor" => q.cursor = Some(value),
            "policy" => q.policy = Some(value),
            "limit" => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            "limit",
                            format!("limit must be from 1 to {MAX_LIMIT}, got {value:?}"),
                        )
                    })?;
            }
            other => {
                return Err(ApiError::bad_request(
                    "query",
                    format!("unknown query parameter {other:?} (prefix, cursor, limit, policy)"),
                ));
            }
        }
    }
    Ok(q)
}

/// `GET /v1/keys?prefix=&cursor=&limit=`: one page of keys.
pub async fn list(
    _: AdminGuard,
    State(app): State<App>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = query(raw.as_deref())?;
    if q.policy.is_some() {
        return Err(ApiError::bad_request(
            "policy",
            "policy is for GET /v1/keys/{key}",
        ));
    }
    if q.prefix.len() > slidelog_core::limit::MAX_KEY_BYTES {
        let max = slidelog_core::limit::MAX_KEY_BYTES;
        return Err(ApiError::bad_request(
            "prefix",
            format!("prefix must be at most {max} bytes"),
        ));
    }
    let page = browse::list(&app, &q.prefix, q.cursor.as_deref(), q.limit)
        .await
        .map_err(browse_error)?;
    Ok(Json(page).into_response())
}

/// `GET /v1/keys/{key}[?policy=NAME]`: one key's log summary (404 when it
/// holds none), and its state under the policy as a peek would report it.
pub async fn get(
    _: AdminGuard,
    State(app): State<App>,
    key: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(|rejection| super::api::path_error(&rejection))?;
    slidelog_core::limit::validate_key(&key)
        .map_err(|e| ApiError::bad_request("key", e.to_string()))?;
    let q = query(raw.as_deref())?;
    if q.cursor.is_some()
        || raw
            .as_deref()
            .is_some_and(|r| r.contains("limit=") || r.contains("prefix="))
    {
        return Err(ApiError::bad_request(
            "query",
            "GET /v1/keys/{key} takes only `policy`",
        ));
    }
    let summary = browse::one(&app, &key).await.map_err(browse_error)?;
    let state = match &q.policy {
        Some(name) => Some(peek_under(&app, &key, name).await?),
        None => None,
    };
    if summary.is_none() && state.is_none() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("key {key:?} holds no log"),
        ));
    }
    let mut body = serde_json::json!({ "key": key, "log": summary });
    if let Some(state) = state {
        body["policy"] = serde_json::Value::String(q.policy.unwrap_or_default());
        body["state"] = state;
    }
    Ok(Json(body).into_response())
}

/// The decision a peek of cost 1 under policy `name` reports for `key`.
async fn peek_under(app: &App, key: &str, name: &str) -> Result<serde_json::Value, ApiError> {
    let limits = super::policy::limits_of(app, name)?;
    let request = slidelog::Request::from_slices(key, &limits, 1)
        .map_err(|e| ApiError::bad_request(e.field(), e.to_string()))?;
    let each = app
        .limiter()
        .decide_each_at(&request, Mode::Peek, slidelog::Now::Server)
        .await
        .map_err(|e| super::call::decision_error(app, e))?;
    let response = super::respond::decision(&each, &request, app.limiter().receipt_key());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error"))
}

fn browse_error(error: BrowseError) -> ApiError {
    match error {
        BrowseError::BadCursor(_) => ApiError::bad_request("cursor", error.to_string()),
        BrowseError::Unsupported(_) => {
            ApiError::new(StatusCode::NOT_IMPLEMENTED, error.to_string())
        }
        BrowseError::Redis(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
    }
}
