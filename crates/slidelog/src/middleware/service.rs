//! The tower [`Layer`] and [`Service`]: decide on every request before the
//! inner service sees it.

use super::extract::KeyExtractor;
use super::response::{RATELIMIT, RATELIMIT_POLICY, Refusal, RejectionBody, is_grpc};
use super::routes::RouteLimits;
use crate::headers::ratelimit_value;
use crate::{Limiter, LimiterError};
use http::{HeaderValue, Request, Response};
use slidelog_core::Mode;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower::{Layer, Service};

/// What to do with a request whose key cannot be extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Answer 400 (gRPC INVALID_ARGUMENT). The default: a client cannot
    /// escape its limit by leaving out its key.
    #[default]
    Reject,
    /// Call the inner service without deciding (e.g. anonymous requests that
    /// another layer limits).
    PassThrough,
}

/// Settings shared by every clone of the service.
#[derive(Debug)]
struct Shared<K> {
    limiter: Limiter,
    extractor: Arc<K>,
    routes: Arc<RouteLimits>,
    missing: MissingKey,
}

/// A tower layer that rate limits `http::Request`s (axum, tonic, hyper).
///
/// For each request: find the route's limits ([`RouteLimits`]), extract the
/// key ([`KeyExtractor`]), decide on the limiter (cost 1). Admitted: the
/// inner service answers and the RateLimit fields are added to its response;
/// the [`Decision`](crate::Decision) is put in the request's and the
/// response's extensions (`degraded` is true when the store failed and the
/// policy is fail-open; only `RateLimit-Policy` is then added, as nothing was
/// counted). Rejected: 429 with `Retry-After` and the RateLimit fields. Store
/// failure under fail-closed: 503. No key: see [`MissingKey`]. gRPC requests
/// get the same answers as gRPC statuses (RESOURCE_EXHAUSTED, UNAVAILABLE,
/// INVALID_ARGUMENT).
///
/// Keys are counted per route rule: the log of client `k` on a route `/login`
/// is `/login:k`, on the default `default:k`.
///
/// ```
/// use axum::{Router, routing::get};
/// use slidelog::middleware::{Header, RateLimitLayer, RouteLimits};
/// use slidelog::{Limit, Limiter};
///
/// let routes = RouteLimits::new([Limit::new(100, 60_000)?])?;
/// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, routes);
/// let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RateLimitLayer<K> {
    limiter: Limiter,
    extractor: Arc<K>,
    routes: Arc<RouteLimits>,
    missing: MissingKey,
}

impl<K> Clone for RateLimitLayer<K> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            extractor: self.extractor.clone(),
            routes: self.routes.clone(),
            missing: self.missing,
        }
    }
}

impl<K: KeyExtractor> RateLimitLayer<K> {
    /// Limits requests by the key `extractor` picks, under `routes`' limits.
    pub fn new(limiter: Limiter, extractor: K, routes: RouteLimits) -> Self {
        Self {
            limiter,
            extractor: Arc::new(extractor),
            routes: Arc::new(routes),
            missing: MissingKey::default(),
        }
    }

    /// What to do when the key cannot be extracted. Default
    /// [`MissingKey::Reject`].
    pub fn on_missing_key(mut self, missing: MissingKey) -> Self {
        self.missing = missing;
        self
    }
}

impl<S, K> Layer<S> for RateLimitLayer<K> {
    type Service = RateLimitService<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            shared: Arc::new(Shared {
                limiter: self.limiter.clone(),
                extractor: self.extractor.clone(),
                routes: self.routes.clone(),
                missing: self.missing,
            }),
        }
    }
}

/// The service that [`RateLimitLayer`] wraps around an inner service.
#[derive(Debug)]
pub struct RateLimitService<S, K> {
    inner: S,
    shared: Arc<Shared<K>>,
}

impl<S: Clone, K> Clone for RateLimitService<S, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S, K> RateLimitService<S, K> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The limiter decisions are made on.
    pub fn limiter(&self) -> &Limiter {
        &self.shared.limiter
    }
}

/// The future of [`RateLimitService`]: the decision, then the inner call.
pub type ResponseFuture<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimitService<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: RejectionBody + Send + 'static,
    K: KeyExtractor,
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
        let shared = self.shared.clone();
        Box::pin(async move { shared.handle(ready, request).await })
    }
}

impl<K: KeyExtractor> Shared<K> {
    async fn handle<S, ReqBody, ResBody>(
        &self,
        mut inner: S,
        request: Request<ReqBody>,
    ) -> Result<Response<ResBody>, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        ResBody: RejectionBody,
    {
        let (mut parts, body) = request.into_parts();
        let rule = self.routes.rule_for(&parts);
        let Some(limits) = rule.limits.clone() else {
            return inner.call(Request::from_parts(parts, body)).await;
        };
        let grpc = is_grpc(&parts.headers);
        let Some(key) = self.extractor.extract(&parts) else {
            return match self.missing {
                MissingKey::PassThrough => inner.call(Request::from_parts(parts, body)).await,
                MissingKey::Reject => {
                    Ok(Refusal::bad_key("no key in the request").into_response(grpc))
                }
            };
        };
        // A key that breaks the bounds (over 512 bytes with its scope) is
        // always refused, whatever `MissingKey` says: passing it through would
        // let a client escape its limit by sending a long key.
        let request = match slidelog_core::Request::new(
            format!("{}:{key}", rule.scope),
            limits.to_vec(),
            1,
        ) {
            Ok(request) => request,
            Err(e) => return Ok(Refusal::bad_key(e).into_response(grpc)),
        };
        match self.limiter.decide(&request, Mode::Record).await {
            Ok(decision) if decision.allowed => {
                parts.extensions.insert(decision);
                let mut response = inner.call(Request::from_parts(parts, body)).await?;
                let headers = response.headers_mut();
                if let Some(policy) = &rule.policy {
                    headers.insert(RATELIMIT_POLICY, policy.clone());
                }
                // A degraded decision carries the policy only (nothing was counted).
                if !decision.degraded {
                    let value = HeaderValue::from_str(&ratelimit_value(&limits, &decision));
                    if let Ok(value) = value {
                        headers.insert(RATELIMIT, value);
                    }
                }
                response.extensions_mut().insert(decision);
                Ok(response)
            }
            Ok(decision) => {
                let mut response = Refusal::limited(&decision, &limits).into_response(grpc);
                response.extensions_mut().insert(decision);
                Ok(response)
            }
            Err(LimiterError::Store(e)) => Ok(Refusal::unavailable(e).into_response(grpc)),
            Err(LimiterError::Input(e)) => Ok(Refusal::bad_key(e).into_response(grpc)),
        }
    }
}
