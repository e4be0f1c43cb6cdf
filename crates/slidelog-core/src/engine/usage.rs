//! Usage-based limits on a [`Log`] (docs/design.md §4.6): settle a record to
//! its actual costs, charge usage known after the fact, and the limits as
//! they stand, which both answer (the deciding limit and every limit's
//! state, [`standing_each`]). The reference every store agrees with.

use super::{Verdict, counted_at, deciding, first_live_for, judge, keep_from, tier};
use crate::{
    Counts, Decision, Detailed, Limit, LimitState, Log, Receipt, ReceiptError, RecordRef, Request,
    Settled,
};
use smallvec::SmallVec;

/// The limits as they stand at `now`: for each, `count` = its live units,
/// `remaining` = `max - count` (0 when over), `retry_after_ms` = the least
/// wait before one more unit fits (0 when one does), `reset_after_ms` = the
/// time until no live record counts in it. `allowed` says one more unit fits
/// in every limit; the deciding limit is the one a check of cost 1 reports.
/// `record` is `None`.
pub fn standing(log: &Log, now: u64, limits: &[Limit]) -> Decision {
    let v = limits
        .iter()
        .enumerate()
        .map(|(position, limit)| judge(log, now, limit, position, 1))
        .fold(None, deciding)
        .expect("a request has at least one limit");
    decision_of(log, now, &v)
}

/// [`standing`] with every limit's state beside it, in `limits`' order:
/// each limit's [`Counts`] are the fields [`standing`] gives the deciding
/// one (`retry_after_ms` 0 where one more unit fits in that limit).
pub fn standing_each(log: &Log, now: u64, limits: &[Limit]) -> Detailed {
    let verdicts: SmallVec<[Verdict<'_>; 4]> = limits
        .iter()
        .enumerate()
        .map(|(position, limit)| judge(log, now, limit, position, 1))
        .collect();
    let v = verdicts
        .iter()
        .copied()
        .fold(None, deciding)
        .expect("a request has at least one limit");
    let decision = decision_of(log, now, &v);
    let limits = verdicts
        .iter()
        .map(|v| {
            let d = decision_of(log, now, v);
            LimitState {
                limit: *v.limit,
                counts: Some(Counts {
                    count: d.count,
                    remaining: d.remaining,
                    retry_after_ms: d.retry_after_ms,
                    reset_after_ms: d.reset_after_ms,
                }),
            }
        })
        .collect();
    Detailed { decision, limits }
}

/// The [`standing`] fields of the deciding verdict `v` (of cost 1).
fn decision_of(log: &Log, now: u64, v: &Verdict<'_>) -> Decision {
    let window = v.limit.window_ms();
    let start = first_live_for(log, now, v.limit);
    Decision {
        allowed: v.wait.is_none(),
        limit: v.limit.max(),
        window_ms: window,
        count: v.live,
        remaining: v.limit.max().saturating_sub(v.live),
        retry_after_ms: v.wait.unwrap_or(0),
        reset_after_ms: log
            .newest_unit(start, v.position)
            .map_or(0, |n| (counted_at(n, v.limit) + window).saturating_sub(now)),
        degraded: false,
        blocked: false,
        record: None,
    }
}

/// Settles the share of the record `receipt` names to `request`'s costs
/// (a [`Request::usage`]; `receipt` verified against it): drops expired
/// records, finds the live record at the receipt's timestamp whose cost at
/// every position is at least the receipt's (its share: requests of the
/// same millisecond are one record), and replaces that share with the
/// request's costs (0 everywhere left: the record is refunded). Not found
/// (expired, reset, or moved to a later time by a charge merged into it):
/// nothing changes and `settled` is false. Answers the limits after the
/// change ([`standing_each`]).
pub fn settle(log: &mut Log, now: u64, request: &Request, receipt: &Receipt) -> Settled {
    log.expire(now, request.longest_window_ms());
    tier::rebucket(log, now, request.limits(), true);
    let refused = receipt.spend().and_then(|spend| {
        if log.is_spent(spend.nonce) {
            Some(ReceiptError::Spent)
        } else {
            (!log.can_spend(now)).then_some(ReceiptError::TooManySettles)
        }
    });
    let settled = refused.is_none()
        && settle_home(log, now, receipt, request)
            .is_some_and(|ts| log.settle_share(ts, receipt.costs(), request.costs()));
    if let Some(spend) = receipt.spend().filter(|_| settled) {
        // Room was checked above: the nonce is kept (or the log emptied,
        // and no receipt can settle on it).
        let _ = log.spend(spend.nonce, spend.until_ms, now);
    }
    let record = (settled && request.costs().iter().any(|&c| c > 0)).then(|| RecordRef {
        ts: receipt.ts(),
        id: receipt.id(),
    });
    let Detailed {
        mut decision,
        limits,
    } = standing_each(log, now, request.limits());
    decision.record = record;
    Settled {
        settled,
        decision,
        limits,
        refused,
    }
}

/// Where the record `receipt` names is at `now`, once the log's tiers are
/// rebuilt: its place in a coarse tier ([`tier::place`], docs/design.md
/// §1.1), when a record there holds the receipt's share. `None`: gone
/// (expired, reset, or moved by a charge merged into it).
pub fn settle_home(log: &Log, now: u64, receipt: &Receipt, request: &Request) -> Option<u64> {
    let ts = tier::place(receipt.ts(), request.limits(), now);
    let j = log.find_ts(ts)?;
    let share = receipt.costs();
    (0..crate::MAX_LIMITS)
        .all(|p| {
            let want = share[p.min(share.len() - 1)];
            // As `Log::settle_share` compares them (a saturated cost holds
            // any share).
            log.cost(j, p) >= want.min(u64::from(u32::MAX))
        })
        .then_some(ts)
}

/// True when a charge of `request` at `now` merges into the newest record
/// ([`charge`]): some limit in which it costs something already holds its
/// max or more live units.
pub fn charge_merges(log: &Log, now: u64, request: &Request) -> bool {
    request.limits().iter().enumerate().any(|(p, limit)| {
        let start = first_live_for(log, now, limit);
        request.cost_for(p) > 0 && log.units_from(start, p) >= limit.max()
    })
}

/// Charges `request`'s costs (a [`Request::usage`]) without deciding: drops
/// expired records and records the costs at `now` even when they take a
/// limit over its max (costs of 0 everywhere record nothing), raising the
/// horizon to the request's longest window. Into a log already at or over
/// its max in a limit the charge costs something in, the costs merge into
/// the newest record, which moves to `now` ([`charge_merges`],
/// docs/design.md §4.6): so a key's records stay bounded by its limits
/// whatever is charged. Answers the limits after recording
/// ([`standing_each`]), naming the record charged.
pub fn charge(log: &mut Log, now: u64, request: &Request) -> Detailed {
    log.expire(now, request.longest_window_ms());
    let record = request.costs().iter().any(|&c| c > 0).then(|| {
        let at = request.stored_at(now);
        let ts = if charge_merges(log, now, request) {
            // Which record is the newest must not depend on when the
            // tiers were last rebuilt.
            tier::rebucket(log, now, request.limits(), true);
            log.merge_into_newest(at, request.costs())
        } else {
            tier::rebucket(log, now, request.limits(), false);
            log.append(at, request.costs());
            at
        };
        log.raise_horizon(keep_from(now, at, request));
        RecordRef { ts, id: None }
    });
    let mut each = standing_each(log, now, request.limits());
    each.decision.record = record;
    each
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{decide_and_record, evaluate};

    fn limits() -> Vec<Limit> {
        vec![
            Limit::new(3, 1_000).unwrap().named("requests").unwrap(),
            Limit::new(100, 1_000).unwrap().named("tokens").unwrap(),
        ]
    }

    fn check(tokens: u64) -> Request {
        Request::with_costs("k", limits(), vec![1, tokens]).unwrap()
    }

    fn usage(costs: &[u64]) -> Request {
        Request::usage("k", limits(), costs.to_vec()).unwrap()
    }

    fn receipt(request: &Request, d: &Decision) -> Receipt {
        Receipt::new(request, d.record.unwrap())
    }

    #[test]
    fn settling_down_frees_units_and_up_takes_a_limit_over_its_max() {
        let mut log = Log::new();
        let r = check(80);
        let d = decide_and_record(&mut log, 0, &r);
        let rc = receipt(&r, &d);
        // 80 reserved: 30 more do not fit.
        assert!(!evaluate(&log, 10, &check(30)).allowed);
        let s = settle(&mut log, 10, &usage(&[1, 20]), &rc);
        assert!(s.settled);
        assert_eq!(
            (s.decision.limit, s.decision.count, s.decision.remaining),
            (3, 1, 2)
        );
        // Every limit's state: the tokens limit beside the deciding one.
        let tokens = s.limits[1].counts.unwrap();
        assert_eq!(
            (tokens.count, tokens.remaining, tokens.reset_after_ms),
            (20, 80, 990)
        );
        assert_eq!(s.limits[0].limit.name(), Some("requests"));
        assert!(evaluate(&log, 10, &check(30)).allowed);
        // The same receipt no longer names a record (its costs changed).
        assert!(!settle(&mut log, 20, &usage(&[1, 5]), &rc).settled);
        // Settling up past the max: the token limit is over; a check waits
        // until the record slides out.
        let rc = Receipt::new(&usage(&[1, 20]), s.decision.record.unwrap());
        let s = settle(&mut log, 20, &usage(&[1, 250]), &rc);
        assert!(s.settled && !s.decision.allowed);
        assert_eq!(
            (
                s.decision.limit,
                s.decision.count,
                s.decision.remaining,
                s.decision.retry_after_ms
            ),
            (100, 250, 0, 980)
        );
        let d = evaluate(&log, 500, &check(1));
        assert_eq!((d.allowed, d.retry_after_ms), (false, 500));
        assert!(evaluate(&log, 1_000, &check(100)).allowed);
    }

    #[test]
    fn a_refund_removes_the_record_and_zero_counts_nowhere() {
        let mut log = Log::new();
        let r = check(10);
        let first = decide_and_record(&mut log, 100, &r);
        let second = decide_and_record(&mut log, 200, &r);
        // 0 tokens: the record counts as a request only; reset of the token
        // limit is the first record's.
        let s = settle(&mut log, 300, &usage(&[1, 0]), &receipt(&r, &second));
        assert!(s.settled);
        assert_eq!(
            (log.units_from(0, 1), log.newest_unit(0, 1)),
            (10, Some(100))
        );
        assert_eq!(
            (log.units_from(0, 0), log.newest_unit(0, 0)),
            (2, Some(200))
        );
        let rejected = evaluate(&log, 300, &check(91));
        assert_eq!(
            (rejected.count, rejected.reset_after_ms),
            (10, 100 + 1_000 - 300)
        );
        // All 0: removed; the log is empty after the other refund too.
        let s = settle(&mut log, 300, &usage(&[0]), &receipt(&r, &first));
        assert!(s.settled && s.decision.record.is_none());
        assert_eq!(log.record_count(), 1);
        let rc = Receipt::new(&usage(&[1, 0]), RecordRef { ts: 200, id: None });
        let s = settle(&mut log, 300, &usage(&[0, 0]), &rc);
        assert!(s.settled);
        assert_eq!(
            (log.len(), s.decision.count, s.decision.reset_after_ms),
            (0, 0, 0)
        );
    }

    #[test]
    fn every_limit_standing_agrees_with_the_deciding_one() {
        let mut log = Log::new();
        for (t, c) in [(0, 60), (100, 30), (200, 5)] {
            charge(&mut log, t, &usage(&[1, c]));
        }
        settle(
            &mut log,
            250,
            &usage(&[1, 0]),
            &Receipt::new(&usage(&[1, 5]), RecordRef { ts: 200, id: None }),
        );
        for now in [250, 999, 1_000, 1_150, 1_250] {
            let each = standing_each(&log, now, &limits());
            assert_eq!(each.decision, standing(&log, now, &limits()));
            let d = each.deciding().unwrap().counts.unwrap();
            let top = each.decision;
            assert_eq!(
                (d.count, d.remaining, d.retry_after_ms, d.reset_after_ms),
                (
                    top.count,
                    top.remaining,
                    top.retry_after_ms,
                    top.reset_after_ms
                )
            );
        }
        // At 250: 3 requests (full: the first expires at 1,000), 90 tokens
        // whose newest counting record is at 100 (200's costs 0 tokens).
        let each = standing_each(&log, 250, &limits());
        let (r, t) = (
            each.limits[0].counts.unwrap(),
            each.limits[1].counts.unwrap(),
        );
        assert_eq!((r.count, r.retry_after_ms, r.reset_after_ms), (3, 750, 950));
        assert_eq!((t.count, t.retry_after_ms, t.reset_after_ms), (90, 0, 850));
    }

    #[test]
    fn an_expired_record_is_not_settled_and_nothing_changes() {
        let mut log = Log::new();
        let r = check(10);
        let d = decide_and_record(&mut log, 0, &r);
        let s = settle(&mut log, 1_000, &usage(&[1, 50]), &receipt(&r, &d));
        assert!(!s.settled);
        assert_eq!((s.decision.count, log.len()), (0, 0));
    }

    #[test]
    fn a_sealed_receipt_settles_once_even_within_a_shared_record() {
        let mut log = Log::new();
        let r = check(10);
        // Two requests in one millisecond: one record of both.
        let first = decide_and_record(&mut log, 100, &r);
        decide_and_record(&mut log, 100, &r);
        assert_eq!(log.len(), 1);
        let spend = |nonce| {
            Some(crate::Spend {
                nonce,
                until_ms: 5_000,
            })
        };
        let sealed = receipt(&r, &first).with_spend(spend(7));
        let refund = usage(&[0, 0]);
        let s = settle(&mut log, 200, &refund, &sealed);
        assert!(s.settled && s.refused.is_none());
        // The replay would take the other request's share: refused, and
        // the log keeps it.
        let again = settle(&mut log, 300, &refund, &sealed);
        assert_eq!(
            (again.settled, again.refused),
            (false, Some(ReceiptError::Spent))
        );
        assert_eq!(again.limits[1].counts.unwrap().count, 10);
        // Another receipt of the same share settles.
        let other = receipt(&r, &first).with_spend(spend(8));
        assert!(settle(&mut log, 300, &refund, &other).settled);
        // The codec keeps what was spent (a snapshot, the module's RDB).
        let mut bytes = Vec::new();
        crate::codec::encode(&log, &mut bytes);
        assert_eq!(
            crate::codec::decode(&bytes).map(|d| d.0.spent().to_vec()),
            Ok(log.spent().to_vec())
        );
    }

    #[test]
    fn a_charge_records_above_the_max_and_zero_records_nothing() {
        let mut log = Log::new();
        let each = charge(&mut log, 0, &usage(&[1, 150]));
        let d = each.decision;
        assert_eq!(
            (d.allowed, d.limit, d.count, d.retry_after_ms),
            (false, 100, 150, 1_000)
        );
        assert_eq!(d.record, Some(RecordRef { ts: 0, id: None }));
        // Every limit: 1 of 3 requests (room for one more), 150 of 100 tokens.
        let r = each.limits[0].counts.unwrap();
        let t = each.limits[1].counts.unwrap();
        assert_eq!((r.count, r.remaining, r.retry_after_ms), (1, 2, 0));
        assert_eq!((t.count, t.remaining, t.retry_after_ms), (150, 0, 1_000));
        assert_eq!((r.reset_after_ms, t.reset_after_ms), (1_000, 1_000));
        let d = charge(&mut log, 10, &usage(&[0])).decision;
        assert_eq!((log.len(), d.record), (1, None));
    }

    #[test]
    fn a_charge_into_a_full_log_merges_into_the_newest_record() {
        let mut log = Log::new();
        // 3 requests per second: full after three charges.
        for t in [0, 100, 200] {
            let d = charge(&mut log, t, &usage(&[1, 10])).decision;
            assert_eq!(d.record, Some(RecordRef { ts: t, id: None }));
        }
        assert!(charge_merges(&log, 300, &usage(&[1, 0])));
        // Costs nothing in the full limit: appended.
        assert!(!charge_merges(&log, 300, &usage(&[0, 5])));
        let d = charge(&mut log, 300, &usage(&[1, 5])).decision;
        assert_eq!(d.record, Some(RecordRef { ts: 300, id: None }));
        assert_eq!(log.len(), 3, "merged into the record at 200, moved to 300");
        assert_eq!((log.ts(2), log.cost(2, 0), log.cost(2, 1)), (300, 2, 15));
        // Its older unit now counts until 300 + 1,000, not 200 + 1,000:
        // conservative.
        assert_eq!(log.units_from(log.first_live(1_250, 1_000), 0), 2);
        // A receipt of the record's old time no longer settles it.
        let old = Receipt::new(&usage(&[1, 10]), RecordRef { ts: 200, id: None });
        assert!(!settle(&mut log, 1_250, &usage(&[0]), &old).settled);
        // The charge's own share does.
        let own = Receipt::new(&usage(&[1, 5]), RecordRef { ts: 300, id: None });
        let s = settle(&mut log, 1_250, &usage(&[0]), &own);
        assert!(s.settled);
        assert_eq!(
            (log.cost(log.len() - 1, 0), log.cost(log.len() - 1, 1)),
            (1, 10)
        );
    }

    #[test]
    fn a_settle_replaces_its_share_of_a_millisecond_s_record() {
        let mut log = Log::new();
        let (a, b) = (check(40), check(30));
        let da = crate::engine::decide_and_record(&mut log, 10, &a);
        let db = crate::engine::decide_and_record(&mut log, 10, &b);
        assert_eq!(log.len(), 1);
        // b used 5 tokens; a none at all (a refund of its share).
        assert!(settle(&mut log, 20, &usage(&[1, 5]), &receipt(&b, &db)).settled);
        assert_eq!((log.cost(0, 0), log.cost(0, 1)), (2, 45));
        assert!(settle(&mut log, 20, &usage(&[0]), &receipt(&a, &da)).settled);
        assert_eq!((log.cost(0, 0), log.cost(0, 1)), (1, 5));
        // a's share is gone: its receipt holds no more than the record.
        assert!(!settle(&mut log, 20, &usage(&[0]), &receipt(&a, &da)).settled);
    }

    #[test]
    fn a_check_of_a_shorter_window_does_not_shorten_the_log() {
        let hour = Request::new("k", vec![Limit::new(3, 3_600_000).unwrap()], 1).unwrap();
        let ms = Request::new("k", vec![Limit::new(1, 1).unwrap()], 1).unwrap();
        let mut log = Log::new();
        for t in 0..3 {
            assert!(crate::engine::decide_and_record(&mut log, 1_000 + t, &hour).allowed);
        }
        assert!(crate::engine::decide_and_record(&mut log, 2_000, &ms).allowed);
        assert_eq!((log.len(), log.horizon()), (4, 3_600_000));
        assert_eq!(evaluate(&log, 2_001, &hour).count, 4);
        // A rejection or a peek leaves the horizon; the log empties and forgets it.
        let mut short = Log::new();
        crate::engine::decide_and_record(&mut short, 0, &ms);
        assert_eq!(short.horizon(), 1);
        let one = Request::new("k", vec![Limit::new(1, 3_600_000).unwrap()], 1).unwrap();
        assert!(!crate::engine::decide_and_record(&mut short, 0, &one).allowed);
        assert_eq!(short.horizon(), 1);
        short.expire(10, 1);
        assert_eq!((short.len(), short.horizon()), (0, 0));
    }
}
