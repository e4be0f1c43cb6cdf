//! Requests that name a policy (`"policy": "api-key"`, docs/design.md §5,
//! "Operators' API"): the policy's limits replace the body's, and with
//! `--require-policy` a body that brings its own limits is refused.

use super::body::DecisionBody;
use super::error::ApiError;
use crate::app::App;
use slidelog::Limit;

/// What a request that named a policy is decided under.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The policy's limits.
    pub limits: Vec<Limit>,
    /// The policy says `on-store-error=fail-closed`: a degraded answer
    /// (the service's fail-open or local policy answered) becomes 503.
    pub fail_closed: bool,
}

/// The limits of policy `name`; 400 naming `policy` when there is no such
/// policy (or no `--policies` at all).
pub fn limits_of(app: &App, name: &str) -> Result<Vec<Limit>, ApiError> {
    policy_of(app, name).map(|r| r.limits)
}

/// Policy `name` as a request is decided under it.
fn policy_of(app: &App, name: &str) -> Result<Resolved, ApiError> {
    let Some(handle) = &app.config().policies else {
        return Err(ApiError::bad_request(
            "policy",
            format!(
                "no policy {name:?}: this service has no policies (start it with --policies FILE)"
            ),
        ));
    };
    let policies = handle.get();
    match policies.get(name) {
        Some(policy) => Ok(Resolved {
            limits: policy.limits(),
            fail_closed: policy.on_store_error() == Some(slidelog::FailurePolicy::FailClosed),
        }),
        None => Err(ApiError::bad_request(
            "policy",
            format!(
                "no policy {name:?} in --policies ({} defined)",
                policies.len()
            ),
        )),
    }
}

/// The policy `body` is to be decided under, or `None` for its own limits
/// (refused with `--require-policy`, naming the field the body used:
/// `max` or `limits`).
pub fn resolve<S: AsRef<str>>(
    app: &App,
    body: &DecisionBody<S>,
) -> Result<Option<Resolved>, ApiError> {
    match &body.policy {
        Some(name) => policy_of(app, name.as_ref()).map(Some),
        None if app.config().require_policy => Err(refused(if body.limits.is_some() {
            "limits"
        } else {
            "max"
        })),
        None => Ok(None),
    }
}

/// The answer to client-chosen limits under `--require-policy`.
pub fn refused(field: &'static str) -> ApiError {
    ApiError::bad_request(
        field,
        format!(
            "{field}: this service decides under the operator's policies only (--require-policy): \
             name one in `policy` instead of sending limits"
        ),
    )
}

/// The limits of `resolved`, as the body readers take them.
pub fn limits(resolved: &Option<Resolved>) -> Option<&[Limit]> {
    resolved.as_ref().map(|r| r.limits.as_slice())
}

/// The answer to a degraded decision under a fail-closed policy.
pub fn refuse_degraded(resolved: &Option<Resolved>, degraded: bool) -> Result<(), ApiError> {
    if degraded && resolved.as_ref().is_some_and(|r| r.fail_closed) {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "rate limit store unavailable (the policy's on-store-error=fail-closed)",
        ));
    }
    Ok(())
}
