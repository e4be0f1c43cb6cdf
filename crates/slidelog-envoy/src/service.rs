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
//!   `share_threshold` pattern in place of its value). The cost is the
//!   reference service's: the descriptor's `hits_addend` when set (0
//!   included), else the request's, 0 meaning 1; above `--max-cost` the
//!   request is `INVALID_ARGUMENT`. By cost:
//!   - 0: a look that records nothing, `OK` while the log is not over the
//!     limit (a full log included, as the reference's `INCRBY 0`);
//!   - on a `charge: true` rule, any other cost is recorded without
//!     checking, even over the limit (the usage Envoy reports at stream end
//!     with `apply_on_stream_done`), `OVER_LIMIT` when the log is then over;
//!   - otherwise a check: `OVER_LIMIT` when rejected (a rejected request
//!     records nothing; a cost above the limit is rejected without asking
//!     the store).
//!
//!   `OK` in `shadow_mode` even when over. `duration_until_reset` is the
//!   wait until one more request of the same cost would be admitted when
//!   over, and the time until the log is empty when within.
//!
//! `overall_code` is `OVER_LIMIT` when any descriptor is. A rule whose `name`
//! another matched rule `replaces` is not applied (reported `OK`).
//!
//! The limited descriptors of one request are decided together, all or
//! nothing (`joint`, docs/design.md §5.1): a request refused by one
//! descriptor records nothing in the others' logs. Shadow-mode rules never
//! refuse the request and record only for an admitted one. With
//! [`ServiceOptions::independent_descriptors`] (for migration) each
//! descriptor is decided on its own, concurrently, as before: a descriptor
//! that admits records even when another refuses the request.

mod counts;
mod grpc;
mod joint;
mod plan;
mod status;

pub use counts::{DECISIONS, UNCONFIGURED, UNMATCHED};
pub use grpc::{
    GRPC_KEEPALIVE, GRPC_MAX_LOCAL_ERROR_RESETS, GRPC_MAX_STREAMS, GrpcService, serve_grpc,
};

use crate::config::Unit;
use crate::handles::{SharedRecorder, Slot};
use crate::proto::{RateLimitRequest, RateLimitResponse, rate_limit_response::Code};
use crate::reload::ConfigHandle;
use plan::{Ask, Plan, Plans};
use slidelog::{Bounds, Limiter, LimiterError};
use slidelog_core::{Decision, Mode, Request, StoreError};
use smallvec::SmallVec;
use std::sync::Arc;

/// Options of the service. The store timeout and failure policy are the
/// [`Limiter`]'s (docs/design.md §6).
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// Add `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset`
    /// to `response_headers_to_add`, from the most restrictive descriptor
    /// (as the reference service's `LIMIT_RESPONSE_HEADERS_ENABLED`).
    pub response_headers: bool,
    /// Decide each descriptor on its own, as before joint decisions
    /// (`serve --envoy-independent-descriptors`, for migration): a request
    /// refused by one descriptor is still recorded in the others' logs.
    pub independent_descriptors: bool,
}

/// Why a request got no decision.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request breaks a rule of the protocol or a bound of docs/design.md §1.
    #[error("{0}")]
    InvalidArgument(String),
    /// The store failed and the policy is fail-closed. Transparent: the
    /// store error's message, and its source, each said once in a chain.
    #[error(transparent)]
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
    recorder: Option<SharedRecorder>,
    /// The handle of the unmatched counter of domains not in the config.
    unconfigured: Slot<metrics::Counter>,
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

/// The answers of one request's plans, in order.
type Answers = SmallVec<[Answer; 2]>;

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
            unconfigured: Slot::default(),
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
        let config = self.config.snapshot();
        // Filled and read in place (no copy of the plans or the answers
        // on their way).
        let mut plans = Plans::new();
        self.plan(&config, req, &mut plans)?;
        // One descriptor alone is decided the same either way: by the
        // cheaper path (a `Decision`, no `Checks` built).
        let mut answers = if self.options.independent_descriptors || plans.len() == 1 {
            self.decide(&plans).await
        } else {
            self.decide_jointly(&plans).await?
        };
        self.respond(&req.domain, &plans, &mut answers)
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

    /// Asks the store, concurrently, about every plan that needs it (one
    /// plan, the common request, without a join).
    async fn decide(&self, plans: &[Plan]) -> Answers {
        match plans {
            [plan] => std::iter::once(self.ask(plan).await).collect(),
            _ => futures::future::join_all(plans.iter().map(|p| self.ask(p)))
                .await
                .into_iter()
                .collect(),
        }
    }

    /// Asks the store about one plan, if it needs it.
    async fn ask(&self, plan: &Plan) -> Answer {
        match plan {
            // The limit is the operator's rule (a client's override was
            // checked against the bounds in `plan`); the cost is checked here.
            Plan::Decide { request, ask, .. } => Some(match ask {
                Ask::Check => self.configured.decide(request, Mode::Record).await,
                Ask::Look => self.configured.decide(request, Mode::Peek).await,
                // Boxed: the charge's future is the largest of the three
                // and charges are rare (`charge: true` rules); inline, it
                // would size every call's future (measured: BENCHMARKS.md).
                Ask::Charge => Box::pin(self.charge(request)).await,
            }),
            _ => None,
        }
    }

    /// Charges `request` (a [`Request::usage`]): recorded without checking.
    /// The library answers no failure policy for a charge; here, as for a
    /// decision, fail-open answers a degraded `OK` (Envoy ignores the answer
    /// of its stream-done call anyway) and fail-closed the error. A store
    /// that has no charge (`StoreError::Unsupported`) is answered
    /// `UNAVAILABLE` whatever the policy.
    async fn charge(&self, request: &Request) -> Result<Decision, LimiterError> {
        let charged = self
            .configured
            .charge(request.key(), request.limits(), request.cost())
            .await
            // The deciding limit's decision: an Envoy answer has one per descriptor.
            .map(|charged| charged.decision);
        match charged {
            // A store without charges (StoreError::Unsupported) is no
            // outage: the error is answered, never a degraded OK.
            Err(LimiterError::Store(e)) if !matches!(e, StoreError::Unsupported { .. }) => self
                .configured
                .failure_policy()
                .answer(request, e)
                .map_err(LimiterError::Store),
            other => other,
        }
    }

    /// Builds the response: one status per descriptor, in order; over the
    /// limit when any is; the headers of the most restrictive when asked.
    fn respond(
        &self,
        domain: &str,
        plans: &[Plan],
        answers: &mut Answers,
    ) -> Result<RateLimitResponse, ServiceError> {
        let mut statuses = Vec::with_capacity(plans.len());
        // The most restrictive limited descriptor, for the optional headers
        // (tracked only when they are asked for).
        let headers = self.options.response_headers;
        let mut tightest: Option<(Decision, Unit)> = None;
        for (plan, answer) in plans.iter().zip(answers.iter_mut().map(Option::take)) {
            let status = match (plan, answer) {
                (Plan::NotLimited, _) => status::not_limited(),
                (Plan::Unlimited, _) => status::unlimited(),
                (Plan::Blocked(rule), _) => {
                    self.count_blocked(domain, rule);
                    status::blocked_status(rule, 0)
                }
                (Plan::TooCostly(rule), _) => {
                    self.count_blocked(domain, rule);
                    status::blocked_status(rule, rule.requests_per_unit())
                }
                (Plan::Decide { rule, ask, .. }, Some(result)) => {
                    // Under fail-open the limiter answered a degraded
                    // decision; an error here is fail-closed.
                    let decision = answered(*ask, result?);
                    self.count_decision(domain, rule, &decision);
                    if headers && tightest.is_none_or(|(t, _)| decision.remaining < t.remaining) {
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
        if let Some((d, _)) = tightest {
            response.response_headers_to_add = status::rate_limit_headers(&d);
        }
        Ok(response)
    }
}

/// The store's answer in the terms of what was asked: `allowed` is then
/// "within the limit", the `OK` of the reference service.
///
/// - a check: as the store answered;
/// - a look (cost 0, asked as a peek of cost 1): within while the log is
///   not over the limit, a full log included; when the peek admitted, the
///   count and remaining are those of now, not after the unit it weighed;
/// - a charge: within while the log, the charge recorded, is not over.
fn answered(ask: Ask, d: Decision) -> Decision {
    if d.degraded {
        return d;
    }
    match ask {
        Ask::Check => d,
        Ask::Look if d.allowed => Decision {
            count: d.count.saturating_sub(1),
            remaining: d.remaining.saturating_add(1).min(d.limit),
            ..d
        },
        Ask::Look | Ask::Charge => {
            let within = d.count <= d.limit;
            Decision {
                allowed: within,
                retry_after_ms: if within { 0 } else { d.retry_after_ms },
                ..d
            }
        }
    }
}
