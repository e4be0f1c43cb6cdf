//! Store health: the outage mode of a [`Limiter`](crate::Limiter)
//! (docs/design.md §6). A store call that fails transiently (refused, reset,
//! timed out) starts ONE background probe per limiter: a `PING` under the
//! call bound. When the probe fails too, the store is known *down*: from then
//! on decisions answer by the failure policy without calling it (fail-open
//! degraded, fail-closed an error; a rejection still in the local cache is
//! answered exactly before this), so an outage costs callers nothing. The
//! probe retries with backoff ([`FIRST_RETRY`] doubling to [`LAST_RETRY`])
//! and marks the store up when a `PING` is answered: the next decision goes
//! to the store again, over the connection that just answered.
//!
//! Why a failed call alone does not mark the store down: a slow call that
//! timed out is not an outage, and its probe tells (a live Redis answers a
//! `PING`). A refused connection fails the probe at once, so the store is
//! down within a round trip.

use crate::limiter::bounded::CallBound;
use crate::metrics::MetricsHook;
use parking_lot::Mutex;
use slidelog_core::{Store, StoreError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The probe's first wait after a failed `PING`.
pub(crate) const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The probe's longest wait between two `PING`s: with the probe's own bound
/// it keeps "exact again" well under a second after the store returns.
pub(crate) const LAST_RETRY: Duration = Duration::from_millis(500);

/// What a limiter knows of its store's health ([`crate::Limiter::store_health`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreHealth {
    /// The store answers (or no probe has found it down).
    Up,
    /// The store answers but cannot decide (a wrong password, NOPERM, the
    /// module engine on a server without the module): not an outage, a
    /// configuration an operator must fix. Logged at error level, counted
    /// (`kind="misconfigured"`) and reported by readiness, in every policy.
    Misconfigured {
        /// What the store said, naming the fix where it is known.
        cause: String,
    },
    /// The store is known down: decisions answer by policy without it.
    Down {
        /// How long it has been known down.
        for_: Duration,
        /// The probe's last failure.
        cause: StoreError,
    },
}

/// Since when, and why, the store is known down.
#[derive(Debug, Clone)]
struct Down {
    since: Instant,
    cause: StoreError,
}

/// One limiter's view of its store's health, and its one probe.
#[derive(Debug)]
pub(crate) struct Health {
    /// The store's kind, for log lines.
    store: &'static str,
    /// Read on every decision: true while [`Health::down`] holds a value.
    is_down: AtomicBool,
    down: Mutex<Option<Down>>,
    /// True while the background probe runs (one per limiter).
    probing: AtomicBool,
    metrics: Option<Arc<dyn MetricsHook>>,
}

impl Health {
    /// Returns the health of the store of kind `store`, up.
    pub(crate) fn new(store: &'static str, metrics: Option<Arc<dyn MetricsHook>>) -> Self {
        Self {
            store,
            is_down: AtomicBool::new(false),
            down: Mutex::new(None),
            probing: AtomicBool::new(false),
            metrics,
        }
    }

    /// Returns the error a decision answers while the store is known down,
    /// or `None` when it should call the store.
    pub(crate) fn outage(&self) -> Option<StoreError> {
        if !self.is_down.load(Ordering::Acquire) {
            return None;
        }
        let down = self.down.lock().clone()?;
        Some(StoreError::Unavailable(format!(
            "store known down for {} ms (a background probe retries it): {}",
            down.since.elapsed().as_millis(),
            down.cause
        )))
    }

    /// Tells whether the store is known down (decisions answer by policy
    /// without it).
    pub(crate) fn is_down(&self) -> bool {
        self.is_down.load(Ordering::Acquire)
    }

    /// Returns what is known of the store's health.
    pub(crate) fn snapshot(&self) -> StoreHealth {
        match self.down.lock().clone() {
            None => StoreHealth::Up,
            Some(d) => StoreHealth::Down {
                for_: d.since.elapsed(),
                cause: d.cause,
            },
        }
    }

    /// After a store call failed with `error`: a transient failure starts
    /// the probe (unless one runs), which decides whether the store is down.
    pub(crate) fn failed(
        self: &Arc<Self>,
        error: &StoreError,
        store: &Arc<dyn Store>,
        bound: CallBound,
    ) {
        if !error.is_transient() || self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.probing.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(probe(Arc::downgrade(self), store.clone(), bound));
    }

    /// Starts the probe at once, whatever has happened (a limiter just built
    /// on a remote store): the store's health, its up gauge and readiness
    /// are then known from start-up, not from the first decision. Needs a
    /// Tokio runtime; without one the first failed call starts it.
    pub(crate) fn start(self: &Arc<Self>, store: &Arc<dyn Store>, bound: CallBound) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.probing.swap(true, Ordering::AcqRel) {
            runtime.spawn(probe(Arc::downgrade(self), store.clone(), bound));
        }
    }

    /// Marks the store down (logged and reported once per outage).
    pub(crate) fn mark_down(&self, cause: StoreError) {
        let mut down = self.down.lock();
        if let Some(d) = down.as_mut() {
            d.cause = cause;
            return;
        }
        log_down(self.store, &cause);
        let since = Instant::now();
        if let Some(metrics) = &self.metrics {
            metrics.store_down(&cause);
        }
        *down = Some(Down { since, cause });
        self.is_down.store(true, Ordering::Release);
    }

    /// After a store call was answered: the store is up (logged and
    /// reported when it was down).
    pub(crate) fn answered(&self) {
        if self.is_down.load(Ordering::Acquire) {
            self.mark_up();
        }
    }

    /// Marks the store up (logged and reported when it was down).
    fn mark_up(&self) {
        let was = self.down.lock().take();
        self.is_down.store(false, Ordering::Release);
        if let Some(d) = was {
            let down_for = d.since.elapsed();
            // The outage episode logs the recovery (crate::episode): once.
            tracing::debug!(
                store = self.store,
                down_ms = down_for.as_millis() as u64,
                "store up: a probe PING was answered; decisions go to it again"
            );
            if let Some(metrics) = &self.metrics {
                metrics.store_recovered(down_for);
            }
        }
    }
}

/// Says what happened: a refused or dropped connection, or a store that
/// fell silent. Told apart by the error's type, never its text. Error
/// level: from now on no decision reaches the store (the outage episode's
/// warning said only that calls fail).
fn log_down(store: &'static str, cause: &StoreError) {
    match cause {
        StoreError::Timeout(bound) => tracing::error!(
            store,
            timeout_ms = bound.as_millis() as u64,
            "store down: silent (a call and its probe PING got no answer within the timeout); answering by policy without it until a probe answers"
        ),
        other => tracing::error!(
            store,
            error = %other,
            "store down: it refused or dropped the connection, or cannot serve now; answering by policy without it until a probe answers"
        ),
    }
}

/// The one probe of a limiter: `PING` until the store answers, with
/// backoff; stops when the limiter is gone.
async fn probe(health: Weak<Health>, store: Arc<dyn Store>, bound: CallBound) {
    let mut wait = FIRST_RETRY;
    loop {
        let result = match bound.run(store.ping()).await {
            // A connection may report its last failure once and reconnect
            // only then (redis-rs's ConnectionManager does): ask again at
            // once, so a store that is back is found on this round.
            Err(e) if matches!(e, StoreError::Unavailable(_)) => {
                bound.run(store.ping()).await.map_err(|_| e)
            }
            other => other,
        };
        let Some(health) = health.upgrade() else {
            return;
        };
        match result {
            Err(e) if e.is_transient() => health.mark_down(e),
            // It answered (an error that is not an outage is an answer).
            _ => {
                health.mark_up();
                if let Some(metrics) = &health.metrics {
                    metrics.store_up();
                }
                health.probing.store(false, Ordering::Release);
                return;
            }
        }
        drop(health);
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(LAST_RETRY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::{Decision, Mode, Now, Request};
    use std::sync::atomic::AtomicU32;

    /// A store whose ping fails while `down` is set.
    #[derive(Debug, Default)]
    struct Flaky {
        down: AtomicBool,
        pings: AtomicU32,
    }

    #[async_trait::async_trait]
    impl Store for Flaky {
        async fn decide(&self, _: &Request, _: Mode, _: Now) -> Result<Decision, StoreError> {
            unreachable!("the health part never decides")
        }
        async fn reset(&self, _: &str) -> Result<bool, StoreError> {
            unreachable!()
        }
        async fn ping(&self) -> Result<(), StoreError> {
            self.pings.fetch_add(1, Ordering::Relaxed);
            if self.down.load(Ordering::Relaxed) {
                Err(StoreError::Unavailable("Connection refused".into()))
            } else {
                Ok(())
            }
        }
        fn kind(&self) -> &'static str {
            "flaky"
        }
    }

    #[tokio::test]
    async fn a_failed_probe_marks_down_and_an_answered_one_up_with_one_probe() {
        let flaky = Arc::new(Flaky::default());
        flaky.down.store(true, Ordering::Relaxed);
        let store: Arc<dyn Store> = flaky.clone();
        let health = Arc::new(Health::new("flaky", None));
        let refused = StoreError::Unavailable("refused".into());
        for _ in 0..5 {
            health.failed(&refused, &store, CallBound(None));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(health.outage().is_some());
        // One probe; a fast failure is asked twice per round.
        assert_eq!(flaky.pings.load(Ordering::Relaxed), 2, "one probe");
        // 50 + 100 + 200 + 400 + 500 + 500 ms of backoff: 7 rounds in 1.8 s
        // (fewer on a loaded machine; never a hot loop).
        tokio::time::sleep(Duration::from_millis(1_800)).await;
        let pings = flaky.pings.load(Ordering::Relaxed);
        assert!((6..=14).contains(&pings), "{pings} pings");
        flaky.down.store(false, Ordering::Relaxed);
        tokio::time::sleep(LAST_RETRY).await;
        assert_eq!(health.outage(), None);
        assert_eq!(health.snapshot(), StoreHealth::Up);
        // A failure that is not an outage starts no probe.
        health.failed(
            &StoreError::Backend("WRONGTYPE".into()),
            &store,
            CallBound(None),
        );
        assert!(!health.probing.load(Ordering::Relaxed));
    }
}
