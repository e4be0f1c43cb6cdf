//! Time behind a small trait: the system clock in ms, a fast monotonic
//! process clock for the in-memory store, and a manual clock that tests move
//! by hand so that every decision is deterministic. Beside them, a
//! [`Stopwatch`] on that fast clock times calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of "now" in Unix milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The process's wall clock (`SystemTime`), as `time.Now().UnixMilli()`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        // A clock before 1970 reads as 0: such a clock never frees capacity.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// The process clock of the in-memory store: Unix ms read through a
/// TSC-calibrated monotonic clock (`quanta`), anchored to the wall clock when
/// created.
///
/// Why not [`SystemClock`]: reading the wall clock costs ~120 ns on some
/// virtual machines, more than the whole decision; this reads in ~25 ns. It
/// never steps backwards, and does not follow wall-clock steps (NTP): the
/// memory store compares only times of its own process, so that is what it
/// needs. Use [`SystemClock`] where times from several processes are compared.
#[derive(Debug, Clone)]
pub struct MonotonicClock {
    clock: quanta::Clock,
    anchor: quanta::Instant,
    anchor_unix_ms: u64,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock {
    /// A clock that reads the wall clock now and counts monotonic time from here.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let anchor = clock.now();
        Self {
            anchor_unix_ms: SystemClock.now_ms(),
            anchor,
            clock,
        }
    }
}

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        let elapsed = self.clock.now().saturating_duration_since(self.anchor);
        self.anchor_unix_ms + elapsed.as_millis() as u64
    }
}

/// A stopwatch for timing calls: monotonic, read through the same
/// TSC-calibrated clock as [`MonotonicClock`] (`quanta`), in nanoseconds.
///
/// Why not [`std::time::Instant`]: timing a call reads the clock twice, and
/// `clock_gettime` (even through the vDSO) costs several times a TSC read on
/// virtual machines; a limiter times every decision it reports.
#[derive(Debug, Clone, Default)]
pub struct Stopwatch {
    clock: quanta::Clock,
}

/// When a call timed by a [`Stopwatch`] started: the clock's raw count
/// (TSC ticks), scaled to time only once, by [`Stopwatch::elapsed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(u64);

impl Stopwatch {
    /// A stopwatch (the clock's calibration is made once per process).
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the stopwatch: the start of a call.
    #[inline]
    pub fn start(&self) -> Tick {
        Tick(self.clock.raw())
    }

    /// The time since `started` (read from this stopwatch or a clone of
    /// it); zero, never negative, should the reading
    /// go backwards (another core's TSC).
    #[inline]
    pub fn elapsed(&self, started: Tick) -> Duration {
        self.clock.delta(started.0, self.clock.raw())
    }
}

/// A clock that moves only when told; clones share the same time.
#[derive(Debug, Default, Clone)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock that reads `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        Self {
            now: Arc::new(AtomicU64::new(start_ms)),
        }
    }

    /// Moves the clock forward by `by` (millisecond resolution).
    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }

    /// Sets the clock to `ms`, forwards or backwards.
    pub fn set(&self, ms: u64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }
}

/// Which clock decides what "now" is (docs/design.md §3): the one way every
/// crate names it. A limiter turns it into the per-call [`Now`](crate::Now)
/// ([`TimeMode::now`]); stores only ever see that.
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

impl TimeMode {
    /// Returns the time a decision made now is made at: [`Now::Server`](crate::Now::Server)
    /// on the store's clock, the caller's clock reading otherwise.
    pub fn now(&self) -> crate::Now {
        match self {
            Self::Store => crate::Now::Server,
            Self::Client(clock) => crate::Now::At(clock.now_ms()),
        }
    }

    /// Returns true on the store's own clock.
    pub fn is_store(&self) -> bool {
        matches!(self, Self::Store)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_mode_turns_into_the_per_call_now() {
        assert_eq!(TimeMode::Store.now(), crate::Now::Server);
        let client = TimeMode::Client(Arc::new(ManualClock::new(42)));
        assert_eq!(client.now(), crate::Now::At(42));
        assert!(TimeMode::default().is_store() && !client.is_store());
    }

    #[test]
    fn manual_clock_moves_only_when_told_and_clones_share_time() {
        let clock = ManualClock::new(1_000);
        let other = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        other.advance(Duration::from_millis(250));
        assert_eq!(clock.now_ms(), 1_250);
        clock.set(10);
        assert_eq!(other.now_ms(), 10);
    }

    #[test]
    fn monotonic_clock_follows_the_wall_clock_and_never_steps_back() {
        let clock = MonotonicClock::new();
        let mut last = clock.now_ms();
        assert!(last.abs_diff(SystemClock.now_ms()) < 1_000);
        for _ in 0..10_000 {
            let now = clock.now_ms();
            assert!(now >= last);
            last = now;
        }
        std::thread::sleep(Duration::from_millis(20));
        assert!(clock.now_ms() >= last + 19);
    }

    #[test]
    fn stopwatch_times_like_the_std_instant() {
        let stopwatch = Stopwatch::new();
        let before = std::time::Instant::now();
        let started = stopwatch.start();
        let after = std::time::Instant::now();
        assert!(stopwatch.elapsed(started) < Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(20));
        // Read inside the std readings: a call's time, within the TSC
        // calibration's error (well under 2%).
        let least = after.elapsed();
        let elapsed = stopwatch.elapsed(started);
        let most = before.elapsed();
        assert!(elapsed >= least.mul_f64(0.98), "{elapsed:?} < {least:?}");
        assert!(elapsed <= most.mul_f64(1.02), "{elapsed:?} > {most:?}");
        assert!(started <= stopwatch.start());
    }

    #[test]
    fn system_clock_is_in_milliseconds() {
        let now = SystemClock.now_ms();
        // After 2020-01-01 and before 2100-01-01, in ms.
        assert!(now > 1_577_836_800_000 && now < 4_102_444_800_000, "{now}");
    }
}
