//! Property test: random traces of (advance or step back the clock, key,
//! cost, check / peek / reset) give the same decisions on the memory store as
//! on a naive model that keeps every admitted timestamp in a `Vec` forever and
//! applies docs/design.md §1–§2 literally.

use proptest::prelude::*;
use slidelog_core::{Decision, Limit, Mode, Request};
use slidelog_memory::MemoryStore;
use std::collections::HashMap;

/// docs/design.md §1–§2 written out directly, with no shared code with the
/// engine: every record keeps its timestamp and its cost per limit, and a
/// limit counts a record of cost `c` as `c` units at that timestamp.
#[derive(Default)]
struct NaiveModel {
    logs: HashMap<String, Vec<(i128, Vec<u64>)>>,
}

impl NaiveModel {
    fn decide(
        &mut self,
        key: &str,
        limits: &[(u64, u64)],
        costs: &[u64],
        now: u64,
        record: bool,
    ) -> Decision {
        let now = now as i128;
        let cost_of = |costs: &[u64], i: usize| costs[i.min(costs.len() - 1)];
        let log = self.logs.entry(key.to_owned()).or_default();
        if record {
            // A check drops what has expired for its longest window, as
            // ZREMRANGEBYSCORE does; a peek changes nothing.
            let longest = limits.iter().map(|&(_, w)| w).max().unwrap() as i128;
            log.retain(|(ts, _)| *ts > now - longest);
        }
        // Per limit: its cost, and its live units, oldest first.
        let per_limit: Vec<(u64, u64, i128, Vec<i128>)> = limits
            .iter()
            .enumerate()
            .map(|(i, &(max, window))| {
                let mut live: Vec<i128> = log
                    .iter()
                    .filter(|(ts, _)| *ts > now - window as i128)
                    .flat_map(|(ts, c)| std::iter::repeat_n(*ts, cost_of(c, i) as usize))
                    .collect();
                live.sort_unstable();
                (max, window, cost_of(costs, i) as i128, live)
            })
            .collect();
        let allowed = per_limit
            .iter()
            .all(|(max, _, cost, live)| live.len() as i128 + cost <= *max as i128);
        let decision = if allowed {
            // Smallest remaining after admission; ties: shorter window.
            let (max, window, cost, live) = per_limit
                .iter()
                .min_by_key(|(max, window, cost, live)| {
                    (*max as i128 - live.len() as i128 - cost, *window)
                })
                .unwrap();
            let count = live.len() as u64 + *cost as u64;
            let newest = log.iter().map(|(ts, _)| *ts).chain([now]).max().unwrap();
            Decision {
                allowed: true,
                limit: *max,
                window_ms: *window,
                count,
                remaining: max - count,
                retry_after_ms: 0,
                reset_after_ms: (newest + *window as i128 - now) as u64,
                degraded: false,
                blocked: false,
                record: None,
            }
        } else {
            // Violated limit with the largest wait; ties: shorter window.
            let (wait, window, max, live) = per_limit
                .iter()
                .filter(|(max, _, cost, live)| live.len() as i128 + cost > *max as i128)
                .map(|(max, window, cost, live)| {
                    let k = live.len() as i128 + cost - *max as i128;
                    let wait = live[(k - 1) as usize] + *window as i128 - now;
                    (wait, *window, *max, live)
                })
                .max_by_key(|(wait, window, _, _)| (*wait, std::cmp::Reverse(*window)))
                .unwrap();
            let newest = log.iter().map(|(ts, _)| *ts).max().unwrap();
            Decision {
                allowed: false,
                limit: max,
                window_ms: window,
                count: live.len() as u64,
                remaining: max.saturating_sub(live.len() as u64),
                retry_after_ms: wait as u64,
                reset_after_ms: (newest + window as i128 - now).max(0) as u64,
                degraded: false,
                blocked: false,
                record: None,
            }
        };
        if allowed && record {
            log.push((now, costs.to_vec()));
        }
        decision
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Move the clock by this many ms (negative: a clock stepping back).
    Time(i64),
    /// `costs`: one cost for every limit, or one per limit (each reduced
    /// to its limit's max when the request is built).
    Check {
        key: usize,
        costs: Vec<u64>,
    },
    Peek {
        key: usize,
        costs: Vec<u64>,
    },
    Reset {
        key: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..400).prop_map(Op::Time),
        1 => (-300i64..0).prop_map(Op::Time),
        10 => (0usize..3, costs()).prop_map(|(key, costs)| Op::Check { key, costs }),
        2 => (0usize..3, costs()).prop_map(|(key, costs)| Op::Peek { key, costs }),
        1 => (0usize..3).prop_map(|key| Op::Reset { key }),
    ]
}

/// Mostly cost 1 (the plain log), often weighted, up to a limit's max, and
/// sometimes one cost per limit.
fn costs() -> impl Strategy<Value = Vec<u64>> {
    prop_oneof![
        3 => Just(vec![1]),
        3 => (1u64..13).prop_map(|c| vec![c]),
        2 => proptest::collection::vec(1u64..13, 2),
    ]
}

/// Each key keeps one set of limits for the whole trace (docs/design.md §1: a key is
/// meant to be used with one set of limits).
fn limit_sets() -> impl Strategy<Value = Vec<Vec<(u64, u64)>>> {
    let one = prop_oneof![
        (3u64..8, 100u64..1500).prop_map(|l| vec![l]),
        (3u64..6, 50u64..400, 6u64..12, 500u64..3000)
            .prop_map(|(m1, w1, m2, w2)| vec![(m1, w1), (m2, w2)]),
    ];
    proptest::collection::vec(one, 3)
}

/// The committed seeds of past failures (proptest's own format, `cc <seed>`),
/// replayed before any new case. An absolute path: the test's working
/// directory must not decide whether they are read.
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/model.proptest-regressions"
);

/// A valid request from drawn costs: one cost, at most the smallest max; or
/// one per limit, each at most its own max. Returns the costs it carries.
fn request_of(key: String, limits: Vec<Limit>, drawn: &[u64]) -> (Request, Vec<u64>) {
    if drawn.len() == 1 || limits.len() == 1 {
        let smallest = limits.iter().map(Limit::max).min().unwrap();
        let cost = drawn[0].min(smallest);
        (Request::new(key, limits, cost).unwrap(), vec![cost])
    } else {
        let costs: Vec<u64> = limits
            .iter()
            .zip(drawn)
            .map(|(l, &c)| c.min(l.max()))
            .collect();
        let request = Request::with_costs(key, limits, costs.clone()).unwrap();
        (request, costs)
    }
}

/// Runs `ops` on the memory store and on the naive model side by side.
fn run_trace(sets: &[Vec<(u64, u64)>], ops: Vec<Op>) -> Result<(), TestCaseError> {
    let store = MemoryStore::new();
    let mut model = NaiveModel::default();
    let mut now: u64 = 1_000_000;
    for op in ops {
        match op {
            Op::Time(delta) => now = now.saturating_add_signed(delta),
            Op::Check { key, ref costs } | Op::Peek { key, ref costs } => {
                let record = matches!(op, Op::Check { .. });
                let limits: Vec<Limit> = sets[key]
                    .iter()
                    .map(|&(m, w)| Limit::new(m, w).unwrap())
                    .collect();
                let (request, costs) = request_of(format!("k{key}"), limits, costs);
                let mode = if record { Mode::Record } else { Mode::Peek };
                let got = store.decide_at(&request, mode, now).unwrap();
                let want = model.decide(&format!("k{key}"), &sets[key], &costs, now, record);
                prop_assert_eq!(got, want, "op {:?} at {}", op, now);
            }
            Op::Reset { key } => {
                store.reset_sync(&format!("k{key}"));
                model.logs.remove(&format!("k{key}"));
            }
        }
    }
    Ok(())
}

/// 256 cases; failing cases are kept in tests/model.proptest-regressions
/// (committed) and replayed first on every run.
fn persisted() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(REGRESSIONS),
        )),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(persisted())]

    #[test]
    fn memory_store_matches_the_naive_model(sets in limit_sets(), ops in proptest::collection::vec(op(), 1..200)) {
        run_trace(&sets, ops)?;
    }
}

/// Time moves by ms or by weeks, either way, so that logs cross the 32-bit
/// offset range of `slidelog_core::Log` (49.7 days) and move between 32-bit
/// offsets and whole timestamps.
fn long_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i64..400).prop_map(Op::Time),
        1 => (-300i64..0).prop_map(Op::Time),
        2 => (-(1i64 << 32)..(1i64 << 33)).prop_map(Op::Time),
        10 => (0usize..3, costs()).prop_map(|(key, costs)| Op::Check { key, costs }),
        2 => (0usize..3, costs()).prop_map(|(key, costs)| Op::Peek { key, costs }),
        1 => (0usize..3).prop_map(|key| Op::Reset { key }),
    ]
}

/// Windows from a second to 366 days (`MAX_WINDOW_MS`), max up to 12.
fn long_limit_sets() -> impl Strategy<Value = Vec<Vec<(u64, u64)>>> {
    let window = prop_oneof![1_000u64..3_000, 1u64..31_622_400_000];
    let one = prop_oneof![
        (3u64..13, window.clone()).prop_map(|l| vec![l]),
        (3u64..6, 50u64..400, 6u64..13, window)
            .prop_map(|(m1, w1, m2, w2)| vec![(m1, w1), (m2, w2)]),
    ];
    proptest::collection::vec(one, 3)
}

proptest! {
    #![proptest_config(persisted())]

    #[test]
    fn memory_store_matches_the_naive_model_over_long_spans(sets in long_limit_sets(), ops in proptest::collection::vec(long_op(), 1..200)) {
        run_trace(&sets, ops)?;
    }
}

/// The file the config names exists and holds seeds: a path that points
/// nowhere would make proptest replay nothing, silently.
#[test]
fn the_committed_regressions_are_where_the_config_reads_them() {
    let text = std::fs::read_to_string(REGRESSIONS)
        .unwrap_or_else(|e| panic!("{REGRESSIONS} cannot be read: {e}"));
    let seeds = text.lines().filter(|l| l.starts_with("cc ")).count();
    assert!(seeds >= 1, "{REGRESSIONS} holds no `cc <seed>` line");
}

/// The shrunk case of the committed seed, spelled out, so it runs even if the
/// strategies change (which changes what a seed generates): a clock that
/// steps back 2 ms after a record expired.
#[test]
fn regression_clock_steps_back_just_after_an_expiry() {
    let sets = vec![vec![(3, 100)], vec![(3, 100)], vec![(4, 287)]];
    let ops = vec![
        Op::Check {
            key: 2,
            costs: vec![1],
        },
        Op::Time(287),
        Op::Check {
            key: 2,
            costs: vec![1],
        },
        Op::Time(-2),
        Op::Check {
            key: 2,
            costs: vec![1],
        },
    ];
    run_trace(&sets, ops).unwrap();
}
