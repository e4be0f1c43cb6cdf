//! The service's shared state: the store, the failure policy, the metrics and
//! the safety settings. Every transport (the HTTP API here, Envoy's gRPC API,
//! `POST /json`) decides through [`App::decide`], so timeouts, the failure
//! policy, metrics and logs are the same whichever way a request arrives.

use crate::metrics::{Metrics, Op};
use crate::policy::FailurePolicy;
use slidelog::{Decision, MemoryStore, Mode, Now, Request, Store, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Settings of the service that are not about transports.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// What to answer when the store fails.
    pub policy: FailurePolicy,
    /// Upper bound on every store call.
    pub store_timeout: Duration,
    /// When set, `DELETE /v1/keys/{key}` needs `Authorization: Bearer <token>`.
    pub admin_token: Option<String>,
    /// Accept `now_ms` from clients (docs/design.md §3); refused with 400 otherwise.
    pub trust_client_time: bool,
}

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            policy: FailurePolicy::default(),
            store_timeout: Duration::from_millis(100),
            admin_token: None,
            trust_client_time: false,
        }
    }
}

/// The store failed and the fail-closed policy refuses to decide.
#[derive(Debug, Clone, thiserror::Error)]
#[error("rate limit store unavailable (fail-closed): {0}")]
pub struct Refused(pub StoreError);

/// Shared, cheaply cloneable service state.
#[derive(Debug, Clone)]
pub struct App {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    memory: Option<Arc<MemoryStore>>,
    config: AppConfig,
    metrics: Metrics,
    /// Whether the last store call succeeded: logs report changes only, so a
    /// store that is down does not flood the log with one line per request.
    store_ok: AtomicBool,
}

impl App {
    /// A service over any store.
    pub fn new(store: Arc<dyn Store>, config: AppConfig) -> Self {
        Self::build(store, None, config)
    }

    /// A service over the in-memory store, whose key count is then exported.
    pub fn with_memory_store(store: Arc<MemoryStore>, config: AppConfig) -> Self {
        Self::build(store.clone(), Some(store), config)
    }

    fn build(store: Arc<dyn Store>, memory: Option<Arc<MemoryStore>>, config: AppConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                memory: memory.clone(),
                config,
                metrics: Metrics::new(memory),
                store_ok: AtomicBool::new(true),
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &AppConfig {
        &self.inner.config
    }

    /// The metrics of this service.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The in-memory store, when that is the store.
    pub fn memory_store(&self) -> Option<Arc<MemoryStore>> {
        self.inner.memory.clone()
    }

    /// The store's kind ("memory", "redis", …).
    pub fn store_kind(&self) -> &'static str {
        self.inner.store.kind()
    }

    /// Decides on `request`, bounded by the store timeout, with the failure
    /// policy applied: fail-open answers a degraded admission, fail-closed
    /// answers [`Refused`].
    pub async fn decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, Refused> {
        let op = match mode {
            Mode::Record => Op::Check,
            Mode::Peek => Op::Peek,
        };
        let started = Instant::now();
        let result = self
            .bounded(self.inner.store.decide(request, mode, now))
            .await;
        let elapsed = started.elapsed();
        match result {
            Ok(decision) => {
                self.store_recovered();
                self.inner.metrics.decision(op, &decision, elapsed);
                Ok(decision)
            }
            Err(error) => {
                let open = self.inner.config.policy == FailurePolicy::FailOpen;
                self.store_failed(op.as_str(), &error, open, elapsed);
                if open {
                    Ok(degraded_allow(request))
                } else {
                    Err(Refused(error))
                }
            }
        }
    }

    /// Deletes a key's log (no failure policy: a reset that did not happen is
    /// reported as an error). Returns whether a log existed.
    pub async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        let started = Instant::now();
        let result = self.bounded(self.inner.store.reset(key)).await;
        match &result {
            Ok(_) => self.store_recovered(),
            Err(e) => self.store_failed("reset", e, false, started.elapsed()),
        }
        result
    }

    /// Readiness: the store answers a ping within the store timeout.
    pub async fn ready(&self) -> Result<(), StoreError> {
        let started = Instant::now();
        let result = self.bounded(self.inner.store.ping()).await;
        match &result {
            Ok(()) => {
                self.store_recovered();
                self.inner.metrics.store_up(true);
            }
            Err(e) => self.store_failed("ping", e, false, started.elapsed()),
        }
        result
    }

    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let timeout = self.inner.config.store_timeout;
        match tokio::time::timeout(timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout(timeout)),
        }
    }

    fn store_failed(
        &self,
        op: &'static str,
        error: &StoreError,
        degraded: bool,
        elapsed: Duration,
    ) {
        self.inner.metrics.store_error(op, error, degraded, elapsed);
        if self.inner.store_ok.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                store = self.store_kind(),
                op,
                error = %error,
                transient = error.is_transient(),
                policy = %self.inner.config.policy,
                "store call failed; further failures are logged at debug level until it recovers"
            );
        } else {
            tracing::debug!(store = self.store_kind(), op, error = %error, "store call failed");
        }
    }

    fn store_recovered(&self) {
        // A load first: the common path stays a read of a shared cache line.
        if !self.inner.store_ok.load(Ordering::Relaxed)
            && !self.inner.store_ok.swap(true, Ordering::Relaxed)
        {
            tracing::info!(store = self.store_kind(), "store answers again");
        }
    }
}

/// The fail-open answer: admitted, degraded, reporting the tightest limit
/// (smallest `max`, then shortest window) with nothing counted.
fn degraded_allow(request: &Request) -> Decision {
    let tightest = request
        .limits()
        .iter()
        .min_by_key(|l| (l.max(), l.window_ms()))
        .expect("a request has at least one limit");
    Decision::degraded_allow(tightest)
}
