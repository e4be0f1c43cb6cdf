//! `POST /v1/settle` and `POST /v1/charge` (docs/design.md §4.6): the
//! check's body, plus `"receipt"` and the actual costs for a settle.
//!
//! ```text
//! POST /v1/settle {"key":"user-7","limits":[{"name":"requests","max":60,"window_ms":60000,"cost":1},
//!                  {"name":"tokens","max":20000,"window_ms":60000,"cost":1250}],"receipt":"AQIG…"}
//! 200 {"settled":true,"allowed":true,"limit":60,…,"limits":[…],"receipt":"AQIG…"}
//! ```
//!
//! Both answer 200 with the limit fields as the log stands after the change
//! (`count` = live units, `remaining`, `retry_after_ms` = the wait before
//! one more unit fits, `reset_after_ms`; `allowed` says one more unit
//! fits): the deciding limit's at the top level and, as `/v1/check` lists
//! them, every limit's in `limits` (memory and Redis scripts report every
//! limit's counts), and the receipt of the record as it now is (absent when a settle
//! removed it or found nothing). A settle that found no record (expired,
//! reset) says `"settled": false`. Bad input is a 400 naming the field: a
//! malformed or foreign receipt, a receipt of another key or other limits,
//! a cost above the bounds (`--max-cost`). A store failure is a 503 whatever
//! the failure policy (a settle or charge never pretends); a store without
//! them, 501.

use super::answer::Answer;
use super::body::{BodyCap, Costs, DecisionBody, JsonBody};
use super::call::client_now;
use super::error::ApiError;
use crate::app::App;
use axum::Json;
use axum::extract::Request as HttpRequest;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use slidelog::{Detailed, InputError, LimiterError, Now, ReceiptError, Request, StoreError};

/// The answer of a settle: `settled` beside the limit fields.
#[derive(Debug, serde::Serialize)]
struct SettleAnswer {
    settled: bool,
    #[serde(flatten)]
    answer: Answer,
}

/// `POST /v1/settle`: change a record's costs to the actual ones.
pub async fn settle(app: App, req: HttpRequest, cap: BodyCap) -> Response {
    let body = JsonBody::read(req, cap, Costs::Usage).await;
    respond(&app, settle_inner(&app, body).await)
}

/// `POST /v1/charge`: record usage without deciding.
pub async fn charge(app: App, req: HttpRequest, cap: BodyCap) -> Response {
    let body = JsonBody::read(req, cap, Costs::Usage).await;
    respond(&app, charge_inner(&app, body).await)
}

fn respond(app: &App, result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(|error| {
        if let Some(field) = error.field {
            app.metrics().bad_request(field);
        }
        error.into_response()
    })
}

async fn settle_inner(
    app: &App,
    body: Result<JsonBody<DecisionBody>, ApiError>,
) -> Result<Response, ApiError> {
    let JsonBody(body) = body?;
    let (request, now) = usage_request(app, &body, true)?;
    let receipt = body.receipt.as_deref().ok_or_else(|| {
        ApiError::bad_request(
            "receipt",
            "missing field `receipt`: the receipt a check answered",
        )
    })?;
    let settled = app
        .limiter()
        .settle_at(&request, receipt, now)
        .await
        .map_err(|e| usage_error("settle", e))?;
    let answer = SettleAnswer {
        settled: settled.settled,
        answer: answer(app, &request, &settled.detailed()),
    };
    Ok((StatusCode::OK, Json(answer)).into_response())
}

async fn charge_inner(
    app: &App,
    body: Result<JsonBody<DecisionBody>, ApiError>,
) -> Result<Response, ApiError> {
    let JsonBody(body) = body?;
    let (request, now) = usage_request(app, &body, false)?;
    let each = app
        .limiter()
        .charge_at(&request, now)
        .await
        .map_err(|e| usage_error("charge", e))?;
    Ok((StatusCode::OK, Json(answer(app, &request, &each))).into_response())
}

/// A settle's (`settle`) or a charge's request from `body`, under its
/// policy when it names one, and the time it is decided at.
fn usage_request(app: &App, body: &DecisionBody, settle: bool) -> Result<(Request, Now), ApiError> {
    let now = client_now(app, body.now_ms)?;
    let policy = super::policy::resolve(app, body)?;
    let request = body.to_usage_request_under(settle, super::policy::limits(&policy))?;
    Ok((request, now))
}

/// The limit fields of `each` (the deciding limit's at the top level, every
/// limit's in `limits`, as `/v1/check` answers them) and the receipt of its
/// record.
fn answer(app: &App, request: &Request, each: &Detailed) -> Answer {
    Answer::new(each).with_receipt(request, app.limiter().receipt_key())
}

/// Bad input is a 400 naming its field, a receipt settled already (or a key
/// holding its most settled receipts) a 409; a store without settle or
/// charge a 501; any other store failure a 503.
fn usage_error(operation: &str, error: LimiterError) -> ApiError {
    match error {
        LimiterError::Input(
            e @ InputError::Receipt(ReceiptError::Spent | ReceiptError::TooManySettles),
        ) => {
            let mut conflict = ApiError::new(StatusCode::CONFLICT, e.to_string());
            conflict.field = Some(e.field());
            conflict
        }
        LimiterError::Input(e) => ApiError::bad_request(e.field(), e.to_string()),
        LimiterError::Store(e @ StoreError::Unsupported { .. }) => {
            ApiError::new(StatusCode::NOT_IMPLEMENTED, e.to_string())
        }
        LimiterError::Store(e) => {
            let error = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("{operation} failed, nothing was pretended: {e}"),
            );
            // A full store says when a key fits again, as a check's answer does.
            match e.full_retry_after_secs() {
                Some(secs) => error.retry_after(secs),
                None => error,
            }
        }
    }
}
