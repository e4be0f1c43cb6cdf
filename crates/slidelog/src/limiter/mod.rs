//! The [`Limiter`]: one handle on a store, through which every interface
//! decides (direct calls, the tower layer, the `slidelog` server's HTTP, gRPC
//! and `POST /json` APIs). A decision is a short pipeline of small parts,
//! each in its own file and testable alone:
//!
//! 1. input bounds: the request is one callers may ask for ([`Bounds`],
//!    docs/design.md §5);
//! 2. the clock: [`TimeMode::now`] turns the limiter's time mode into the
//!    call's [`Now`], unless the caller gave one (docs/design.md §3);
//! 3. the rejection cache ([`crate::rejection_cache`]): a rejection still
//!    in force is answered without the store;
//! 4. the store's health ([`health`]): while the store is known down,
//!    the decision is answered by policy without calling it, and one
//!    background probe looks for it;
//! 5. the bounded store call ([`bounded`]): no store hangs a caller;
//! 6. the failure policy ([`FailurePolicy::answer`], docs/design.md §6);
//!    under [`FailurePolicy::Local`] the limiter answers in its own memory
//!    at a share of each limit and charges it back later ([`local`]); a key
//!    with records still to charge back is answered there before step 4;
//! 7. the report ([`report`]): the metrics hook, and outages logged once per
//!    episode ([`crate::episode`]), which readiness reads.
//!
//! The options live in [`LimiterBuilder`] ([`builder`]). Waiting for room
//! ([`Limiter::until_ready`]) is a loop over this pipeline ([`wait`]).

mod all;
mod bounded;
mod builder;
mod control;
mod each;
mod error;
mod floor;
mod health;
mod local;
mod policy;
mod queue;
mod remote;
mod report;
mod usage;
mod wait;

pub use builder::{LimiterBuilder, shared_receipt_key};
pub use error::{BuildError, LimiterError};
pub use health::StoreHealth;
pub use local::DEFAULT_JOURNAL_CAP;
pub use policy::{BadShare, FailurePolicy, UnknownPolicy};
pub use wait::{Wait, WaitError};

use crate::Cost;
use crate::metrics::Op;
use crate::rejection_cache::RejectionCache;
use bounded::CallBound;
use health::Health;
use report::Report;
use slidelog_core::{
    Bounds, Decision, InputError, Limit, Mode, Now, ReceiptKey, RecordRef, Request, Store, TimeMode,
};
use std::sync::Arc;

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
    /// What callers may ask for, checked before the store; outside `inner`
    /// so that [`Limiter::with_bounds`] shares everything else.
    bounds: Bounds,
    /// The operator's granularity floor (docs/design.md §1.1): a request's
    /// limits are raised to it before the store sees them.
    floor: Option<slidelog_core::GranularityFloor>,
}

/// The parts of a limiter that its clones share.
#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    time: TimeMode,
    policy: FailurePolicy,
    bound: CallBound,
    /// Rejections answered again without the store; on only where exact.
    rejections: Option<Arc<RejectionCache>>,
    /// Whether the store is known down, and its one background probe.
    health: Arc<Health>,
    /// The local policy's memory store, journal and charge-back; `None`
    /// under another policy (or on a store in this process's memory).
    local: Option<Arc<local::Local>>,
    report: Report,
    /// Seals the receipts this limiter issues and opens those it settles.
    receipts: Arc<ReceiptKey>,
    /// The waiters of [`Limiter::until_ready`], in turn per key.
    queue: queue::Queue,
    /// Overrides read from a remote store, kept a short while ([`control`]).
    overrides: control::OverrideCache,
    /// The layer namespaces derived on this limiter (never process-wide).
    #[cfg(feature = "tower")]
    names: Arc<crate::middleware::Names>,
}

impl Limiter {
    /// Returns a builder for the options: timeout, store-error policy, time
    /// mode, bounds, metrics, rejection cache.
    pub fn builder() -> LimiterBuilder {
        LimiterBuilder::default()
    }

    /// Returns a limiter on the store that `url` names (`memory://`,
    /// `redis://…`, `rediss://…`, `redis+cluster://…`,
    /// `redis+sentinel://…`), with default options (100 ms timeout, prefix
    /// `rate:sliding:`, fail-open, store time).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let limiter = slidelog::Limiter::from_url("memory://").await?;
    /// assert_eq!(limiter.store().kind(), "memory");
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn from_url(url: &str) -> Result<Self, BuildError> {
        Self::builder().open(url, Default::default()).await
    }

    /// Returns a limiter on `store` with default options.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let limiter = slidelog::Limiter::from_store(Arc::new(slidelog::store::MemoryStore::new()));
    /// assert_eq!(limiter.store().kind(), "memory");
    /// ```
    pub fn from_store(store: Arc<dyn Store>) -> Self {
        Self::builder().build(store)
    }

    /// The signed receipt of `request`'s record, when `record` names one
    /// (an admitted check's or a charge's [`Decision::record`]): what
    /// [`settle`](Self::settle) takes (docs/design.md §4.6).
    pub fn receipt(&self, request: &Request, record: Option<RecordRef>) -> Option<String> {
        self.inner.receipts.issue(request, record)
    }

    /// The key that seals and opens this limiter's receipts.
    pub fn receipt_key(&self) -> &ReceiptKey {
        &self.inner.receipts
    }

    /// Returns a limiter on a new in-process memory store (tests, single
    /// instances).
    ///
    /// ```
    /// let limiter = slidelog::Limiter::memory();
    /// assert_eq!(limiter.failure_policy(), slidelog::FailurePolicy::FailOpen);
    /// ```
    pub fn memory() -> Self {
        Self::from_store(Arc::new(slidelog_memory::MemoryStore::new()))
    }

    /// Decides on `cost` for `key` under every limit in `limits` and, when
    /// admitted, records it. `cost` is one cost for every limit (`1`) or
    /// one per limit, matched by position (`[1, 4_000]`: docs/design.md §1);
    /// a rejection records nothing in any limit. Input is validated; a store
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
    ///
    /// // 3,000 requests and 1,000,000 tokens per minute: a cost for each.
    /// let limits = [Limit::new(3_000, 60_000)?, Limit::new(1_000_000, 60_000)?];
    /// assert!(limiter.check("user-7", &limits, [1, 4_000]).await?.allowed);
    /// let d = limiter.check("user-7", &limits, [1, 999_000]).await?;
    /// assert!(!d.allowed && d.limit == 1_000_000);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn check(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: impl Into<Cost>,
    ) -> Result<Decision, LimiterError> {
        let key: String = key.into();
        let request = cost.into().request_of(&key, limits)?;
        self.decide(&request, Mode::Record).await
    }

    /// Returns the decision that [`check`](Self::check) would make,
    /// recording nothing.
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
        cost: impl Into<Cost>,
    ) -> Result<Decision, LimiterError> {
        let key: String = key.into();
        let request = cost.into().request_of(&key, limits)?;
        self.decide(&request, Mode::Peek).await
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
        self.decide_at(request, mode, self.inner.time.now()).await
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
        self.controlled_at(request, mode, now).await
    }

    /// [`decide_at`](Self::decide_at) on the request as given (after the
    /// key's override, [`control`]).
    async fn decide_store_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, LimiterError> {
        self.bounds.check(request).map_err(InputError::from)?;
        let floored = self.floored(request);
        let request = floored.as_ref().unwrap_or(request);
        let call = self.store_decide(request, mode, now);
        self.through_store(request, mode, now, call).await
    }

    /// The store's decision, bounded in time. A store in this process's
    /// memory decides synchronously: no boxed future, no timer (it cannot
    /// hang).
    async fn store_decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, slidelog_core::StoreError> {
        match self.inner.store.in_process() {
            Some(local) => local.decide_now(request, mode, now),
            None => {
                let call = self.inner.store.decide(request, mode, now);
                self.inner.bound.run(call).await
            }
        }
    }

    /// Answers `request` by the failure policy for `error`, and reports it:
    /// under the local policy a transient failure is answered locally.
    fn by_policy(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
        op: Op,
        error: slidelog_core::StoreError,
        started: report::Started,
    ) -> Result<slidelog_core::Detailed, LimiterError> {
        if self.inner.local.is_some() && error.is_transient() {
            return self.locally_each(request, mode, now, op, started, Some(error));
        }
        let answer = self.inner.policy.answer(request, error.clone());
        self.inner
            .report
            .failed(op, &error, answer.is_ok(), started);
        Ok(slidelog_core::Detailed::deciding_only(request, answer?))
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
        let started = self.inner.report.start();
        let result = self.inner.bound.run(self.inner.store.reset(key)).await;
        match &result {
            Ok(_) => self.inner.report.answered(false),
            Err(e) => self.inner.report.failed(Op::Reset, e, false, started),
        }
        Ok(result?)
    }

    /// Answers when the store is reachable (readiness probes).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// slidelog::Limiter::memory().ping().await?;
    /// # Ok::<(), slidelog::LimiterError>(()) }).unwrap();
    /// ```
    pub async fn ping(&self) -> Result<(), LimiterError> {
        // Readiness follows the background probe: while it knows the store
        // down, not ready at once; it marks the store up within one probe
        // interval of its return.
        if let Some(outage) = self.inner.health.outage() {
            return Err(outage.into());
        }
        let started = self.inner.report.start();
        let store = &self.inner.store;
        let result = match self.inner.bound.run(store.ping()).await {
            // A connection may report its last failure once and reconnect
            // only then: ask again at once (as the probe does).
            Err(e) if matches!(e, slidelog_core::StoreError::Unavailable(_)) => {
                self.inner.bound.run(store.ping()).await.map_err(|_| e)
            }
            other => other,
        };
        match &result {
            Ok(()) => {
                self.inner.health.answered();
                self.inner.report.ready()
            }
            Err(e) => {
                let inner = &self.inner;
                inner.health.failed(e, &inner.store, inner.bound);
                inner.report.failed(Op::Ping, e, false, started)
            }
        }
        Ok(result?)
    }

    /// Returns this limiter with other bounds on what callers may ask for,
    /// sharing everything else (store, cache, metrics, episodes). A service
    /// deciding on limits its operator configured (Envoy rules) bounds only
    /// the costs, since a rule's `max` is not a client's choice:
    ///
    /// ```
    /// use slidelog::{Bounds, Limiter, store::MemoryStore};
    /// let store = std::sync::Arc::new(MemoryStore::new());
    /// let service = Limiter::builder().bounds(Bounds::SERVICE).build(store);
    /// let configured = service.with_bounds(Bounds { max_cost: service.bounds().max_cost, ..Bounds::ABSOLUTE });
    /// assert_eq!(configured.bounds().max_limit, Bounds::ABSOLUTE.max_limit);
    /// ```
    pub fn with_bounds(&self, bounds: Bounds) -> Self {
        Self {
            inner: self.inner.clone(),
            bounds,
            floor: self.floor,
        }
    }

    /// Returns the layer namespaces derived on this limiter.
    #[cfg(feature = "tower")]
    pub(crate) fn names(&self) -> &Arc<crate::middleware::Names> {
        &self.inner.names
    }

    /// Returns the metrics hook, when one listens (the layer's tiers).
    #[cfg(feature = "tower")]
    pub(crate) fn metrics(&self) -> Option<&Arc<dyn crate::metrics::MetricsHook>> {
        self.inner.report.metrics()
    }

    /// Returns what callers may ask for ([`LimiterBuilder::bounds`]).
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// Returns the store decisions are made on.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Returns what a store failure does.
    pub fn failure_policy(&self) -> FailurePolicy {
        self.inner.policy
    }

    /// Returns the clock decisions use.
    pub fn time_mode(&self) -> &TimeMode {
        &self.inner.time
    }

    /// Returns what is known of the store's health: [`StoreHealth::Down`]
    /// while decisions answer by policy without it (docs/design.md §6),
    /// [`StoreHealth::Misconfigured`] while it answers but refuses
    /// slidelog's configuration and no decision has succeeded since.
    pub fn store_health(&self) -> StoreHealth {
        match (self.inner.health.snapshot(), self.misconfiguration()) {
            (StoreHealth::Up, Some(cause)) => StoreHealth::Misconfigured { cause },
            (health, _) => health,
        }
    }

    /// Returns the local rejection cache, when on
    /// ([`LimiterBuilder::rejection_cache`]).
    pub fn rejection_cache(&self) -> Option<&Arc<RejectionCache>> {
        self.inner.rejections.as_ref()
    }

    /// Returns the misconfiguration the store reported (wrong password,
    /// NOPERM, …) while no decision has succeeded since: readiness reports it.
    pub fn misconfiguration(&self) -> Option<String> {
        self.inner.report.misconfiguration()
    }

    /// Records a misconfiguration found before serving (logged at error
    /// level, reported by [`misconfiguration`](Self::misconfiguration)).
    pub fn note_misconfiguration(&self, cause: &str) {
        self.inner.report.misconfigured(cause);
    }
}
