//! [`RateLimiter`]: a `RateLimitRequest` in, one sliding-log decision per
//! descriptor on the store, a `RateLimitResponse` out; and [`GrpcService`],
//! the tonic `RateLimitService` around it.
//!
//! Per descriptor, as the reference service answers:
//! - no rule (unknown domain, nothing matches): `OK`, no `current_limit`;
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

use crate::config::{RateLimitConfig, Rule, Unit};
use crate::proto::{
    HeaderValue, RateLimitRequest, RateLimitResponse, RateLimitService,
    rate_limit_response::{self, Code, DescriptorStatus, rate_limit::Unit as PbUnit},
};
use crate::reload::ConfigHandle;
use slidelog::{Limiter, LimiterError};
use slidelog_core::{Decision, Limit, Mode, Request, StoreError};
use std::collections::HashSet;
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

/// The plan for one descriptor before the store is asked.
enum Plan {
    NotLimited,
    Unlimited,
    /// `requests_per_unit: 0`: over the limit without asking the store.
    Blocked(Arc<Rule>),
    Decide {
        rule: Arc<Rule>,
        request: Request,
    },
}

impl RateLimiter {
    /// The service over `limiter` with the rules of `config`.
    pub fn new(limiter: Limiter, config: Arc<ConfigHandle>, options: ServiceOptions) -> Self {
        Self {
            limiter,
            config,
            options,
            recorder: None,
        }
    }

    /// Records the `slidelog_envoy_*` counters in `recorder` (a server's own
    /// registry) instead of the process-global one.
    pub fn with_recorder(mut self, recorder: Arc<dyn metrics::Recorder + Send + Sync>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// The live config.
    pub fn config(&self) -> &Arc<ConfigHandle> {
        &self.config
    }

    /// Decides every descriptor of `req` and builds Envoy's response.
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
    ) -> Result<RateLimitResponse, ServiceError> {
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
            .map_err(|e| ServiceError::InvalidArgument(e.to_string()))?;
        let config = self.config.get();
        let plans = self.plan(&config, req)?;
        let decisions = futures::future::join_all(plans.iter().map(|p| async move {
            match p {
                // The limit is the operator's rule (a client's override was
                // checked against the bounds in `plan`); the cost is checked here.
                Plan::Decide { request, .. } => {
                    Some(self.limiter.decide_configured(request, Mode::Record).await)
                }
                _ => None,
            }
        }))
        .await;

        let mut statuses = Vec::with_capacity(plans.len());
        // The most restrictive limited descriptor, for the optional headers.
        let mut tightest: Option<(Decision, Unit)> = None;
        for (plan, decision) in plans.iter().zip(decisions) {
            let status = match (plan, decision) {
                (Plan::NotLimited, _) => DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                },
                (Plan::Unlimited, _) => DescriptorStatus {
                    code: Code::Ok as i32,
                    limit_remaining: u32::MAX,
                    ..Default::default()
                },
                (Plan::Blocked(rule), _) => blocked_status(rule),
                (Plan::Decide { rule, .. }, Some(result)) => {
                    // Under fail-open the limiter answered a degraded
                    // decision; an error here is fail-closed.
                    let decision = result?;
                    self.record_metrics(&req.domain, rule, &decision);
                    if tightest.is_none_or(|(t, _)| decision.remaining < t.remaining) {
                        tightest = Some((decision, rule.unit()));
                    }
                    status_for(rule, &decision)
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
            response.response_headers_to_add = rate_limit_headers(&d);
        }
        Ok(response)
    }

    fn plan(
        &self,
        config: &RateLimitConfig,
        req: &RateLimitRequest,
    ) -> Result<Vec<Plan>, ServiceError> {
        let request_cost = u64::from(req.hits_addend.max(1));
        let mut matched: Vec<Option<Arc<Rule>>> = Vec::with_capacity(req.descriptors.len());
        for d in &req.descriptors {
            let entries: Vec<(&str, &str)> = d
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            let rule = match &d.limit {
                // A limit sent by the client applies when the domain is
                // configured, as in the reference service.
                Some(o) if config.has_domain(&req.domain) => {
                    let rule = override_rule(o, &req.domain, &entries)?;
                    if let Some(limit) = rule.limit() {
                        self.limiter.bounds().check_limits(&[limit]).map_err(|e| {
                            ServiceError::InvalidArgument(format!(
                                "descriptor limit override: {}",
                                e.to_string().replacen("max", "requests_per_unit", 1)
                            ))
                        })?;
                    }
                    Some(Arc::new(rule))
                }
                _ => config.lookup(&req.domain, &entries),
            };
            matched.push(rule);
        }
        let replaced: HashSet<&str> = matched
            .iter()
            .flatten()
            .flat_map(|r| r.replaces().iter().map(String::as_str))
            .collect();
        let mut plans = Vec::with_capacity(matched.len());
        for (d, rule) in req.descriptors.iter().zip(&matched) {
            let Some(rule) = rule else {
                plans.push(Plan::NotLimited);
                continue;
            };
            if rule.name().is_some_and(|n| replaced.contains(n)) {
                plans.push(Plan::NotLimited);
                continue;
            }
            if rule.blocks_all() {
                plans.push(Plan::Blocked(Arc::clone(rule)));
                continue;
            }
            let Some(limit) = rule.limit() else {
                plans.push(Plan::Unlimited);
                continue;
            };
            let cost = match d.hits_addend {
                Some(n) if n > 0 => n,
                _ => request_cost,
            };
            let entries: Vec<(&str, &str)> = d
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_str()))
                .collect();
            let key = rule.store_key(&req.domain, &entries);
            let request = Request::new(key, vec![limit], cost).map_err(|e| {
                ServiceError::InvalidArgument(format!(
                    "descriptor {}: hits_addend {e}",
                    rule.path()
                ))
            })?;
            plans.push(Plan::Decide {
                rule: Arc::clone(rule),
                request,
            });
        }
        Ok(plans)
    }

    /// Counts one descriptor's decision by domain, rule and result.
    fn record_metrics(&self, domain: &str, rule: &Rule, d: &Decision) {
        let result = match (d.allowed, d.degraded, rule.shadow_mode()) {
            (true, true, _) => "degraded",
            (true, false, _) => "ok",
            (false, _, true) => "shadow_over_limit",
            (false, _, false) => "over_limit",
        };
        let count = || {
            metrics::counter!(
                "slidelog_envoy_decisions_total",
                "domain" => domain.to_owned(),
                "rule" => rule.path().to_owned(),
                "result" => result,
            )
            .increment(1);
        };
        match &self.recorder {
            Some(recorder) => metrics::with_local_recorder(recorder.as_ref(), count),
            None => count(),
        }
    }
}

fn override_rule(
    o: &crate::proto::rate_limit_descriptor::RateLimitOverride,
    domain: &str,
    entries: &[(&str, &str)],
) -> Result<Rule, ServiceError> {
    use crate::proto::RateLimitUnit as U;
    let unit = match U::try_from(o.unit).unwrap_or(U::Unknown) {
        U::Second => Unit::Second,
        U::Minute => Unit::Minute,
        U::Hour => Unit::Hour,
        U::Day => Unit::Day,
        U::Month => Unit::Month,
        U::Year => Unit::Year,
        U::Unknown => {
            return Err(ServiceError::InvalidArgument(
                "descriptor limit override: unit must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR"
                    .into(),
            ));
        }
    };
    let limit = Limit::new(u64::from(o.requests_per_unit), unit.millis()).map_err(|e| {
        ServiceError::InvalidArgument(format!(
            "descriptor limit override: {}",
            e.to_string().replacen("max", "requests_per_unit", 1)
        ))
    })?;
    let path = std::iter::once(domain.to_owned())
        .chain(entries.iter().map(|(k, v)| format!("{k}_{v}")))
        .collect::<Vec<_>>()
        .join(".");
    Ok(Rule::from_override(limit, unit, path))
}

fn pb_unit(unit: Unit) -> PbUnit {
    match unit {
        Unit::Second => PbUnit::Second,
        Unit::Minute => PbUnit::Minute,
        Unit::Hour => PbUnit::Hour,
        Unit::Day => PbUnit::Day,
        Unit::Week => PbUnit::Week,
        Unit::Month => PbUnit::Month,
        Unit::Year => PbUnit::Year,
    }
}

fn status_for(rule: &Rule, d: &Decision) -> DescriptorStatus {
    let wait_ms = if d.allowed {
        d.reset_after_ms
    } else {
        d.retry_after_ms
    };
    let code = if d.allowed || rule.shadow_mode() {
        Code::Ok
    } else {
        Code::OverLimit
    };
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(rate_limit_response::RateLimit {
            name: rule.name().unwrap_or_default().to_owned(),
            requests_per_unit: u32::try_from(rule.requests_per_unit()).unwrap_or(u32::MAX),
            unit: pb_unit(rule.unit()) as i32,
        }),
        // A degraded (fail-open) decision counted nothing: it claims no
        // remaining count (0 is left out of the answer).
        limit_remaining: if d.degraded {
            0
        } else {
            u32::try_from(d.remaining).unwrap_or(u32::MAX)
        },
        duration_until_reset: Some(prost_types::Duration {
            seconds: (wait_ms / 1000) as i64,
            nanos: ((wait_ms % 1000) * 1_000_000) as i32,
        }),
        quota: None,
    }
}

/// A rule with `requests_per_unit: 0`: over the limit (OK in shadow mode),
/// nothing remaining, and a whole window until anything could change.
fn blocked_status(rule: &Rule) -> DescriptorStatus {
    let code = if rule.shadow_mode() {
        Code::Ok
    } else {
        Code::OverLimit
    };
    let wait_ms = rule.window_ms();
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(rate_limit_response::RateLimit {
            name: rule.name().unwrap_or_default().to_owned(),
            requests_per_unit: 0,
            unit: pb_unit(rule.unit()) as i32,
        }),
        limit_remaining: 0,
        duration_until_reset: Some(prost_types::Duration {
            seconds: (wait_ms / 1000) as i64,
            nanos: ((wait_ms % 1000) * 1_000_000) as i32,
        }),
        quota: None,
    }
}

/// `x-ratelimit-*` as the reference service sends them: the limit with its
/// window in seconds, the remaining count, and seconds until reset.
fn rate_limit_headers(d: &Decision) -> Vec<HeaderValue> {
    let window_s = d.window_ms.div_ceil(1000);
    let wait_ms = if d.allowed {
        d.reset_after_ms
    } else {
        d.retry_after_ms
    };
    let header = |key: &str, value: String| HeaderValue {
        key: key.to_owned(),
        value,
        raw_value: Vec::new(),
    };
    let mut headers = vec![header(
        "x-ratelimit-limit",
        format!("{}, {};w={}", d.limit, d.limit, window_s),
    )];
    // A degraded (fail-open) decision counted nothing: no remaining count.
    if !d.degraded {
        headers.push(header("x-ratelimit-remaining", d.remaining.to_string()));
    }
    headers.push(header(
        "x-ratelimit-reset",
        wait_ms.div_ceil(1000).to_string(),
    ));
    headers
}

/// The tonic `RateLimitService`.
#[derive(Debug, Clone)]
pub struct GrpcService {
    limiter: Arc<RateLimiter>,
}

impl GrpcService {
    /// The service over `limiter`.
    pub fn new(limiter: Arc<RateLimiter>) -> Self {
        Self { limiter }
    }

    /// The tonic server wrapper, ready for `tonic::transport::Server::add_service`.
    pub fn into_server(self) -> crate::proto::RateLimitServiceServer<Self> {
        crate::proto::RateLimitServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl RateLimitService for GrpcService {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let response = self
            .limiter
            .should_rate_limit(request.get_ref())
            .await
            .map_err(tonic::Status::from)?;
        Ok(tonic::Response::new(response))
    }
}

/// Serves `RateLimitService` on `listener` until `shutdown` completes.
pub async fn serve_grpc(
    listener: tokio::net::TcpListener,
    limiter: Arc<RateLimiter>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .add_service(GrpcService::new(limiter).into_server())
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown,
        )
        .await
}
