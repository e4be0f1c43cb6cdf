//! The tower [`Layer`]: builds the configuration of rate limiting
//! ([`super::config`]: limiter, extractor, route limits, cost, namespace,
//! settle, hooks), as tower's own `RateLimitLayer` holds only its rate, and
//! hands it to the service it makes. The behaviour lives in
//! [`super::service`]. What can be wrong in a configuration (a name, a cost
//! list that does not fit the limits, a header name) is an error of the
//! builder method that takes it, never of a request.

use super::config::{Config, MissingKey};
use super::cost::{BodyCost, CostListError, HeadCost, UnitCost, check_positional};
use super::extract::KeyExtractor;
use super::namespace::{MAX_NAME_BYTES, Namespace};
use super::response::Rejection;
use super::routes::RouteLimits;
use super::service::RateLimitService;
use super::settle::{BodyUsage, HeadSource, NoBodyUsage, SettleOutcome, Settling};
use crate::{Decision, Limiter};
use http::header::InvalidHeaderName;
use http::request::Parts;
use http::{HeaderName, Response, StatusCode, response};
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
/// Admitted: the inner service answers and the RateLimit fields, listing
/// every limit by name, are added to its response; the [`Decision`] is put
/// in the request's and the response's extensions (the response's also
/// holds every limit's state, [`Detailed`](crate::Detailed); `degraded` is
/// true when the store failed and the policy is fail-open; only
/// `RateLimit-Policy` is then added, as nothing was counted); a layer that
/// settles ([`settle_from_header`](Self::settle_from_header),
/// [`refund_on`](Self::refund_on)) then settles the reservation to the real
/// cost the response reports. Rejected: 429 with `Retry-After` and the RateLimit fields (or
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
/// name on a store shared over the network warns when first wrapped around a service), and the route is the matching [`RouteLimits`] rule
/// (`default` for the default). So two layers on one limiter never share a
/// log by accident, even when their keys collide.
///
/// **Several keys on one request** ("100 a minute per API key *and* 20 a
/// second per IP"): give one layer every key with [`key`](Self::key). Each
/// request is then one [`Limiter::decide_all`] over every key its route
/// limits (docs/design.md §1): admitted only if every key admits, recorded
/// in every key; refused by any, recorded in none. The RateLimit fields
/// list every limit under its key's name (`"api-key";q=100;w=60,
/// "ip";q=20;w=1`, the first key named by [`key_name`](Self::key_name)),
/// the deciding key's first; `Retry-After` is the longest wait of the
/// refusing keys. A refund ([`refund_on`](Self::refund_on)) removes the
/// record of every key; a real cost ([`settle_from_header`](Self::settle_from_header)
/// and the other sources) settles the first key's, the one the layer's
/// [`cost`](Self::cost) prices (keys added with `key` count 1 a request).
///
/// **Stacked layers** (an API-key layer around an IP layer, in either
/// order) cannot charge each other either: a layer refunds its record of
/// a request that a rate limit layer inside it refused (the inner service
/// never ran), so each key's log holds the requests that were served. It
/// is two decisions, not one: between the outer decision and its refund,
/// the outer key holds the unit, so a concurrent request on that key may
/// be refused that one decision would have admitted (never one admitted
/// too many), and the refund is one more store call. Once two layers have
/// met on a request they list their limits by key too (the extractor's
/// kind, `"ip"`, `"header-x-api-key"`, or [`key_name`](Self::key_name)),
/// the inner layer's first, so no two are both `"default"`; the first
/// layer to meet another logs a warning pointing to [`key`](Self::key),
/// the one atomic decision.
///
/// ```
/// use axum::{Router, routing::get};
/// use slidelog::middleware::{Header, PeerIp};
/// use slidelog::{Limiter, RateLimitLayer};
///
/// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "100/minute".parse()?)
///     .key_name("api-key")?
///     .key("ip", PeerIp::new(), "20/second".parse()?)?;
/// let app: Router = Router::new().route("/", get(|| async { "hello" })).layer(layer);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
pub struct RateLimitLayer<K, C = UnitCost, U = NoBodyUsage> {
    pub(super) config: Config<K, C, U>,
}

impl<K, C, U> std::fmt::Debug for RateLimitLayer<K, C, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RateLimitLayer").field(&self.config).finish()
    }
}

impl<K, C, U> Clone for RateLimitLayer<K, C, U> {
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
        let key_name = super::keyed::derived_name(&extractor.kind());
        let config = Config {
            limiter,
            extractor: Arc::new(extractor),
            routes: Arc::new(routes),
            missing: MissingKey::default(),
            namespace,
            charge: Arc::new(UnitCost),
            usage: Arc::new(NoBodyUsage),
            settling: Settling::default(),
            settles: false,
            on_rejection: None,
            on_degraded: None,
            key_name,
            keys: Arc::new([]),
            stacked: Arc::default(),
            delay: None,
            tiers: None,
        };
        Self { config }
    }
}

impl<K: KeyExtractor, C, U> RateLimitLayer<K, C, U> {
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

    /// Holds a request that would be refused until it fits, for up to
    /// `bound`, instead of answering 429 at once (nginx `limit_req` with
    /// `burst` and `delay`): the layer waits as
    /// [`Limiter::until_ready_all`] does (in arrival order per key, one
    /// waiter asking the store at a time) and refuses only a request whose
    /// retry time is past `bound`, at once. The client sees a slower
    /// answer, never a 429 it could have waited out. A request dropped by
    /// its client while held is recorded nowhere.
    ///
    /// ```
    /// use slidelog::{Limiter, RateLimitLayer, middleware::Header};
    /// use std::time::Duration;
    /// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "10/second".parse()?)
    ///     .delay_up_to(Duration::from_millis(500)); // smooth bursts, refuse past half a second
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delay_up_to(mut self, bound: std::time::Duration) -> Self {
        self.config.delay = Some(bound);
        self
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
    fn charging<C2>(self, charge: C2) -> RateLimitLayer<K, C2, U> {
        RateLimitLayer {
            config: self.config.charging(charge),
        }
    }

    /// Returns this layer with costs given by `names`, resolved against
    /// every limited route (of every tier too).
    fn naming(mut self, names: &[&str]) -> Result<Self, CostListError> {
        let mut routes = (*self.config.routes).clone();
        routes.name_costs(names)?;
        self.config.routes = Arc::new(routes);
        if let Some(tiers) = &mut self.config.tiers {
            for routes in Arc::make_mut(tiers).routes_mut() {
                routes.name_costs(names)?;
            }
        }
        Ok(self)
    }

    /// Returns this layer with one more place to find a response's real cost.
    fn source(mut self, source: HeadSource) -> Self {
        self.config.settling.sources.push(source);
        self.config.settles = true;
        self
    }

    /// Settles each admitted request to the real cost its response reports
    /// in the header `name` (a decimal number, e.g. `x-usage-tokens: 1250`):
    /// the record the admission appended is changed to that cost, in one
    /// atomic step ([`Limiter::settle`]), before the response is handed on.
    /// The cost replaces the reserved one in the limits the cost source
    /// names ([`cost_by_name`](Self::cost_by_name): e.g. `tokens`, the
    /// others keep what they reserved), or in every limit when it names
    /// none. A response without the header (or with a value that is not a
    /// number) keeps the estimate.
    ///
    /// Sources are tried in the order they were added (a header, an
    /// [extension](Self::settle_from_extension), [a closure over the
    /// head](Self::settle_from), then [the body](Self::settle_with)); the
    /// first that reports a cost is settled to. A settle never counts
    /// twice (it sets the record's costs, it adds nothing) and never fails
    /// the response: a store error leaves the estimate, is logged and told
    /// to [`on_settle`](Self::on_settle). When a settle (or a refund)
    /// changed the record, the response's `RateLimit` field lists the
    /// limits after it: what the client has left once its real cost counts.
    ///
    /// ```
    /// use slidelog::{Limiter, RateLimitLayer, middleware::Header};
    /// let layer = RateLimitLayer::new(
    ///     Limiter::memory(),
    ///     Header::named("x-api-key")?,
    ///     "requests=60/minute, tokens=20000/minute".parse()?,
    /// )
    /// .cost_by_name(["tokens"], |_parts| [1_000])? // reserve 1,000 tokens (and 1 request)
    /// .settle_from_header("x-usage-tokens")?      // settle tokens to what the response used
    /// .refund_on(|status| status.is_server_error()); // a 5xx costs nothing
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_from_header(self, name: &str) -> Result<Self, InvalidHeaderName> {
        let name = HeaderName::try_from(name)?;
        Ok(self.source(HeadSource::Header(name)))
    }

    /// Settles each admitted request to the [`Usage`](super::Usage) its
    /// handler put in the response's extensions
    /// (`response.extensions_mut().insert(Usage(n))`), as
    /// [`settle_from_header`](Self::settle_from_header) does with a header.
    pub fn settle_from_extension(self) -> Self {
        self.source(HeadSource::Extension)
    }

    /// Settles each admitted request to the real cost `usage` reads from the
    /// response head (`None`: keep the estimate), as
    /// [`settle_from_header`](Self::settle_from_header) does with a header.
    pub fn settle_from(
        self,
        usage: impl Fn(&response::Parts) -> Option<u64> + Send + Sync + 'static,
    ) -> Self {
        self.source(HeadSource::Head(Arc::new(usage)))
    }

    /// Refunds each admitted request whose response status `refund` picks
    /// (e.g. `|status| status.is_server_error()`): its record is removed
    /// (settled to 0 in every limit), so it counts nowhere. An inner
    /// service that fails without a response is refunded too. Called
    /// again, a status either rule picks is refunded. A refund takes
    /// precedence over the real cost a response reports.
    pub fn refund_on(
        mut self,
        refund: impl Fn(StatusCode) -> bool + Send + Sync + 'static,
    ) -> Self {
        let rule: super::settle::RefundRule = match self.config.settling.refund.take() {
            Some(before) => Arc::new(move |status| before(status) || refund(status)),
            None => Arc::new(refund),
        };
        self.config.settling.refund = Some(rule);
        self.config.settles = true;
        self
    }

    /// Called with what became of each reservation after its response
    /// ([`SettleOutcome`]: settled, refunded, gone, no usage, failed): count
    /// them (`outcome.label()`), alert on failures. Failures are also logged
    /// (warn) and the limiter's [`MetricsHook`](crate::metrics::MetricsHook)
    /// sees the store error. Replaces an earlier hook.
    pub fn on_settle(mut self, hook: impl Fn(&SettleOutcome) + Send + Sync + 'static) -> Self {
        self.config.settling.hook = Some(Arc::new(hook));
        self
    }
}

/// The body source of a real cost: only on a layer that has none yet.
impl<K: KeyExtractor, C> RateLimitLayer<K, C, NoBodyUsage> {
    /// Settles each admitted request to the real cost `usage` reads from the
    /// response head and whole body (`None`: keep the estimate), e.g. the
    /// `usage.total_tokens` of an LLM API's JSON answer. Only a body whose
    /// length is known and at most `max_bytes` is read (a buffered body:
    /// axum's `Json`, `String`, `Bytes`); it is handed on unchanged. A
    /// streamed body, or a longer one, is not read, and its estimate stays.
    /// Tried after the head sources
    /// ([`settle_from_header`](Self::settle_from_header)). Needs a body type
    /// the layer can rebuild ([`BufferedBody`](super::BufferedBody)).
    ///
    /// ```
    /// use slidelog::{Limiter, RateLimitLayer, middleware::Header};
    /// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "tokens=20000/minute".parse()?)
    ///     .cost(|_parts| 500u64)
    ///     .settle_with(64 * 1024, |_parts, body| {
    ///         let text = std::str::from_utf8(body).ok()?;
    ///         // {"usage":{"total_tokens":1250}}; a real service parses its JSON.
    ///         let after = text.split(r#""total_tokens":"#).nth(1)?;
    ///         after.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    ///     });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settle_with<F>(self, max_bytes: usize, usage: F) -> RateLimitLayer<K, C, BodyUsage<F>>
    where
        F: Fn(&response::Parts, &[u8]) -> Option<u64> + Send + Sync + 'static,
    {
        RateLimitLayer {
            config: self.config.reading(BodyUsage {
                max_bytes,
                f: usage,
            }),
        }
    }
}

/// The cost sources: only on a layer that charges 1 (has none yet).
impl<K: KeyExtractor, U> RateLimitLayer<K, UnitCost, U> {
    /// Chooses the first key's limits per request by the key's tier
    /// ([`Tiers`](super::Tiers): free 100 a minute, paid 10,000): the tier
    /// [`Tiers`](super::Tiers)'s lookup names (cached) gives its limits; a
    /// key in no tier gets the layer's own. Each tier counts in its own
    /// logs; the RateLimit fields list the tier's limits by their names,
    /// and the limiter's [`MetricsHook::tier_decided`](crate::metrics::MetricsHook::tier_decided)
    /// hears the tier of every decision. Before any cost source, so that
    /// costs by name or position are checked against every tier's limits
    /// too.
    pub fn tiers(mut self, tiers: super::Tiers) -> Self {
        self.config.tiers = Some(Arc::new(tiers));
        self
    }

    /// Checks a cost list of `n` against every limited route, of every tier.
    fn check_positional(&self, n: usize) -> Result<(), CostListError> {
        check_positional(&self.config.routes, n)?;
        let mut tiers = self.config.tiers.iter().flat_map(|t| t.routes());
        tiers.try_for_each(|routes| check_positional(routes, n))
    }

    /// Each request costs what `cost` says of its head, one cost for every
    /// limit. A cost above a limit's `max` (or the limiter's bounds) is
    /// answered 413 with the reason. A cost of 0 charges nothing (as a
    /// settle of 0 does): the request is handed to the inner service
    /// without a decision.
    ///
    /// One cost per limit: [`cost_by_name`](Self::cost_by_name) (by limit
    /// name) or [`cost_by_position`](Self::cost_by_position) (an array
    /// matched by position), both checked against every route's limits when
    /// the layer is built.
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
    pub fn cost<F>(self, cost: F) -> RateLimitLayer<K, HeadCost<F>, U>
    where
        F: Fn(&Parts) -> u64 + Send + Sync + 'static,
    {
        self.charging(HeadCost(cost))
    }

    /// Each request costs what `cost` says of its head, one cost per limit
    /// matched by position (`[1, tokens]`: 1 against the first limit, the
    /// tokens against the second). The array's length is checked against
    /// every limited route when the layer is built: a route with another
    /// number of limits is a [`CostListError::Length`] naming it (never a
    /// cost charged to the wrong limit, or an error per request). Costs of
    /// 0 and above a limit's `max` are treated as with
    /// [`cost_by_name`](Self::cost_by_name): 0 charges nothing in that
    /// limit, a request costing 0 in every limit is not decided.
    ///
    /// ```
    /// use slidelog::{Limiter, RateLimitLayer, middleware::{Constant, CostListError}};
    /// let tokens = |parts: &http::request::Parts| {
    ///     let n = parts.headers.get("x-max-tokens").and_then(|v| v.to_str().ok()?.parse().ok());
    ///     n.unwrap_or(256u64)
    /// };
    /// let layer = RateLimitLayer::new(Limiter::memory(), Constant::new("all"), "60/minute, 20000/minute".parse()?)
    ///     .cost_by_position(move |parts| [1, tokens(parts)])?; // 1 request, n tokens
    /// // Two limits, one cost: refused here, not on a request.
    /// let short = RateLimitLayer::new(Limiter::memory(), Constant::new("all"), "60/minute, 20000/minute".parse()?)
    ///     .cost_by_position(|_| [1]);
    /// assert!(matches!(short.unwrap_err(), CostListError::Length { got: 1, want: 2, .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cost_by_position<const N: usize, F>(
        self,
        cost: F,
    ) -> Result<RateLimitLayer<K, HeadCost<F>, U>, CostListError>
    where
        F: Fn(&Parts) -> [u64; N] + Send + Sync + 'static,
    {
        self.check_positional(N)?;
        Ok(self.charging(HeadCost(cost)))
    }

    /// Each request costs what `cost` says of its head and whole body (tokens
    /// in a prompt, bytes uploaded). The body is read up to `max_bytes`
    /// (longer: 413, before the inner service or the limiter is called), then
    /// handed on to the inner service unchanged. Needs a body type the layer
    /// can rebuild ([`BufferedBody`](super::BufferedBody): axum's and
    /// tonic's with their features). One cost for every limit; one per
    /// limit: [`body_cost_by_name`](Self::body_cost_by_name),
    /// [`body_cost_by_position`](Self::body_cost_by_position).
    pub fn body_cost<F>(self, max_bytes: usize, cost: F) -> RateLimitLayer<K, BodyCost<F>, U>
    where
        F: Fn(&Parts, &[u8]) -> u64 + Send + Sync + 'static,
    {
        self.charging(BodyCost { max_bytes, f: cost })
    }

    /// [`body_cost`](Self::body_cost) with one cost per limit matched by
    /// position, as [`cost_by_position`](Self::cost_by_position) gives them
    /// (the length checked when the layer is built).
    pub fn body_cost_by_position<const N: usize, F>(
        self,
        max_bytes: usize,
        cost: F,
    ) -> Result<RateLimitLayer<K, BodyCost<F>, U>, CostListError>
    where
        F: Fn(&Parts, &[u8]) -> [u64; N] + Send + Sync + 'static,
    {
        self.check_positional(N)?;
        Ok(self.charging(BodyCost { max_bytes, f: cost }))
    }

    /// Each request costs what `cost` says of its head, given by limit name:
    /// `cost` returns one cost per name, in the order of `names`; a limit
    /// the names leave out costs 1. The names are checked against every
    /// limited route when the layer is built: a name no limit of a route
    /// carries, or one given twice, is a [`CostListError`] naming it (never
    /// a cost charged to the wrong limit, as a list matched by position can
    /// be). Costs of 0 and above a limit's `max` are treated as with
    /// [`cost`](Self::cost).
    ///
    /// ```
    /// use slidelog::{Limiter, RateLimitLayer, middleware::Header};
    /// let tokens = |parts: &http::request::Parts| {
    ///     let n = parts.headers.get("x-max-tokens").and_then(|v| v.to_str().ok()?.parse().ok());
    ///     n.unwrap_or(256u64)
    /// };
    /// let routes = "requests=60/minute, tokens=20000/minute".parse()?;
    /// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, routes)
    ///     .cost_by_name(["tokens"], move |parts| [tokens(parts)])?; // and 1 request
    /// // A name the limits do not carry fails here, not on a request:
    /// let typo = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "requests=60/minute, tokens=20000/minute".parse()?)
    ///     .cost_by_name(["tokenz"], |_| [1]);
    /// assert!(typo.unwrap_err().to_string().starts_with("cost names[0]: \"tokenz\" names no limit of route \"default\""));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cost_by_name<const N: usize, F>(
        self,
        names: [&str; N],
        cost: F,
    ) -> Result<RateLimitLayer<K, HeadCost<F>, U>, CostListError>
    where
        F: Fn(&Parts) -> [u64; N] + Send + Sync + 'static,
    {
        Ok(self.naming(&names)?.charging(HeadCost(cost)))
    }

    /// [`body_cost`](Self::body_cost) with the costs given by limit name, as
    /// [`cost_by_name`](Self::cost_by_name) gives them (checked when the
    /// layer is built).
    pub fn body_cost_by_name<const N: usize, F>(
        self,
        max_bytes: usize,
        names: [&str; N],
        cost: F,
    ) -> Result<RateLimitLayer<K, BodyCost<F>, U>, CostListError>
    where
        F: Fn(&Parts, &[u8]) -> [u64; N] + Send + Sync + 'static,
    {
        Ok(self
            .naming(&names)?
            .charging(BodyCost { max_bytes, f: cost }))
    }
}

impl<S, K, C, U> Layer<S> for RateLimitLayer<K, C, U> {
    type Service = RateLimitService<S, K, C, U>;

    fn layer(&self, inner: S) -> Self::Service {
        // Warned here, not in `new`: by now `.name(...)` has had its say.
        let config = &self.config;
        if config.limiter.store().in_process().is_none() && config.namespace.first_unnamed_use() {
            // Another service with the same extractor and limits on this
            // store would derive the same name (super::namespace).
            tracing::warn!(
                namespace = config.namespace.as_str(),
                store = config.limiter.store().kind(),
                "rate limit layer without a name on a shared store: its counts are shared with any layer deriving the same name (same key kind, routes and limits); give it one with .name(...)"
            );
        }
        RateLimitService::new(inner, Arc::new(self.config.clone()))
    }
}
