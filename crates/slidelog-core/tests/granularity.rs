//! Granularity per limit (docs/design.md §1.1), differential: random
//! sequences of checks, peeks, settles, charges and clock steps (back too)
//! under 1 to 3 limits whose granularities run from 1 ms to the window,
//! with weighted costs and a cost per limit, give on the engine's `Log`
//! exactly what a plain model with rounded times gives, field by field.

#[path = "granular/model.rs"]
mod model;

use model::{Model, Record};
use proptest::prelude::*;
use slidelog_core::engine::{charge, decide_and_record_each, evaluate_each, settle};
use slidelog_core::{Counts, Limit, LimitState, Log, Receipt, RecordRef, Request};

/// The windows drawn from, with the granularities that divide them.
const WINDOWS: [u64; 6] = [10, 60, 100, 120, 300, 600];

fn limit() -> impl Strategy<Value = Limit> {
    (
        1u64..8,
        proptest::sample::select(WINDOWS.to_vec()),
        any::<proptest::sample::Index>(),
    )
        .prop_map(|(max, w, pick)| {
            let divisors: Vec<u64> = (1..=w).filter(|g| w % g == 0).collect();
            let g = divisors[pick.index(divisors.len())];
            Limit::new(max, w).unwrap().with_granularity(g).unwrap()
        })
}

/// One step of a run.
#[derive(Debug, Clone)]
pub enum Op {
    /// Moves the clock by this many ms (negative: a step back).
    Step(i64),
    /// A check of these costs (each at most its limit's max).
    Check([u64; 3]),
    /// A peek of these costs.
    Peek([u64; 3]),
    /// Settles the n-th receipt issued (old ones included) to these costs.
    Settle(usize, [u64; 3]),
    /// A charge of these costs.
    Charge([u64; 3]),
}

/// A run of operations.
pub fn ops() -> impl Strategy<Value = Vec<Op>> {
    let costs = proptest::array::uniform3(1u64..4);
    let usage = proptest::array::uniform3(0u64..5);
    let op = prop_oneof![
        4 => prop_oneof![9 => 0i64..200, 1 => -300i64..0].prop_map(Op::Step),
        6 => costs.clone().prop_map(Op::Check),
        1 => costs.prop_map(Op::Peek),
        2 => (0usize..8, usage.clone()).prop_map(|(n, c)| Op::Settle(n, c)),
        1 => usage.prop_map(Op::Charge),
    ];
    proptest::collection::vec(op, 1..120)
}

/// `costs` for `n` limits as a request lists them (1 when all are equal)
/// and as the model keeps them (every position past `n` its last).
pub fn costs_of(costs: [u64; 3], n: usize) -> (Vec<u64>, [u64; 3]) {
    let list = costs[..n].to_vec();
    let last = list[n - 1];
    let full = [0, 1, 2].map(|p| if p < n { costs[p] } else { last });
    (list, full)
}

/// A check's costs, each at most its limit's max.
fn check_costs(limits: &[Limit], costs: [u64; 3]) -> [u64; 3] {
    [0, 1, 2].map(|p| costs[p].min(limits[p.min(limits.len() - 1)].max()))
}

fn counts(limits: &[LimitState]) -> Vec<Counts> {
    limits.iter().map(|s| s.counts.unwrap()).collect()
}

/// True when some records of `limits` move to a coarse tier: the limits
/// of the longest windows share a granule coarser than all share.
fn tiered(limits: &[Limit]) -> bool {
    let gcd = |a: u64, b: u64| -> u64 {
        let (mut a, mut b) = (a, b);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut order: Vec<(u64, u64)> = limits
        .iter()
        .map(|l| (l.window_ms(), l.granularity_ms()))
        .collect();
    order.sort_unstable();
    let all = order.iter().fold(0, |a, l| gcd(a, l.1));
    (1..order.len()).any(|k| order[k..].iter().fold(0, |a, l| gcd(a, l.1)) > all)
}

fn run(limits: Vec<Limit>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let n = limits.len();
    // A record moved to a coarse tier may count again in a finer limit
    // once the clock steps back (later than it would have: never early,
    // docs/design.md §1.1), and the engine moves records lazily: the
    // model moves them at once. So tiered runs step forward only.
    let back = !tiered(&limits);
    let mut model = Model::new(limits.clone());
    let mut log = Log::new();
    let mut receipts: Vec<(Receipt, Record)> = Vec::new();
    let mut now = 100_000u64;
    for op in ops {
        match op {
            Op::Step(dt) => now = now.saturating_add_signed(if back { dt } else { dt.max(0) }),
            Op::Check(c) | Op::Peek(c) => {
                let (list, full) = costs_of(check_costs(&limits, c), n);
                let r = Request::with_costs("k", limits.clone(), list).unwrap();
                let record = matches!(op, Op::Check(_));
                let got = if record {
                    decide_and_record_each(&mut log, now, &r)
                } else {
                    evaluate_each(&log, now, &r)
                };
                let want = model.check(now, full, record);
                prop_assert_eq!(got.decision, want, "{:?} at {}", op, now);
                if let Some(at) = got.decision.record {
                    receipts.push((Receipt::new(&r, at), (at.ts, full)));
                }
            }
            Op::Settle(i, c) => {
                let Some((receipt, share)) = receipts.get(i % receipts.len().max(1)).cloned()
                else {
                    continue;
                };
                let (list, full) = costs_of(c, n);
                let r = Request::usage("k", limits.clone(), list).unwrap();
                let live = model.counts_anywhere(now, share);
                let got = settle(&mut log, now, &r, &receipt);
                let (settled, mut want, each) = model.settle(now, share, full);
                prop_assert_eq!(counts(&got.limits), each, "{:?} at {}", op, now);
                if live {
                    prop_assert_eq!(got.settled, settled, "{:?} at {}", op, now);
                } else {
                    // A record no limit counts: settling it or not changes
                    // no answer (the engine may still hold it in a tier).
                    want.record = got.decision.record;
                }
                prop_assert_eq!(got.decision, want, "{:?} at {}", op, now);
                if let (Some(at), true) = (got.decision.record, settled) {
                    receipts.push((Receipt::new(&r, at), (share.0, full)));
                }
            }
            Op::Charge(c) => {
                let (list, full) = costs_of(c, n);
                let r = Request::usage("k", limits.clone(), list).unwrap();
                let got = charge(&mut log, now, &r);
                let (want, each) = model.charge(now, full);
                prop_assert_eq!(counts(&got.limits), each, "{:?} at {}", op, now);
                prop_assert_eq!(got.decision, want, "{:?} at {}", op, now);
                if let Some(at) = got.decision.record {
                    receipts.push((Receipt::new(&r, at), (at.ts, full)));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    #[test]
    fn granular_limits_match_the_model(
        limits in proptest::collection::vec(limit(), 1..=3),
        ops in ops(),
    ) {
        run(limits, ops)?;
    }
}

#[test]
fn a_record_counts_at_its_time_rounded_up_never_early() {
    // 2 per 1,000 ms at 100 ms: admitted at 1,050 and 1,120, they count as
    // if at 1,100 and 1,200: the next unit fits at 2,100, not 2,050.
    let limit = Limit::new(2, 1_000).unwrap().with_granularity(100).unwrap();
    let r = Request::single("k", limit).unwrap();
    let mut log = Log::new();
    let first = decide_and_record_each(&mut log, 1_050, &r).decision;
    assert_eq!(
        first.record,
        Some(RecordRef {
            ts: 1_100,
            id: None
        })
    );
    assert_eq!(first.reset_after_ms, 1_100 + 1_000 - 1_050);
    assert!(decide_and_record_each(&mut log, 1_120, &r).decision.allowed);
    let d = evaluate_each(&log, 2_050, &r).decision;
    assert_eq!((d.allowed, d.retry_after_ms), (false, 50));
    assert!(evaluate_each(&log, 2_100, &r).decision.allowed);
    // Both merged into one record per granule.
    assert_eq!(log.len(), 2);
}

#[test]
fn a_bad_granularity_names_the_field_and_the_bound() {
    let err = Limit::new(10, 1_000)
        .unwrap()
        .with_granularity(300)
        .unwrap_err();
    assert_eq!(err.field(), "granularity_ms");
    assert!(err.to_string().contains("granularity_ms"), "{err}");
    assert!(err.to_string().contains("1000"), "{err}");
    for g in [0, 1_001, 2_000] {
        assert!(Limit::new(10, 1_000).unwrap().with_granularity(g).is_err());
    }
}

#[test]
fn the_operator_floor_raises_to_the_smallest_divisor() {
    let minute = Limit::new(10, 60_000).unwrap();
    assert_eq!(minute.with_floor(1.0 / 600.0).granularity_ms(), 100);
    assert_eq!(minute.with_floor(0.001).granularity_ms(), 60);
    // 7 ms has no divisor from 3 to 6: raised to 7.
    assert_eq!(
        Limit::new(1, 7).unwrap().with_floor(0.4).granularity_ms(),
        7
    );
    let coarse = minute.with_granularity(1_000).unwrap();
    assert_eq!(coarse.with_floor(0.001).granularity_ms(), 1_000);
    // A prime window over a day: the search ends.
    let prime = Limit::new(1, 86_400_013).unwrap();
    assert_eq!(prime.with_floor(0.5).granularity_ms(), 86_400_013);
}

#[test]
fn mixed_granularities_keep_the_day_at_minutes() {
    // 10 per second at 10 ms and 100,000 per day at 1 minute: after a
    // minute of traffic every 10 ms, the log holds about a second's 10 ms
    // granules and the older records in minutes, not 6,000 records.
    let limits = vec![
        Limit::new(10, 1_000).unwrap().with_granularity(10).unwrap(),
        Limit::new(100_000, 86_400_000)
            .unwrap()
            .with_granularity(60_000)
            .unwrap(),
    ];
    let r = Request::new("k", limits, 1).unwrap();
    let mut log = Log::new();
    let start = 1_000_000_000u64;
    let mut admitted = 0;
    for t in (0..600_000).step_by(10) {
        admitted += u64::from(
            decide_and_record_each(&mut log, start + t, &r)
                .decision
                .allowed,
        );
    }
    assert_eq!(admitted, 6_000);
    assert!(log.len() < 600, "{} records", log.len());
    let d = evaluate_each(&log, start + 600_000, &r);
    assert_eq!(d.limits[1].counts.unwrap().count, 6_000 + 1);
}
