//! [`LimiterBuilder`]: the options of a [`Limiter`] that hold whatever the
//! store (timeout, failure policy, clock, bounds, metrics, rejection cache).
//! Two ways to finish, told apart by type: [`build`](LimiterBuilder::build)
//! takes a store you made, [`open`](LimiterBuilder::open) opens one from a
//! URL with the [`StoreOptions`] that only opening reads (key prefix, memory
//! bounds, connect timeout, lazy connect, TLS roots). So no option is
//! silently ignored: a store you made was configured when you made it.

use super::{CallBound, FailurePolicy, Health, Inner, Limiter, Report};
use crate::metrics::MetricsHook;
use crate::rejection_cache::{RejectionCache, Setting};
use crate::url::{StoreOptions, open_store};
use slidelog_core::{Bounds, Clock, ReceiptKey, Store, SystemClock, TimeMode};
use std::sync::Arc;
use std::time::Duration;

/// Options of a [`Limiter`]; finish with [`open`](Self::open) (a URL and
/// its [`StoreOptions`]) or [`build`](Self::build) (a store you made).
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use slidelog::{FailurePolicy, Limiter, url::StoreOptions};
/// use std::time::Duration;
/// let limiter = Limiter::builder()
///     .timeout(Duration::from_millis(50))
///     .failure_policy(FailurePolicy::FailClosed)
///     .client_time()
///     .open("memory://", StoreOptions { key_prefix: "myapp:rl:".into(), ..Default::default() })
///     .await?;
/// assert_eq!(limiter.failure_policy(), FailurePolicy::FailClosed);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct LimiterBuilder {
    timeout: Duration,
    policy: FailurePolicy,
    time: TimeMode,
    metrics: Option<Arc<dyn MetricsHook>>,
    bounds: Bounds,
    rejections: Setting,
    /// Seals and opens receipts; `None`: from the store, else random.
    receipts: Option<Arc<ReceiptKey>>,
    /// The local policy's journal cap.
    journal_cap: usize,
    /// How long a remote store's override (or its absence) is reused.
    override_cache: Duration,
    /// The granularity floor ([`LimiterBuilder::min_granularity`]).
    floor: Option<slidelog_core::GranularityFloor>,
}

impl Default for LimiterBuilder {
    fn default() -> Self {
        Self {
            timeout: crate::url::DEFAULT_TIMEOUT,
            policy: FailurePolicy::default(),
            time: TimeMode::default(),
            metrics: None,
            bounds: Bounds::default(),
            rejections: Setting::default(),
            receipts: None,
            journal_cap: super::DEFAULT_JOURNAL_CAP,
            override_cache: super::control::DEFAULT_OVERRIDE_CACHE,
            floor: None,
        }
    }
}

impl LimiterBuilder {
    /// How long an override read from a remote store (or the news that a
    /// key has none) is reused before it is read again: the bound on how
    /// late another instance's override or its deletion applies here
    /// (docs/design.md §5.4). Zero reads it on every decision. Default
    /// 1 s; a store in this process's memory is always read at once.
    pub fn override_cache(mut self, ttl: Duration) -> Self {
        self.override_cache = ttl;
        self
    }
}

impl LimiterBuilder {
    /// Sets the upper bound on one store call; past it the call fails with
    /// [`StoreError::Timeout`](crate::StoreError::Timeout) and the policy
    /// answers. A store opened by [`open`](Self::open) gets the same
    /// timeout, so both give up together. Default 100 ms. Not applied to a
    /// store in this process's memory, which answers without I/O.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Raises every request's granularity to `floor`, a fraction of each
    /// limit's window (docs/design.md §1.1: `slidelog serve
    /// --min-granularity 1/600`): below it, to the smallest divisor of the
    /// window at or above it. The answers' limits report the granularity
    /// used. So callers who choose their limits cannot make a key hold
    /// more than about `1 / fraction` records per limit.
    pub fn min_granularity(mut self, floor: slidelog_core::GranularityFloor) -> Self {
        self.floor = Some(floor);
        self
    }

    /// Sets what callers may ask for: the largest `max`, the largest cost,
    /// the most limits per request (and descriptors per Envoy request). A
    /// request above one is an [`InputError::Bound`](crate::InputError::Bound)
    /// naming it. Default [`Bounds::ABSOLUTE`]: a service facing remote
    /// clients sets tighter ones, as `slidelog serve` does ([`Bounds::SERVICE`]).
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Sets what a store failure does. Default [`FailurePolicy::FailOpen`].
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Sets the most records the local policy's journal holds awaiting
    /// charge-back ([`FailurePolicy::Local`], docs/design.md §6); past it a
    /// local admission is refused with an error. Default
    /// [`DEFAULT_JOURNAL_CAP`](super::DEFAULT_JOURNAL_CAP).
    pub fn local_journal_cap(mut self, records: usize) -> Self {
        self.journal_cap = records;
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

    /// Sets which clock decides. Default [`TimeMode::Store`].
    pub fn time_mode(mut self, time: TimeMode) -> Self {
        self.time = time;
        self
    }

    /// Decides on this process's wall clock ([`TimeMode::Client`] with the
    /// system clock).
    pub fn client_time(self) -> Self {
        self.time_mode(TimeMode::Client(Arc::new(SystemClock)))
    }

    /// Decides on `clock` (a [`ManualClock`](crate::store::ManualClock) in tests).
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
    pub fn rejection_cache(mut self, cache: RejectionCache) -> Self {
        self.rejections = Setting::With(Arc::new(cache));
        self
    }

    /// Sends every decision to the store (`--no-rejection-cache`).
    pub fn no_rejection_cache(mut self) -> Self {
        self.rejections = Setting::Off;
        self
    }

    /// Seals and opens receipts with `key` (docs/design.md §4.6, "Signed
    /// receipts"). Instances that settle each other's receipts need one
    /// secret ([`ReceiptKey::from_secret`]). Without one, [`open`](Self::open)
    /// takes the secret a shared store keeps (the first instance creates
    /// it), and [`build`](Self::build) and an in-process store a random one.
    pub fn receipt_key(mut self, key: impl Into<Arc<ReceiptKey>>) -> Self {
        self.receipts = Some(key.into());
        self
    }

    /// [`receipt_key`](Self::receipt_key) from the secret that `store` keeps
    /// for every instance sharing it ([`Store::receipt_secret`]: the first
    /// instance creates it); a store that keeps none, or cannot be read
    /// now, gives a random key (with a warning when it could not be read).
    pub async fn receipt_key_of(self, store: &dyn Store) -> Self {
        let timeout = self.timeout;
        self.receipt_key(shared_receipt_key(store, timeout).await)
    }

    /// Opens the store that `url` names with `options` (and this builder's
    /// timeout) and returns a limiter on it.
    ///
    /// A store that cannot be reached at startup is a matter for the failure
    /// policy, as it is on every later call. Under fail-open (the default)
    /// and local `open` does not fail: after one attempt (at most
    /// [`StoreOptions::connect_timeout`]) it returns a limiter that connects
    /// lazily, whose decisions are admitted `degraded` until the store
    /// answers and exact from then on (under local: decided at the share in
    /// the limiter's own memory, and charged back when the store answers).
    /// Under fail-closed it fails fast with the connect error ([`OpenError::is_transient`](crate::OpenError::is_transient)
    /// is true), so a service that must not run unlimited does not start;
    /// set [`StoreOptions::lazy_connect`] to start anyway and answer errors
    /// (503) until the store answers. A bad URL, or a store that refuses the
    /// configuration (wrong password, TLS), fails under either policy.
    pub async fn open(
        self,
        url: &str,
        options: StoreOptions,
    ) -> Result<Limiter, super::BuildError> {
        let store = match open_store(url, &options, self.timeout).await {
            Err(e) if e.is_transient() && self.policy != FailurePolicy::FailClosed => {
                tracing::warn!(
                    error = %e.with_causes(),
                    "store unreachable at startup; fail-open: starting anyway, decisions are degraded until it answers"
                );
                let lazy = StoreOptions {
                    lazy_connect: true,
                    ..options
                };
                open_store(url, &lazy, self.timeout).await?
            }
            opened => opened?,
        };
        let builder = match self.receipts {
            Some(_) => self,
            None => self.receipt_key_of(store.as_ref()).await,
        };
        Ok(builder.build(store))
    }

    /// Returns a limiter on `store`, configured as you made it. A store in
    /// this process's memory ([`Store::in_process`]) is called without a
    /// timer and without a rejection cache (it answers without I/O).
    pub fn build(self, store: Arc<dyn Store>) -> Limiter {
        let remote = store.in_process().is_none();
        // Exact (and worth it) only for a remote store on its own clock.
        let rejections = self.rejections.resolve(remote && self.time.is_store());
        let health = Arc::new(Health::new(store.kind(), self.metrics.clone()));
        let local = remote
            .then(|| super::local::Local::new(self.policy, self.journal_cap, self.metrics.clone()))
            .flatten();
        let report = Report::new(&store, self.policy, self.metrics, health.clone());
        let bound = CallBound(remote.then_some(self.timeout));
        if remote {
            // Health, the up gauge and readiness known from start-up.
            health.start(&store, bound);
        }
        Limiter {
            inner: Arc::new(Inner {
                store,
                time: self.time,
                policy: self.policy,
                bound,
                rejections,
                health,
                local,
                report,
                receipts: self
                    .receipts
                    .unwrap_or_else(|| Arc::new(ReceiptKey::random())),
                queue: Default::default(),
                overrides: super::control::OverrideCache::new(if remote {
                    self.override_cache
                } else {
                    Duration::ZERO
                }),
                #[cfg(feature = "tower")]
                names: Default::default(),
            }),
            bounds: self.bounds,
            floor: self.floor,
        }
    }
}

/// The receipt key of instances sharing `store`: its stored secret (created
/// by the first instance), or a random one, with a warning, when the store
/// keeps none that this call can read (unreachable at start, or a secret
/// too short to be one slidelog wrote).
pub async fn shared_receipt_key(store: &dyn Store, timeout: Duration) -> ReceiptKey {
    let fresh = ReceiptKey::random_secret();
    let asked = tokio::time::timeout(
        timeout.max(Duration::from_secs(1)),
        store.receipt_secret(&fresh),
    );
    let problem = match asked.await {
        Ok(Ok(None)) => return ReceiptKey::random(),
        Ok(Ok(Some(secret))) => match ReceiptKey::from_secret(&secret) {
            Ok(key) => return key,
            Err(e) => e.to_string(),
        },
        Ok(Err(e)) => e.to_string(),
        Err(_) => "timed out".to_owned(),
    };
    tracing::warn!(
        error = %problem,
        "could not read the store's shared receipt secret; receipts this instance issues settle only on this instance until it restarts (set a receipt secret to share one)"
    );
    ReceiptKey::from_secret(&fresh).unwrap_or_else(|_| ReceiptKey::random())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_process_store_gets_no_timer_and_no_cache_a_remote_one_both() {
        let memory = Limiter::builder().build(Arc::new(slidelog_memory::MemoryStore::new()));
        assert_eq!(memory.inner.bound, CallBound(None));
        assert!(memory.rejection_cache().is_none());
        let remote = Limiter::builder()
            .timeout(Duration::from_millis(7))
            .build(Arc::new(Remote));
        assert_eq!(
            remote.inner.bound,
            CallBound(Some(Duration::from_millis(7)))
        );
        assert!(remote.rejection_cache().is_some());
        let client_time = Limiter::builder().client_time().build(Arc::new(Remote));
        assert!(
            client_time.rejection_cache().is_none(),
            "inexact off the store's clock"
        );
    }

    /// A store that is not in this process's memory (it never answers).
    #[derive(Debug)]
    struct Remote;

    #[async_trait::async_trait]
    impl Store for Remote {
        async fn decide(
            &self,
            _: &slidelog_core::Request,
            _: slidelog_core::Mode,
            _: slidelog_core::Now,
        ) -> Result<slidelog_core::Decision, crate::StoreError> {
            std::future::pending().await
        }
        async fn reset(&self, _: &str) -> Result<bool, crate::StoreError> {
            std::future::pending().await
        }
        async fn ping(&self) -> Result<(), crate::StoreError> {
            std::future::pending().await
        }
        fn kind(&self) -> &'static str {
            "remote"
        }
    }
}
