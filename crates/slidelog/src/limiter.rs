//! The [`Limiter`]: one handle on a store, and the one place where a
//! decision is bounded in time, the failure policy applied (docs/design.md §6),
//! the clock picked (docs/design.md §3), and metrics and logs emitted (through
//! a [`MetricsHook`]). Every interface decides through it: direct calls, the
//! tower layer, and the `slidelog` server's HTTP, gRPC and `POST /json` APIs.

use crate::metrics::{MetricsHook, Op};
use crate::url::{OpenError, StoreOptions, StoreUrl, open_store};
use slidelog_core::{
    Bounds, Clock, Decision, InputError, Limit, Mode, Now, Request, Store, StoreError, SystemClock,
    TimeMode,
};
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a decision does when the store fails (docs/design.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FailurePolicy {
    /// Admit the request and mark the decision `degraded` (the default, as
    /// Envoy's rate limit filter does: an outage of the limiter does not
    /// become an outage of the service).
    #[default]
    FailOpen,
    /// Return the store error ([`LimiterError::Store`]; HTTP 503, gRPC
    /// `UNAVAILABLE`).
    FailClosed,
}

impl FailurePolicy {
    /// The flag value: `fail-open` or `fail-closed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::FailOpen => "fail-open",
            Self::FailClosed => "fail-closed",
        }
    }
}

impl std::fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is neither `fail-open` nor `fail-closed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown store-error policy {0:?}: use fail-open or fail-closed")]
pub struct UnknownPolicy(pub String);

impl std::str::FromStr for FailurePolicy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fail-open" => Ok(Self::FailOpen),
            "fail-closed" => Ok(Self::FailClosed),
            other => Err(UnknownPolicy(other.to_owned())),
        }
    }
}

/// Why a limiter call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LimiterError {
    /// The request breaks a bound of docs/design.md §1 (the message names the field).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The store failed and the policy is fail-closed (or the call was a
    /// reset or ping, to which no policy applies).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a limiter could not be built from a URL.
pub type BuildError = OpenError;

/// A rate limiter over one store. Cheap to clone: clones share the store.
///
/// ```
/// use slidelog::{Limit, Limiter};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limiter = Limiter::memory();
/// let per_minute = [Limit::new(2, 60_000)?];
/// assert!(limiter.check("user123", &per_minute, 1).await?.allowed);
/// assert!(limiter.check("user123", &per_minute, 1).await?.allowed);
/// let third = limiter.check("user123", &per_minute, 1).await?;
/// assert!(!third.allowed && third.retry_after_ms > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    /// The same store when it is the in-process memory store (told apart by
    /// type when the limiter is built), for its key count and sweeps.
    memory: Option<Arc<MemoryStore>>,
    policy: FailurePolicy,
    time: TimeMode,
    /// `None` for the memory store: it answers in microseconds without I/O,
    /// so a timer would only add overhead.
    timeout: Option<Duration>,
    /// `None` when nobody listens: then a decision is not even timed.
    metrics: Option<Arc<dyn MetricsHook>>,
    /// Store outages, logged once per episode rather than per request.
    episodes: crate::episode::Episodes,
    /// What callers may ask for (docs/design.md §5), checked before the store.
    bounds: Bounds,
    /// Rejections answered again without the store ([`crate::rejection_cache`]).
    rejections: Option<Arc<crate::rejection_cache::RejectionCache>>,
}

impl Limiter {
    /// A builder for options: timeout, key prefix, store-error policy, time mode.
    pub fn builder() -> LimiterBuilder {
        LimiterBuilder::default()
    }

    /// A limiter on the store that `url` names (`memory://`, `redis://…`,
    /// `rediss://…`, `redis+cluster://…`, `redis+sentinel://…`), with default
    /// options (100 ms timeout, prefix `rate:sliding:`, fail-open,
    /// store time).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let limiter = slidelog::Limiter::from_url("memory://").await?;
    /// assert_eq!(limiter.store().kind(), "memory");
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn from_url(url: &str) -> Result<Self, BuildError> {
        Self::builder().open(url).await
    }

    /// A limiter on `store` with default options.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let limiter = slidelog::Limiter::from_store(Arc::new(slidelog::store::MemoryStore::new()));
    /// assert_eq!(limiter.store().kind(), "memory");
    /// ```
    pub fn from_store(store: Arc<dyn Store>) -> Self {
        Self::builder().build(store)
    }

    /// A limiter on a new in-process memory store (tests, single instances).
    ///
    /// ```
    /// let limiter = slidelog::Limiter::memory();
    /// assert_eq!(limiter.failure_policy(), slidelog::FailurePolicy::FailOpen);
    /// ```
    pub fn memory() -> Self {
        Self::builder().build_memory(Arc::new(MemoryStore::new()))
    }

    /// Decides on `cost` units for `key` under every limit in `limits` and,
    /// when admitted, records them. Input is validated (docs/design.md §1); a store
    /// failure follows the [`FailurePolicy`].
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter};
    /// let limiter = Limiter::memory();
    /// // 10 per second and 1,000 per hour on the same key.
    /// let limits = [Limit::new(10, 1_000)?, Limit::new(1_000, 3_600_000)?];
    /// let decision = limiter.check("api-key-1", &limits, 3).await?;
    /// assert!(decision.allowed);
    /// assert_eq!((decision.limit, decision.remaining), (10, 7));
    /// // A cost above the smallest max is an error, never clamped.
    /// assert!(limiter.check("api-key-1", &limits, 11).await.is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn check(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: u64,
    ) -> Result<Decision, LimiterError> {
        let request = Request::new(key, limits.to_vec(), cost)?;
        self.decide(&request, Mode::Record).await
    }

    /// A check where each limit is charged its own cost, matched by position
    /// (docs/design.md §1): admitted only if every limit admits its cost; a
    /// rejection records nothing in any of them.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter};
    /// let limiter = Limiter::memory();
    /// // 3,000 requests and 1,000,000 tokens per minute.
    /// let limits = [Limit::new(3_000, 60_000)?, Limit::new(1_000_000, 60_000)?];
    /// let d = limiter.check_costs("user-7", &limits, &[1, 4_000]).await?;
    /// assert!(d.allowed);
    /// let d = limiter.check_costs("user-7", &limits, &[1, 999_000]).await?;
    /// assert!(!d.allowed && d.limit == 1_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn check_costs(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        costs: &[u64],
    ) -> Result<Decision, LimiterError> {
        let request = Request::with_costs(key, limits.to_vec(), costs.to_vec())?;
        self.decide(&request, Mode::Record).await
    }

    /// What callers may ask for ([`LimiterBuilder::bounds`]).
    pub fn bounds(&self) -> &Bounds {
        &self.inner.bounds
    }

    /// The decision that [`check`](Self::check) would make, recording nothing.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter};
    /// let limiter = Limiter::memory();
    /// let limits = [Limit::new(1, 60_000)?];
    /// assert!(limiter.peek("k", &limits, 1).await?.allowed);
    /// assert!(limiter.peek("k", &limits, 1).await?.allowed); // nothing was recorded
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn peek(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: u64,
    ) -> Result<Decision, LimiterError> {
        let request = Request::new(key, limits.to_vec(), cost)?;
        self.decide(&request, Mode::Peek).await
    }

    /// Deletes the key's log; returns whether one existed. No failure policy
    /// applies: a store error is returned.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter};
    /// let limiter = Limiter::memory();
    /// let limits = [Limit::new(1, 60_000)?];
    /// limiter.check("k", &limits, 1).await?;
    /// assert!(limiter.reset("k").await?);
    /// assert!(limiter.check("k", &limits, 1).await?.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn reset(&self, key: &str) -> Result<bool, LimiterError> {
        slidelog_core::limit::validate_key(key)?;
        if let Some(cache) = &self.inner.rejections {
            cache.forget(key);
        }
        let started = self.start_timer();
        let result = self.bounded(self.inner.store.reset(key)).await;
        match &result {
            Ok(_) => self.store_answered(false),
            Err(e) => self.store_failed(Op::Reset, e, false, started),
        }
        Ok(result?)
    }

    /// Decides on an already validated request, on the limiter's clock.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter, Mode, Request};
    /// let request = Request::single("k", Limit::new(5, 1_000)?)?;
    /// let decision = Limiter::memory().decide(&request, Mode::Record).await?;
    /// assert_eq!(decision.remaining, 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn decide(&self, request: &Request, mode: Mode) -> Result<Decision, LimiterError> {
        self.decide_at(request, mode, self.now()).await
    }

    /// Decides at an explicit time (replay, tests): [`Now::At`] uses the
    /// given Unix ms whatever the time mode, [`Now::Server`] the store's clock.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter, Mode, Now, Request};
    /// let limiter = Limiter::memory();
    /// let request = Request::single("replay", Limit::new(1, 1_000)?)?;
    /// assert!(limiter.decide_at(&request, Mode::Record, Now::At(5_000)).await?.allowed);
    /// let second = limiter.decide_at(&request, Mode::Record, Now::At(5_400)).await?;
    /// assert_eq!((second.allowed, second.retry_after_ms), (false, 600));
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn decide_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, LimiterError> {
        self.inner.bounds.check(request).map_err(InputError::from)?;
        self.decide_within_bounds(request, mode, now).await
    }

    /// Decides a request whose limits the operator configured (Envoy
    /// `--config` rules): only its costs are checked against the bounds,
    /// since its `max` is not a client's choice. On the limiter's clock.
    pub async fn decide_configured(
        &self,
        request: &Request,
        mode: Mode,
    ) -> Result<Decision, LimiterError> {
        for &cost in request.costs() {
            self.inner
                .bounds
                .check_cost(cost)
                .map_err(InputError::from)?;
        }
        self.decide_within_bounds(request, mode, self.now()).await
    }

    /// The time a decision is made at: the store's clock, or the caller's.
    fn now(&self) -> Now {
        self.inner.time.now()
    }

    /// The decision of a request already checked against the bounds.
    async fn decide_within_bounds(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, LimiterError> {
        let op = match mode {
            Mode::Record => Op::Check,
            Mode::Peek => Op::Peek,
        };
        let started = self.start_timer();
        // Only on the store's clock is a cached rejection exact.
        let cache = self
            .inner
            .rejections
            .as_ref()
            .filter(|_| now == Now::Server);
        let ticket = match cache.map(|c| c.answer(request)) {
            Some(Ok(local)) => {
                if let (Some(metrics), Some(started)) = (&self.inner.metrics, started) {
                    metrics.decided(op, &local, started.elapsed());
                }
                return Ok(local);
            }
            Some(Err(ticket)) => Some(ticket),
            None => None,
        };
        let decided = self
            .bounded(self.inner.store.decide(request, mode, now))
            .await;
        match decided {
            Ok(decision) => {
                if let (Some(cache), Some(ticket)) = (cache, ticket) {
                    cache.observe(request, &decision, ticket);
                }
                self.store_answered(true);
                if let (Some(metrics), Some(started)) = (&self.inner.metrics, started) {
                    metrics.decided(op, &decision, started.elapsed());
                }
                Ok(decision)
            }
            Err(e) => {
                // A full store is not an outage: no policy admits past it.
                let open = self.inner.policy == FailurePolicy::FailOpen && !e.is_full();
                self.store_failed(op, &e, open, started);
                if open {
                    Ok(degraded_allow(request))
                } else {
                    Err(LimiterError::Store(e))
                }
            }
        }
    }

    /// Answers when the store is reachable (readiness probes).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// slidelog::Limiter::memory().ping().await?;
    /// # Ok::<(), slidelog::LimiterError>(()) }).unwrap();
    /// ```
    pub async fn ping(&self) -> Result<(), LimiterError> {
        let started = self.start_timer();
        let result = self.bounded(self.inner.store.ping()).await;
        match &result {
            Ok(()) => {
                self.store_answered(false);
                if let Some(metrics) = &self.inner.metrics {
                    metrics.store_up();
                }
            }
            Err(e) => self.store_failed(Op::Ping, e, false, started),
        }
        Ok(result?)
    }

    /// The store decisions are made on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The in-process memory store, when that is the store (its key count
    /// and sweeps are the owner's business).
    pub fn memory_store(&self) -> Option<&Arc<MemoryStore>> {
        self.inner.memory.as_ref()
    }

    /// What a store failure does.
    pub fn failure_policy(&self) -> FailurePolicy {
        self.inner.policy
    }

    /// The clock decisions use.
    pub fn time_mode(&self) -> &TimeMode {
        &self.inner.time
    }

    /// The local rejection cache, when on ([`LimiterBuilder::rejection_cache`]).
    pub fn rejection_cache(&self) -> Option<&Arc<crate::rejection_cache::RejectionCache>> {
        self.inner.rejections.as_ref()
    }

    /// Runs a store call under the timeout, if any: a store never hangs a
    /// caller. The only timeout between a transport and the store.
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match self.inner.timeout {
            None => call.await,
            Some(limit) => tokio::time::timeout(limit, call)
                .await
                .unwrap_or(Err(StoreError::Timeout(limit))),
        }
    }

    /// The start of a store call, read only when a hook will be told.
    fn start_timer(&self) -> Option<Instant> {
        self.inner.metrics.as_ref().map(|_| Instant::now())
    }

    /// Reports a failed store call: counted every time, logged once per
    /// outage episode ([`crate::episode`]).
    fn store_failed(&self, op: Op, error: &StoreError, degraded: bool, started: Option<Instant>) {
        if let (Some(metrics), Some(started)) = (&self.inner.metrics, started) {
            metrics.store_failed(op, error, degraded, started.elapsed());
        }
        let store = self.inner.store.kind();
        self.inner
            .episodes
            .failure(store, op.as_str(), error, &self.inner.policy);
    }

    /// A store call succeeded (`decided`: a decision); ends an episode, once.
    fn store_answered(&self, decided: bool) {
        self.inner
            .episodes
            .success(self.inner.store.kind(), decided);
    }

    /// The misconfiguration the store reported (wrong password, NOPERM, …),
    /// while no decision has succeeded since: readiness reports it.
    pub fn misconfiguration(&self) -> Option<String> {
        self.inner.episodes.misconfiguration()
    }

    /// Records a misconfiguration found before serving (logged at error
    /// level, reported by [`misconfiguration`](Self::misconfiguration)).
    pub fn note_misconfiguration(&self, cause: &str) {
        self.inner
            .episodes
            .misconfigured(self.inner.store.kind(), cause, &self.inner.policy);
    }
}

/// The fail-open answer: admitted, degraded, reporting the tightest limit
/// (smallest max, then shortest window) with nothing counted.
fn degraded_allow(request: &Request) -> Decision {
    let tightest = request
        .limits()
        .iter()
        .min_by_key(|l| (l.max(), l.window_ms()))
        .expect("a validated request has at least one limit");
    Decision::degraded_allow(tightest)
}

/// Options of a [`Limiter`]; finish with [`open`](Self::open) (a URL) or
/// [`build`](Self::build) (a store you made).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use slidelog::{FailurePolicy, Limiter};
/// use std::time::Duration;
/// let limiter = Limiter::builder()
///     .timeout(Duration::from_millis(50))
///     .prefix("myapp:rl:")
///     .failure_policy(FailurePolicy::FailClosed)
///     .client_time()
///     .open("memory://")
///     .await?;
/// assert_eq!(limiter.failure_policy(), FailurePolicy::FailClosed);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct LimiterBuilder {
    options: StoreOptions,
    policy: FailurePolicy,
    time: TimeMode,
    metrics: Option<Arc<dyn MetricsHook>>,
    bounds: Bounds,
    rejections: crate::rejection_cache::Setting,
}

impl LimiterBuilder {
    /// Upper bound on one store call; past it the call fails with
    /// [`StoreError::Timeout`] and the policy answers. Default 100 ms.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = timeout;
        self
    }

    /// Prefix of the store's keys (Redis stores opened from a URL). Default
    /// `rate:sliding:`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.options.key_prefix = prefix.into();
        self
    }

    /// Budget of bytes held by a memory store opened from a URL (records,
    /// keys and their table slots). Default 1 GiB. New keys are refused with
    /// [`StoreError::Full`] above it; no failure policy admits past it.
    pub fn memory_limit(mut self, bytes: usize) -> Self {
        self.options.memory_limit = bytes;
        self
    }

    /// What callers may ask for: the largest `max`, the largest cost, the most
    /// limits per request (and descriptors per Envoy request). A request above
    /// one is an [`InputError::Bound`] naming it. Default
    /// [`Bounds::ABSOLUTE`]: a service facing remote clients sets tighter
    /// ones, as `slidelog serve` does ([`Bounds::SERVICE`]).
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Cap on the number of keys of a memory store opened from a URL.
    pub fn memory_key_cap(mut self, cap: usize) -> Self {
        self.options.memory_key_cap = cap;
        self
    }

    /// Upper bound on establishing the first connection to a Redis store.
    /// Default 2 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.options.connect_timeout = timeout;
        self
    }

    /// Do not wait for Redis when opening: decisions fail (and the policy
    /// answers) until it is reachable. Default: opening tries Redis once,
    /// and under fail-open falls back to connecting lazily when it is
    /// unreachable ([`open`](Self::open)); this option skips that attempt,
    /// and lets a fail-closed limiter start while Redis is down.
    pub fn lazy_connect(mut self) -> Self {
        self.options.lazy_connect = true;
        self
    }

    /// Every option of the stores opened from a URL at once (TLS roots,
    /// connect timeout, …); the other setters change fields of it.
    pub fn store_options(mut self, options: StoreOptions) -> Self {
        self.options = options;
        self
    }

    /// What a store failure does. Default [`FailurePolicy::FailOpen`].
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Shorthand for [`FailurePolicy::FailOpen`].
    pub fn fail_open(self) -> Self {
        self.failure_policy(FailurePolicy::FailOpen)
    }

    /// Shorthand for [`FailurePolicy::FailClosed`].
    pub fn fail_closed(self) -> Self {
        self.failure_policy(FailurePolicy::FailClosed)
    }

    /// Which clock decides. Default [`TimeMode::Store`].
    pub fn time_mode(mut self, time: TimeMode) -> Self {
        self.time = time;
        self
    }

    /// Decide on this process's wall clock ([`TimeMode::Client`] with the
    /// system clock).
    pub fn client_time(self) -> Self {
        self.time_mode(TimeMode::Client(Arc::new(SystemClock)))
    }

    /// Decide on `clock` (a [`ManualClock`](crate::store::ManualClock) in tests).
    pub fn clock(self, clock: Arc<dyn Clock>) -> Self {
        self.time_mode(TimeMode::Client(clock))
    }

    /// Reports every decision, store failure and readiness answer to `hook`
    /// (the server's Prometheus recorder). Default: none.
    pub fn metrics(mut self, hook: Arc<dyn MetricsHook>) -> Self {
        self.metrics = Some(hook);
        self
    }

    /// Answers a rejected request again without the store until its
    /// `retry_after_ms` has passed ([`crate::rejection_cache`]), with this
    /// cache (its capacity and clock). Default: on, [`DEFAULT_CAPACITY`]
    /// entries, wherever it is exact: a store reached over the network,
    /// deciding on its own clock ([`TimeMode::Store`]).
    ///
    /// [`DEFAULT_CAPACITY`]: crate::rejection_cache::DEFAULT_CAPACITY
    pub fn rejection_cache(mut self, cache: crate::rejection_cache::RejectionCache) -> Self {
        self.rejections = crate::rejection_cache::Setting::With(Arc::new(cache));
        self
    }

    /// Every decision goes to the store (`--no-rejection-cache`).
    pub fn no_rejection_cache(mut self) -> Self {
        self.rejections = crate::rejection_cache::Setting::Off;
        self
    }

    /// Opens the store that `url` names with these options.
    ///
    /// A store that cannot be reached at startup is a matter for the failure
    /// policy, as it is on every later call. Under fail-open (the default)
    /// `open` does not fail: after one attempt (at most the
    /// [`connect_timeout`](Self::connect_timeout)) it returns a limiter that
    /// connects lazily, whose decisions are admitted `degraded` until the
    /// store answers and exact from then on. Under fail-closed it fails fast
    /// with the connect error ([`OpenError::is_transient`] is true), so a
    /// service that must not run unlimited does not start; add
    /// [`lazy_connect`](Self::lazy_connect) to start anyway and answer errors
    /// (503) until the store answers. A bad URL, or a store that refuses the
    /// configuration (wrong password, TLS), fails under either policy.
    pub async fn open(self, url: &str) -> Result<Limiter, BuildError> {
        if let StoreUrl::Memory = StoreUrl::parse(url)? {
            let store = MemoryStore::new()
                .with_key_cap(self.options.memory_key_cap)
                .with_memory_limit(self.options.memory_limit);
            return Ok(self.build_memory(Arc::new(store)));
        }
        let store = match open_store(url, &self.options).await {
            Err(e) if e.is_transient() && self.policy == FailurePolicy::FailOpen => {
                tracing::warn!(
                    error = %e,
                    "store unreachable at startup; fail-open: starting anyway, decisions are degraded until it answers"
                );
                let lazy = StoreOptions {
                    lazy_connect: true,
                    ..self.options.clone()
                };
                open_store(url, &lazy).await?
            }
            opened => opened?,
        };
        Ok(self.build(store))
    }

    /// A limiter on `store` (the prefix and key cap options are the store's
    /// own business here; the timeout and policy apply).
    pub fn build(self, store: Arc<dyn Store>) -> Limiter {
        let timeout = Some(self.options.timeout);
        self.finish(store, None, timeout)
    }

    /// A limiter on an in-process memory store: no timeout (it answers
    /// without I/O), and [`Limiter::memory_store`] gives it back.
    pub fn build_memory(self, store: Arc<MemoryStore>) -> Limiter {
        self.finish(store.clone(), Some(store), None)
    }

    fn finish(
        self,
        store: Arc<dyn Store>,
        memory: Option<Arc<MemoryStore>>,
        timeout: Option<Duration>,
    ) -> Limiter {
        // Exact (and worth it) only for a remote store on its own clock.
        let rejections = self
            .rejections
            .resolve(memory.is_none() && self.time.is_store());
        Limiter {
            inner: Arc::new(Inner {
                store,
                memory,
                policy: self.policy,
                time: self.time,
                timeout,
                metrics: self.metrics,
                episodes: crate::episode::Episodes::default(),
                bounds: self.bounds,
                rejections,
            }),
        }
    }
}
