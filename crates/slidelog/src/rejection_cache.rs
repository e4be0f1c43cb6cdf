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
//!   a later `retry_after_ms` than the store's). A smaller cost the store
//!   admits through this limiter drops the key's entries (their counts are
//!   no longer the store's); one admitted through another instance, or
//!   whose reply overtakes an older rejection's here, is not seen.
//!
//! An entry is kept only when the wait is for the oldest unit counted against
//! the deciding limit (`count + cost - max == 1`, the usual full log): then
//! nothing the decision reports changes until the wait ends, so with one
//! instance every field of a local answer is the store's own (`count`,
//! `remaining`, and `retry_after_ms`/`reset_after_ms` less the time elapsed).
//! When older units expire first, the count would move, and the rejection is
//! not cached.
//!
//! Every limit's state ([`RejectionCache::answer_each`], for
//! [`Limiter::decide_each`](crate::Limiter::decide_each): the layer, HTTP).
//! A rejection the store answered with every limit's counts keeps them, and
//! a local answer reports another limit's counts only while they provably
//! are the store's own, by the argument above: a limit with nothing counted
//! (nothing is admitted on the key while it is full), and a limit that
//! refused too with a wait for its own oldest unit, until that wait ends.
//! Any other limit's count falls as its records expire, at moments the
//! store does not report (its reply says when a limit would admit and when
//! its log is empty, not when its oldest record goes): such a limit is
//! answered without counts (`null`, and no `RateLimit` item), never with a
//! number that may have become stale. A store answer gives them all again.
//! The counts cost 32 B per limit of an entry that has such a limit, none
//! otherwise.
//!
//! It is exact only on the store's clock (`TimeMode::Store`, `Now::Server`):
//! a decision at an explicit or caller-read time is never cached or answered.
//! Memory is bounded: at the capacity the expired entries are swept, then
//! arbitrary ones dropped (a dropped entry only costs a store call).

use parking_lot::Mutex;
use slidelog_core::{
    Clock, Counts, Decision, Detailed, Limit, LimitState, MonotonicClock, Request,
};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries kept by default (an entry is 160 B plus its key with one limit,
/// 64 B more per further limit, and 32 B per limit when it keeps every
/// limit's counts: at most 1,632 B plus the key with 16 limits).
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
    limits: Box<[Limit]>,
    /// The cost per limit the rejection was for.
    costs: Box<[u64]>,
    /// The deciding limit's counts in the store's rejection (the rest of
    /// its decision: that limit, refused, not degraded, no record).
    decision: Counts,
    /// The deciding limit's position among `limits`.
    deciding: u8,
    /// Every limit's counts in the store's answer, kept only when another
    /// limit than the deciding one can be answered exactly (module doc).
    counts: Option<Box<[Counts]>>,
    /// When the rejected request was sent, in ms on the cache's clock.
    sent: u64,
}

impl Entry {
    /// Returns the elapsed time at `at` (ms on the cache's clock, `slack`
    /// added: rounded up, the store's clock may have moved by at most this
    /// much), while the wait has not ended.
    fn elapsed(&self, at: u64, slack: u64) -> Option<u64> {
        let elapsed_ms = at.saturating_sub(self.sent) + slack;
        (self.decision.retry_after_ms > elapsed_ms).then_some(elapsed_ms)
    }

    /// Returns the local answer at `at`, or `None` once the wait may have ended.
    fn answer(&self, at: u64, slack: u64) -> Option<Decision> {
        let elapsed_ms = self.elapsed(at, slack)?;
        let limit = self.limits.get(usize::from(self.deciding))?;
        Some(Decision {
            allowed: false,
            limit: limit.max(),
            window_ms: limit.window_ms(),
            count: self.decision.count,
            remaining: self.decision.remaining,
            retry_after_ms: self.decision.retry_after_ms - elapsed_ms,
            reset_after_ms: self.decision.reset_after_ms.saturating_sub(elapsed_ms),
            degraded: false,
            blocked: false,
            record: None,
        })
    }

    /// Returns the local answer with every limit's state at `at`: the
    /// deciding limit's, and the others' while they are provably the
    /// store's own (see [`exact_at`]).
    fn answer_each(&self, at: u64, slack: u64) -> Option<Detailed> {
        let elapsed_ms = self.elapsed(at, slack)?;
        let decision = self.answer(at, slack)?;
        let deciding = usize::from(self.deciding);
        let limits = self
            .limits
            .iter()
            .enumerate()
            .map(|(i, &limit)| {
                let counts = if i == deciding {
                    Some(Counts {
                        count: decision.count,
                        remaining: decision.remaining,
                        retry_after_ms: decision.retry_after_ms,
                        reset_after_ms: decision.reset_after_ms,
                    })
                } else {
                    let stored = self.counts.as_deref().and_then(|c| c.get(i));
                    stored.and_then(|c| exact_at(c, &limit, self.costs[i], elapsed_ms))
                };
                LimitState { limit, counts }
            })
            .collect();
        Some(Detailed { decision, limits })
    }

    /// Returns the bytes this entry holds (its heap parts included; the
    /// key and the map's own slot not).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + std::mem::size_of_val(&*self.limits)
            + std::mem::size_of_val(&*self.costs)
            + self.counts.as_deref().map_or(0, std::mem::size_of_val)
    }
}

/// Returns a non-deciding limit's counts `elapsed_ms` after the store
/// answered `stored` for it (the request cost `cost` there), when they are
/// still the store's own: nothing counted (nothing is admitted on the key
/// while the entry holds), or a refusal whose wait is for this limit's own
/// oldest unit (`count + cost - max == 1`) that has not ended. `None`: the
/// count may have fallen by an expiry the store did not report.
fn exact_at(stored: &Counts, limit: &Limit, cost: u64, elapsed_ms: u64) -> Option<Counts> {
    if stored.count == 0 {
        return Some(*stored);
    }
    let oldest_unit = stored.retry_after_ms > 0 && stored.count + cost == limit.max() + 1;
    (oldest_unit && stored.retry_after_ms > elapsed_ms).then(|| Counts {
        retry_after_ms: stored.retry_after_ms - elapsed_ms,
        reset_after_ms: stored.reset_after_ms.saturating_sub(elapsed_ms),
        ..*stored
    })
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
        self.lookup(request, Entry::answer)
    }

    /// [`answer`](Self::answer) with every limit's state: the deciding
    /// limit's, and each other limit's while the stored counts are provably
    /// still the store's own (module doc); the others' counts empty.
    pub fn answer_each(&self, request: &Request) -> Result<Detailed, Ticket> {
        self.lookup(request, Entry::answer_each)
    }

    /// Returns what `local` makes of the first live entry covering
    /// `request`, dropping the entries whose wait has ended.
    fn lookup<T>(
        &self,
        request: &Request,
        local: impl Fn(&Entry, u64, u64) -> Option<T>,
    ) -> Result<T, Ticket> {
        let generation = self.generation.load(Ordering::Acquire);
        let now = self.clock.now_ms();
        let mut shard = self.shard(request.key()).lock();
        if let Some(entries) = shard.get_mut(request.key()) {
            let mut found = None;
            entries.retain(|e| {
                if e.elapsed(now, self.slack_ms).is_none() {
                    return false;
                }
                if found.is_none() && covers(e, request) {
                    found = local(e, now, self.slack_ms);
                }
                true
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
        self.keep(request, decision, None, ticket);
    }

    /// [`observe`](Self::observe) of an answer with every limit's state
    /// ([`Store::decide_each`](crate::store::Store::decide_each)): the
    /// other limits' counts are kept too, when one of them can be answered
    /// exactly later ([`answer_each`](Self::answer_each)).
    pub fn observe_each(&self, request: &Request, each: &Detailed, ticket: Ticket) {
        self.keep(request, &each.decision, Some(&each.limits), ticket);
    }

    fn keep(
        &self,
        request: &Request,
        decision: &Decision,
        states: Option<&[LimitState]>,
        ticket: Ticket,
    ) {
        if decision.degraded {
            return;
        }
        if decision.allowed {
            // A smaller cost than a cached one was admitted: the key's log
            // moved, so its entries' counts are no longer the store's.
            let mut shard = self.shard(request.key()).lock();
            if !shard.is_empty() {
                shard.remove(request.key());
            }
            return;
        }
        if decision.retry_after_ms < 2 {
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
        let costs: Box<[u64]> = (0..request.limits().len())
            .map(|i| request.cost_for(i))
            .collect();
        // Kept only when some other limit may be answered from them.
        let counts = states
            .filter(|s| s.len() == costs.len())
            .and_then(|s| s.iter().map(|s| s.counts).collect::<Option<Box<[_]>>>())
            .filter(|counts| {
                let other = |j: usize| {
                    j != i && exact_at(&counts[j], &request.limits()[j], costs[j], 0).is_some()
                };
                (0..counts.len()).any(other)
            });
        let entry = Entry {
            limits: request.limits().into(),
            costs,
            decision: Counts {
                count: decision.count,
                remaining: decision.remaining,
                retry_after_ms: decision.retry_after_ms,
                reset_after_ms: decision.reset_after_ms,
            },
            deciding: i as u8,
            counts,
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
        entries.retain(|e| *e.limits != *entry.limits || *e.costs != *entry.costs);
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
            v.retain(|e| e.elapsed(now, self.slack_ms).is_some());
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
    *entry.limits == *request.limits()
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
            blocked: false,
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
    fn another_limit_is_answered_only_while_its_count_cannot_have_moved() {
        let limit = Limit::new(5, 1_000).unwrap();
        let counts = |count, retry_after_ms| Counts {
            count,
            remaining: 5u64.saturating_sub(count),
            retry_after_ms,
            reset_after_ms: 900,
        };
        // Nothing counted: stays nothing.
        assert_eq!(exact_at(&counts(0, 0), &limit, 1, 500), Some(counts(0, 0)));
        // Full, waiting for its own oldest unit: exact until that wait ends.
        let full = exact_at(&counts(5, 300), &limit, 1, 100).unwrap();
        assert_eq!(
            (full.count, full.retry_after_ms, full.reset_after_ms),
            (5, 200, 800)
        );
        assert_eq!(exact_at(&counts(5, 300), &limit, 1, 300), None);
        // Waiting for its second oldest unit: the oldest may go first.
        assert_eq!(exact_at(&counts(5, 300), &limit, 2, 0), None);
        // Admitting with units counted: they expire when the store did not say.
        assert_eq!(exact_at(&counts(3, 0), &limit, 1, 0), None);
    }

    #[test]
    fn an_entry_keeps_other_counts_only_when_they_can_be_answered() {
        let clock = ManualClock::new(0);
        let cache = RejectionCache::with_clock(10, Arc::new(clock.clone()));
        let limits = vec![Limit::new(5, 1_000).unwrap(), Limit::new(9, 1_000).unwrap()];
        let r = Request::with_costs("k", limits.clone(), vec![1, 1]).unwrap();
        let each = |other: Counts| Detailed {
            decision: rejected(5, 5, 300),
            limits: vec![
                LimitState {
                    limit: limits[0],
                    counts: Some(Counts {
                        count: 5,
                        remaining: 0,
                        retry_after_ms: 300,
                        reset_after_ms: 900,
                    }),
                },
                LimitState {
                    limit: limits[1],
                    counts: Some(other),
                },
            ],
        };
        let empty = Counts {
            count: 0,
            remaining: 9,
            retry_after_ms: 0,
            reset_after_ms: 0,
        };
        let t = cache.answer(&r).unwrap_err();
        cache.observe_each(&r, &each(empty), t);
        clock.set(100);
        let d = cache.answer_each(&r).unwrap();
        assert_eq!(d.limits[0].counts.unwrap().retry_after_ms, 200);
        assert_eq!(d.limits[1].counts, Some(empty));
        // Stale-prone other counts are not even kept.
        let some = Counts {
            count: 4,
            remaining: 5,
            ..empty
        };
        cache.forget("k");
        let t = cache.answer(&r).unwrap_err();
        cache.observe_each(&r, &each(some), t);
        let shard = cache.shard("k").lock();
        assert!(shard["k"][0].counts.is_none());
        drop(shard);
        assert_eq!(cache.answer_each(&r).unwrap().limits[1].counts, None);
        // An admission on the key drops its entries: their counts moved.
        let t = Ticket {
            sent: 100,
            generation: cache.generation.load(Ordering::Acquire),
        };
        cache.observe(
            &r,
            &Decision {
                allowed: true,
                ..rejected(5, 5, 0)
            },
            t,
        );
        assert!(cache.answer_each(&r).is_err());
    }

    #[test]
    fn bytes_per_entry() {
        let named = |i: usize| {
            Limit::new(60, 60_000)
                .unwrap()
                .named(&format!("l{i}"))
                .unwrap()
        };
        let bytes = |n: usize, with_counts: bool| {
            let limits: Vec<Limit> = (0..n).map(named).collect();
            let r = Request::with_costs("k", limits, vec![1; n]).unwrap();
            let counts = Counts {
                count: 0,
                remaining: 60,
                retry_after_ms: 0,
                reset_after_ms: 0,
            };
            let entry = Entry {
                limits: r.limits().into(),
                costs: vec![1; n].into(),
                decision: counts,
                deciding: 0,
                counts: with_counts.then(|| vec![counts; n].into()),
                sent: 0,
            };
            entry.bytes()
        };
        // The layout before every limit's counts were kept: two Vecs, the
        // decision and the send time, with the limits and costs on the heap.
        let before = |n: usize| {
            2 * std::mem::size_of::<Vec<u64>>()
                + std::mem::size_of::<Decision>()
                + 8
                + n * (std::mem::size_of::<Limit>() + 8)
        };
        for n in [1, 2, 16] {
            eprintln!(
                "limits {n}: before {} B, now {} B without counts, {} B with",
                before(n),
                bytes(n, false),
                bytes(n, true)
            );
            assert!(bytes(n, false) <= before(n));
            assert_eq!(
                bytes(n, true),
                bytes(n, false) + n * std::mem::size_of::<Counts>()
            );
        }
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
