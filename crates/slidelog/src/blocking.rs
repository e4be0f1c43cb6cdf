//! A blocking [`Limiter`]: the same decisions as [`crate::Limiter`] for
//! programs without a Tokio runtime of their own (a CLI, a thread pool, a
//! synchronous web framework).
//!
//! It owns a small runtime (one worker thread, `slidelog-blocking`) that
//! keeps the store's connections, the health probe and the timers running
//! between calls; each call blocks the calling thread until the async
//! limiter answers on it. Every rule (bounds, the rejection cache, outage
//! mode, the failure policy, metrics) is the async limiter's, which it
//! wraps: the decisions are the same by construction. Calls must not be
//! made from inside an async runtime (Tokio refuses to block a worker
//! thread); from async code use [`crate::Limiter`], or `spawn_blocking`.
//!
//! ```
//! use slidelog::{Limit, blocking::Limiter};
//! let limiter = Limiter::memory()?; // or Limiter::from_url("redis://…")?
//! let limits = [Limit::new(2, 60_000)?];
//! assert!(limiter.check("user123", &limits, 1)?.allowed);
//! assert!(limiter.check("user123", &limits, 1)?.allowed);
//! assert!(!limiter.check("user123", &limits, 1)?.allowed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::url::StoreOptions;
use crate::{
    BuildError, Checks, Cost, Decision, Detailed, JointDecision, Limit, LimiterBuilder,
    LimiterError, Mode, Now, Request, Wait, WaitError,
};
use slidelog_core::Store;
use std::future::Future;
use std::sync::Arc;
use tokio::runtime::Runtime;

/// Why the blocking limiter's runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    /// The runtime's worker thread could not be started.
    #[error("cannot start the blocking limiter's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The store could not be opened.
    #[error(transparent)]
    Open(#[from] BuildError),
}

/// The runtime a blocking limiter and its clones share, shut down without
/// waiting when the last is dropped (so dropping one inside an async
/// context, as a test's adapter may, does not panic).
#[derive(Debug)]
struct Owned(Option<Runtime>);

impl Owned {
    fn runtime(&self) -> &Runtime {
        self.0.as_ref().expect("the runtime lives until drop")
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// A rate limiter whose calls block until answered. Cheap to clone: clones
/// share the store and the runtime.
#[derive(Debug, Clone)]
pub struct Limiter {
    limiter: crate::Limiter,
    runtime: Arc<Owned>,
}

/// A new runtime of one worker thread, with timers and I/O.
fn runtime() -> Result<Owned, BlockingError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("slidelog-blocking")
        .enable_all()
        .build()
        .map_err(BlockingError::Runtime)?;
    Ok(Owned(Some(runtime)))
}

impl Limiter {
    /// A limiter on a new in-process memory store.
    pub fn memory() -> Result<Self, BlockingError> {
        Self::build(
            crate::Limiter::builder(),
            Arc::new(crate::store::MemoryStore::new()),
        )
    }

    /// A limiter on the store `url` names, with default options (as
    /// [`crate::Limiter::from_url`]).
    pub fn from_url(url: &str) -> Result<Self, BlockingError> {
        Self::open(crate::Limiter::builder(), url, StoreOptions::default())
    }

    /// A limiter with `builder`'s options on the store `url` names.
    pub fn open(
        builder: LimiterBuilder,
        url: &str,
        options: StoreOptions,
    ) -> Result<Self, BlockingError> {
        let runtime = runtime()?;
        let limiter = runtime.runtime().block_on(builder.open(url, options))?;
        Ok(Self {
            limiter,
            runtime: Arc::new(runtime),
        })
    }

    /// A limiter with `builder`'s options on `store`.
    pub fn build(builder: LimiterBuilder, store: Arc<dyn Store>) -> Result<Self, BlockingError> {
        let runtime = runtime()?;
        // Built inside the runtime: a remote store's health probe starts on it.
        let limiter = runtime.runtime().block_on(async { builder.build(store) });
        Ok(Self {
            limiter,
            runtime: Arc::new(runtime),
        })
    }

    /// The async limiter this one drives (for its accessors: store,
    /// health, policy), usable from the runtime's own tasks.
    pub fn as_async(&self) -> &crate::Limiter {
        &self.limiter
    }

    /// Runs `call` on this limiter's runtime, blocking until it answers.
    fn block<T>(&self, call: impl Future<Output = T>) -> T {
        self.runtime.runtime().block_on(call)
    }

    /// [`crate::Limiter::check`], blocking.
    pub fn check(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: impl Into<Cost>,
    ) -> Result<Decision, LimiterError> {
        self.block(self.limiter.check(key, limits, cost))
    }

    /// [`crate::Limiter::peek`], blocking.
    pub fn peek(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: impl Into<Cost>,
    ) -> Result<Decision, LimiterError> {
        self.block(self.limiter.peek(key, limits, cost))
    }

    /// [`crate::Limiter::decide_at`], blocking.
    pub fn decide_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, LimiterError> {
        self.block(self.limiter.decide_at(request, mode, now))
    }

    /// [`crate::Limiter::decide_each_at`], blocking.
    pub fn decide_each_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, LimiterError> {
        self.block(self.limiter.decide_each_at(request, mode, now))
    }

    /// [`crate::Limiter::decide_all_at`], blocking.
    pub fn decide_all_at(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, LimiterError> {
        self.block(self.limiter.decide_all_at(checks, mode, now))
    }

    /// [`crate::Limiter::until_ready`], blocking the thread while it waits.
    ///
    /// ```
    /// use slidelog::{Limit, Wait, blocking::Limiter};
    /// use std::time::Duration;
    /// let limiter = Limiter::memory()?;
    /// let limits = [Limit::new(1, 100)?];
    /// for _ in 0..3 {
    ///     limiter.until_ready("job", &limits, 1, Wait::up_to(Duration::from_secs(1)))?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn until_ready(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: impl Into<Cost>,
        wait: Wait,
    ) -> Result<Decision, WaitError> {
        self.block(self.limiter.until_ready(key, limits, cost, wait))
    }

    /// [`crate::Limiter::until_ready_all`], blocking.
    pub fn until_ready_all(&self, checks: &Checks, wait: Wait) -> Result<JointDecision, WaitError> {
        self.block(self.limiter.until_ready_all(checks, wait))
    }

    /// [`crate::Limiter::reset`], blocking.
    pub fn reset(&self, key: &str) -> Result<bool, LimiterError> {
        self.block(self.limiter.reset(key))
    }

    /// [`crate::Limiter::ping`], blocking.
    pub fn ping(&self) -> Result<(), LimiterError> {
        self.block(self.limiter.ping())
    }
}
