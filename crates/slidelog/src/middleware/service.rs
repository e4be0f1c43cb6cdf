//! The tower [`Service`]: the behaviour of rate limiting. Each request goes
//! through the request side ([`super::ask`]: route, keys, cost, validation),
//! one decision on the limiter over every key, and the response side ([`super::answer`]:
//! hooks, headers, refusals, and the settle of [`super::settle`]). The configuration is the layer's
//! ([`super::config`], built by [`RateLimitLayer`](super::RateLimitLayer)).

use super::answer;
use super::ask::{self, Asked};
use super::config::Config;
use super::cost::{Charge, UnitCost};
use super::extract::KeyExtractor;
use super::response::RejectionBody;
use super::settle::{NoBodyUsage, ReadUsage};
use super::stack;
use crate::{Limiter, LimiterError};
use http::{Request, Response};
use slidelog_core::{Checks, JointDecision, Mode};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::Service;

/// The service that [`RateLimitLayer`](super::RateLimitLayer) wraps around an inner service.
pub struct RateLimitService<S, K, C = UnitCost, U = NoBodyUsage> {
    inner: S,
    /// The layer's configuration, shared by every service it made.
    config: Arc<Config<K, C, U>>,
}

impl<S: std::fmt::Debug, K, C, U> std::fmt::Debug for RateLimitService<S, K, C, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl<S: Clone, K, C, U> Clone for RateLimitService<S, K, C, U> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S, K, C, U> RateLimitService<S, K, C, U> {
    /// Returns the service deciding with `config` before `inner`.
    pub(crate) fn new(inner: S, config: Arc<Config<K, C, U>>) -> Self {
        Self { inner, config }
    }

    /// Returns the inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Returns the inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Returns the inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Returns the limiter decisions are made on.
    pub fn limiter(&self) -> &Limiter {
        &self.config.limiter
    }
}

/// The future of [`RateLimitService`]: the decision, then the inner call.
pub type ResponseFuture<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

impl<S, K, C, U, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimitService<S, K, C, U>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: RejectionBody + Send + 'static,
    K: KeyExtractor,
    C: Charge<ReqBody>,
    U: ReadUsage<ResBody>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The service that `poll_ready` made ready is the one to call; the
        // clone stays behind for the next `poll_ready` (tower's guidance for
        // services that call their inner service from a future). A request
        // that is refused drops the ready service, releasing what it reserved.
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        Box::pin(async move { handle(&config, ready, request).await })
    }
}

/// Decides on one request: the request side, the decision, the response side.
async fn handle<S, K, C, U, ReqBody, ResBody>(
    config: &Config<K, C, U>,
    inner: S,
    request: Request<ReqBody>,
) -> Result<Response<ResBody>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: RejectionBody,
    K: KeyExtractor,
    C: Charge<ReqBody>,
    U: ReadUsage<ResBody>,
{
    let (parts, body) = request.into_parts();
    if parts.extensions.get::<stack::Outer>().is_some() {
        stack::met(config);
    }
    match ask::ask(config, &parts, body).await {
        Asked::Pass(body) => answer::pass(inner, parts, body).await,
        Asked::Refuse(rejection) => Ok(answer::refuse(config, &parts, rejection)),
        Asked::Decide(asked) => {
            let decided = match config.delay {
                Some(bound) => delayed(&config.limiter, &asked.checks, bound).await,
                None => decide(&config.limiter, &asked.checks).await,
            };
            if let (Some(tier), Some(hook), Ok(joint)) =
                (asked.tier, config.limiter.metrics(), &decided)
            {
                hook.tier_decided(tier, &joint.deciding().decision);
            }
            answer::decided(config, inner, parts, asked, decided).await
        }
    }
}

/// Decides every check at once, with every limit's state (the answer lists
/// them all, RateLimit): one key as a plain decision, several as one
/// joint decision (admitted in all, or recorded in none).
async fn decide(limiter: &Limiter, checks: &Checks) -> Result<JointDecision, LimiterError> {
    match checks.as_slice() {
        [one] => {
            let each = limiter.decide_each(one, Mode::Record).await?;
            Ok(JointDecision::of(vec![each]))
        }
        _ => limiter.decide_all(checks, Mode::Record).await,
    }
}

/// Decides every check at once, waiting up to `bound` for room
/// ([`RateLimitLayer::delay_up_to`](super::RateLimitLayer::delay_up_to)): the
/// admission, or the refusal whose retry time is past `bound`.
async fn delayed(
    limiter: &Limiter,
    checks: &Checks,
    bound: std::time::Duration,
) -> Result<JointDecision, LimiterError> {
    use crate::WaitError;
    match limiter.wait_all(checks, crate::Wait::up_to(bound)).await {
        Ok(joint) => Ok(joint),
        Err(stopped) => match (stopped.refusal, stopped.error) {
            (Some(refused), _) => Ok(refused),
            (None, WaitError::Store(e)) => Err(LimiterError::Store(e)),
            (None, WaitError::Input(e) | WaitError::InsufficientCapacity(e)) => {
                Err(LimiterError::Input(e))
            }
            // Still queued at the bound: answered as without a delay.
            (None, _) => decide(limiter, checks).await,
        },
    }
}
