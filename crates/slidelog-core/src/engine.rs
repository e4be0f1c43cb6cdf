//! The sliding window log decision rule of docs/design.md §1–§2 as pure functions.
//!
//! A log is the ascending list of the millisecond timestamps of every admitted
//! unit. A record is live for a limit iff `ts > now - window` (written here as
//! `ts + window > now`, which cannot underflow). A request of `cost` units is
//! admitted iff `live + cost <= max` for every limit. These functions are the
//! reference that every store (the memory store here, the Lua script in Redis)
//! must agree with.

use crate::{Decision, Limit, Request};
use std::collections::VecDeque;

/// Read access to an ascending log of ms timestamps.
pub trait SortedLog {
    /// Number of records.
    fn len(&self) -> usize;
    /// The record at position `i` (0 = oldest).
    fn at(&self, i: usize) -> u64;
    /// True when the log holds no record.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SortedLog for [u64] {
    fn len(&self) -> usize {
        <[u64]>::len(self)
    }
    fn at(&self, i: usize) -> u64 {
        self[i]
    }
}

impl SortedLog for Vec<u64> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn at(&self, i: usize) -> u64 {
        self[i]
    }
}

impl SortedLog for VecDeque<u64> {
    fn len(&self) -> usize {
        VecDeque::len(self)
    }
    fn at(&self, i: usize) -> u64 {
        self[i]
    }
}

/// Index of the first record that is live for `window_ms` at `now`
/// (every record before it has `ts + window <= now`).
pub fn first_live<L: SortedLog + ?Sized>(log: &L, now: u64, window_ms: u64) -> usize {
    // Common case first: after expiry the oldest record is live for the
    // longest window, and the whole log counts.
    if log.is_empty() || log.at(0) + window_ms > now {
        return 0;
    }
    let (mut lo, mut hi) = (1, log.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if log.at(mid) + window_ms <= now {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The decision for `request` at `now` over `log`, without changing the log.
///
/// This is both the check (before appending) and the peek. `log` must be
/// ascending; expired records may still be in it (they are not counted).
pub fn evaluate<L: SortedLog + ?Sized>(log: &L, now: u64, request: &Request) -> Decision {
    let cost = request.cost();
    let newest = if log.is_empty() {
        None
    } else {
        Some(log.at(log.len() - 1))
    };
    if let [limit] = request.limits() {
        // One limit (the common case): it is the deciding limit.
        return evaluate_one(log, now, limit, cost, newest);
    }

    // Per limit: how many records are live, and, when violated, the wait.
    let mut allowed = true;
    // (wait, window, limit, live) of the violated limit with the largest wait.
    let mut worst_violation: Option<(u64, u64, &Limit, u64)> = None;
    // (remaining after admission, window, limit, live) with the least remaining.
    let mut tightest: Option<(u64, u64, &Limit, u64)> = None;

    for limit in request.limits() {
        let start = first_live(log, now, limit.window_ms());
        let live = (log.len() - start) as u64;
        if live + cost > limit.max() {
            allowed = false;
            // The k-th oldest live record (1-based) must expire first:
            // k = live + cost - max, which is <= live because cost <= max.
            let k = live + cost - limit.max();
            let kth = log.at(start + k as usize - 1);
            let wait = kth + limit.window_ms() - now;
            let better = match worst_violation {
                None => true,
                Some((w, win, _, _)) => wait > w || (wait == w && limit.window_ms() < win),
            };
            if better {
                worst_violation = Some((wait, limit.window_ms(), limit, live));
            }
        } else {
            let remaining = limit.max() - live - cost;
            let better = match tightest {
                None => true,
                Some((r, win, _, _)) => {
                    remaining < r || (remaining == r && limit.window_ms() < win)
                }
            };
            if better {
                tightest = Some((remaining, limit.window_ms(), limit, live));
            }
        }
    }

    if let (false, Some((wait, _, limit, live))) = (allowed, worst_violation) {
        // Rejected: nothing is appended, so the newest record is a live one.
        let reset = newest.map_or(0, |n| (n + limit.window_ms()).saturating_sub(now));
        return Decision {
            allowed: false,
            limit: limit.max(),
            window_ms: limit.window_ms(),
            count: live,
            // More than `max` can be live after a clock stepped back or a key's
            // max was lowered: remaining is then 0, never a panic.
            remaining: limit.max().saturating_sub(live),
            retry_after_ms: wait,
            reset_after_ms: reset,
            degraded: false,
        };
    }

    let (remaining, _, limit, live) = tightest.expect("a request has at least one limit");
    // Admitted: `cost` records at `now` join the log; the newest is whichever is later.
    let newest_after = newest.map_or(now, |n| n.max(now));
    Decision {
        allowed: true,
        limit: limit.max(),
        window_ms: limit.window_ms(),
        count: live + cost,
        remaining,
        retry_after_ms: 0,
        reset_after_ms: newest_after + limit.window_ms() - now,
        degraded: false,
    }
}

/// [`evaluate`] for a request under a single limit.
fn evaluate_one<L: SortedLog + ?Sized>(
    log: &L,
    now: u64,
    limit: &Limit,
    cost: u64,
    newest: Option<u64>,
) -> Decision {
    let (max, window) = (limit.max(), limit.window_ms());
    let start = first_live(log, now, window);
    let live = (log.len() - start) as u64;
    if live + cost > max {
        let k = (live + cost - max) as usize;
        let wait = log.at(start + k - 1) + window - now;
        let reset = newest.map_or(0, |n| (n + window).saturating_sub(now));
        return Decision {
            allowed: false,
            limit: max,
            window_ms: window,
            count: live,
            remaining: max.saturating_sub(live),
            retry_after_ms: wait,
            reset_after_ms: reset,
            degraded: false,
        };
    }
    let newest_after = newest.map_or(now, |n| n.max(now));
    Decision {
        allowed: true,
        limit: max,
        window_ms: window,
        count: live + cost,
        remaining: max - live - cost,
        retry_after_ms: 0,
        reset_after_ms: newest_after + window - now,
        degraded: false,
    }
}

/// Drops the records that have expired for a window of `longest_window_ms`
/// (`ts + window <= now`). Returns how many were dropped.
pub fn expire(log: &mut VecDeque<u64>, now: u64, longest_window_ms: u64) -> usize {
    // Records expire oldest first, a few per call: popping is O(1) amortized.
    let mut dropped = 0;
    while log.front().is_some_and(|&ts| ts + longest_window_ms <= now) {
        log.pop_front();
        dropped += 1;
    }
    dropped
}

/// Appends `cost` records at `now`, keeping the log ascending even when `now`
/// is earlier than the newest record (a clock that stepped backwards).
pub fn append(log: &mut VecDeque<u64>, now: u64, cost: u64) {
    let at = log.partition_point(|&ts| ts <= now);
    if at == log.len() {
        log.extend(std::iter::repeat_n(now, cost as usize));
    } else {
        for _ in 0..cost {
            log.insert(at, now);
        }
    }
}

/// One full check on a log: drop expired records, decide, and append `cost`
/// records at `now` when admitted. A rejected request appends nothing.
pub fn decide_and_record(log: &mut VecDeque<u64>, now: u64, request: &Request) -> Decision {
    expire(log, now, request.longest_window_ms());
    let decision = evaluate(log, now, request);
    if decision.allowed {
        append(log, now, request.cost());
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(limits: &[(u64, u64)], cost: u64) -> Request {
        let limits: Vec<Limit> = limits
            .iter()
            .map(|&(m, w)| Limit::new(m, w).unwrap())
            .collect();
        Request::new("k", limits, cost).unwrap()
    }

    #[test]
    fn a_record_exactly_window_old_has_expired() {
        let r = req(&[(1, 1000)], 1);
        let mut log = VecDeque::new();
        assert!(decide_and_record(&mut log, 5_000, &r).allowed);
        // 999 ms later the record is still live.
        let d = decide_and_record(&mut log, 5_999, &r);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 1);
        // Exactly `window` later it has expired.
        assert!(decide_and_record(&mut log, 6_000, &r).allowed);
    }

    #[test]
    fn rejected_is_admitted_at_now_plus_retry_after_and_not_before() {
        let r = req(&[(3, 1000)], 1);
        let mut log = VecDeque::new();
        for t in [100, 400, 700] {
            assert!(decide_and_record(&mut log, t, &r).allowed);
        }
        let d = decide_and_record(&mut log, 800, &r);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 300); // 100 + 1000 - 800
        assert_eq!(d.reset_after_ms, 900); // 700 + 1000 - 800
        assert_eq!((d.count, d.remaining), (3, 0));
        assert!(!evaluate(&log, 800 + d.retry_after_ms - 1, &r).allowed);
        assert!(evaluate(&log, 800 + d.retry_after_ms, &r).allowed);
    }

    #[test]
    fn cost_uses_the_kth_oldest_record() {
        let r3 = req(&[(5, 1000)], 3);
        let mut log: VecDeque<u64> = [10, 20, 30, 40].into_iter().collect();
        // live 4 + 3 > 5: k = 2, the second oldest (20) must expire.
        let d = evaluate(&log, 500, &r3);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 20 + 1000 - 500);
        assert_eq!(d.count, 4);
        // A rejected request appends nothing.
        decide_and_record(&mut log, 500, &r3);
        assert_eq!(log.len(), 4);
        // Admitted at the predicted time, with all three units recorded.
        let d = decide_and_record(&mut log, 1020, &r3);
        assert!(d.allowed);
        assert_eq!((d.count, d.remaining), (5, 0));
        assert_eq!(log.iter().filter(|&&t| t == 1020).count(), 3);
    }

    #[test]
    fn several_limits_report_the_deciding_one() {
        // 2 per second and 3 per 10 seconds.
        let r = req(&[(2, 1_000), (3, 10_000)], 1);
        let mut log = VecDeque::new();
        let d = decide_and_record(&mut log, 0, &r);
        // remaining 1 (per second) vs 2 (per 10 s): the per-second limit decides.
        assert_eq!((d.limit, d.window_ms, d.remaining), (2, 1_000, 1));
        let d = decide_and_record(&mut log, 1, &r);
        // remaining 0 vs 1.
        assert_eq!((d.limit, d.remaining, d.reset_after_ms), (2, 0, 1000));
        let d = decide_and_record(&mut log, 2, &r);
        assert!(!d.allowed);
        assert_eq!((d.limit, d.retry_after_ms), (2, 998));
        let d = decide_and_record(&mut log, 1_500, &r);
        assert!(d.allowed);
        // Per second: 1 of 2 used; per 10 s: 3 of 3 used, so that one decides.
        assert_eq!((d.limit, d.window_ms, d.remaining), (3, 10_000, 0));
        let d = decide_and_record(&mut log, 2_000, &r);
        // Per second: live 1 (1500) admits; per 10 s: live 3 rejects, waiting for t=0 to expire.
        assert!(!d.allowed);
        assert_eq!((d.limit, d.window_ms, d.retry_after_ms), (3, 10_000, 8_000));
        assert_eq!(d.reset_after_ms, 1_500 + 10_000 - 2_000);
    }

    #[test]
    fn a_clock_that_steps_back_never_frees_capacity() {
        let r = req(&[(2, 1000)], 1);
        let mut log = VecDeque::new();
        assert!(decide_and_record(&mut log, 10_000, &r).allowed);
        assert!(decide_and_record(&mut log, 10_500, &r).allowed);
        // The clock steps back 5 s: the records are in the future, still live.
        let d = decide_and_record(&mut log, 5_000, &r);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 10_000 + 1000 - 5_000);
        // An admission at an earlier time keeps the log sorted.
        let mut log: VecDeque<u64> = [10_000].into_iter().collect();
        assert!(decide_and_record(&mut log, 9_000, &r).allowed);
        assert_eq!(log, VecDeque::from(vec![9_000, 10_000]));
    }

    #[test]
    fn more_live_than_max_after_a_step_back_reports_zero_remaining() {
        // 2 per 100 ms and 10 per second: records at 0 and 100 are all live
        // for the short window again when the clock steps back to 50.
        let r = req(&[(2, 100), (10, 1000)], 1);
        let mut log = VecDeque::new();
        decide_and_record(&mut log, 0, &r);
        decide_and_record(&mut log, 0, &r);
        decide_and_record(&mut log, 100, &r);
        decide_and_record(&mut log, 100, &r);
        let d = decide_and_record(&mut log, 50, &r);
        assert!(!d.allowed);
        assert_eq!((d.limit, d.count, d.remaining), (2, 4, 0));
        assert_eq!(d.retry_after_ms, 100 + 100 - 50);
    }

    #[test]
    fn peek_reports_the_same_decision_without_appending() {
        let r = req(&[(2, 1000)], 1);
        let mut log = VecDeque::new();
        let peeked = evaluate(&log, 0, &r);
        let checked = decide_and_record(&mut log, 0, &r);
        assert_eq!(peeked, checked);
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn early_timestamps_do_not_underflow() {
        let r = req(&[(1, 1000)], 1);
        let mut log = VecDeque::new();
        assert!(decide_and_record(&mut log, 0, &r).allowed);
        let d = decide_and_record(&mut log, 999, &r);
        assert_eq!((d.allowed, d.retry_after_ms), (false, 1));
        assert!(decide_and_record(&mut log, 1000, &r).allowed);
    }
}
