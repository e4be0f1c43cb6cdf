//! The coarse tiers of a log whose limits have different granularities
//! (docs/design.md §1.1): a record older than every finer limit's window is
//! moved to the granule of the limits that can still count it, so that
//! 10 per second at 10 ms and 100,000 per day at 1 minute cost the day's
//! minutes, not 10 ms granules over a day.
//!
//! With the limits ordered by window, `w_1 <= … <= w_n`, tier `k` is the
//! records that limits `1..=k` no longer count: they may be stored at
//! `G_k = gcd(g_{k+1}, …, g_n)`, exact for those limits (each `g` is a
//! multiple of `G_k`, so rounding to `G_k` first changes no rounding to
//! `g`). A record moves only when, once moved, no limit `1..=k` counts it
//! (`ceil(s'/g_j)*g_j + w_j <= now`); time only makes that truer, so a
//! moved record never counts again in a finer limit of the same set.

use crate::Limit;
use crate::limit::{gcd, round_up};
use crate::log::Log;
use smallvec::SmallVec;

/// Logs shorter than this are never re-bucketed: a rebuild would save
/// less than it costs.
const MIN_GAIN: usize = 64;

/// One tier: the limits (window, granularity) that no longer count its
/// records, and the granule its records may move to.
struct Tier {
    finer: SmallVec<[(u64, u64); 4]>,
    granule: u64,
}

/// The tiers of `limits`, coarsest first (each tier's granules coarsest
/// first); none when every limit's
/// granularity is a multiple of one granule already (one limit, or equal
/// granularities: the records are stored at it).
fn tiers(limits: &[Limit]) -> SmallVec<[Tier; 2]> {
    let mut tiers = SmallVec::new();
    if limits.len() < 2 {
        return tiers;
    }
    let mut order: SmallVec<[(u64, u64); 4]> = limits
        .iter()
        .map(|l| (l.window_ms(), l.granularity_ms()))
        .collect();
    order.sort_unstable();
    for k in (1..order.len()).rev() {
        let granule = order[k..].iter().map(|l| l.1).reduce(gcd).unwrap_or(1);
        // The next finer tier's granule (all limits' gcd below tier 1).
        let next = order[k - 1..].iter().map(|l| l.1).reduce(gcd).unwrap_or(1);
        // The tier's granule and a chain of its divisors down to the next
        // tier's (each dividing the one before, so one nested chain over
        // all tiers): a record moves to the coarsest one that no finer
        // limit can see it at, so the records of the current coarse granule
        // are not all held at the finest until it is over (a minute of
        // 10 ms granules under a per-day limit).
        for granule in chain(granule, next) {
            tiers.push(Tier {
                finer: order[..k].into(),
                granule,
            });
        }
    }
    tiers
}

/// `top`, then `top` divided by its smallest prime factor over `bottom`,
/// and so on while above `bottom` (`bottom` divides `top`). A factor above
/// 1,000 ends the chain: the search stays cheap.
fn chain(top: u64, bottom: u64) -> SmallVec<[u64; 8]> {
    let mut out = SmallVec::new();
    let mut d = top;
    while d > bottom {
        out.push(d);
        let rest = d / bottom;
        match (2..=1_000u64.min(rest)).find(|p| rest.is_multiple_of(*p)) {
            Some(p) => d /= p,
            None => break,
        }
    }
    out
}

/// True when a record at `ts`, moved to `tier`'s granule, counts in none of
/// the tier's finer limits at `now` (nor later).
fn movable(ts: u64, tier: &Tier, now: u64) -> bool {
    let moved = round_up(ts, tier.granule);
    tier.finer
        .iter()
        .all(|&(w, g)| round_up(moved, g).saturating_add(w) <= now)
}

/// How many of the oldest records may move to `tier`'s granule at `now`.
fn movable_end(log: &Log, tier: &Tier, now: u64) -> usize {
    let (mut lo, mut hi) = (0, log.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if movable(log.ts(mid), tier, now) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Moves the records of each tier of `limits` to that tier's granule, when
/// that gives back at least a quarter of the log, or, when `force`,
/// whenever one is not there yet: a settle looking for a record, and a
/// charge about to merge into the newest one, need a log that does not
/// depend on when the last rebuild was. Exact for `limits`: no decision of
/// theirs changes.
pub fn rebucket(log: &mut Log, now: u64, limits: &[Limit], force: bool) -> Rounds {
    let mut rounds = Rounds::new();
    if !force && log.len() < MIN_GAIN {
        return rounds;
    }
    for tier in tiers(limits) {
        let end = movable_end(log, &tier, now);
        if end == 0 {
            continue;
        }
        // At least this many records merge: the records `0..end` fall in at
        // most this many granules.
        let first = round_up(log.ts(0), tier.granule) / tier.granule;
        let last = round_up(log.ts(end - 1), tier.granule) / tier.granule;
        let gain = end.saturating_sub((last - first + 1) as usize);
        let due = if force {
            // Forced: only when some record is not in its granule yet (an
            // O(records) scan, on the rare paths that force).
            (0..end).any(|j| !log.ts(j).is_multiple_of(tier.granule))
        } else {
            gain * 4 >= log.len() + MIN_GAIN
        };
        if due {
            let through = round_up(log.ts(end - 1), tier.granule);
            log.round_front(end, tier.granule);
            rounds.push((through, tier.granule));
        }
    }
    rounds
}

/// The re-bucketings one call made, in order: every record at or before
/// the first time was rounded up to a multiple of the second (what a
/// replica replays, [`Log::round_through`]).
pub type Rounds = SmallVec<[(u64, u64); 2]>;

/// True when some records of `limits` move to a coarse tier.
pub fn has_tiers(limits: &[Limit]) -> bool {
    !tiers(limits).is_empty()
}

/// Where a record first stored at `ts` is at `now` once the log's tiers
/// are rebuilt (as [`rebucket`] with `force` leaves them): its time in the
/// coarsest granule no finer limit can count it at, else `ts` itself. One
/// place, not a search: a record that a charge merged into a later one is
/// not at its receipt's place any more, and a search of the other
/// granules could find a later request's record there instead
/// (docs/design.md §1.1).
pub fn place(ts: u64, limits: &[Limit], now: u64) -> u64 {
    tiers(limits)
        .iter()
        .find(|tier| movable(ts, tier, now))
        .map_or(ts, |tier| round_up(ts, tier.granule))
}
