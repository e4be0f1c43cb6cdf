//! The tower [`Layer`]: builds the configuration of rate limiting
//! ([`super::config`]: limiter, extractor, route limits, cost, namespace,
//! hooks), as tower's own `RateLimitLayer` holds only its rate, and hands
//! it to the service it makes. The behaviour lives in [`super::service`].

use super::config::{Config, MissingKey};
use super::cost::{BodyCost, Cost, HeadCost, UnitCost};
use super::extract::KeyExtractor;
use super::namespace::{MAX_NAME_BYTES, Namespace};
use super::response::Rejection;
use super::routes::RouteLimits;
use super::service::RateLimitService;
use crate::{Decision, Limiter};
use http::Response;
use http::request::Parts;
use std::sync::Arc;
use tower::Layer;

/// A name given to [`RateLimitLayer::name`] that cannot be a namespace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("layer name {0:?} must be 1 to 64 bytes without ':'")]
pub struct NameError(pub String);

/// A tower layer that rate limits `http::Request`s (axum, tonic, hyper).
///
/// For each request: find the route's limits ([`RouteLimits`]), extract the
/// key ([`KeyExtractor`]), find the cost (1 unless [`cost`](Self::cost) or
/// [`body_cost`](Self::body_cost) says otherwise), decide on the limiter.
/// Admitted: the inner service answers and the RateLimit fields are added to
/// its response; the [`Decision`] is put in the request's and the response's
/// extensions (`degraded` is true when the store failed and the policy is
/// fail-open; only `RateLimit-Policy` is then added, as nothing was
/// counted). Rejected: 429 with `Retry-After` and the RateLimit fields (or
/// what [`on_rejection`](Self::on_rejection) makes). A cost no limit can ever
/// admit: 413 with the reason. Store failure under fail-closed: 503. No key:
/// see [`MissingKey`]. gRPC requests get the same answers as gRPC statuses
/// (RESOURCE_EXHAUSTED, INVALID_ARGUMENT, UNAVAILABLE).
///
/// Each layer counts in its own logs: the log of client `k` is
/// `{namespace}:{route}:k`, where the namespace is the layer's
/// [`name`](Self::name) or one derived from its extractor and its routes'
/// limits (`auto-ip-1a2b3c4d`, `auto-header-x-api-key-…`, and `…-2` for a
/// second layer with the same ones on the same limiter: two layers with
/// other limits never share logs, in one process or two; a layer without a
/// name on a store shared over the network warns when built), and the route is the matching [`RouteLimits`] rule
/// (`default` for the default). So two layers on one limiter never share a
/// log by accident, even when their keys collide.
///
/// ```
/// use axum::{Router, routing::get};
/// use slidelog::middleware::{Header, PeerIp};
/// use slidelog::{Limiter, RateLimitLayer};
///
/// let limiter = Limiter::memory();
/// let search = RateLimitLayer::new(limiter.clone(), Header::named("x-api-key")?, "100/minute".parse()?)
///     .name("search")?;
/// let upload = RateLimitLayer::new(limiter, PeerIp::new(), "10/minute".parse()?);
/// assert_eq!(search.namespace(), "search");
/// assert!(upload.namespace().starts_with("auto-ip-"));
/// let app: Router = Router::new()
///     .route("/search", get(|| async { "results" }).layer(search))
///     .route("/upload", get(|| async { "stored" }).layer(upload));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RateLimitLayer<K, C = UnitCost> {
    config: Config<K, C>,
}

impl<K, C> std::fmt::Debug for RateLimitLayer<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RateLimitLayer").field(&self.config).finish()
    }
}

impl<K, C> Clone for RateLimitLayer<K, C> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
        }
    }
}

impl<K: KeyExtractor> RateLimitLayer<K> {
    /// Limits requests by the key `extractor` picks, under `routes`' limits
    /// (a [`RouteLimits`] table, or `"100/minute".parse()?` for one limit on
    /// every request), at a cost of 1 each.
    pub fn new(limiter: Limiter, extractor: K, routes: RouteLimits) -> Self {
        let namespace =
            Namespace::derived(limiter.names(), &extractor.kind(), &routes.fingerprint());
        if limiter.store().in_process().is_none() {
            // Another service with the same extractor and limits on this
            // store would derive the same name (super::namespace).
            tracing::warn!(
                namespace = namespace.as_str(),
                store = limiter.store().kind(),
                "rate limit layer without a name on a shared store: its counts are shared with any layer deriving the same name (same key kind, routes and limits); give it one with .name(...)"
            );
        }
        let config = Config {
            limiter,
            extractor: Arc::new(extractor),
            routes: Arc::new(routes),
            missing: MissingKey::default(),
            namespace,
            charge: Arc::new(UnitCost),
            on_rejection: None,
            on_degraded: None,
        };
        Self { config }
    }
}

impl<K: KeyExtractor, C> RateLimitLayer<K, C> {
    /// Counts this layer's requests under `name` (1 to 64 bytes, no `:`)
    /// instead of a derived namespace. Layers given the same name on one
    /// store share their logs: that is how two layers share a budget.
    pub fn name(mut self, name: &str) -> Result<Self, NameError> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES || name.contains(':') {
            return Err(NameError(name.to_owned()));
        }
        self.config.namespace = Namespace::named(name.to_owned());
        Ok(self)
    }

    /// Returns the namespace this layer counts in (its name, or the derived one).
    pub fn namespace(&self) -> &str {
        self.config.namespace.as_str()
    }

    /// Sets what to do when the key cannot be extracted. Default
    /// [`MissingKey::Reject`].
    pub fn on_missing_key(mut self, missing: MissingKey) -> Self {
        self.config.missing = missing;
        self
    }

    /// Makes the HTTP answer to every refusal of the layer (429, 413, 400,
    /// 503), e.g. with a JSON body; the layer adds `RateLimit-Policy`,
    /// `RateLimit` and `Retry-After` to it. gRPC requests keep their status
    /// answers.
    ///
    /// ```
    /// use slidelog::{Limiter, RateLimitLayer, middleware::Constant};
    /// let layer = RateLimitLayer::new(Limiter::memory(), Constant::new("all"), "10/second".parse()?)
    ///     .on_rejection(|r| r.response("application/json", format!(r#"{{"error":{:?}}}"#, r.message())));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_rejection(
        mut self,
        hook: impl Fn(&Rejection) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.config.on_rejection = Some(Arc::new(hook));
        self
    }

    /// Called for every request admitted degraded (the store failed and the
    /// limiter is fail-open), before the inner service: count it, log it.
    /// The limiter's [`MetricsHook`](crate::metrics::MetricsHook) sees the
    /// store error itself.
    pub fn on_degraded(mut self, hook: impl Fn(&Parts, &Decision) + Send + Sync + 'static) -> Self {
        self.config.on_degraded = Some(Arc::new(hook));
        self
    }

    /// Returns this layer charging with `charge` instead.
    fn charging<C2>(self, charge: C2) -> RateLimitLayer<K, C2> {
        RateLimitLayer {
            config: self.config.charging(charge),
        }
    }
}

/// The cost sources: only on a layer that charges 1 (has none yet).
impl<K: KeyExtractor> RateLimitLayer<K, UnitCost> {
    /// Each request costs what `cost` says of its head: one cost for every
    /// limit (`u64`), or one per limit (`[u64; N]`, `Vec<u64>`, matched by
    /// position). A cost above a limit's `max` (or the limiter's bounds) is
    /// answered 413 with the reason. A cost of 0 charges nothing in that
    /// limit (as a settle of 0 does): a request costing 0 in every limit is
    /// handed to the inner service without a decision, one costing 0 in some
    /// limits is decided on the others only.
    ///
    /// A layer has one cost source: `cost` and [`body_cost`](Self::body_cost)
    /// exist only on a layer that has none yet, so a second one does not
    /// compile (rather than replacing the first without a word):
    ///
    /// ```compile_fail
    /// use slidelog::{Limiter, RateLimitLayer, middleware::Header};
    /// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "1000/minute".parse()?)
    ///     .cost(|_parts| 2u64)
    ///     .body_cost(4096, |_parts, body: &[u8]| body.len() as u64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// ```
    /// use slidelog::{Limiter, RateLimitLayer, middleware::Header};
    /// // Batch calls declare their size; each item counts.
    /// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "1000/minute".parse()?)
    ///     .cost(|parts| {
    ///         let items = parts.headers.get("x-batch-size").and_then(|v| v.to_str().ok()?.parse().ok());
    ///         items.unwrap_or(1u64)
    ///     });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cost<F, R>(self, cost: F) -> RateLimitLayer<K, HeadCost<F>>
    where
        F: Fn(&Parts) -> R + Send + Sync + 'static,
        R: Into<Cost>,
    {
        self.charging(HeadCost(cost))
    }

    /// Each request costs what `cost` says of its head and whole body (tokens
    /// in a prompt, bytes uploaded). The body is read up to `max_bytes`
    /// (longer: 413, before the inner service or the limiter is called), then
    /// handed on to the inner service unchanged. Needs a body type the layer
    /// can rebuild ([`BufferedBody`](super::BufferedBody): axum's and
    /// tonic's with their features).
    pub fn body_cost<F, R>(self, max_bytes: usize, cost: F) -> RateLimitLayer<K, BodyCost<F>>
    where
        F: Fn(&Parts, &[u8]) -> R + Send + Sync + 'static,
        R: Into<Cost>,
    {
        self.charging(BodyCost { max_bytes, f: cost })
    }
}

impl<S, K, C> Layer<S> for RateLimitLayer<K, C> {
    type Service = RateLimitService<S, K, C>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService::new(inner, Arc::new(self.config.clone()))
    }
}
