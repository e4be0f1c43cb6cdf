//! The sliding window log decision rule of docs/design.md §1–§2 as pure
//! functions over a [`Log`].
//!
//! A record is live for a limit iff `ts > now - window` (written here as
//! `ts + window > now`, which cannot underflow). A request is admitted iff
//! `live_i + cost_i <= max_i` for every limit `i`, where `live_i` sums the
//! live records' costs at position `i`. An admitted request appends one
//! weighted record, whatever its cost (or adds to the record of the same
//! millisecond). These functions are the reference
//! that every store (the memory store here, the Lua script in Redis) must
//! agree with.

pub use crate::log::Log;
pub use all::decide_all;
pub use tier::{Rounds, has_tiers, place, rebucket};

pub use usage::{charge, charge_merges, settle, settle_home, standing, standing_each};

mod all;
mod tier;
mod usage;
use crate::limit::round_up;
use crate::{Counts, Decision, Detailed, Limit, LimitState, RecordRef, Request};
use smallvec::SmallVec;

/// What one limit says about a request.
#[derive(Debug, Clone, Copy)]
struct Verdict<'a> {
    limit: &'a Limit,
    /// The limit's position in the request (its cost position).
    position: usize,
    /// Live units before the decision.
    live: u64,
    /// The request's cost against this limit.
    cost: u64,
    /// `Some(wait)` when this limit rejects the request.
    wait: Option<u64>,
}

impl Verdict<'_> {
    fn remaining_after(&self) -> u64 {
        self.limit.max() - self.live - self.cost
    }
}

/// The verdict of the limit at `position` of a request.
// Inlined (as `counts_of` is) so that the one-limit path of
// `evaluate_each` keeps the verdict in registers: ~40 instructions per
// decision fewer (callgrind), which the `#[inline]` hint alone did not get.
#[inline(always)]
fn judge<'a>(log: &Log, now: u64, limit: &'a Limit, position: usize, cost: u64) -> Verdict<'a> {
    let start = first_live_for(log, now, limit);
    let live = log.units_from(start, position);
    let wait = (live + cost > limit.max()).then(|| {
        // The k-th oldest live unit must expire before the request fits:
        // k = live + cost - max, which is <= live because cost <= max.
        let k = live + cost - limit.max();
        if k > live {
            // A usage request's cost above max (Request::usage) never fits:
            // one window, never a search past the log's end.
            return limit.window_ms();
        }
        let g = limit.granularity_ms();
        round_up(log.kth_unit_ts(start, position, k), g) + limit.window_ms() - now
    });
    Verdict {
        limit,
        position,
        live,
        cost,
        wait,
    }
}

/// The first record that counts in `limit` at `now`: a record stored at
/// `s` counts as if at `ceil(s/g)*g`, live iff that is after `now - w`,
/// which is `s > floor(now/g)*g - w` as `g` divides `w` (docs/design.md
/// §1.1): the exact rule at the last granule boundary.
#[inline(always)]
fn first_live_for(log: &Log, now: u64, limit: &Limit) -> usize {
    let g = limit.granularity_ms();
    let boundary = if g == 1 { now } else { now - now % g };
    log.first_live(boundary, limit.window_ms())
}

/// The time a record stored at `ts` counts at in `limit`.
#[inline(always)]
fn counted_at(ts: u64, limit: &Limit) -> u64 {
    round_up(ts, limit.granularity_ms())
}

/// The deciding verdict: when rejected, the violated limit with the largest
/// wait; when allowed, the limit with the smallest remaining (ties: the
/// shorter window in both cases).
fn deciding<'a>(best: Option<Verdict<'a>>, next: Verdict<'a>) -> Option<Verdict<'a>> {
    let Some(best) = best else {
        return Some(next);
    };
    let shorter = next.limit.window_ms() < best.limit.window_ms();
    let better = match (best.wait, next.wait) {
        (None, Some(_)) => true,
        (Some(_), None) => false,
        (Some(b), Some(n)) => n > b || (n == b && shorter),
        (None, None) => {
            let (b, n) = (best.remaining_after(), next.remaining_after());
            n < b || (n == b && shorter)
        }
    };
    Some(if better { next } else { best })
}

/// The decision for `request` at `now` over `log`, without changing the log.
///
/// This is both the check (before appending) and the peek. Expired records
/// may still be in the log (they are not counted).
pub fn evaluate(log: &Log, now: u64, request: &Request) -> Decision {
    let mut decider = None;
    for (position, limit) in request.limits().iter().enumerate() {
        let verdict = judge(log, now, limit, position, request.cost_for(position));
        decider = deciding(decider, verdict);
    }
    decision_of(log, now, decider.expect("a request has at least one limit"))
}

/// The decision that the deciding verdict `v` gives: that limit's
/// [`counts_of`] (admitted exactly when the deciding verdict admits: it
/// rejects whenever any limit does).
fn decision_of(log: &Log, now: u64, v: Verdict<'_>) -> Decision {
    decision_from(&v, counts_of(log, now, &v, v.wait.is_none()))
}

/// [`evaluate`] with every limit's state beside the decision (the same
/// decision; a few more words of work per limit, no other pass over the log).
///
/// The decision is the deciding limit's counts (as in [`evaluate`]), so
/// each limit's newest unit is looked up once.
pub fn evaluate_each(log: &Log, now: u64, request: &Request) -> Detailed {
    if let [limit] = request.limits() {
        // One limit (the common request): no list of verdicts, and the
        // answer's one-element list allocated at its size.
        let v = judge(log, now, limit, 0, request.cost_for(0));
        let counts = counts_of(log, now, &v, v.wait.is_none());
        return Detailed {
            decision: decision_from(&v, counts),
            limits: vec![LimitState {
                limit: *limit,
                counts: Some(counts),
            }],
        };
    }
    let verdicts: SmallVec<[Verdict<'_>; 4]> = request
        .limits()
        .iter()
        .enumerate()
        .map(|(position, limit)| judge(log, now, limit, position, request.cost_for(position)))
        .collect();
    let decider = verdicts
        .iter()
        .copied()
        .fold(None, deciding)
        .expect("a request has at least one limit");
    let allowed = decider.wait.is_none();
    let mut decision = None;
    let limits = verdicts
        .iter()
        .map(|v| {
            let counts = counts_of(log, now, v, allowed);
            if v.position == decider.position {
                decision = Some(decision_from(v, counts));
            }
            LimitState {
                limit: *v.limit,
                counts: Some(counts),
            }
        })
        .collect();
    Detailed {
        decision: decision.expect("the deciding verdict is one of them"),
        limits,
    }
}

/// The decision whose deciding verdict is `v`, from that limit's
/// [`counts_of`].
fn decision_from(v: &Verdict<'_>, counts: Counts) -> Decision {
    Decision {
        allowed: v.wait.is_none(),
        limit: v.limit.max(),
        window_ms: v.limit.window_ms(),
        count: counts.count,
        remaining: counts.remaining,
        retry_after_ms: counts.retry_after_ms,
        reset_after_ms: counts.reset_after_ms,
        degraded: false,
        blocked: false,
        record: None,
    }
}

/// One limit's counts after a decision that `allowed` or not. Rejected:
/// nothing is appended, so the newest record that counts in this limit is a
/// live one; more than `max` can be live after a clock stepped back or a
/// key's max was lowered, and remaining is then 0, never a panic. Admitted:
/// a record at `now` joins, and the newest is whichever is later (a record
/// of cost 0 in this limit counts nowhere in it).
#[inline(always)]
fn counts_of(log: &Log, now: u64, v: &Verdict<'_>, allowed: bool) -> Counts {
    let window = v.limit.window_ms();
    let newest = log
        .newest_unit(0, v.position)
        .map(|n| counted_at(n, v.limit));
    let (count, reset_after_ms) = if allowed {
        // The request itself counts at `now` rounded up to this limit's
        // granularity.
        let at = counted_at(now, v.limit);
        let newest_after = newest.map_or(at, |n| n.max(at));
        (v.live + v.cost, newest_after + window - now)
    } else {
        let reset = newest.map_or(0, |n| (n + window).saturating_sub(now));
        (v.live, reset)
    };
    Counts {
        count,
        remaining: v.limit.max().saturating_sub(count),
        retry_after_ms: v.wait.unwrap_or(0),
        reset_after_ms,
    }
}

/// [`decide_and_record`] with every limit's state beside the decision.
pub fn decide_and_record_each(log: &mut Log, now: u64, request: &Request) -> Detailed {
    prepare(log, now, request);
    // Taken apart and built again in the return slot: a `Detailed` kept
    // whole while the log is appended to is copied once more (a `memcpy`
    // call per decision).
    let Detailed {
        mut decision,
        limits,
    } = evaluate_each(log, now, request);
    if decision.allowed {
        decision.record = Some(record(log, now, request));
    }
    Detailed { decision, limits }
}

/// Before a decision that may record: drop what expired for the longer of
/// the log's horizon and the request's, and move old records to their
/// coarse tier (docs/design.md §1.1).
#[inline]
fn prepare(log: &mut Log, now: u64, request: &Request) {
    log.expire(now, request.longest_window_ms());
    if request.limits().len() > 1 {
        tier::rebucket(log, now, request.limits(), false);
    }
}

/// Appends an admitted request's costs at its stored time (`now` rounded
/// up to the request's granule, docs/design.md §1.1) and raises the
/// horizon: the record's name.
#[inline]
fn record(log: &mut Log, now: u64, request: &Request) -> RecordRef {
    let ts = request.stored_at(now);
    log.append(ts, request.costs());
    log.raise_horizon(keep_from(now, ts, request));
    RecordRef { ts, id: None }
}

/// The horizon a request that recorded at `ts` (at `now`) raises: its keep,
/// counted from `now` as if from `ts` (so a replica that replays the record
/// at `ts` with this window expires what the decision expired, docs/design.md
/// §1.1). The longest window itself for exact limits.
#[inline]
pub fn keep_from(now: u64, ts: u64, request: &Request) -> u64 {
    request.longest_window_ms() + ts.saturating_sub(now)
}

/// One full check on a log: drop expired records (for the longer of the
/// log's horizon and the request's longest window), decide, and append the
/// request's costs at `now` when admitted (to the record already at `now`,
/// if any), raising the horizon to the request's longest window. A rejected
/// request appends nothing and leaves the horizon.
pub fn decide_and_record(log: &mut Log, now: u64, request: &Request) -> Decision {
    prepare(log, now, request);
    let mut decision = evaluate(log, now, request);
    if decision.allowed {
        decision.record = Some(record(log, now, request));
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
        let mut log = Log::new();
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
        let mut log = Log::new();
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
        let mut log = Log::from_timestamps([10, 20, 30, 40]);
        // live 4 + 3 > 5: k = 2, the second oldest (20) must expire.
        let d = evaluate(&log, 500, &r3);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 20 + 1000 - 500);
        assert_eq!(d.count, 4);
        // A rejected request appends nothing.
        decide_and_record(&mut log, 500, &r3);
        assert_eq!(log.len(), 4);
        // Admitted at the predicted time: one record of three units.
        let d = decide_and_record(&mut log, 1020, &r3);
        assert!(d.allowed);
        assert_eq!((d.count, d.remaining), (5, 0));
        assert_eq!(log.len(), 3);
        assert_eq!(log.units_from(0, 0), 5);
    }

    #[test]
    fn several_limits_report_the_deciding_one() {
        // 2 per second and 3 per 10 seconds.
        let r = req(&[(2, 1_000), (3, 10_000)], 1);
        let mut log = Log::new();
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
        let mut log = Log::new();
        assert!(decide_and_record(&mut log, 10_000, &r).allowed);
        assert!(decide_and_record(&mut log, 10_500, &r).allowed);
        // The clock steps back 5 s: the records are in the future, still live.
        let d = decide_and_record(&mut log, 5_000, &r);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 10_000 + 1000 - 5_000);
        // An admission at an earlier time keeps the log sorted.
        let mut log = Log::from_timestamps([10_000]);
        assert!(decide_and_record(&mut log, 9_000, &r).allowed);
        assert_eq!((log.ts(0), log.ts(1)), (9_000, 10_000));
    }

    #[test]
    fn more_live_than_max_after_a_step_back_reports_zero_remaining() {
        // 2 per 100 ms and 10 per second: records at 0 and 100 are all live
        // for the short window again when the clock steps back to 50.
        let r = req(&[(2, 100), (10, 1000)], 1);
        let mut log = Log::new();
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
        let mut log = Log::new();
        let peeked = evaluate(&log, 0, &r);
        let checked = decide_and_record(&mut log, 0, &r);
        assert_eq!(peeked, checked);
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn a_large_cost_is_one_record_and_waits_for_enough_units() {
        let r = req(&[(10_000_000, 60_000)], 10_000_000);
        let mut log = Log::new();
        assert!(decide_and_record(&mut log, 1_000, &r).allowed);
        assert_eq!(log.len(), 1);
        let d = decide_and_record(&mut log, 2_000, &r);
        assert_eq!(
            (d.allowed, d.retry_after_ms, d.count),
            (false, 59_000, 10_000_000)
        );
        // Units 4 + 3 + 5 at 0, 10, 20; a cost of 5 needs 12 + 5 - 12 = 5
        // units expired: the first record (4) and one unit of the second.
        let r5 = req(&[(12, 1_000)], 5);
        let mut log = Log::new();
        for (t, c) in [(0, 4), (10, 3), (20, 5)] {
            assert!(decide_and_record(&mut log, t, &req(&[(12, 1_000)], c)).allowed);
        }
        let d = evaluate(&log, 500, &r5);
        assert_eq!(
            (d.allowed, d.count, d.retry_after_ms),
            (false, 12, 10 + 1_000 - 500)
        );
    }

    #[test]
    fn each_limit_is_charged_its_own_cost() {
        // 2 requests and 100 tokens per second.
        let limits = vec![
            Limit::new(2, 1_000).unwrap(),
            Limit::new(100, 1_000).unwrap(),
        ];
        let call = |tokens| Request::with_costs("k", limits.clone(), vec![1, tokens]).unwrap();
        let mut log = Log::new();
        let d = decide_and_record(&mut log, 0, &call(60));
        // Remaining 1 request vs 40 tokens: the request limit decides.
        assert_eq!((d.allowed, d.limit, d.remaining), (true, 2, 1));
        // 60 + 50 > 100 tokens: rejected by the token limit, nothing recorded.
        let d = decide_and_record(&mut log, 10, &call(50));
        assert_eq!(
            (d.allowed, d.limit, d.count, d.retry_after_ms),
            (false, 100, 60, 990)
        );
        assert_eq!(log.len(), 1);
        // 40 tokens fit; then the request limit is full.
        assert!(decide_and_record(&mut log, 20, &call(40)).allowed);
        let d = decide_and_record(&mut log, 30, &call(1));
        assert_eq!((d.allowed, d.limit, d.retry_after_ms), (false, 2, 970));
    }

    #[test]
    fn every_limit_reports_its_own_state_and_the_decision_is_unchanged() {
        let limits = vec![
            Limit::new(2, 1_000).unwrap().named("requests").unwrap(),
            Limit::new(100, 1_000).unwrap().named("tokens").unwrap(),
        ];
        let call = |tokens| Request::with_costs("k", limits.clone(), vec![1, tokens]).unwrap();
        let (mut plain, mut each) = (Log::new(), Log::new());
        for (t, tokens) in [(0, 60), (10, 50), (20, 40), (30, 1)] {
            let d = decide_and_record(&mut plain, t, &call(tokens));
            let e = decide_and_record_each(&mut each, t, &call(tokens));
            assert_eq!(d, e.decision);
            let deciding = e.deciding().unwrap().counts.unwrap();
            assert_eq!(
                (deciding.count, deciding.remaining, deciding.retry_after_ms),
                (d.count, d.remaining, d.retry_after_ms)
            );
        }
        // At 40: 2 requests and 100 tokens used; a peek of 1 token.
        let e = evaluate_each(&each, 40, &call(1));
        let [r, t] = [e.limits[0], e.limits[1]];
        assert_eq!(r.limit.name(), Some("requests"));
        let (r, t) = (r.counts.unwrap(), t.counts.unwrap());
        assert_eq!((r.count, r.remaining, r.retry_after_ms), (2, 0, 960));
        assert_eq!((t.count, t.remaining, t.retry_after_ms), (100, 0, 960));
        assert_eq!((r.reset_after_ms, t.reset_after_ms), (980, 980));
        // Admitted: each limit counts its own cost.
        let e = evaluate_each(&each, 1_001, &call(5));
        let (r, t) = (e.limits[0].counts.unwrap(), e.limits[1].counts.unwrap());
        assert!(e.decision.allowed);
        assert_eq!((r.count, t.count, t.remaining), (2, 45, 55));
    }

    #[test]
    fn early_timestamps_do_not_underflow() {
        let r = req(&[(1, 1000)], 1);
        let mut log = Log::new();
        assert!(decide_and_record(&mut log, 0, &r).allowed);
        let d = decide_and_record(&mut log, 999, &r);
        assert_eq!((d.allowed, d.retry_after_ms), (false, 1));
        assert!(decide_and_record(&mut log, 1000, &r).allowed);
    }

    /// A request of 1 to 3 limits (small maxes so that some reject) and
    /// one cost for all, or one cost per limit.
    fn any_request() -> impl proptest::strategy::Strategy<Value = Request> {
        use proptest::prelude::*;
        let limit = (1u64..8, prop_oneof![1u64..50, 50u64..400]);
        (
            proptest::collection::vec(limit, 1..=3),
            proptest::collection::vec(1u64..3, 1..=3),
        )
            .prop_map(|(limits, costs)| {
                let limits: Vec<Limit> = limits
                    .into_iter()
                    .map(|(m, w)| Limit::new(m, w).unwrap())
                    .collect();
                let smallest = limits.iter().map(Limit::max).min().unwrap();
                let costs: Vec<u64> = costs.into_iter().map(|c| c.min(smallest)).collect();
                if costs.len() == limits.len() {
                    Request::with_costs("k", limits, costs).unwrap()
                } else {
                    Request::new("k", limits, costs[0]).unwrap()
                }
            })
    }

    proptest::proptest! {
        /// `evaluate_each` and `decide_and_record_each` (the decision read
        /// off the deciding limit's counts, a one-limit path) against
        /// `evaluate` and `decide_and_record`, and every limit's counts
        /// against that limit judged alone by `evaluate` (where the request
        /// is rejected by another limit, this one reports its live units, no
        /// wait, and the time until its newest unit expires).
        #[test]
        fn each_limit_agrees_with_the_plain_decision(
            steps in proptest::collection::vec((0u64..60, any_request()), 1..80),
        ) {
            let (mut plain, mut each) = (Log::new(), Log::new());
            let mut now = 1_000u64;
            for (delta, request) in steps {
                now += delta;
                let peeked = evaluate_each(&each, now, &request);
                proptest::prop_assert_eq!(peeked.decision, evaluate(&each, now, &request));
                proptest::prop_assert_eq!(peeked.decision.record, None);
                for (i, (state, limit)) in peeked.limits.iter().zip(request.limits()).enumerate() {
                    proptest::prop_assert_eq!(state.limit, *limit);
                    let counts = state.counts.unwrap();
                    let cost = request.cost_for(i);
                    let start = each.first_live(now, limit.window_ms());
                    let live = each.units_from(start, i);
                    let alone = live + cost <= limit.max();
                    if peeked.decision.allowed {
                        proptest::prop_assert_eq!(counts.count, live + cost);
                        proptest::prop_assert_eq!(counts.retry_after_ms, 0);
                        let newest = each.newest_unit(0, i).map_or(now, |n| n.max(now));
                        proptest::prop_assert_eq!(counts.reset_after_ms, newest + limit.window_ms() - now);
                    } else {
                        proptest::prop_assert_eq!(counts.count, live);
                        proptest::prop_assert_eq!(counts.retry_after_ms == 0, alone);
                        let reset = each.newest_unit(0, i).map_or(0, |n| (n + limit.window_ms()).saturating_sub(now));
                        proptest::prop_assert_eq!(counts.reset_after_ms, reset);
                    }
                    proptest::prop_assert_eq!(counts.remaining, limit.max().saturating_sub(counts.count));
                }
                if request.has_one_cost() && each.cost_width() == 1 && !peeked.decision.allowed {
                    // A limit that rejects reports the wait it gives alone
                    // (at position 0 too when every record has one cost).
                    for (state, limit) in peeked.limits.iter().zip(request.limits()) {
                        let one = Request::new("k", vec![*limit], request.cost()).unwrap();
                        let alone = evaluate(&each, now, &one);
                        let counts = state.counts.unwrap();
                        if !alone.allowed {
                            proptest::prop_assert_eq!(counts.retry_after_ms, alone.retry_after_ms);
                        }
                    }
                }
                let d = decide_and_record(&mut plain, now, &request);
                let e = decide_and_record_each(&mut each, now, &request);
                proptest::prop_assert_eq!(d, e.decision);
                proptest::prop_assert_eq!(d.record, e.decision.record);
                proptest::prop_assert_eq!(&plain, &each);
            }
        }
    }
}
