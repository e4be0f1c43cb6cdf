//! Store outages logged per episode, not per request: one line when the
//! store starts failing, one when it has recovered. A store that fails every
//! other request (a memory store at its key cap, a flapping link) is one
//! episode, not one line per answer: the episode ends only after the store
//! has answered and no call has failed for [`DEFAULT_QUIET`].
//!
//! A store of several nodes (a Redis Cluster) with one node down fails only
//! for that node's keys: while the store reports a node down
//! ([`StoreStats::nodes_down`](slidelog_core::StoreStats::nodes_down)) the
//! episode stays open ([`Episodes::success_unless`]), however long only the
//! other nodes' keys are asked for, so its two lines are not logged again
//! and again. The store logs the node's own outage (once down, once up).
//!
//! A full store ([`StoreError::Full`]) is no outage and opens no episode:
//! the memory store logs its own full episodes, once each.
//!
//! A misconfiguration (wrong password, NOPERM, a missing database, a failed
//! TLS handshake: [`StoreError::Misconfigured`]) is logged at error level
//! once per episode, even when the episode began as a transient failure,
//! and stays known until a decision succeeds, so readiness can report it.

use crate::StoreError;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the store must go without a failed call before an episode is
/// over (and its recovery logged).
pub const DEFAULT_QUIET: Duration = Duration::from_secs(1);

/// The outage episodes of one store (see the module docs).
#[derive(Debug)]
pub struct Episodes {
    /// True while an episode is open: the path of a healthy store is one
    /// load of this flag.
    open: AtomicBool,
    state: Mutex<Option<Episode>>,
    quiet: Duration,
}

#[derive(Debug)]
struct Episode {
    started: Instant,
    last_failure: Instant,
    failures: u64,
    /// The cause, once a misconfiguration was seen in this episode.
    misconfigured: Option<String>,
}

impl Default for Episodes {
    fn default() -> Self {
        Self::new(DEFAULT_QUIET)
    }
}

impl Episodes {
    /// Returns a tracker whose episodes end after `quiet` without a failure.
    pub fn new(quiet: Duration) -> Self {
        Self {
            open: AtomicBool::new(false),
            state: Mutex::new(None),
            quiet,
        }
    }

    /// Records that a store call failed with `error`. Logs when this opens
    /// an episode (warn; error for a misconfiguration) and when the first
    /// misconfiguration of an open episode is seen; otherwise debug only.
    /// A full store is no failure of the store: debug only, no episode.
    pub fn failure(
        &self,
        store: &str,
        op: &str,
        error: &StoreError,
        policy: &dyn std::fmt::Display,
    ) {
        if error.is_full() {
            tracing::debug!(store, op, error = %error, "new key refused: store full");
            return;
        }
        let now = Instant::now();
        let mut state = self.state.lock();
        let misconfigured = error.is_misconfiguration().then(|| error.to_string());
        let Some(episode) = state.as_mut() else {
            log_opening(store, op, error, misconfigured.as_deref(), policy);
            *state = Some(Episode {
                started: now,
                last_failure: now,
                failures: 1,
                misconfigured,
            });
            self.open.store(true, Ordering::Release);
            return;
        };
        episode.failures += 1;
        episode.last_failure = now;
        match misconfigured {
            Some(cause) if episode.misconfigured.is_none() => {
                log_misconfiguration(store, op, &cause, None);
                episode.misconfigured = Some(cause);
            }
            _ => tracing::debug!(store, op, error = %error, "store call failed"),
        }
    }

    /// Records that a store call succeeded. `decided`: it was a decision (a ping can
    /// succeed for a user who may not run the script, so only a decision
    /// clears a misconfiguration). Ends the episode, with one log line,
    /// once no call has failed for the quiet period.
    pub fn success(&self, store: &str, decided: bool) {
        self.success_unless(store, decided, || false);
    }

    /// [`success`](Self::success), except that the episode stays open while
    /// `part_down` says part of the store is still down (a cluster master:
    /// its keys still fail while the others answer). `part_down` is asked at
    /// most once per quiet period, and only while an episode is open.
    pub fn success_unless(&self, store: &str, decided: bool, part_down: impl FnOnce() -> bool) {
        if !self.open.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.state.lock();
        let Some(episode) = state.as_mut() else {
            return;
        };
        if decided {
            episode.misconfigured = None;
        }
        if episode.misconfigured.is_some() || episode.last_failure.elapsed() < self.quiet {
            return;
        }
        if part_down() {
            // Not over: asked again after another quiet period.
            episode.last_failure = Instant::now();
            return;
        }
        tracing::info!(
            store,
            outage = ?episode.started.elapsed(),
            failed_calls = episode.failures,
            "store answers again"
        );
        *state = None;
        self.open.store(false, Ordering::Release);
    }

    /// Records a misconfiguration found outside a store call (the check at
    /// start), logged as [`failure`](Self::failure) logs it.
    pub fn misconfigured(&self, store: &str, cause: &str, policy: &dyn std::fmt::Display) {
        self.failure(
            store,
            "start",
            &StoreError::Misconfigured(cause.to_owned()),
            policy,
        );
    }

    /// Returns the misconfiguration of the open episode, if one was seen and no
    /// decision has succeeded since.
    pub fn misconfiguration(&self) -> Option<String> {
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        self.state
            .lock()
            .as_ref()
            .and_then(|e| e.misconfigured.clone())
    }

    /// Returns true while an episode is open.
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }
}

/// Logs the failure that opens an episode: error level for a
/// misconfiguration, warn for any other failure.
fn log_opening(
    store: &str,
    op: &str,
    error: &StoreError,
    misconfigured: Option<&str>,
    policy: &dyn std::fmt::Display,
) {
    if let Some(cause) = misconfigured {
        log_misconfiguration(store, op, cause, Some(policy));
    } else {
        tracing::warn!(
            store,
            op,
            error = %error,
            transient = error.is_transient(),
            policy = %policy,
            "store failing; further failures are logged at debug level until it recovers"
        );
    }
}

/// Logs a misconfiguration at error level (with the policy, when it opens
/// the episode).
fn log_misconfiguration(
    store: &str,
    op: &str,
    cause: &str,
    policy: Option<&dyn std::fmt::Display>,
) {
    const MESSAGE: &str = "store refuses slidelog's configuration; fix it (logged once until the store answers again)";
    match policy {
        Some(policy) => tracing::error!(store, op, error = %cause, policy = %policy, "{MESSAGE}"),
        None => tracing::error!(store, op, error = %cause, "{MESSAGE}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternating_failures_are_one_episode() {
        let episodes = Episodes::new(Duration::from_millis(50));
        for _ in 0..20 {
            episodes.failure(
                "memory",
                "check",
                &StoreError::Unavailable("x".into()),
                &"fail-open",
            );
            episodes.success("memory", true);
            assert!(
                episodes.is_open(),
                "recovery is not declared between failures"
            );
        }
        std::thread::sleep(Duration::from_millis(60));
        episodes.success("memory", true);
        assert!(!episodes.is_open());
    }

    #[test]
    fn an_episode_stays_open_while_part_of_the_store_is_down() {
        let episodes = Episodes::new(Duration::from_millis(20));
        let error = StoreError::Unavailable("cluster master known down".into());
        let asked = std::cell::Cell::new(0);
        let part_down = || {
            asked.set(asked.get() + 1);
            true
        };
        episodes.failure("redis-cluster", "check", &error, &"fail-open");
        for _ in 0..5 {
            // Only the live masters' keys for longer than the quiet period.
            std::thread::sleep(Duration::from_millis(25));
            for _ in 0..100 {
                episodes.success_unless("redis-cluster", true, part_down);
            }
            assert!(episodes.is_open(), "not over while a node is down");
            episodes.failure("redis-cluster", "check", &error, &"fail-open");
        }
        assert!(
            (5..=10).contains(&asked.get()),
            "asked once per quiet period, not per call: {}",
            asked.get()
        );
        std::thread::sleep(Duration::from_millis(25));
        episodes.success_unless("redis-cluster", true, || false);
        assert!(!episodes.is_open(), "over once every node is up");
    }

    #[test]
    fn a_misconfiguration_is_kept_until_a_decision_succeeds() {
        let episodes = Episodes::new(Duration::ZERO);
        episodes.failure(
            "redis",
            "ping",
            &StoreError::Timeout(Duration::from_millis(1)),
            &"fail-open",
        );
        episodes.failure(
            "redis",
            "check",
            &StoreError::Misconfigured("NOPERM".into()),
            &"fail-open",
        );
        episodes.success("redis", false);
        assert_eq!(
            episodes.misconfiguration().as_deref(),
            Some("store misconfigured: NOPERM")
        );
        episodes.success("redis", true);
        assert_eq!(episodes.misconfiguration(), None);
        assert!(!episodes.is_open());
    }
}
