//! The response side of the layer: the inner service's answer to an
//! admitted request (with the decision in its extensions and the RateLimit
//! fields), the degraded hook, and the layer's own refusals (429, 413, 400,
//! 503, or their gRPC statuses, through the rejection hook).

use super::ask::Ask;
use super::config::Config;
use super::response::{Rejection, RejectionBody, is_grpc};
use crate::headers::{RATELIMIT, RATELIMIT_POLICY, ratelimit_value};
use crate::{Decision, LimiterError};
use http::request::Parts;
use http::{HeaderValue, Request, Response};
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
pub(crate) fn refuse<K, C, B: RejectionBody>(
    config: &Config<K, C>,
    parts: &Parts,
    rejection: Rejection,
) -> Response<B> {
    rejection.into_response(is_grpc(&parts.headers), config.on_rejection.as_ref())
}

/// Answers a decided request: the inner service's answer when admitted,
/// the layer's refusal otherwise.
pub(crate) async fn decided<S, K, C, B, ResBody>(
    config: &Config<K, C>,
    inner: S,
    parts: Parts,
    asked: Ask<B>,
    decided: Result<Decision, LimiterError>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
    ResBody: RejectionBody,
{
    let limits = asked.limits.clone();
    let rejection = match decided {
        Ok(decision) if decision.allowed => {
            return admitted(config, inner, parts, asked, decision).await;
        }
        Ok(decision) => {
            let mut response = refuse(config, &parts, Rejection::limited(decision, limits));
            response.extensions_mut().insert(decision);
            return Ok(response);
        }
        Err(LimiterError::Store(e)) => Rejection::unavailable(&e),
        Err(LimiterError::Input(e)) => Rejection::input(&e, limits),
    };
    Ok(refuse(config, &parts, rejection))
}

/// Returns the inner service's answer to an admitted request, with the decision in
/// the request's and the response's extensions and the RateLimit fields
/// (only `RateLimit-Policy` for a degraded decision: nothing was counted).
async fn admitted<S, K, C, B, ResBody>(
    config: &Config<K, C>,
    mut inner: S,
    mut parts: Parts,
    asked: Ask<B>,
    decision: Decision,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    if decision.degraded
        && let Some(hook) = &config.on_degraded
    {
        hook(&parts, &decision);
    }
    parts.extensions.insert(decision);
    let mut response = inner.call(Request::from_parts(parts, asked.body)).await?;
    let headers = response.headers_mut();
    if let Some(policy) = asked.policy {
        headers.insert(RATELIMIT_POLICY, policy);
    }
    if !decision.degraded
        && let Ok(value) = HeaderValue::from_str(&ratelimit_value(&asked.limits, &decision))
    {
        headers.insert(RATELIMIT, value);
    }
    response.extensions_mut().insert(decision);
    Ok(response)
}
