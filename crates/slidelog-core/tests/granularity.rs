//! Granularity per limit (docs/design.md §1.1), differential: random
//! sequences of checks, peeks, settles, charges and clock steps (back too)
//! under 1 to 3 limits whose granularities run from 1 ms to the window,
//! with weighted costs and a cost per limit, give on the engine's `Log`
//! exactly what a plain model with rounded times gives, field by field.

mod granular;

use granular::run::{Subject, counts, limit, ops, run};
use proptest::prelude::*;
use slidelog_core::engine::{charge, decide_and_record_each, evaluate_each, settle};
use slidelog_core::{Counts, Decision, Limit, Log, Receipt, RecordRef, Request};

/// The engine on one log.
struct Engine(Log);

impl Subject for Engine {
    fn check(&mut self, request: &Request, now: u64, record: bool) -> Decision {
        if record {
            decide_and_record_each(&mut self.0, now, request).decision
        } else {
            evaluate_each(&self.0, now, request).decision
        }
    }

    fn settle(
        &mut self,
        request: &Request,
        receipt: &Receipt,
        now: u64,
    ) -> (bool, Decision, Vec<Counts>) {
        let s = settle(&mut self.0, now, request, receipt);
        (s.settled, s.decision, counts(&s.limits))
    }

    fn charge(&mut self, request: &Request, now: u64) -> (Decision, Vec<Counts>) {
        let d = charge(&mut self.0, now, request);
        (d.decision, counts(&d.limits))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    #[test]
    fn granular_limits_match_the_model(
        limits in proptest::collection::vec(limit(), 1..=3),
        ops in ops(),
    ) {
        run(&mut Engine(Log::new()), limits, ops)?;
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
    use slidelog_core::GranularityFloor;
    let floor = |text: &str| text.parse::<GranularityFloor>().unwrap();
    let minute = Limit::new(10, 60_000).unwrap();
    assert_eq!(floor("1/600").limit(minute).granularity_ms(), 100);
    assert_eq!(floor("0.001").limit(minute).granularity_ms(), 60);
    // 7 ms has no divisor from 3 to 6: raised to 7.
    let seven = Limit::new(1, 7).unwrap();
    assert_eq!(floor("0.4").limit(seven).granularity_ms(), 7);
    let coarse = minute.with_granularity(1_000).unwrap();
    assert_eq!(floor("0.001").limit(coarse).granularity_ms(), 1_000);
    // A prime window over a day: the search ends.
    let prime = Limit::new(1, 86_400_013).unwrap();
    assert_eq!(floor("1/2").limit(prime).granularity_ms(), 86_400_013);
    for bad in ["0", "1.5", "2/1", "-1", "x", "1/0", ""] {
        let err = bad.parse::<GranularityFloor>().unwrap_err();
        assert!(err.to_string().contains("(0, 1]"), "{err}");
    }
    // A request: raised limits, costs and key kept.
    let r = Request::with_costs(
        "k",
        vec![minute, Limit::new(100, 1_000).unwrap()],
        vec![1, 40],
    )
    .unwrap();
    let raised = floor("1/100").request(&r).unwrap();
    let g: Vec<u64> = raised.limits().iter().map(Limit::granularity_ms).collect();
    assert_eq!((g, raised.costs().to_vec()), (vec![600, 10], vec![1, 40]));
    assert_eq!(raised.granule_ms(), 10);
    assert!(floor("1/100").request(&raised).is_none());
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

#[test]
fn the_limit_syntax_takes_a_granularity_after_an_at() {
    let limits =
        slidelog_core::limit::parse_list("100/1m@1s, tokens=100000/day@1m, 5/500ms").unwrap();
    let g: Vec<u64> = limits.iter().map(Limit::granularity_ms).collect();
    assert_eq!(g, [1_000, 60_000, 1]);
    let err = "10/1s@300ms".parse::<Limit>().unwrap_err();
    assert!(err.to_string().contains("granularity_ms"), "{err}");
    assert!("10/1s@".parse::<Limit>().is_err());
}

/// The cases the differential run found while the tiers were written
/// (proptest keeps no regression file for an integration test), replayed.
#[test]
fn the_differential_run_s_past_failures_pass() {
    use granular::run::Op::{Charge, Check, Peek, Settle, Step};
    let l = |m: u64, w: u64, g: u64| Limit::new(m, w).unwrap().with_granularity(g).unwrap();
    let one = [1, 1, 1];
    let steps = |s: &[i64]| s.iter().map(|&d| Step(d)).collect::<Vec<_>>();
    let mut cases = Vec::new();
    // A moved record counting again after a step back; a settle of an expired one.
    let mut ops = steps(&[53, 5, 46, 63, 124, 5, 14, 93, 7, 46, 12, 13, 78]);
    ops.push(Check(one));
    ops.extend(steps(&[56, 17, 137, -6, 68, 30]));
    ops.extend([
        Check(one),
        Step(71),
        Check(one),
        Step(-2),
        Settle(0, [0, 0, 0]),
    ]);
    cases.push((vec![l(1, 300, 10), l(1, 60, 6)], ops));
    // A settle of a record moved to its tier, twice, then of its receipt.
    let mut ops = vec![Check(one)];
    ops.extend(steps(&[78, 23, 9, 95]));
    ops.extend([
        Check(one),
        Settle(0, [1, 1, 0]),
        Step(8),
        Settle(0, [1, 1, 0]),
    ]);
    ops.extend(steps(&[79, 196, -2, 171]));
    ops.push(Settle(2, [0, 0, 0]));
    cases.push((vec![l(2, 600, 60), l(1, 100, 1)], ops));
    // A charge merged into the newest record, then a settle of the first.
    let mut ops = steps(&[85, 116]);
    ops.extend([
        Check(one),
        Step(172),
        Charge([0, 1, 0]),
        Step(137),
        Check(one),
    ]);
    ops.push(Settle(2, [0, 0, 0]));
    cases.push((vec![l(1, 10, 1), l(1, 300, 300)], ops));
    // Three tiers whose granules must form one nested chain.
    let mut ops = vec![Check(one), Settle(0, [0, 0, 0])];
    ops.extend(steps(&[46, 170, 47]));
    ops.extend([Peek(one), Peek(one), Step(85), Check(one), Step(102)]);
    ops.extend([
        Settle(1, [1, 0, 0]),
        Step(161),
        Check(one),
        Charge([0, 0, 1]),
    ]);
    ops.extend(steps(&[181, 169, 27, 110, 142]));
    ops.push(Settle(3, [0, 1, 0]));
    cases.push((vec![l(1, 600, 20), l(4, 600, 300), l(1, 10, 1)], ops));
    // A settle of a record the coarse tier moved, after a later request
    // recorded at the time the record would have in a coarser granule: the
    // settle must not take the later request's units.
    let mut ops = steps(&[101, 127, 195]);
    ops.extend([Check(one), Settle(0, [2, 0, 0])]);
    ops.extend(steps(&[138, 52, 168]));
    ops.extend([Check([2, 1, 1]), Settle(2, [0, 0, 0])]);
    cases.push((vec![l(2, 100, 20), l(3, 600, 600)], ops));
    // A charge merged into the newest record and moved it to a time that is
    // also the first record's place in a finer granule of the tier: the
    // first receipt no longer names it.
    let ops = vec![
        Step(155),
        Check(one),
        Step(15),
        Charge([1, 0, 0]),
        Settle(2, [0, 0, 0]),
    ];
    cases.push((vec![l(1, 600, 60), l(1, 10, 1)], ops));
    // The same, then a later check recorded at that time: the first
    // receipt's settle must not refund the later request (it would admit a
    // second request in the 10 ms window).
    let mut ops = vec![Step(155), Check(one), Step(5), Charge([1, 0, 0])];
    ops.extend([Step(10), Check(one), Settle(0, [0, 0, 0]), Check(one)]);
    cases.push((vec![l(1, 10, 1), l(5, 600, 60)], ops));
    for (limits, ops) in cases {
        run(&mut Engine(Log::new()), limits, ops).unwrap();
    }
}
