//! The local rejection cache: a rejected request is answered again without
//! the store until the store said it could first fit (docs/design.md §2:
//! `retry_after_ms` is exactly that moment).
//!
//! Why it is exact. A rejection appends nothing, and no instance can admit
//! into a log that has no room before its records expire: the log of a
//! rejected request only gets fuller until `retry_after_ms` has passed on the
//! store's clock. The store decided some time after this instance *sent* the
//! request, so counting the wait on the instance's monotonic clock from the
//! send can only end it early, never late. Two things can make room sooner:
//! - a reset. A reset through this limiter forgets the key here; a reset
//!   through another instance (or `redis-cli DEL`) is not seen, and this
//!   instance keeps rejecting that key for at most the cached wait. Turn the
//!   cache off where resets from elsewhere must take effect at once;
//! - a settle down or a refund (docs/design.md §4.6). A settle or charge
//!   through this limiter forgets the key here, before and after the store
//!   call; one through another instance is not seen, as a reset is not;
//! - a smaller cost: it may fit sooner, so an entry answers only requests on
//!   the same key and limits whose cost for every limit is at least the one
//!   it was made for (the answer then reports the cached, earlier wait: never
//!   a later `retry_after_ms` than the store's).
//!
//! An entry is kept only when the wait is for the oldest unit counted against
//! the deciding limit (`count + cost - max == 1`, the usual full log): then
//! nothing the decision reports changes until the wait ends, so with one
//! instance every field of a local answer is the store's own (`count`,
//! `remaining`, and `retry_after_ms`/`reset_after_ms` less the time elapsed).
//! When older units expire first, the count would move, and the rejection is
//! not cached.
//!
//! It is exact only on the store's clock (`TimeMode::Store`, `Now::Server`):
//! a decision at an explicit or caller-read time is never cached or answered.
//! Memory is bounded: at the capacity the expired entries are swept, then
//! arbitrary ones dropped (a dropped entry only costs a store call).

use parking_lot::Mutex;
use slidelog_core::{Clock, Decision, Limit, MonotonicClock, Request};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries kept by default (about 100 B each plus the key).
pub const DEFAULT_CAPACITY: usize = 100_000;

/// Lock shards: rejections of different keys rarely wait on one another.
const SHARDS: usize = 16;

/// Whether a [`Limiter`](crate::Limiter) keeps a rejection cache.
#[derive(Debug, Clone, Default)]
pub enum Setting {
    /// On with [`DEFAULT_CAPACITY`] entries wherever it is exact.
    #[default]
    Default,
    /// Off: every decision goes to the store.
    Off,
    /// This cache.
    With(Arc<RejectionCache>),
}

impl Setting {
    /// Returns the cache of a limiter whose store and clock make it `exact`.
    pub fn resolve(self, exact: bool) -> Option<Arc<RejectionCache>> {
        match self {
            Self::Default if exact => Some(Arc::new(RejectionCache::default())),
            Self::Default | Self::Off => None,
            Self::With(cache) => Some(cache),
        }
    }
}

/// What was cached for one set of limits of a key.
#[derive(Debug, Clone)]
struct Entry {
    limits: Vec<Limit>,
    /// The cost per limit the rejection was for.
    costs: Vec<u64>,
    decision: Decision,
    /// When the rejected request was sent, in ms on the cache's clock.
    sent: u64,
}

impl Entry {
    /// Returns the local answer at `at` (ms on the cache's clock, `slack`
    /// added to the elapsed time), or `None` once the wait may have ended.
    fn answer(&self, at: u64, slack: u64) -> Option<Decision> {
        // Rounded up: the store's clock may have moved by at most this much.
        let elapsed_ms = at.saturating_sub(self.sent) + slack;
        let retry = self.decision.retry_after_ms.checked_sub(elapsed_ms)?;
        (retry > 0).then(|| Decision {
            retry_after_ms: retry,
            reset_after_ms: self.decision.reset_after_ms.saturating_sub(elapsed_ms),
            ..self.decision
        })
    }
}

/// The moment a request was sent, and the reset generation then: a reply
/// to a request sent before a reset is not cached.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    sent: u64,
    generation: u64,
}

/// Counters of the cache (all since it was made).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RejectionCacheStats {
    /// Decisions answered locally, without the store.
    pub local_answers: u64,
    /// Store rejections kept.
    pub cached: u64,
    /// Entries dropped at the capacity before their wait ended.
    pub evicted: u64,
    /// Entries held now.
    pub entries: u64,
}

/// One lock shard: key -> its entries (one per set of limits and costs).
type Shard = Mutex<HashMap<String, Vec<Entry>>>;

/// The cache of one [`Limiter`](crate::Limiter) (see the module doc).
#[derive(Debug)]
pub struct RejectionCache {
    shards: Box<[Shard]>,
    hasher: std::collections::hash_map::RandomState,
    per_shard: usize,
    clock: Arc<dyn Clock>,
    /// Added to every elapsed time: 1 ms for a clock whose readings drop
    /// a fraction of a ms (two readings may be up to 1 ms short of the
    /// time between them), 0 for one that moves in exact steps.
    slack_ms: u64,
    /// Bumped by every reset, so a reply that raced it is not kept.
    generation: AtomicU64,
    local_answers: AtomicU64,
    cached: AtomicU64,
    evicted: AtomicU64,
}

impl Default for RejectionCache {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl RejectionCache {
    /// Returns a cache of at most `capacity` entries (at least one per
    /// shard) on the process's monotonic clock, counting every wait 1 ms
    /// short (the clock reads whole ms: two readings can fall up to 1 ms
    /// short of the time between them, and a wait must never end late).
    pub fn new(capacity: usize) -> Self {
        Self {
            slack_ms: 1,
            ..Self::with_clock(capacity, Arc::new(MonotonicClock::new()))
        }
    }

    /// Returns a cache on `clock`, a clock that moves in exact ms steps (a
    /// [`ManualClock`](slidelog_core::ManualClock) that tests drive in step
    /// with a store's clock): elapsed times are taken as read.
    pub fn with_clock(capacity: usize, clock: Arc<dyn Clock>) -> Self {
        Self {
            slack_ms: 0,
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            clock,
            generation: AtomicU64::new(0),
            local_answers: AtomicU64::new(0),
            cached: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &str) -> &Shard {
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// Returns the local answer to `request` if a cached rejection covers it; else
    /// the ticket to pass to [`observe`](Self::observe) with the store's
    /// answer. Read just before the request is sent.
    pub fn answer(&self, request: &Request) -> Result<Decision, Ticket> {
        let generation = self.generation.load(Ordering::Acquire);
        let now = self.clock.now_ms();
        let mut shard = self.shard(request.key()).lock();
        if let Some(entries) = shard.get_mut(request.key()) {
            let mut found = None;
            entries.retain(|e| match e.answer(now, self.slack_ms) {
                None => false,
                Some(d) => {
                    if found.is_none() && covers(e, request) {
                        found = Some(d);
                    }
                    true
                }
            });
            if entries.is_empty() {
                shard.remove(request.key());
            }
            if let Some(d) = found {
                self.local_answers.fetch_add(1, Ordering::Relaxed);
                return Ok(d);
            }
        }
        Err(Ticket {
            sent: now,
            generation,
        })
    }

    /// Keeps the store's `decision` on `request` (sent at `ticket`) when it
    /// is a rejection whose report holds still until its wait ends.
    pub fn observe(&self, request: &Request, decision: &Decision, ticket: Ticket) {
        if decision.allowed || decision.degraded || decision.retry_after_ms < 2 {
            return;
        }
        let Some(i) = request
            .limits()
            .iter()
            .position(|l| l.max() == decision.limit && l.window_ms() == decision.window_ms)
        else {
            return;
        };
        // The wait is for the k-th oldest unit, k = count + cost - max.
        if decision.count + request.cost_for(i) != decision.limit + 1 {
            return;
        }
        let entry = Entry {
            limits: request.limits().to_vec(),
            costs: (0..request.limits().len())
                .map(|i| request.cost_for(i))
                .collect(),
            decision: *decision,
            sent: ticket.sent,
        };
        let mut shard = self.shard(request.key()).lock();
        if self.generation.load(Ordering::Acquire) != ticket.generation {
            return; // a reset ran while this request was out
        }
        if shard.len() >= self.per_shard && !shard.contains_key(request.key()) {
            self.make_room(&mut shard);
        }
        let entries = shard.entry(request.key().to_owned()).or_default();
        // One entry per limits and costs: the newer rejection replaces it.
        entries.retain(|e| e.limits != entry.limits || e.costs != entry.costs);
        entries.push(entry);
        self.cached.fetch_add(1, Ordering::Relaxed);
    }

    /// Forgets every entry of `key` (a reset through this limiter).
    pub fn forget(&self, key: &str) {
        let mut shard = self.shard(key).lock();
        self.generation.fetch_add(1, Ordering::AcqRel);
        shard.remove(key);
    }

    /// Returns the counters.
    pub fn stats(&self) -> RejectionCacheStats {
        let entries = self
            .shards
            .iter()
            .map(|s| s.lock().values().map(|v| v.len() as u64).sum::<u64>())
            .sum();
        RejectionCacheStats {
            local_answers: self.local_answers.load(Ordering::Relaxed),
            cached: self.cached.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            entries,
        }
    }

    /// At the capacity: sweep the expired, then drop a tenth, arbitrarily.
    fn make_room(&self, shard: &mut HashMap<String, Vec<Entry>>) {
        let now = self.clock.now_ms();
        shard.retain(|_, v| {
            v.retain(|e| e.answer(now, self.slack_ms).is_some());
            !v.is_empty()
        });
        if shard.len() >= self.per_shard {
            let drop: Vec<String> = shard
                .keys()
                .take(self.per_shard / 10 + 1)
                .cloned()
                .collect();
            for k in drop {
                shard.remove(&k);
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Returns true when `entry` may answer `request`: same limits, and a cost at least
/// the cached one for every limit (a smaller cost may fit sooner).
fn covers(entry: &Entry, request: &Request) -> bool {
    entry.limits == request.limits()
        && entry
            .costs
            .iter()
            .enumerate()
            .all(|(i, &c)| request.cost_for(i) >= c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::ManualClock;

    fn rejected(count: u64, max: u64, retry: u64) -> Decision {
        Decision {
            allowed: false,
            limit: max,
            window_ms: 1_000,
            count,
            remaining: max.saturating_sub(count),
            retry_after_ms: retry,
            reset_after_ms: 900,
            degraded: false,
            record: None,
        }
    }

    #[test]
    fn answers_until_the_wait_ends_and_only_for_costs_at_least_the_cached() {
        let clock = ManualClock::new(0);
        let cache = RejectionCache::with_clock(10, Arc::new(clock.clone()));
        let limit = Limit::new(5, 1_000).unwrap();
        let r2 = Request::new("k", vec![limit], 2).unwrap();
        let t = cache.answer(&r2).unwrap_err();
        cache.observe(&r2, &rejected(4, 5, 300), t);
        clock.set(100);
        let d = cache.answer(&r2).unwrap();
        assert_eq!((d.retry_after_ms, d.reset_after_ms, d.count), (200, 800, 4));
        let r3 = Request::new("k", vec![limit], 3).unwrap();
        assert_eq!(cache.answer(&r3).unwrap().retry_after_ms, 200);
        let r1 = Request::new("k", vec![limit], 1).unwrap();
        assert!(cache.answer(&r1).is_err(), "a smaller cost may fit sooner");
        clock.set(300);
        assert!(cache.answer(&r2).is_err(), "the wait has ended");
        assert_eq!(cache.stats().entries, 0);
    }

    #[test]
    fn a_count_that_would_move_a_reset_and_a_racing_reply_are_not_kept() {
        let cache = RejectionCache::new(10);
        let r = Request::new("k", vec![Limit::new(5, 1_000).unwrap()], 1).unwrap();
        // Over-full (a lowered max): older units expire before the wait ends.
        let t = cache.answer(&r).unwrap_err();
        cache.observe(&r, &rejected(7, 5, 300), t);
        assert!(cache.answer(&r).is_err());
        let t = cache.answer(&r).unwrap_err();
        cache.observe(&r, &rejected(5, 5, 300), t);
        assert!(cache.answer(&r).is_ok());
        cache.forget("k");
        assert!(cache.answer(&r).is_err());
        let t = cache.answer(&r).unwrap_err();
        cache.forget("k");
        cache.observe(&r, &rejected(5, 5, 300), t);
        assert!(cache.answer(&r).is_err(), "sent before the reset");
    }

    #[test]
    fn memory_is_bounded() {
        let cache = RejectionCache::new(64);
        for i in 0..1_000 {
            let r = Request::new(format!("k{i}"), vec![Limit::new(1, 1_000).unwrap()], 1).unwrap();
            let t = cache.answer(&r).unwrap_err();
            cache.observe(&r, &rejected(1, 1, 50_000), t);
        }
        let s = cache.stats();
        assert!(s.entries <= 64 + SHARDS as u64, "{s:?}");
        assert!(s.evicted > 0);
    }
}
