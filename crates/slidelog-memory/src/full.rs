//! The memory store's full episodes: from the first new key refused at the
//! key cap or the memory budget until the store has room again and has
//! refused no key for [`QUIET`]. One warning line opens an episode (naming
//! the bound and the time until the first held log expires) and one info
//! line closes it, however many keys were refused in between: a store that
//! sits at its bound refuses every new key, and a line per refusal would
//! bury the log. The flag and the refusal count feed the service's
//! `slidelog_memory_full` and `slidelog_memory_full_refusals_total`.
//!
//! A store at its budget frees bytes as records expire inside held logs,
//! so it may admit a new key now and then refuse the next: the quiet period
//! keeps that one episode rather than one per admitted key.

use parking_lot::Mutex;
use slidelog_core::{FullLimit, StoreError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the store must refuse no new key, with room again, before an
/// episode is over.
pub const QUIET: Duration = Duration::from_secs(10);

/// The open or closed episode and the refusals so far.
#[derive(Debug, Default)]
pub(crate) struct FullEpisodes {
    /// True while an episode is open: what the admission of a new key reads
    /// (one load; the lock below only while an episode is open).
    open: AtomicBool,
    /// New keys refused since the store was made.
    refusals: AtomicU64,
    episode: Mutex<Option<Episode>>,
}

#[derive(Debug)]
struct Episode {
    started: Instant,
    last_refusal: Instant,
    /// `refusals` when the episode opened.
    refusals_before: u64,
}

impl FullEpisodes {
    /// True while an episode is open: new keys are being refused.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// New keys refused since the store was made.
    pub(crate) fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Counts a refused key and, when this opens an episode, logs the one
    /// warning line of the episode. `error` is the [`StoreError::Full`]
    /// answered; `held` the keys and bytes held.
    pub(crate) fn refused(&self, error: &StoreError, held: (usize, usize)) {
        let before = self.refusals.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut episode = self.episode.lock();
        if let Some(open) = episode.as_mut() {
            open.last_refusal = now;
            return;
        }
        *episode = Some(Episode {
            started: now,
            last_refusal: now,
            refusals_before: before,
        });
        self.open.store(true, Ordering::Relaxed);
        drop(episode);
        log_opening(error, held);
    }

    /// The store has room for a new key (one was just admitted, or a sweep
    /// left it below both bounds): closes an open episode once no key has
    /// been refused for [`QUIET`], with one info line.
    pub(crate) fn room(&self) {
        if !self.is_open() {
            return;
        }
        let mut episode = self.episode.lock();
        let Some(open) = episode.as_ref() else {
            return;
        };
        if open.last_refusal.elapsed() < QUIET {
            return;
        }
        let refused = self.refusals().saturating_sub(open.refusals_before);
        tracing::info!(
            lasted = ?open.started.elapsed(),
            refused_keys = refused,
            "memory store has room for new keys again"
        );
        *episode = None;
        self.open.store(false, Ordering::Relaxed);
    }
}

/// The warning that opens an episode: the bound reached (the budget or the
/// cap, with its flag), what is held, and the time until the first held log
/// expires, which is when a key surely fits again.
fn log_opening(error: &StoreError, (keys, bytes): (usize, usize)) {
    let StoreError::Full {
        limit,
        retry_after_ms,
    } = error
    else {
        return;
    };
    let budget = match limit {
        FullLimit::Keys(_) => "key cap (--memory-key-cap)",
        FullLimit::Bytes(_) => "memory budget (--memory-limit)",
        FullLimit::Controls(_) => "block and override cap (--max-blocks)",
    };
    let first_expiry = retry_after_ms.map_or_else(
        || "unknown (no held log expires)".to_owned(),
        |ms| format!("{:.3} s", ms as f64 / 1e3),
    );
    tracing::warn!(
        bound = %limit,
        keys,
        bytes,
        first_log_expires_in = %first_expiry,
        retry_after_s = error.full_retry_after_secs(),
        "memory store full at its {budget}: new keys are refused (503, Retry-After = the time \
         until the first held log expires, at most {} s), held keys are decided exactly; \
         logged once per episode",
        slidelog_core::error::FULL_RETRY_AFTER_MAX_SECS
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> StoreError {
        StoreError::Full {
            limit: FullLimit::Bytes(1 << 20),
            retry_after_ms: Some(90_000),
        }
    }

    #[test]
    fn an_episode_opens_once_and_closes_only_after_quiet() {
        let episodes = FullEpisodes::default();
        assert!(!episodes.is_open());
        episodes.room();
        for _ in 0..5 {
            episodes.refused(&full(), (3, 4_096));
            // Room right after a refusal does not close it: the store flaps.
            episodes.room();
        }
        assert!(episodes.is_open());
        assert_eq!(episodes.refusals(), 5);
        // A refusal older than the quiet period: room closes the episode.
        let mut episode = episodes.episode.lock();
        let open = episode.as_mut().unwrap();
        open.last_refusal = open.last_refusal.checked_sub(QUIET).unwrap();
        drop(episode);
        episodes.room();
        assert!(!episodes.is_open());
        episodes.refused(&full(), (3, 4_096));
        assert!(episodes.is_open());
        assert_eq!(episodes.refusals(), 6);
    }
}
