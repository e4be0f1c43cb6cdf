//! Model-based differential for usage-based limits (docs/design.md §4.6):
//! random sequences of check / peek / settle / charge / reset / advance on
//! keys with a cost per limit (1 request + N tokens) give, on the memory
//! store, exactly what a plain model gives: every field of every answer,
//! the record each names, every limit's state of a settle or charge,
//! settles of expired records, refunds, settling up over the max. The
//! model keeps one record per millisecond (requests of the same ms add
//! their costs), settles a receipt's share of its record, and merges a
//! charge into a full log's newest record, moved to now (docs/design.md
//! §4.6).

use proptest::prelude::*;
use slidelog_core::{Counts, Decision, Limit, LimitState, Mode, Receipt, RecordRef, Request};
use slidelog_memory::MemoryStore;
use std::collections::HashMap;

/// The limits every key is decided under: requests and tokens, two windows.
fn limits() -> Vec<Limit> {
    vec![
        Limit::new(4, 1_000).unwrap().named("requests").unwrap(),
        Limit::new(100, 3_000).unwrap().named("tokens").unwrap(),
    ]
}

const KEYS: [&str; 2] = ["alice", "bob"];

/// One record: its timestamp and its cost per limit.
type Record = (u64, [u64; 2]);

/// The rules written out over a plain list of records, sharing no code
/// with the engine.
#[derive(Default)]
struct Model {
    logs: HashMap<&'static str, (bool, Vec<Record>)>,
}

/// One limit's view at `now`: (max, window, live units, live units by age).
fn view(log: &[Record], now: u64, i: usize) -> (u64, u64, u64, Vec<u64>) {
    let l = &limits()[i];
    let mut units: Vec<u64> = log
        .iter()
        .filter(|(ts, _)| ts + l.window_ms() > now)
        .flat_map(|(ts, c)| std::iter::repeat_n(*ts, c[i] as usize))
        .collect();
    units.sort_unstable();
    (l.max(), l.window_ms(), units.len() as u64, units)
}

/// The wait before `cost` more units fit in limit `i`, if they do not now.
fn wait(log: &[Record], now: u64, i: usize, cost: u64) -> Option<u64> {
    let (max, window, live, units) = view(log, now, i);
    (live + cost > max).then(|| {
        let k = (live + cost - max) as usize;
        units[k - 1] + window - now
    })
}

/// The deciding limit: the largest wait when one rejects, else the
/// smallest remaining after `cost`; ties go to the shorter window, then the
/// first.
fn deciding(log: &[Record], now: u64, costs: [u64; 2]) -> usize {
    let waits: Vec<Option<u64>> = (0..2).map(|i| wait(log, now, i, costs[i])).collect();
    let key = |i: usize| {
        let (max, window, live, _) = view(log, now, i);
        match waits[i] {
            Some(w) => (0, u64::MAX - w, window),
            None => (1, max - live - costs[i], window),
        }
    };
    if key(1) < key(0) { 1 } else { 0 }
}

/// The newest record at or before the end that costs something in limit `i`,
/// among those live for `window` when `live_only`.
fn newest_unit(log: &[Record], now: u64, i: usize, live_only: bool) -> Option<u64> {
    let window = limits()[i].window_ms();
    log.iter()
        .filter(|(ts, c)| c[i] > 0 && (!live_only || ts + window > now))
        .map(|(ts, _)| *ts)
        .max()
}

/// Adds `costs` at `ts`: to the record already there, or as a new one.
fn add(log: &mut Vec<Record>, ts: u64, costs: [u64; 2]) {
    let at = log.partition_point(|(t, _)| *t < ts);
    match log.get_mut(at) {
        Some((t, c)) if *t == ts => {
            c[0] += costs[0];
            c[1] += costs[1];
        }
        _ => log.insert(at, (ts, costs)),
    }
}

impl Model {
    fn log(&mut self, key: &'static str) -> &mut (bool, Vec<Record>) {
        self.logs.entry(key).or_default()
    }

    fn expire(&mut self, key: &'static str, now: u64) {
        self.log(key).1.retain(|(ts, _)| ts + 3_000 > now);
    }

    fn check(&mut self, key: &'static str, costs: [u64; 2], now: u64, record: bool) -> Decision {
        if record {
            self.expire(key, now);
        }
        let log = self.log(key).1.clone();
        let i = deciding(&log, now, costs);
        let (max, window, live, _) = view(&log, now, i);
        let allowed = (0..2).all(|j| wait(&log, now, j, costs[j]).is_none());
        let newest = newest_unit(&log, now, i, false);
        let mut d = Decision {
            allowed,
            limit: max,
            window_ms: window,
            count: live,
            remaining: max.saturating_sub(live),
            retry_after_ms: wait(&log, now, i, costs[i]).unwrap_or(0),
            reset_after_ms: newest.map_or(0, |n| (n + window).saturating_sub(now)),
            degraded: false,
            blocked: false,
            record: None,
        };
        if allowed {
            d.count = live + costs[i];
            d.remaining = max - live - costs[i];
            d.reset_after_ms = newest.map_or(now, |n| n.max(now)) + window - now;
            if record {
                let entry = self.log(key);
                entry.0 = true;
                add(&mut entry.1, now, costs);
                d.record = Some(RecordRef { ts: now, id: None });
            }
        } else if record {
            self.log(key).0 = true;
        }
        d
    }

    /// The deciding limit's fields, and every limit's (in order).
    fn standing(&mut self, key: &'static str, now: u64) -> (Decision, Vec<Counts>) {
        let log = self.log(key).1.clone();
        let of = |i: usize| {
            let (max, window, live, _) = view(&log, now, i);
            let retry = wait(&log, now, i, 1);
            Decision {
                allowed: retry.is_none(),
                limit: max,
                window_ms: window,
                count: live,
                remaining: max.saturating_sub(live),
                retry_after_ms: retry.unwrap_or(0),
                reset_after_ms: newest_unit(&log, now, i, true).map_or(0, |n| n + window - now),
                degraded: false,
                blocked: false,
                record: None,
            }
        };
        let mut d = of(deciding(&log, now, [1, 1]));
        d.allowed = (0..2).all(|i| of(i).allowed);
        let each = (0..2)
            .map(|i| {
                let s = of(i);
                Counts {
                    count: s.count,
                    remaining: s.remaining,
                    retry_after_ms: s.retry_after_ms,
                    reset_after_ms: s.reset_after_ms,
                }
            })
            .collect();
        (d, each)
    }

    fn settle(
        &mut self,
        key: &'static str,
        r: Record,
        costs: [u64; 2],
        now: u64,
    ) -> (bool, Decision, Vec<Counts>) {
        self.expire(key, now);
        let log = &mut self.log(key).1;
        // The record at the receipt's time that holds its share.
        let (ts, share) = r;
        let found = log
            .iter()
            .position(|(t, c)| *t == ts && c[0] >= share[0] && c[1] >= share[1]);
        let mut record = None;
        if let Some(j) = found {
            let c = &mut log[j].1;
            *c = [c[0] - share[0] + costs[0], c[1] - share[1] + costs[1]];
            if *c == [0, 0] {
                log.remove(j);
            }
            if costs != [0, 0] {
                record = Some(RecordRef { ts, id: None });
            }
        }
        let (mut d, each) = self.standing(key, now);
        d.record = record;
        (found.is_some(), d, each)
    }

    fn charge(&mut self, key: &'static str, costs: [u64; 2], now: u64) -> (Decision, Vec<Counts>) {
        self.expire(key, now);
        let mut record = None;
        if costs != [0, 0] {
            // A limit the charge costs something in is full: into the
            // newest record, moved to now.
            let log = self.log(key).1.clone();
            let full = (0..2).any(|i| costs[i] > 0 && view(&log, now, i).2 >= limits()[i].max());
            let entry = self.log(key);
            entry.0 = true;
            let ts = match entry.1.pop() {
                Some((t, c)) if full => {
                    let ts = t.max(now);
                    entry.1.push((ts, [c[0] + costs[0], c[1] + costs[1]]));
                    ts
                }
                newest => {
                    entry.1.extend(newest);
                    add(&mut entry.1, now, costs);
                    now
                }
            };
            record = Some(RecordRef { ts, id: None });
        }
        let (mut d, each) = self.standing(key, now);
        d.record = record;
        (d, each)
    }

    fn reset(&mut self, key: &'static str) -> bool {
        let existed = self.log(key).0;
        *self.log(key) = (false, Vec::new());
        existed
    }
}

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Check(usize, u64),
    Peek(usize, u64),
    /// Settle the n-th receipt issued for the key (old ones included).
    Settle(usize, usize, [u64; 2]),
    Charge(usize, [u64; 2]),
    Reset(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let key = 0..KEYS.len();
    let settled = prop_oneof![
        2 => (0u64..=1, 0u64..=60).prop_map(|(r, t)| [r, t]),
        1 => Just([0, 0]),
        1 => (0u64..=2, 60u64..=250).prop_map(|(r, t)| [r, t]),
    ];
    let op = prop_oneof![
        3 => (0u64..700).prop_map(Op::Advance),
        5 => (key.clone(), 1u64..=60).prop_map(|(k, t)| Op::Check(k, t)),
        1 => (key.clone(), 1u64..=60).prop_map(|(k, t)| Op::Peek(k, t)),
        4 => (key.clone(), 0usize..8, settled.clone()).prop_map(|(k, n, c)| Op::Settle(k, n, c)),
        2 => (key.clone(), settled).prop_map(|(k, c)| Op::Charge(k, c)),
        1 => key.prop_map(Op::Reset),
    ];
    proptest::collection::vec(op, 1..150)
}

fn request(key: &str, costs: [u64; 2]) -> Request {
    Request::with_costs(key, limits(), costs.to_vec()).unwrap()
}

fn usage(key: &str, costs: [u64; 2]) -> Request {
    Request::usage(key, limits(), costs.to_vec()).unwrap()
}

/// Every limit's counts of a store's answer (each must have them).
fn counts(limits: &[LimitState]) -> Vec<Counts> {
    limits
        .iter()
        .map(|s| s.counts.expect("every limit's counts"))
        .collect()
}

/// Runs `ops` on the store and the model, comparing every answer.
fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let store = MemoryStore::new();
    let mut model = Model::default();
    let mut receipts: HashMap<usize, Vec<(String, Record)>> = HashMap::new();
    let mut now = 1_000_000u64;
    for op in ops {
        match op {
            Op::Advance(dt) => now += dt,
            Op::Check(k, tokens) | Op::Peek(k, tokens) => {
                let record = matches!(op, Op::Check(..));
                let r = request(KEYS[k], [1, tokens]);
                let mode = if record { Mode::Record } else { Mode::Peek };
                let got = store.decide_at(&r, mode, now).unwrap();
                let want = model.check(KEYS[k], [1, tokens], now, record);
                prop_assert_eq!(got, want, "{:?} at {}", op, now);
                prop_assert_eq!(got.record, want.record);
                if let Some(text) = Receipt::issue(&r, got.record) {
                    receipts
                        .entry(k)
                        .or_default()
                        .push((text, (now, [1, tokens])));
                }
            }
            Op::Settle(k, n, costs) => {
                let Some(list) = receipts.get(&k).filter(|l| !l.is_empty()) else {
                    continue;
                };
                let (text, rec) = list[n % list.len()].clone();
                let r = usage(KEYS[k], costs);
                let receipt = Receipt::for_request(&text, &r).unwrap();
                let got = store.settle_at(&r, &receipt, now);
                let (settled, want, each) = model.settle(KEYS[k], rec, costs, now);
                prop_assert_eq!(got.settled, settled, "{:?} at {}", op, now);
                prop_assert_eq!(got.decision, want, "{:?} at {}", op, now);
                prop_assert_eq!(counts(&got.limits), each, "{:?} at {}", op, now);
                prop_assert_eq!(got.decision.record, want.record);
                if let Some(text) = Receipt::issue(&r, got.decision.record) {
                    receipts.entry(k).or_default().push((text, (rec.0, costs)));
                }
            }
            Op::Charge(k, costs) => {
                let r = usage(KEYS[k], costs);
                let got = store.charge_at(&r, now).unwrap();
                let (want, each) = model.charge(KEYS[k], costs, now);
                prop_assert_eq!(counts(&got.limits), each, "{:?} at {}", op, now);
                let got = got.decision;
                prop_assert_eq!(got, want, "{:?} at {}", op, now);
                prop_assert_eq!(got.record, want.record);
                if let Some(text) = Receipt::issue(&r, got.record) {
                    let ts = got.record.unwrap().ts;
                    receipts.entry(k).or_default().push((text, (ts, costs)));
                }
            }
            Op::Reset(k) => {
                prop_assert_eq!(store.reset_sync(KEYS[k]), model.reset(KEYS[k]));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn usage_matches_the_model(ops in ops()) {
        run(ops)?;
    }
}

#[test]
fn a_receipt_of_one_key_never_settles_another() {
    let store = MemoryStore::new();
    let r = request("alice", [1, 10]);
    let d = store.decide_at(&r, Mode::Record, 1_000).unwrap();
    let text = Receipt::issue(&r, d.record).unwrap();
    for i in 0..10_000u32 {
        let other = usage(&format!("user-{i}"), [1, 0]);
        assert_eq!(
            Receipt::for_request(&text, &other),
            Err(slidelog_core::ReceiptError::OtherKey)
        );
    }
}
