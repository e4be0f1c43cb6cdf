//! The log's unit tests and its model test against a plain list
//! (docs/design.md §4.1, §4.6): same-millisecond merging, settles by
//! share, refunds, the horizon and charges merged into the newest record.

use super::*;
use crate::MAX_LIMITS;

#[test]
fn plain_logs_count_by_rank_and_keep_no_sums() {
    let mut log = Log::new();
    for t in [10, 20, 30] {
        log.append(t, &[1]);
    }
    assert!(!log.is_weighted());
    assert_eq!(log.units_from(1, 0), 2);
    assert_eq!(log.kth_unit_ts(1, 0, 2), 30);
}

#[test]
fn weighted_records_count_their_costs() {
    let mut log = Log::new();
    log.append(10, &[1]);
    log.append(20, &[5]);
    log.append(30, &[2]);
    assert_eq!(log.len(), 3);
    assert_eq!(log.units_from(0, 0), 8);
    assert_eq!(log.units_from(1, 0), 7);
    // Units by age: 10 | 20 x5 | 30 x2.
    assert_eq!(log.kth_unit_ts(0, 0, 1), 10);
    assert_eq!(log.kth_unit_ts(0, 0, 2), 20);
    assert_eq!(log.kth_unit_ts(0, 0, 6), 20);
    assert_eq!(log.kth_unit_ts(0, 0, 7), 30);
    log.expire(1_015, 1_000);
    assert_eq!((log.len(), log.units_from(0, 0)), (2, 7));
    assert_eq!(log.kth_unit_ts(0, 0, 5), 20);
}

#[test]
fn per_position_costs_and_widening() {
    let mut log = Log::new();
    log.append(10, &[3]); // 3 for every position
    log.append(20, &[1, 400]);
    assert_eq!(log.units_from(0, 0), 4);
    assert_eq!(log.units_from(0, 1), 403);
    // A later position repeats the last listed cost.
    assert_eq!(log.units_from(0, 5), 403);
    assert_eq!(log.kth_unit_ts(0, 1, 4), 20);
    assert_eq!(log.kth_unit_ts(0, 0, 3), 10);
}

#[test]
fn an_earlier_record_goes_in_order_and_later_sums_grow() {
    let mut log = Log::new();
    log.append(10, &[2]);
    log.append(30, &[2]);
    log.append(20, &[5]);
    assert_eq!((log.ts(0), log.ts(1), log.ts(2)), (10, 20, 30));
    assert_eq!(log.units_from(2, 0), 2);
    assert_eq!(log.units_from(1, 0), 7);
    assert_eq!(log.kth_unit_ts(0, 0, 3), 20);
}

fn stamps(log: &Log) -> Vec<u64> {
    (0..log.len()).map(|j| log.ts(j)).collect()
}

#[test]
fn an_emptied_log_keeps_its_room_and_a_sparse_one_shrinks() {
    let mut log = Log::new();
    for t in 0..5 {
        log.append(100 + t, &[1]);
    }
    assert_eq!(stamps(&log), [100, 101, 102, 103, 104]);
    let room = log.heap_bytes();
    assert!(room >= 5 * 4);
    // Everything expires: the next record sets the base, in the same room.
    assert_eq!(log.expire(10_000, 1_000), 5);
    assert_eq!((log.len(), log.heap_bytes()), (0, room));
    log.append(50, &[1]);
    assert_eq!(stamps(&log), [50]);
    // A burst that expired would leave a sparse log: the expiry itself
    // shrinks it to room for a quarter more than the records left.
    for t in 0..200 {
        log.append(20_000 + t, &[1]);
    }
    let burst = log.heap_bytes();
    assert!(burst <= 200 * 4 * 5 / 4 + 64, "{burst}");
    log.expire(21_197, 1_000);
    assert_eq!(stamps(&log), [20_198, 20_199]);
    assert!(!log.is_sparse());
    assert!(log.heap_bytes() <= 4 * 4, "{}", log.heap_bytes());
    log.shrink_if_sparse();
    assert_eq!(stamps(&log), [20_198, 20_199]);
}

#[test]
fn a_log_whose_newest_record_expired_empties_whole() {
    // Weighted and whole timestamps (60 days apart): the newest record
    // has expired, so every record goes, and the log is plain offsets again.
    let day = 86_400_000;
    let mut log = Log::new();
    log.append(1_000, &[3]);
    log.append(1_000 + 60 * day, &[1, 2]);
    assert!(log.wide() && log.is_weighted());
    let room = log.heap_bytes();
    assert_eq!(log.expire(1_000 + 61 * day, day), 2);
    assert!(log.is_empty() && !log.wide() && !log.is_weighted());
    assert_eq!(log.newest(), None);
    assert!(log.heap_bytes() <= room);
    // Only the oldest expired: counted from the front, the newest kept.
    log.append(5_000, &[1]);
    log.append(6_000, &[1]);
    assert_eq!(log.expire(6_500, 1_000), 1);
    assert_eq!(stamps(&log), [6_000]);
    // Nothing expired, and an empty log: nothing to drop.
    assert_eq!(log.expire(6_500, 1_000), 0);
    assert_eq!(Log::new().expire(10_000, 1_000), 0);
}

#[test]
fn dropped_records_make_room_before_the_queue_grows() {
    let mut log = Log::new();
    // A steady 24 live records: the queue stops growing.
    for t in 0..24 {
        log.append(t, &[1]);
    }
    let settled = (0..1_000).fold(0, |_, t| {
        log.expire(24 + t, 24);
        log.append(24 + t, &[1]);
        log.heap_bytes()
    });
    assert_eq!(log.len(), 24);
    assert!(settled <= 32 * 4, "{settled} bytes for 24 records");
    assert_eq!(log.ts(0), 1_000);
}

#[test]
fn offsets_rebase_when_a_record_falls_outside_them() {
    let span = u64::from(u32::MAX);
    let mut log = Log::new();
    log.append(1_000, &[1]);
    log.append(2_000, &[1]);
    // A clock that stepped back: below the base.
    log.append(500, &[1]);
    assert_eq!(stamps(&log), [500, 1_000, 2_000]);
    // u32::MAX ms after the base, and the oldest gone: the base moves up.
    log.expire(1_001, 1);
    assert_eq!(stamps(&log), [2_000]);
    log.append(600 + span, &[1]);
    log.append(2_000 + span, &[1]);
    assert_eq!(stamps(&log), [2_000, 600 + span, 2_000 + span]);
    assert_eq!(log.first_live(2_000 + span, span), 1);
    assert_eq!(log.kth_unit_ts(0, 0, 3), 2_000 + span);
}

#[test]
fn a_log_spanning_more_than_the_offsets_keeps_whole_timestamps() {
    let day = 86_400_000;
    let mut log = Log::new();
    log.append(1_000, &[1]);
    log.append(1_000 + 30 * day, &[2]);
    // 60 days: more than u32::MAX ms (49.7 days).
    log.append(1_000 + 60 * day, &[1]);
    log.append(1_000 + 60 * day + 1, &[1]);
    assert_eq!(
        stamps(&log),
        [
            1_000,
            1_000 + 30 * day,
            1_000 + 60 * day,
            1_000 + 60 * day + 1
        ]
    );
    assert_eq!(log.units_from(0, 0), 5);
    assert_eq!(log.first_live(1_000 + 60 * day, 40 * day), 1);
    assert_eq!(log.first_live(1_000 + 60 * day, 30 * day), 2);
    assert_eq!(log.kth_unit_ts(0, 0, 3), 1_000 + 30 * day);
    // A step back below all of them, still wide.
    log.append(10, &[1]);
    assert_eq!(log.ts(0), 10);
    // The oldest expire: 1 day apart, the log is offsets again.
    assert_eq!(log.expire(1_000 + 60 * day + 1, 20 * day), 3);
    assert_eq!(stamps(&log), [1_000 + 60 * day, 1_000 + 60 * day + 1]);
    assert!(!log.wide());
    assert_eq!(log.units_from(0, 0), 2);
}

#[test]
fn a_log_is_48_bytes() {
    // The memory store's table entry holds one: keep it small.
    assert_eq!(std::mem::size_of::<Log>(), 48);
}

#[test]
fn records_of_one_millisecond_are_one_record() {
    let mut log = Log::new();
    log.append(10, &[1]);
    log.append(10, &[1]);
    log.append(20, &[1, 5]);
    log.append(20, &[2]);
    assert_eq!(stamps(&log), [10, 20]);
    assert_eq!((log.cost(0, 0), log.cost(0, 3)), (2, 2));
    assert_eq!((log.cost(1, 0), log.cost(1, 1)), (3, 7));
    // A clock that stepped back to 10: the record at 10 takes it.
    log.append(10, &[4]);
    assert_eq!(stamps(&log), [10, 20]);
    assert_eq!(log.units_from(0, 0), 6 + 3);
    assert_eq!(log.kth_unit_ts(0, 1, 6), 10);
    assert_eq!(log.kth_unit_ts(0, 1, 7), 20);
}

#[test]
fn a_settle_replaces_its_share_and_a_refund_is_a_tombstone() {
    let mut log = Log::new();
    log.append(10, &[1, 30]);
    log.append(10, &[1, 50]);
    log.append(20, &[1, 5]);
    log.append(30, &[1]);
    // The first request's share (1, 30) of the record (2, 80) at 10.
    assert!(log.settle_share(10, &[1, 30], &[1, 12]));
    assert_eq!((log.cost(0, 0), log.cost(0, 1)), (2, 62));
    // A share the record does not hold: nothing changes.
    assert!(!log.settle_share(10, &[1, 63], &[0]));
    assert!(!log.settle_share(11, &[1], &[0]));
    // Refund the record at 20: a tombstone that counts nowhere (one of
    // three records: not compacted yet).
    assert!(log.settle_share(20, &[1, 5], &[0]));
    assert_eq!((log.len(), log.record_count()), (3, 2));
    assert!(log.is_tombstone(1));
    assert_eq!((log.units_from(0, 0), log.units_from(0, 1)), (3, 63));
    assert_eq!(log.units_from(1, 1), 1);
    assert_eq!(log.kth_unit_ts(0, 1, 63), 30);
    assert_eq!(log.records().count(), 2);
    // A check at 20 revives the tombstone's timestamp.
    log.append(20, &[1, 1]);
    assert_eq!(
        (log.len(), log.record_count(), log.units_from(1, 1)),
        (3, 3, 2)
    );
    // The newest refunded: dropped at once, so the newest record counts.
    assert!(log.settle_share(30, &[1], &[0]));
    assert_eq!((log.len(), log.newest()), (2, Some(20)));
    // Refunds of both: the log empties and forgets its horizon.
    log.raise_horizon(1_000);
    assert!(log.settle_share(10, &[2, 62], &[0]));
    assert_eq!((log.len(), log.record_count()), (2, 1));
    assert!(log.settle_share(20, &[1], &[0]));
    assert!(log.is_empty() && !log.is_weighted());
    assert_eq!(log.horizon(), 0);
}

#[test]
fn a_charge_merges_into_the_newest_record_and_moves_it() {
    let mut log = Log::new();
    log.append(10, &[1]);
    log.append(20, &[3]);
    assert_eq!(log.merge_into_newest(50, &[2, 9]), 50);
    assert_eq!(stamps(&log), [10, 50]);
    assert_eq!((log.cost(1, 0), log.cost(1, 1)), (5, 12));
    // A clock behind the newest record: it stays where it is.
    assert_eq!(log.merge_into_newest(40, &[1]), 50);
    assert_eq!((stamps(&log), log.cost(1, 0)), (vec![10, 50], 6));
    // Whole timestamps: the newest moves out of the offsets' range.
    let far = 10 + u64::from(u32::MAX) + 5;
    assert_eq!(log.merge_into_newest(far, &[1]), far);
    assert_eq!(stamps(&log), [10, far]);
    assert!(log.wide());
    assert_eq!(log.units_from(0, 1), 1 + 14);
    // An empty log gets a record.
    assert_eq!(Log::new().merge_into_newest(7, &[2]), 7);
}

#[test]
fn the_horizon_keeps_records_a_shorter_request_would_drop() {
    let mut log = Log::new();
    log.append(1_000, &[1]);
    log.raise_horizon(60_000);
    log.append(1_500, &[1]);
    // A request of a 1 ms window expires nothing younger than the horizon.
    assert_eq!(log.expire(2_000, 1), 0);
    assert_eq!(log.len(), 2);
    // A shorter horizon does not lower it; a longer request's window is
    // used when longer.
    log.raise_horizon(10);
    assert_eq!(log.horizon(), 60_000);
    assert_eq!(log.expire(61_000, 1), 1);
    assert_eq!(log.expire(61_600, 120_000), 0);
    // Emptied: the horizon is forgotten.
    assert_eq!(log.expire(61_600, 1), 1);
    assert_eq!((log.len(), log.horizon()), (0, 0));
    // The longest window (366 days) fits.
    log.raise_horizon(crate::MAX_WINDOW_MS);
    assert_eq!(log.horizon(), crate::MAX_WINDOW_MS);
    assert_eq!(std::mem::size_of::<Log>(), 48);
}

#[test]
fn a_cost_past_u32_saturates_and_stays_saturated() {
    let mut log = Log::new();
    for _ in 0..500 {
        log.append(10, &[10_000_000]);
    }
    assert_eq!(log.cost(0, 0), u64::from(u32::MAX));
    // A settle of one share leaves it saturated: it still rejects every
    // request (every max is at most 10,000,000).
    assert!(log.settle_share(10, &[10_000_000], &[0]));
    assert_eq!(log.cost(0, 0), u64::from(u32::MAX));
}

#[test]
fn widening_keeps_old_records_at_one_cost_each() {
    let n = 10_000u64;
    let mut log = Log::new();
    for t in 0..n {
        log.append(t, &[2]);
    }
    let narrow = log.heap_bytes();
    log.append(n, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    let wide = log.heap_bytes();
    // 15 more trees of one u64 per block of 32 records: ~4 bytes a record.
    assert!(wide - narrow < n as usize * 5, "{narrow} -> {wide}");
    assert_eq!(log.units_from(0, 15), 2 * n + 16);
    assert_eq!(log.kth_unit_ts(0, 15, 2 * n + 1), n);
    // Settling the oldest to 16 costs widens one block only.
    assert!(log.settle_share(
        0,
        &[2],
        &[16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    ));
    assert!(log.heap_bytes() - wide < 32 * 16 * 4 + 256);
    assert_eq!(log.units_from(0, 0), 2 * n - 2 + 16 + 1);
    assert_eq!(log.units_from(1, 15), 2 * n - 2 + 16);
}

#[test]
fn bytes_per_record_stay_in_their_targets() {
    let n = 200_000u64;
    let per = |log: &Log| log.heap_bytes() as f64 / n as f64;
    let (mut plain, mut weighted, mut wide) = (Log::new(), Log::new(), Log::new());
    let sixteen: Vec<u64> = (1..=16).collect();
    for t in 0..n {
        plain.append(t, &[1]);
        weighted.append(t, &[7]);
        wide.append(t, &sixteen);
    }
    assert!(per(&plain) <= 4.0 * 1.5, "plain {}", per(&plain));
    assert!(per(&weighted) <= 16.0, "weighted {}", per(&weighted));
    assert!(
        per(&wide) <= 16.0 * 4.0 + 16.0,
        "16 positions {}",
        per(&wide)
    );
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Op {
    /// Append at `now + delta` with these costs.
    Append(i64, Vec<u64>),
    /// A check recorded at `now + delta` with this longest window: the
    /// engine's expire, append and horizon.
    Check(i64, u64, Vec<u64>),
    /// A charge merged into the newest record at `now + delta`.
    Merge(i64, Vec<u64>),
    /// Expire for this window at `now + delta`.
    Expire(i64, u64),
    /// Settle a share of the record at this index (modulo the length):
    /// the share is the record's costs less these (saturating at 0), or
    /// more than it holds when `over`.
    Settle(usize, Vec<u64>, bool, Vec<u64>),
    /// Set the costs of the record at this index (modulo the length).
    SetCosts(usize, Vec<u64>),
}

/// Deltas that cross the offset range both ways (often 0: the same
/// millisecond), and windows up to 366 days.
fn ops() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
    use proptest::prelude::*;
    let delta = prop_oneof![
        2 => Just(0i64),
        4 => 0i64..1_000,
        1 => -1_000i64..0,
        1 => -(1i64 << 33)..(1i64 << 33),
    ];
    let costs = prop_oneof![
        3 => Just(vec![1u64]),
        1 => (1u64..5).prop_map(|c| vec![c]),
        1 => proptest::collection::vec(1u64..5, 2),
        1 => proptest::collection::vec(0u64..5, 3..=16).prop_map(|mut c| {
            // A request costs something somewhere.
            c[0] = c[0].max(1);
            c
        }),
    ];
    let window = prop_oneof![1u64..2_000, 1u64..31_622_400_000];
    let some = prop_oneof![
        (0u64..5).prop_map(|c| vec![c]),
        proptest::collection::vec(0u64..5, 2),
    ];
    proptest::collection::vec(
        prop_oneof![
            4 => (delta.clone(), costs.clone()).prop_map(|(d, c)| Op::Append(d, c)),
            2 => (delta.clone(), window.clone(), costs.clone()).prop_map(|(d, w, c)| Op::Check(d, w, c)),
            1 => (delta.clone(), costs).prop_map(|(d, c)| Op::Merge(d, c)),
            1 => (delta, window).prop_map(|(d, w)| Op::Expire(d, w)),
            2 => (0usize..200, some.clone(), any::<bool>(), some.clone())
                .prop_map(|(j, less, over, new)| Op::Settle(j, less, over, new)),
            1 => (0usize..200, some).prop_map(|(j, c)| Op::SetCosts(j, c)),
        ],
        1..120,
    )
}

/// A record's costs at every position (a later one: the last listed).
fn full(costs: &[u64]) -> [u64; MAX_LIMITS] {
    std::array::from_fn(|p| costs[p.min(costs.len() - 1)])
}

/// The plain model: (timestamp, costs) ascending, one per millisecond, no
/// tombstones, and the horizon.
#[derive(Default)]
struct Model {
    records: Vec<(u64, [u64; MAX_LIMITS])>,
    horizon: u64,
}

impl Model {
    fn add(&mut self, ts: u64, costs: &[u64]) {
        let at = self.records.partition_point(|(t, _)| *t < ts);
        match self.records.get_mut(at) {
            Some((t, c)) if *t == ts => (0..MAX_LIMITS).for_each(|p| c[p] += full(costs)[p]),
            _ => self.records.insert(at, (ts, full(costs))),
        }
    }

    fn expire(&mut self, now: u64, window: u64) -> usize {
        let keep = window.max(self.horizon);
        let gone = self
            .records
            .iter()
            .take_while(|(t, _)| t + keep <= now)
            .count();
        self.records.drain(..gone);
        if self.records.is_empty() {
            self.horizon = 0;
        }
        gone
    }

    fn set(&mut self, ts: u64, costs: &[u64]) {
        let j = self.records.iter().position(|(t, _)| *t == ts).unwrap();
        let c = full(costs);
        if c.iter().all(|&x| x == 0) {
            self.records.remove(j);
            if self.records.is_empty() {
                self.horizon = 0;
            }
        } else {
            self.records[j].1 = c;
        }
    }

    fn settle(&mut self, ts: u64, share: &[u64], new: &[u64]) -> bool {
        let Some(j) = self.records.iter().position(|(t, _)| *t == ts) else {
            return false;
        };
        let (share, new) = (full(share), full(new));
        let c = &mut self.records[j].1;
        if (0..MAX_LIMITS).any(|p| c[p] < share[p]) {
            return false;
        }
        (0..MAX_LIMITS).for_each(|p| c[p] = c[p] - share[p] + new[p]);
        if c.iter().all(|&x| x == 0) {
            self.records.remove(j);
            if self.records.is_empty() {
                self.horizon = 0;
            }
        }
        true
    }
}

/// A share of a record of costs `c`: less `less` (at least 1 somewhere),
/// or more than it holds when `over`.
fn share_of(c: &[u64; MAX_LIMITS], less: &[u64], over: bool) -> Vec<u64> {
    let less = full(less);
    let share: Vec<u64> = c
        .iter()
        .zip(less)
        .map(|(c, l)| if over { c + l + 1 } else { c.saturating_sub(l) })
        .collect();
    if share.iter().all(|&s| s == 0) {
        vec![1]
    } else {
        share
    }
}

/// Steps the log and the model by one op; the clock moves by the op's delta.
fn step(
    log: &mut Log,
    model: &mut Model,
    now: &mut u64,
    op: Op,
) -> Result<(), proptest::test_runner::TestCaseError> {
    match op {
        Op::Append(d, costs) => {
            *now = now.saturating_add_signed(d);
            log.append(*now, &costs);
            model.add(*now, &costs);
        }
        Op::Check(d, window, costs) => {
            *now = now.saturating_add_signed(d);
            proptest::prop_assert_eq!(log.expire(*now, window) >= model.expire(*now, window), true);
            log.append(*now, &costs);
            log.raise_horizon(window);
            model.add(*now, &costs);
            model.horizon = model.horizon.max(window);
        }
        Op::Merge(d, costs) => {
            *now = now.saturating_add_signed(d);
            let ts = log.merge_into_newest(*now, &costs);
            let newest = model.records.pop().map(|(t, c)| (t.max(*now), c));
            let (t, mut c) = newest.unwrap_or((*now, [0; MAX_LIMITS]));
            (0..MAX_LIMITS).for_each(|p| c[p] += full(&costs)[p]);
            proptest::prop_assert_eq!(ts, t);
            model.records.push((t, c));
        }
        Op::Expire(d, window) => {
            *now = now.saturating_add_signed(d);
            let dropped = log.expire(*now, window);
            let gone = model.expire(*now, window);
            // Refunded records not yet compacted go too.
            proptest::prop_assert!(dropped >= gone);
        }
        Op::Settle(j, less, over, new) if !model.records.is_empty() => {
            let (ts, c) = model.records[j % model.records.len()];
            let share = share_of(&c, &less, over);
            let want = model.settle(ts, &share, &new);
            proptest::prop_assert_eq!(log.settle_share(ts, &share, &new), want);
        }
        Op::SetCosts(j, costs) if !model.records.is_empty() => {
            let ts = model.records[j % model.records.len()].0;
            log.set_costs(log.find_ts(ts).unwrap(), &costs);
            model.set(ts, &costs);
        }
        Op::Settle(..) | Op::SetCosts(..) => {}
    }
    Ok(())
}

/// Every question a decision asks, of the log and of the model.
fn compare(log: &Log, model: &Model, now: u64) -> Result<(), proptest::test_runner::TestCaseError> {
    let got: Vec<(u64, [u64; MAX_LIMITS])> = (0..log.len())
        .filter(|&j| !log.is_tombstone(j))
        .map(|j| (log.ts(j), std::array::from_fn(|p| log.cost(j, p))))
        .collect();
    proptest::prop_assert_eq!(&got, &model.records);
    proptest::prop_assert_eq!(log.records().count(), model.records.len());
    proptest::prop_assert_eq!(log.record_count(), model.records.len());
    proptest::prop_assert_eq!(log.horizon(), model.horizon);
    // At most half of the records are refunded ones (a dense log's empty
    // granules are its layout: its size bounds them, `log/dense.rs`).
    if !log.is_dense() {
        proptest::prop_assert!(2 * (log.len() - log.record_count()) <= log.len());
    }
    for window in [1, 500, 1 << 32, 1 << 34] {
        let start = log.first_live(now, window);
        proptest::prop_assert!((0..log.len()).all(|j| (log.ts(j) + window > now) == (j >= start)));
        let live: Vec<_> = model
            .records
            .iter()
            .filter(|(t, _)| t + window > now)
            .collect();
        for p in [0, 1, 2, 15] {
            let units: u64 = live.iter().map(|(_, c)| c[p]).sum();
            proptest::prop_assert_eq!(log.units_from(start, p), units);
            let newest = live.iter().rev().find(|(_, c)| c[p] > 0).map(|(t, _)| *t);
            proptest::prop_assert_eq!(log.newest_unit(start, p), newest);
            if units > 0 {
                for k in [1, units.div_ceil(2), units] {
                    let mut seen = 0;
                    let kth = live
                        .iter()
                        .find(|(_, c)| {
                            seen += c[p];
                            seen >= k
                        })
                        .unwrap()
                        .0;
                    proptest::prop_assert_eq!(log.kth_unit_ts(start, p, k), kth);
                }
            }
        }
    }
    Ok(())
}

/// Runs `ops` on a log and on the model, comparing every answer and the
/// codec's round trip after each step.
fn run_against_model(ops: Vec<Op>) -> Result<(), proptest::test_runner::TestCaseError> {
    let mut log = Log::new();
    let mut model = Model::default();
    let mut now: u64 = 1 << 40;
    for op in ops {
        step(&mut log, &mut model, &mut now, op)?;
        compare(&log, &model, now)?;
        let mut bytes = Vec::new();
        crate::codec::encode(&log, &mut bytes);
        let (back, _) = crate::codec::decode(&bytes).unwrap();
        proptest::prop_assert_eq!(&back, &log);
    }
    Ok(())
}

proptest::proptest! {
    /// The log against a plain sorted list of (timestamp, costs), one
    /// record per millisecond: appends that merge, checks that raise the
    /// horizon, charges merged into the newest record, expiry up to the
    /// horizon, settles by share (and shares it does not hold), refunds.
    #[test]
    fn the_log_matches_a_plain_list(ops in ops()) {
        run_against_model(ops)?;
    }
}

#[test]
fn a_sliding_weighted_log_gives_back_dropped_blocks_and_counts_exactly() {
    // 5,000 records of costs 1..=7 (two positions), 300 live at a time:
    // the dropped room is given back block by block as the log slides.
    let mut log = Log::new();
    let mut model: Vec<(u64, u64, u64)> = Vec::new();
    for t in 0..5_000u64 {
        let (a, b) = (1 + t % 7, 1 + t % 3);
        log.expire(t, 300);
        model.retain(|&(ts, _, _)| ts + 300 > t);
        log.append(t, &[a, b]);
        model.push((t, a, b));
        if t % 97 == 0 {
            let units: u64 = model.iter().map(|m| m.1).sum();
            assert_eq!(log.units_from(0, 0), units);
            assert_eq!(log.units_from(0, 1), model.iter().map(|m| m.2).sum::<u64>());
            for k in [1, (units / 3).max(1), units] {
                let mut seen = 0;
                let want = model
                    .iter()
                    .find(|m| {
                        seen += m.1;
                        seen >= k
                    })
                    .unwrap()
                    .0;
                assert_eq!(log.kth_unit_ts(0, 0, k), want, "t {t} k {k}");
            }
            let start = log.first_live(t, 100);
            let live: u64 = model.iter().filter(|m| m.0 + 100 > t).map(|m| m.2).sum();
            assert_eq!(log.units_from(start, 1), live);
        }
    }
    assert_eq!(log.len(), 300);
    assert!(log.heap_bytes() < 300 * 40, "{}", log.heap_bytes());
}

/// Ops on a grid of `q` ms, as a granular key's stored times are: mostly
/// forward by 0-3 granules, sometimes far on (a key gone quiet), off the
/// grid, or back; costs that cross `u8` and `u16`; windows of whole
/// granules. Long enough for the log to go dense and back.
fn grid_ops() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
    use proptest::prelude::*;
    prop_oneof![Just(1i64), Just(10), Just(100)].prop_flat_map(|q| {
        let delta = prop_oneof![
            150 => (0i64..3).prop_map(move |g| g * q),
            5 => (3i64..80).prop_map(move |g| g * q),
            1 => -3i64..3,
            4 => (-5i64..0).prop_map(move |g| g * q),
        ];
        let costs = prop_oneof![
            30 => Just(vec![1u64]),
            15 => (1u64..300).prop_map(|c| vec![c]),
            2 => (1u64..70_000).prop_map(|c| vec![c]),
            1 => proptest::collection::vec(1u64..5, 2),
        ];
        let window = (1u64..200).prop_map(move |g| g * q as u64);
        let some = prop_oneof![
            8 => (0u64..5).prop_map(|c| vec![c]),
            1 => proptest::collection::vec(0u64..5, 2),
        ];
        proptest::collection::vec(
            prop_oneof![
                6 => (delta.clone(), costs.clone()).prop_map(|(d, c)| Op::Append(d, c)),
                6 => (delta.clone(), window.clone(), costs.clone())
                    .prop_map(|(d, w, c)| Op::Check(d, w, c)),
                1 => (delta.clone(), costs).prop_map(|(d, c)| Op::Merge(d, c)),
                1 => (delta, window).prop_map(|(d, w)| Op::Expire(d, w)),
                2 => (0usize..400, some.clone(), any::<bool>(), some.clone())
                    .prop_map(|(j, less, over, new)| Op::Settle(j, less, over, new)),
                1 => (0usize..400, some).prop_map(|(j, c)| Op::SetCosts(j, c)),
            ],
            1..600,
        )
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// The same model test on a granular key's times: the log switches to
    /// dense and back, widens its costs, and every
    /// answer, the codec's round trip and equality hold in both layouts.
    #[test]
    fn dense_and_sparse_logs_match_a_plain_list(ops in grid_ops()) {
        run_against_model(ops)?;
    }
}

/// The bytes position 0's costs take per record.
fn cost_bytes(log: &Log) -> usize {
    log.costs.as_deref().map_or(0, |c| c.record_bytes())
}

#[test]
fn costs_take_the_narrowest_width_and_widen_on_demand() {
    let mut log = Log::new();
    for t in 0..10 {
        log.append(t * 7, &[3]);
    }
    assert_eq!(cost_bytes(&log), 1);
    // 255 fits a byte; 256 does not.
    log.append(100, &[255]);
    assert_eq!(cost_bytes(&log), 1);
    log.append(100, &[1]);
    assert_eq!((cost_bytes(&log), log.cost(10, 0)), (2, 256));
    log.append(200, &[70_000]);
    assert_eq!((cost_bytes(&log), log.cost(11, 0)), (4, 70_000));
    // Saturation stays as it was.
    log.append(200, &[u64::from(u32::MAX)]);
    assert_eq!(log.cost(11, 0), u64::from(u32::MAX));
    assert_eq!(log.units_from(0, 0), 30 + 256 + u64::from(u32::MAX));
    // Every old cost reads the same after each widening.
    assert!((0..10).all(|j| log.cost(j, 0) == 3));
    assert_eq!(log.kth_unit_ts(0, 0, 31), 100);
}

/// A hot key at 100 ms granules: `n` granules of `cost` from `start`.
fn hot(start: u64, n: u64, cost: u64) -> Log {
    let mut log = Log::new();
    for g in 0..n {
        log.append(start + 100 * g, &[1]);
        log.append(start + 100 * g, &[cost - 1]);
    }
    log
}

#[test]
fn a_hot_granular_log_goes_dense_and_a_quiet_one_goes_back() {
    let start = 1_700_000_000_000;
    let mut log = hot(start, 601, 1_000);
    assert!(log.is_dense());
    assert_eq!((log.len(), log.record_count()), (601, 601));
    assert_eq!(
        (log.ts(600), log.units_from(0, 0)),
        (start + 60_000, 601_000)
    );
    // 2 bytes a granule, room for a quarter more, trees and the costs' own size.
    assert!(
        log.heap_bytes() <= 601 * 2 * 5 / 4 + 600,
        "{}",
        log.heap_bytes()
    );
    assert_eq!(log.find_ts(start + 100 * 7), Some(7));
    assert_eq!(log.find_ts(start + 100 * 7 + 1), None);
    assert_eq!(log.kth_unit_ts(0, 0, 1_001), start + 100);
    // The key goes quiet: one request every 30 s, the ring would be
    // mostly empty granules, so the log keeps timestamps again.
    let mut now = start + 60_000;
    for _ in 0..4 {
        now += 30_000;
        log.expire(now, 60_000);
        log.append(now, &[5]);
    }
    assert!(!log.is_dense());
    assert_eq!(stamps(&log), [now - 30_000, now]);
    assert!(log.heap_bytes() < 400, "{}", log.heap_bytes());
}

#[test]
fn a_dense_log_takes_records_off_its_grid_and_before_its_base() {
    let start = 1_000_000;
    let mut log = hot(start, 100, 10);
    assert!(log.is_dense());
    // Off the grid: back to timestamps, every answer the same.
    log.append(start + 100 * 99 + 50, &[2]);
    assert!(!log.is_dense());
    assert_eq!(log.units_from(0, 0), 1_002);
    assert_eq!(log.ts(100), start + 100 * 99 + 50);
    // A hot key again on the grid (from the next granule): dense again.
    let mut log = hot(start, 100, 10);
    log.append(start - 100, &[4]);
    assert!(!log.is_dense());
    assert_eq!((log.ts(0), log.units_from(0, 0)), (start - 100, 1_004));
}

#[test]
fn a_dense_log_settles_refunds_merges_and_expires_like_a_sparse_one() {
    let start = 5_000_000;
    let mut log = hot(start, 64, 3);
    assert!(log.is_dense());
    // A settle of one request's share and a refund of a whole granule.
    assert!(log.settle_share(start + 100, &[1], &[0]));
    assert_eq!(log.cost(1, 0), 2);
    log.remove(2);
    assert!(log.is_tombstone(2) && log.is_dense());
    assert_eq!(log.record_count(), 63);
    // A charge merged into the newest moves it later, on the grid.
    let newest = start + 100 * 63;
    assert_eq!(log.merge_into_newest(newest + 300, &[4]), newest + 300);
    assert!(log.is_dense());
    assert_eq!(
        (log.newest(), log.cost(log.len() - 1, 0)),
        (Some(newest + 300), 7)
    );
    assert!(log.is_tombstone(63));
    // Expiry drops whole granules from the front.
    assert_eq!(log.expire(start + 100 * 10 + 1_000, 1_000), 11);
    assert_eq!(log.ts(0), start + 1_100);
    assert_eq!(log.units_from(0, 0), 3 * 52 + 7);
    // Refunding the newest drops it and the empty granules before it.
    let last = log.len() - 1;
    log.remove(last);
    assert_eq!(log.newest(), Some(start + 100 * 62));
}

#[test]
fn a_dense_log_of_wide_timestamps_goes_back_to_whole_ones() {
    // Times past 2^40 on a 1 ms grid, then a record 60 days on: more than
    // the offsets' range, so whole timestamps.
    let start = (1u64 << 40) + 3;
    let mut log = Log::new();
    for t in 0..100 {
        log.append(start + t, &[2]);
    }
    assert!(log.is_dense());
    let later = start + 60 * 86_400_000;
    log.append(later, &[1]);
    assert!(!log.is_dense() && log.wide());
    assert_eq!((log.ts(0), log.ts(100)), (start, later));
    assert_eq!(log.units_from(0, 0), 201);
}
