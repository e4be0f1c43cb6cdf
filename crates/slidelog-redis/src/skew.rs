//! Clock skew between this host and Redis, found by comparing the clocks:
//! a reading of Redis `TIME` taken between two readings of this host's clock
//! (`sent <= redis <= received` when both clocks agree) that falls outside
//! that bracket by more than the skew margin. Readings come for free with
//! every decision on Redis `TIME` (the script answers the time it used),
//! and from a `TIME` sent at connect and after a check was refused by its
//! deadline. A refusal itself is never taken for skew: a check that waited
//! in a queue past its deadline is refused on one clock too.
//!
//! The deadline a check carries is on this host's clock (docs/design.md §6):
//! Redis ahead by more than the margin refuses checks that are still in
//! time; Redis behind can record a check after its caller gave up. Either
//! is reported once per store, at warn level, so an operator fixes the clocks.

use redis::aio::ConnectionLike;
use slidelog_core::{Clock, SystemClock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How far Redis's clock was found from this host's, beyond the bracket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skew {
    /// Redis's clock is ahead by at least this many ms.
    Ahead(u64),
    /// Redis's clock is behind by at least this many ms.
    Behind(u64),
}

/// The clock comparison of one store (see the module docs).
#[derive(Debug)]
pub(crate) struct ClockWatch {
    margin: Duration,
    kind: &'static str,
    warned: AtomicBool,
    /// True while a `TIME` reading is under way.
    measuring: AtomicBool,
    /// When (host ms) the last `TIME` reading started.
    last_measured_ms: AtomicU64,
}

/// Fewest ms between two `TIME` readings sent after refusals.
const MEASURE_EVERY_MS: u64 = 1_000;

impl ClockWatch {
    /// A watch that reports skew beyond `margin` for the store `kind`.
    pub(crate) fn new(margin: Duration, kind: &'static str) -> Self {
        Self {
            margin,
            kind,
            warned: AtomicBool::new(false),
            measuring: AtomicBool::new(false),
            last_measured_ms: AtomicU64::new(0),
        }
    }

    /// Compares `redis_ms`, read by Redis between `sent_ms` and
    /// `received_ms` of this host's clock; warns once when it is off.
    pub(crate) fn observe(&self, sent_ms: u64, redis_ms: u64, received_ms: u64) -> Option<Skew> {
        let margin = self.margin.as_millis() as u64;
        let skew = if redis_ms > received_ms + margin {
            Skew::Ahead(redis_ms - received_ms)
        } else if redis_ms + margin < sent_ms {
            Skew::Behind(sent_ms - redis_ms)
        } else {
            return None;
        };
        if !self.warned.swap(true, Ordering::Relaxed) {
            let (way, by, effect) = match skew {
                Skew::Ahead(ms) => ("ahead of", ms, "checks may be refused by their deadline"),
                Skew::Behind(ms) => ("behind", ms, "a check may be recorded after it timed out"),
            };
            tracing::warn!(
                store = self.kind,
                margin = ?self.margin,
                "Redis's clock is {way} this host's by at least {by} ms, more than the skew \
                 margin: {effect} (fix the clocks)"
            );
        }
        Some(skew)
    }

    /// Reads Redis `TIME` over `conn` (bounded by `timeout`) and compares.
    pub(crate) async fn measure<C: ConnectionLike>(
        &self,
        conn: &mut C,
        timeout: Duration,
    ) -> Option<Skew> {
        let sent_ms = SystemClock.now_ms();
        let cmd = redis::cmd("TIME");
        let time = cmd.query_async::<(u64, u64)>(conn);
        let (secs, micros) = tokio::time::timeout(timeout, time).await.ok()?.ok()?;
        let redis_ms = secs * 1_000 + micros / 1_000;
        self.observe(sent_ms, redis_ms, SystemClock.now_ms())
    }

    /// [`ClockWatch::measure`] on its own task, unless one runs already or
    /// one started less than a second ago.
    pub(crate) fn measure_soon<C>(self: &std::sync::Arc<Self>, mut conn: C, timeout: Duration)
    where
        C: ConnectionLike + Send + 'static,
    {
        let now = SystemClock.now_ms();
        let last = self.last_measured_ms.load(Ordering::Relaxed);
        if now < last + MEASURE_EVERY_MS || self.measuring.swap(true, Ordering::AcqRel) {
            return;
        }
        self.last_measured_ms.store(now, Ordering::Relaxed);
        let watch = self.clone();
        tokio::spawn(async move {
            watch.measure(&mut conn, timeout).await;
            watch.measuring.store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_clock_is_never_skewed_and_a_clock_outside_the_bracket_is() {
        let watch = ClockWatch::new(Duration::from_millis(20), "test");
        // A slow reply widens the bracket; it never looks like skew.
        assert_eq!(watch.observe(1_000, 1_000, 1_000), None);
        assert_eq!(watch.observe(1_000, 1_050, 5_000), None);
        assert_eq!(watch.observe(1_000, 1_020, 1_000), None);
        assert_eq!(watch.observe(1_000, 1_021, 1_000), Some(Skew::Ahead(21)));
        assert_eq!(watch.observe(1_000, 900, 1_010), Some(Skew::Behind(100)));
    }
}
