//! The service's shared state: the [`Limiter`] every transport decides
//! through, the metrics it reports to, and the safety settings. The HTTP API,
//! Envoy's gRPC API and `POST /json` all call the same limiter, so timeouts,
//! the failure policy, metrics and logs are the same whichever way a request
//! arrives (docs/design.md §5, §6).

use crate::metrics::Metrics;
use crate::policy::FailurePolicy;
use slidelog::Limiter;
use slidelog::store::{MemoryStore, Store};
use std::sync::Arc;
use std::time::Duration;

/// Settings of the service that are not about transports.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// What to answer when the store fails.
    pub policy: FailurePolicy,
    /// Upper bound on every store call.
    pub store_timeout: Duration,
    /// When set, every admin operation needs `Authorization: Bearer <token>`;
    /// when not, admin operations answer loopback callers only
    /// ([`crate::auth::AdminGuard`]). (`Debug` shows `***`.)
    pub admin_token: Option<slidelog::redact::Secret>,
    /// Accept `now_ms` from clients (docs/design.md §3); refused with 400 otherwise.
    pub trust_client_time: bool,
    /// What clients may ask for: the largest max and cost, the most limits
    /// per request and descriptors per Envoy request (docs/design.md §5).
    pub bounds: slidelog::Bounds,
    /// Seals and opens receipts (docs/design.md §4.6, "Signed receipts");
    /// `None`: a random key (receipts settle on this process only).
    pub receipts: Option<Arc<slidelog::ReceiptKey>>,
    /// The operator's policies (`--policies`), which a request may name.
    pub policies: Option<Arc<crate::policies::PolicyHandle>>,
    /// `--require-policy`: requests must name a policy; client-chosen
    /// limits are refused.
    pub require_policy: bool,
    /// Where the key browser reads a Redis store's keys (`None`: the
    /// memory store's own listing, or no browser).
    pub key_space: Option<crate::browse::key_space::KeySpace>,
}

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            policy: FailurePolicy::default(),
            store_timeout: Duration::from_millis(100),
            admin_token: None,
            trust_client_time: false,
            bounds: slidelog::Bounds::SERVICE,
            receipts: None,
            policies: None,
            require_policy: false,
            key_space: None,
        }
    }
}

/// Shared, cheaply cloneable service state.
#[derive(Debug, Clone)]
pub struct App {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limiter: Limiter,
    config: AppConfig,
    metrics: Arc<Metrics>,
    /// The in-memory store, when that is the store: the service sweeps,
    /// counts and snapshots it (the limiter sees only a `Store`).
    memory: Option<Arc<MemoryStore>>,
}

impl App {
    /// A service over any store.
    pub fn new(store: Arc<dyn Store>, config: AppConfig) -> Self {
        let metrics = Arc::new(Metrics::new(None));
        let limiter = Self::limiter_builder(&config, &metrics).build(store);
        Self::with_limiter(limiter, config, metrics, None)
    }

    /// A service over the in-memory store, whose key count is then exported.
    pub fn with_memory_store(store: Arc<MemoryStore>, config: AppConfig) -> Self {
        let metrics = Arc::new(Metrics::new(Some(store.clone())));
        let limiter = Self::limiter_builder(&config, &metrics).build(store.clone());
        Self::with_limiter(limiter, config, metrics, Some(store))
    }

    /// [`App::new`] with the limiter's options changed by `tweak` (serve's
    /// `--no-rejection-cache`).
    pub fn with_builder(
        store: Arc<dyn Store>,
        config: AppConfig,
        tweak: impl FnOnce(slidelog::LimiterBuilder) -> slidelog::LimiterBuilder,
    ) -> Self {
        let metrics = Arc::new(Metrics::new(None));
        let limiter = tweak(Self::limiter_builder(&config, &metrics)).build(store);
        Self::with_limiter(limiter, config, metrics, None)
    }

    /// The limiter options the settings ask for, reporting to `metrics`.
    fn limiter_builder(config: &AppConfig, metrics: &Arc<Metrics>) -> slidelog::LimiterBuilder {
        let builder = Limiter::builder()
            .timeout(config.store_timeout)
            .failure_policy(config.policy)
            .bounds(config.bounds)
            .metrics(metrics.clone());
        match &config.receipts {
            Some(key) => builder.receipt_key(key.clone()),
            None => builder,
        }
    }

    fn with_limiter(
        limiter: Limiter,
        config: AppConfig,
        metrics: Arc<Metrics>,
        memory: Option<Arc<MemoryStore>>,
    ) -> Self {
        metrics.watch_store(limiter.store().clone());
        if matches!(config.policy, slidelog::FailurePolicy::Local { .. })
            && limiter.store().in_process().is_none()
        {
            metrics.local_policy();
        }
        if let Some(cache) = limiter.rejection_cache() {
            metrics.watch_rejection_cache(cache.clone());
        }
        Self {
            inner: Arc::new(Inner {
                limiter,
                config,
                metrics,
                memory,
            }),
        }
    }

    /// The limiter every transport decides through.
    pub fn limiter(&self) -> &Limiter {
        &self.inner.limiter
    }

    /// The settings.
    pub fn config(&self) -> &AppConfig {
        &self.inner.config
    }

    /// The metrics of this service.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The in-memory store, when that is the store.
    pub fn memory_store(&self) -> Option<Arc<MemoryStore>> {
        self.inner.memory.clone()
    }

    /// The store's kind ("memory", "redis", …).
    pub fn store_kind(&self) -> &'static str {
        self.inner.limiter.store().kind()
    }
}
