//! The response side of the layer: the inner service's answer to an
//! admitted request (with the decision in its extensions and the RateLimit
//! fields of every limit of every key), the degraded hook, what becomes of
//! the reservations after the response ([`super::after`]), and the layer's
//! own refusals (429, 413, 400, 503, or their gRPC statuses, through the
//! rejection hook).

use super::after::{self, Reserved};
use super::ask::{Ask, Keyed};
use super::config::Config;
use super::response::{Rejection, RejectionBody, is_grpc};
use super::settle::ReadUsage;
use super::stack::{self, Answered};
use crate::LimiterError;
use crate::headers::{self, RATELIMIT, RATELIMIT_POLICY};
use http::request::Parts;
use http::{HeaderMap, Request, Response};
use slidelog_core::{Detailed, JointDecision};
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
/// request, else the hook's or the plain answer), marked refused for the
/// rate limit layers around this one ([`super::stack`]).
pub(crate) fn refuse<K, C, U, B: RejectionBody>(
    config: &Config<K, C, U>,
    parts: &Parts,
    rejection: Rejection,
) -> Response<B> {
    let mut response =
        rejection.into_response(is_grpc(&parts.headers), config.on_rejection.as_ref());
    response.extensions_mut().insert(Answered { refused: true });
    response
}

/// The name of each check's key, when the layer lists its limits by key.
fn names<'c, K, C, U>(config: &'c Config<K, C, U>, keys: &[Keyed<'_>]) -> Option<Vec<&'c str>> {
    config
        .by_key()
        .then(|| keys.iter().map(|k| config.name_of(k.index)).collect())
}

/// Answers a decided request: the inner service's answer when every key
/// admitted it, the layer's refusal otherwise.
pub(crate) async fn decided<S, K, C, U, B, ResBody>(
    config: &Config<K, C, U>,
    inner: S,
    parts: Parts,
    asked: Ask<'_, B>,
    decided: Result<JointDecision, LimiterError>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: RejectionBody,
    U: ReadUsage<ResBody>,
{
    let names = names(config, &asked.keys);
    let limits = asked.keys[0].limits();
    let rejection = match decided {
        Ok(joint) if joint.allowed => {
            return admitted(config, inner, parts, asked, joint).await;
        }
        Ok(joint) => {
            let decision = joint.deciding().decision;
            let rejection = match &names {
                Some(names) => Rejection::limited_joint(&joint, names, limits),
                None => Rejection::limited(joint.deciding().clone(), limits),
            };
            let mut response = refuse(config, &parts, rejection);
            response.extensions_mut().insert(decision);
            response.extensions_mut().insert(joint);
            return Ok(response);
        }
        Err(LimiterError::Store(e)) => Rejection::unavailable(&e),
        Err(LimiterError::Input(e)) => Rejection::input(&e, limits),
    };
    let rejection = match &names {
        Some(names) => {
            let keyed = asked.keys.iter().zip(names);
            let limits = asked.checks.as_slice().iter().map(|c| c.limits());
            let items = keyed.zip(limits).map(|((_, name), limits)| (*name, limits));
            rejection.with_policy(headers::policy_value_keyed(items))
        }
        None => rejection,
    };
    Ok(refuse(config, &parts, rejection))
}

/// Returns the inner service's answer to an admitted request, with the
/// deciding key's decision in the request's and the response's extensions
/// (the response's also holds that key's every limit, `Detailed`, and the
/// [`JointDecision`] of every key) and the RateLimit fields of every limit
/// (only `RateLimit-Policy` for a degraded decision: nothing was counted).
/// Then settles the reservations when the layer settles, or refunds them
/// when a rate limit layer inside this one refused the request.
async fn admitted<S, K, C, U, B, ResBody>(
    config: &Config<K, C, U>,
    mut inner: S,
    mut parts: Parts,
    asked: Ask<'_, B>,
    mut joint: JointDecision,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    U: ReadUsage<ResBody>,
{
    let deciding = joint.deciding().clone();
    let decision = deciding.decision;
    if joint.degraded()
        && let Some(hook) = &config.on_degraded
    {
        hook(&parts, &decision);
    }
    parts.extensions.insert(decision);
    parts.extensions.insert(stack::Outer);
    let Ask {
        checks, keys, body, ..
    } = asked;
    let called = inner.call(Request::from_parts(parts, body)).await;
    let reserved = Reserved {
        checks: &checks,
        keys: &keys,
    };
    let response = match called {
        Ok(response) => response,
        Err(e) => {
            // No response: refunded when the layer refunds anything.
            if config.settling.refund.is_some() {
                after::refund(config, reserved, &mut joint).await;
            }
            return Err(e);
        }
    };
    Ok(answered(config, reserved, joint, deciding, response).await)
}

/// Finishes the inner service's answer to an admitted request: refunds the
/// reservations when a rate limit layer inside this one refused it, else
/// settles them (when the layer settles); adds the RateLimit fields (after
/// an inner layer's) and the decision to the extensions.
async fn answered<K, C, U, ResBody>(
    config: &Config<K, C, U>,
    reserved: Reserved<'_>,
    mut joint: JointDecision,
    deciding: Detailed,
    mut response: Response<ResBody>,
) -> Response<ResBody>
where
    U: ReadUsage<ResBody>,
{
    let inside = response.extensions().get::<Answered>().copied();
    if inside.is_some() {
        stack::met(config);
    }
    let refused_inside = inside.is_some_and(|a| a.refused);
    if refused_inside {
        // Not served: counted in none of this layer's keys either.
        after::refund(config, reserved, &mut joint).await;
    } else if config.settles {
        response = after::settle_from(config, reserved, &mut joint, response).await;
    }
    let headers = response.headers_mut();
    write_fields(config, reserved.keys, &joint, headers, inside.is_some());
    let extensions = response.extensions_mut();
    if !refused_inside {
        // A refusal inside carries the refusing layer's decision.
        extensions.insert(deciding.decision);
        extensions.insert(deciding);
        extensions.insert(joint);
    }
    extensions.insert(Answered {
        refused: refused_inside,
    });
    response
}

/// Writes the RateLimit fields of `joint` into `headers` (after those of a
/// rate limit layer inside this one, when `append`), and marks a degraded
/// answer ([`headers::DEGRADED`]).
fn write_fields<K, C, U>(
    config: &Config<K, C, U>,
    keys: &[Keyed<'_>],
    joint: &JointDecision,
    headers: &mut HeaderMap,
    append: bool,
) {
    headers::mark_degraded(headers, joint.degraded());
    let Some(names) = names(config, keys) else {
        // One key, listed as it always was: the route's policy is
        // formatted once, when the layer is built.
        if let Some(policy) = &keys[0].rule.policy {
            headers.insert(RATELIMIT_POLICY, policy.clone());
        }
        if let Some(value) = headers::ratelimit_header_each(&joint.checks[0]) {
            headers.insert(RATELIMIT, value);
        }
        return;
    };
    let fields = headers::ratelimit_fields_joint(joint, &names);
    if append {
        headers::append_fields(headers, &fields);
    } else {
        headers::insert_fields(headers, &fields);
    }
}
