//! [`RateLimiter`]: a `RateLimitRequest` in, one sliding-log decision per
//! descriptor on the store, a `RateLimitResponse` out; and [`GrpcService`],
//! the tonic `RateLimitService` around it.
//!
//! Per descriptor, as the reference service answers:
//! - no rule (unknown domain, nothing matches): `OK`, no `current_limit`;
//!   counted in `slidelog_envoy_unmatched_total` and logged at debug;
//! - `unlimited`: `OK`, `limit_remaining` = `u32::MAX`;
//! - `requests_per_unit: 0`: `OVER_LIMIT` (`OK` in `shadow_mode`) with
//!   `requests_per_unit` 0 and a whole window until reset; the store is not
//!   asked;
//! - a limit: the store decides on the rule's key for the descriptor
//!   ([`crate::config::Rule::store_key`]: the descriptor's own key, with a
//!   `share_threshold` pattern in place of its value) with cost = the descriptor's
//!   `hits_addend` when set, else the request's, 0 meaning 1. `OVER_LIMIT`
//!   when rejected (a rejected request records nothing), `OK` in
//!   `shadow_mode` even when rejected. `duration_until_reset` is the wait
//!   until the same request would be admitted when rejected, and the time
//!   until the log is empty when admitted.
//!
//! `overall_code` is `OVER_LIMIT` when any descriptor is. A rule whose `name`
//! another matched rule `replaces` is not applied (reported `OK`).
//! Descriptors are decided independently and concurrently.

mod counts;
mod grpc;
mod plan;
mod status;

pub use counts::{DECISIONS, UNCONFIGURED, UNMATCHED};
pub use grpc::{GrpcService, serve_grpc};

use crate::config::Unit;
use crate::proto::{RateLimitRequest, RateLimitResponse, rate_limit_response::Code};
use crate::reload::ConfigHandle;
use plan::Plan;
use slidelog::{Bounds, Limiter, LimiterError};
use slidelog_core::{Decision, Mode, StoreError};
use std::sync::Arc;

/// Options of the service. The store timeout and failure policy are the
/// [`Limiter`]'s (docs/design.md §6).
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// Add `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset`
    /// to `response_headers_to_add`, from the most restrictive descriptor
    /// (as the reference service's `LIMIT_RESPONSE_HEADERS_ENABLED`).
    pub response_headers: bool,
}

/// Why a request got no decision.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request breaks a rule of the protocol or a bound of docs/design.md §1.
    #[error("{0}")]
    InvalidArgument(String),
    /// The store failed and the policy is fail-closed.
    #[error("{0}")]
    Unavailable(#[from] StoreError),
}

impl From<LimiterError> for ServiceError {
    fn from(e: LimiterError) -> Self {
        match e {
            LimiterError::Store(e) => Self::Unavailable(e),
            LimiterError::Input(e) => Self::InvalidArgument(e.to_string()),
        }
    }
}

impl From<ServiceError> for tonic::Status {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::InvalidArgument(m) => tonic::Status::invalid_argument(m),
            ServiceError::Unavailable(e) => tonic::Status::unavailable(e.to_string()),
        }
    }
}

/// Decides Envoy rate limit requests through a [`Limiter`] (which bounds
/// the store call, applies the failure policy and reports the decision)
/// with the live config.
#[derive(Clone)]
pub struct RateLimiter {
    limiter: Limiter,
    /// The same limiter bounding only the costs: a rule's `max` is the
    /// operator's, not a client's choice (a client's override is checked
    /// against the client bounds in `plan`).
    configured: Limiter,
    config: Arc<ConfigHandle>,
    options: ServiceOptions,
    /// Where the `slidelog_envoy_*` counters go; `None`: the global recorder.
    recorder: Option<Arc<dyn metrics::Recorder + Send + Sync>>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limiter", &self.limiter)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What the store answered for one plan: `None` where it was not asked.
type Answer = Option<Result<Decision, LimiterError>>;

impl RateLimiter {
    /// Creates the service over `limiter` with the rules of `config`.
    pub fn new(limiter: Limiter, config: Arc<ConfigHandle>, options: ServiceOptions) -> Self {
        let configured = limiter.with_bounds(Bounds {
            max_cost: limiter.bounds().max_cost,
            ..Bounds::ABSOLUTE
        });
        let service = Self {
            limiter,
            configured,
            config,
            options,
            recorder: None,
        };
        service.describe_counters();
        service
    }

    /// Records the `slidelog_envoy_*` counters in `recorder` (a server's own
    /// registry) instead of the process-global one.
    pub fn with_recorder(mut self, recorder: Arc<dyn metrics::Recorder + Send + Sync>) -> Self {
        self.recorder = Some(recorder);
        self.describe_counters();
        self
    }

    /// Returns the live config.
    pub fn config(&self) -> &Arc<ConfigHandle> {
        &self.config
    }

    /// Decides every descriptor of `req` and builds Envoy's response.
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
    ) -> Result<RateLimitResponse, ServiceError> {
        self.check_shape(req)?;
        let config = self.config.get();
        let plans = self.plan(&config, req)?;
        let answers = self.decide(&plans).await;
        self.respond(&req.domain, &plans, answers)
    }

    /// Refuses a request without a domain or descriptors, or with more
    /// descriptors than the operator's bound.
    fn check_shape(&self, req: &RateLimitRequest) -> Result<(), ServiceError> {
        if req.domain.is_empty() {
            return Err(ServiceError::InvalidArgument(
                "domain must not be empty".into(),
            ));
        }
        if req.descriptors.is_empty() {
            return Err(ServiceError::InvalidArgument(
                "descriptors must not be empty".into(),
            ));
        }
        // Every descriptor is a decision: their number is the operator's bound.
        self.limiter
            .bounds()
            .check_descriptors(req.descriptors.len())
            .map_err(|e| ServiceError::InvalidArgument(e.to_string()))
    }

    /// Asks the store, concurrently, about every plan that needs it.
    async fn decide(&self, plans: &[Plan]) -> Vec<Answer> {
        futures::future::join_all(plans.iter().map(|p| async move {
            match p {
                // The limit is the operator's rule (a client's override was
                // checked against the bounds in `plan`); the cost is checked here.
                Plan::Decide { request, .. } => {
                    Some(self.configured.decide(request, Mode::Record).await)
                }
                _ => None,
            }
        }))
        .await
    }

    /// Builds the response: one status per descriptor, in order; over the
    /// limit when any is; the headers of the most restrictive when asked.
    fn respond(
        &self,
        domain: &str,
        plans: &[Plan],
        answers: Vec<Answer>,
    ) -> Result<RateLimitResponse, ServiceError> {
        let mut statuses = Vec::with_capacity(plans.len());
        // The most restrictive limited descriptor, for the optional headers.
        let mut tightest: Option<(Decision, Unit)> = None;
        for (plan, answer) in plans.iter().zip(answers) {
            let status = match (plan, answer) {
                (Plan::NotLimited, _) => status::not_limited(),
                (Plan::Unlimited, _) => status::unlimited(),
                (Plan::Blocked(rule), _) => {
                    self.count_blocked(domain, rule);
                    status::blocked_status(rule)
                }
                (Plan::Decide { rule, .. }, Some(result)) => {
                    // Under fail-open the limiter answered a degraded
                    // decision; an error here is fail-closed.
                    let decision = result?;
                    self.count_decision(domain, rule, &decision);
                    if tightest.is_none_or(|(t, _)| decision.remaining < t.remaining) {
                        tightest = Some((decision, rule.unit()));
                    }
                    status::status_for(rule, &decision)
                }
                (Plan::Decide { .. }, None) => unreachable!("every planned decision is made"),
            };
            statuses.push(status);
        }
        let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
        let mut response = RateLimitResponse {
            overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
            statuses,
            ..Default::default()
        };
        if let (true, Some((d, _))) = (self.options.response_headers, tightest) {
            response.response_headers_to_add = status::rate_limit_headers(&d);
        }
        Ok(response)
    }
}
