//! The response side of the layer: the inner service's answer to an
//! admitted request (with the decision in its extensions and the RateLimit
//! fields of every limit), the degraded hook, the settle of the reservation
//! from the response ([`super::settle`]), and the layer's own refusals (429,
//! 413, 400, 503, or their gRPC statuses, through the rejection hook).

use super::ask::Ask;
use super::config::Config;
use super::response::{Rejection, RejectionBody, is_grpc};
use super::settle::{ReadUsage, SettleOutcome, settled_cost};
use crate::headers::{RATELIMIT, RATELIMIT_POLICY, ratelimit_header_each};
use crate::{Cost, LimiterError};
use http::request::Parts;
use http::{Request, Response};
use slidelog_core::{Detailed, Receipt, RecordRef};
use tower::Service;

/// Hands a request no limit applies to on to the inner service.
pub(crate) async fn pass<S, B, ResBody>(
    mut inner: S,
    parts: Parts,
    body: B,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    inner.call(Request::from_parts(parts, body)).await
}

/// Returns the layer's own answer to `rejection` (a gRPC status for a gRPC
/// request, else the hook's or the plain answer).
pub(crate) fn refuse<K, C, U, B: RejectionBody>(
    config: &Config<K, C, U>,
    parts: &Parts,
    rejection: Rejection,
) -> Response<B> {
    rejection.into_response(is_grpc(&parts.headers), config.on_rejection.as_ref())
}

/// Answers a decided request: the inner service's answer when admitted,
/// the layer's refusal otherwise.
pub(crate) async fn decided<S, K, C, U, B, ResBody>(
    config: &Config<K, C, U>,
    inner: S,
    parts: Parts,
    asked: Ask<'_, B>,
    decided: Result<Detailed, LimiterError>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: RejectionBody,
    U: ReadUsage<ResBody>,
{
    let rejection = match decided {
        Ok(each) if each.decision.allowed => {
            return admitted(config, inner, parts, asked, each).await;
        }
        Ok(each) => {
            let decision = each.decision;
            let rejection = Rejection::limited(each, asked.limits.clone());
            let mut response = refuse(config, &parts, rejection);
            response.extensions_mut().insert(decision);
            return Ok(response);
        }
        Err(LimiterError::Store(e)) => Rejection::unavailable(&e),
        Err(LimiterError::Input(e)) => Rejection::input(&e, asked.limits.clone()),
    };
    Ok(refuse(config, &parts, rejection))
}

/// Returns the inner service's answer to an admitted request, with the decision in
/// the request's and the response's extensions (the response's also holds
/// every limit's state, [`Detailed`]) and the RateLimit fields of every
/// limit (only `RateLimit-Policy` for a degraded decision: nothing was
/// counted); then settles the reservation, when the layer settles.
async fn admitted<S, K, C, U, B, ResBody>(
    config: &Config<K, C, U>,
    mut inner: S,
    mut parts: Parts,
    asked: Ask<'_, B>,
    each: Detailed,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    U: ReadUsage<ResBody>,
{
    let decision = each.decision;
    if decision.degraded
        && let Some(hook) = &config.on_degraded
    {
        hook(&parts, &decision);
    }
    parts.extensions.insert(decision);
    let Ask {
        request,
        rule,
        body,
        ..
    } = asked;
    let called = inner.call(Request::from_parts(parts, body)).await;
    let reserved = Reserved {
        request: &request,
        named: rule.named.as_deref(),
    };
    // A degraded admission appended no record: nothing to settle.
    let record = decision.record.filter(|_| config.settles);
    let mut response = match (called, record) {
        (Ok(response), _) => response,
        (Err(e), Some(record)) => {
            // No response: refunded when the layer refunds anything.
            if config.settling.refund.is_some() {
                settle(config, reserved, record, Cost::All(0), None).await;
            }
            return Err(e);
        }
        (Err(e), None) => return Err(e),
    };
    let headers = response.headers_mut();
    if let Some(policy) = &rule.policy {
        headers.insert(RATELIMIT_POLICY, policy.clone());
    }
    if let Some(value) = ratelimit_header_each(&each) {
        headers.insert(RATELIMIT, value);
    }
    if let Some(record) = record {
        response = settle_from(config, reserved, record, response).await;
    }
    let extensions = response.extensions_mut();
    extensions.insert(decision);
    extensions.insert(each);
    Ok(response)
}

/// An admitted request, as its settle needs it.
#[derive(Clone, Copy)]
struct Reserved<'a> {
    /// The request as decided (key, limits, reserved costs).
    request: &'a slidelog_core::Request,
    /// With costs by name, the positions of the named limits: the ones a
    /// settle changes (every limit when `None`).
    named: Option<&'a [usize]>,
}

/// Settles the reservation `record` of `reserved` from `response`: refunded
/// when its status is one to refund, else settled to the real cost the
/// first source reports (the head sources, then the body reader), else
/// left at its estimate. The response is handed back whatever happens.
async fn settle_from<K, C, U, ResBody>(
    config: &Config<K, C, U>,
    reserved: Reserved<'_>,
    record: RecordRef,
    response: Response<ResBody>,
) -> Response<ResBody>
where
    U: ReadUsage<ResBody>,
{
    let settling = &config.settling;
    let (mut parts, body) = response.into_parts();
    if settling.refunds(parts.status) {
        let after = settle(config, reserved, record, Cost::All(0), None).await;
        restate(&mut parts.headers, after);
        return Response::from_parts(parts, body);
    }
    let (actual, body) = match settling.read_head(&parts) {
        Some(actual) => (Some(actual), body),
        None if config.usage.reads() => config.usage.read(&parts, body).await,
        None => (None, body),
    };
    match actual {
        Some(actual) => {
            let cost = settled_cost(reserved.request, reserved.named, actual);
            let after = settle(config, reserved, record, cost, Some(actual)).await;
            restate(&mut parts.headers, after);
        }
        None => settling.report(reserved.request.key(), &SettleOutcome::NoUsage),
    }
    Response::from_parts(parts, body)
}

/// Rewrites the `RateLimit` field with the limits after a settle (what
/// the client has left once this request's real cost counts), when the
/// settle changed the record.
fn restate(headers: &mut http::HeaderMap, after: Option<Detailed>) {
    if let Some(value) = after.as_ref().and_then(ratelimit_header_each) {
        headers.insert(RATELIMIT, value);
    }
}

/// Settles `record` to `cost` (a refund when it is 0 everywhere), once,
/// and reports the outcome; never fails the response. Returns the limits
/// after the settle when it changed the record.
async fn settle<K, C, U>(
    config: &Config<K, C, U>,
    reserved: Reserved<'_>,
    record: RecordRef,
    cost: Cost,
    actual: Option<u64>,
) -> Option<Detailed> {
    let request = reserved.request;
    let receipt = config
        .limiter
        .receipt_key()
        .seal(&Receipt::new(request, record), request.key());
    let settled = config
        .limiter
        .settle(request.key(), request.limits(), &receipt, cost)
        .await;
    let (outcome, after) = match (settled, actual) {
        (Ok(s), _) if !s.settled => (SettleOutcome::Gone, None),
        (Ok(s), Some(actual)) => (SettleOutcome::Settled { actual }, Some(s.detailed())),
        (Ok(s), None) => (SettleOutcome::Refunded, Some(s.detailed())),
        (Err(e), _) => (SettleOutcome::Failed(e), None),
    };
    config.settling.report(request.key(), &outcome);
    after
}
