//! The [`Limiter`]: one handle on a store that validates requests, applies
//! the per-call timeout and the store-error policy of docs/design.md §6, and picks the
//! clock of docs/design.md §3. Every interface of the library (direct calls, the tower
//! layer) decides through it.

use crate::url::{OpenError, StoreOptions, open_store};
use slidelog_core::{
    Clock, Decision, InputError, Limit, Mode, Now, Request, Store, StoreError, SystemClock,
};
use std::sync::Arc;
use std::time::Duration;

/// What a decision does when the store fails (docs/design.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// Admit the request and mark the decision `degraded` (the default, as
    /// Envoy's rate limit filter does: an outage of the limiter does not
    /// become an outage of the service).
    #[default]
    FailOpen,
    /// Return the store error ([`LimiterError::Store`]; HTTP 503 in the layer).
    FailClosed,
}

/// Which clock decides what "now" is (docs/design.md §3).
#[derive(Debug, Clone, Default)]
pub enum TimeMode {
    /// The store's own clock: Redis `TIME` inside the script, the process
    /// clock for the memory store. Every application instance shares it.
    #[default]
    Store,
    /// The caller's clock, read on every decision (the original Go design's
    /// `time.Now().UnixMilli()`). Clock skew between instances then matters.
    Client(Arc<dyn Clock>),
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
    policy: FailurePolicy,
    time: TimeMode,
    /// `None` for the memory store: it answers in microseconds without I/O,
    /// so a timer would only add overhead.
    timeout: Option<Duration>,
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
    /// let limiter = slidelog::Limiter::from_store(Arc::new(slidelog::MemoryStore::new()));
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
        Self::from_store(Arc::new(slidelog_memory::MemoryStore::new()))
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
        let reset = self.inner.store.reset(key);
        Ok(self.bounded(reset).await?)
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
        let now = match &self.inner.time {
            TimeMode::Store => Now::Server,
            TimeMode::Client(clock) => Now::At(clock.now_ms()),
        };
        self.decide_at(request, mode, now).await
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
        let decided = self
            .bounded(self.inner.store.decide(request, mode, now))
            .await;
        match (decided, self.inner.policy) {
            (Ok(decision), _) => Ok(decision),
            (Err(_), FailurePolicy::FailOpen) => Ok(degraded_allow(request)),
            (Err(e), FailurePolicy::FailClosed) => Err(LimiterError::Store(e)),
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
        Ok(self.bounded(self.inner.store.ping()).await?)
    }

    /// The store decisions are made on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// What a store failure does.
    pub fn failure_policy(&self) -> FailurePolicy {
        self.inner.policy
    }

    /// The clock decisions use.
    pub fn time_mode(&self) -> &TimeMode {
        &self.inner.time
    }

    /// Runs a store call under the timeout, if any: a store never hangs a caller.
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
    /// answers) until it is reachable. For a service that must start while
    /// Redis is down. Default: opening checks that Redis answers.
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

    /// Decide on `clock` (a [`ManualClock`](crate::ManualClock) in tests).
    pub fn clock(self, clock: Arc<dyn Clock>) -> Self {
        self.time_mode(TimeMode::Client(clock))
    }

    /// Opens the store that `url` names with these options.
    pub async fn open(self, url: &str) -> Result<Limiter, BuildError> {
        let store = open_store(url, &self.options).await?;
        Ok(self.build(store))
    }

    /// A limiter on `store` (the prefix and key cap options are the store's
    /// own business here; the timeout and policy apply).
    pub fn build(self, store: Arc<dyn Store>) -> Limiter {
        let timeout = (store.kind() != "memory").then_some(self.options.timeout);
        Limiter {
            inner: Arc::new(Inner {
                store,
                policy: self.policy,
                time: self.time,
                timeout,
            }),
        }
    }
}
