//! What becomes of an admitted request's reservations once the inner
//! service answered (docs/design.md §4.6): settled to the real cost the
//! response reports ([`super::settle`] reads it), refunded (settled to 0)
//! when the status is one to refund, or when a rate limit layer inside this
//! one refused the request ([`super::stack`]).
//!
//! With several keys, each admitted check holds its own record (its own
//! receipt): a refund removes every one of them; a real cost settles the
//! first key's, the one the layer's cost priced (keys added with
//! [`RateLimitLayer::key`](super::RateLimitLayer::key) count 1 a request
//! and keep it).

use super::ask::Keyed;
use super::config::Config;
use super::settle::{ReadUsage, SettleOutcome, settled_cost};
use crate::Cost;
use http::Response;
use slidelog_core::{Checks, Detailed, JointDecision, Receipt, RecordRef, Request};

/// An admitted request's checks, as their settles need them.
#[derive(Clone, Copy)]
pub(crate) struct Reserved<'a> {
    /// The checks as decided (keys, limits, reserved costs).
    pub(crate) checks: &'a Checks,
    /// Where each came from (with costs by name, the settled limits).
    pub(crate) keys: &'a [Keyed<'a>],
}

/// Refunds every check of `reserved` that recorded, and puts each one's
/// state after the refund in `joint`.
pub(crate) async fn refund<K, C, U>(
    config: &Config<K, C, U>,
    reserved: Reserved<'_>,
    joint: &mut JointDecision,
) {
    for (at, request) in reserved.checks.as_slice().iter().enumerate() {
        // A degraded admission appended no record: nothing to refund.
        let Some(record) = joint.checks.get(at).and_then(|d| d.decision.record) else {
            continue;
        };
        if let Some(after) = settle(config, request, record, Cost::All(0), None).await {
            joint.checks[at] = after;
        }
    }
}

/// Settles the reservations of `reserved` from `response`: refunded when
/// its status is one to refund, else the first key's settled to the real
/// cost the first source reports (the head sources, then the body reader),
/// else left at their estimates. `joint` gets the states after. The
/// response is handed back whatever happens.
pub(crate) async fn settle_from<K, C, U, ResBody>(
    config: &Config<K, C, U>,
    reserved: Reserved<'_>,
    joint: &mut JointDecision,
    response: Response<ResBody>,
) -> Response<ResBody>
where
    U: ReadUsage<ResBody>,
{
    let settling = &config.settling;
    let (parts, body) = response.into_parts();
    if settling.refunds(parts.status) {
        refund(config, reserved, joint).await;
        return Response::from_parts(parts, body);
    }
    let first = reserved.keys.iter().position(|k| k.index == 0);
    let reservation = first.and_then(|at| Some((at, joint.checks.get(at)?.decision.record?)));
    let Some((at, record)) = reservation else {
        // The first key was not charged, or nothing was recorded.
        return Response::from_parts(parts, body);
    };
    let request = &reserved.checks.as_slice()[at];
    let (actual, body) = match settling.read_head(&parts) {
        Some(actual) => (Some(actual), body),
        None if config.usage.reads() => config.usage.read(&parts, body).await,
        None => (None, body),
    };
    match actual {
        Some(actual) => {
            let named = reserved.keys[at].rule.named.as_deref();
            let cost = settled_cost(request, named, actual);
            if let Some(after) = settle(config, request, record, cost, Some(actual)).await {
                joint.checks[at] = after;
            }
        }
        None => settling.report(request.key(), &SettleOutcome::NoUsage),
    }
    Response::from_parts(parts, body)
}

/// Settles `record` of `request` to `cost` (a refund when it is 0
/// everywhere), once, and reports the outcome; never fails the response.
/// Returns the limits after the settle when it changed the record.
async fn settle<K, C, U>(
    config: &Config<K, C, U>,
    request: &Request,
    record: RecordRef,
    cost: Cost,
    actual: Option<u64>,
) -> Option<Detailed> {
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
