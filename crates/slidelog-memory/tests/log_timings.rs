//! Timings of the changes a settle or charge makes on a big log
//! (docs/design.md §4.1): on one key of 200,000 records under 16 limits,
//! one charge of 16 different costs, then a settle of the oldest record to
//! 16 different costs; and the bytes per record of a plain, a weighted
//! (one cost) and a 16-position log. Ignored: it prints numbers. Run:
//!
//! `cargo test --release -p slidelog-memory --test log_timings -- --ignored --nocapture`

use slidelog_core::{Limit, Log, Mode, Receipt, Request};
use slidelog_memory::MemoryStore;
use std::time::Instant;

const RECORDS: u64 = 200_000;
const T0: u64 = 1_767_225_600_000;

fn limits() -> Vec<Limit> {
    (0..16)
        .map(|i| Limit::new(10_000_000, 3_600_000 + i).unwrap())
        .collect()
}

fn sixteen(from: u64) -> Vec<u64> {
    (from..from + 16).collect()
}

/// A key of `RECORDS` records of `cost` (each its own ms), then the charge
/// and the settle, timed; returns their times in ms.
fn run(cost: u64) -> (f64, f64) {
    let store = MemoryStore::new();
    let check = Request::new("big", limits(), cost).unwrap();
    let mut oldest = None;
    for t in 0..RECORDS {
        let d = store.decide_at(&check, Mode::Record, T0 + t).unwrap();
        oldest = oldest.or(d.record);
    }
    let now = T0 + RECORDS;
    let charge = Request::usage("big", limits(), sixteen(1)).unwrap();
    let start = Instant::now();
    store.charge_at(&charge, now).unwrap();
    let charged = start.elapsed().as_secs_f64() * 1e3;
    let settle = Request::usage("big", limits(), sixteen(100)).unwrap();
    let receipt = Receipt::new(&check, oldest.unwrap());
    let start = Instant::now();
    let s = store.settle_at(&settle, &receipt, now);
    let settled = start.elapsed().as_secs_f64() * 1e3;
    assert!(s.settled);
    (charged, settled)
}

fn bytes_per_record(costs: &[u64]) -> f64 {
    let mut log = Log::new();
    for t in 0..RECORDS {
        log.append(T0 + t, costs);
    }
    log.heap_bytes() as f64 / RECORDS as f64
}

#[test]
#[ignore = "prints timings; run in release"]
fn a_charge_and_a_settle_on_200k_records_under_16_limits() {
    for (name, cost) in [("plain", 1), ("weighted", 3)] {
        let (charge, settle) = run(cost);
        println!(
            "{name} log of {RECORDS} records: 16-cost charge {charge:.3} ms, settle of the oldest to 16 costs {settle:.3} ms"
        );
    }
    // The attack of a 16-cost charge on a plain log of 1M records: the
    // time and the bytes it takes (running sums widened it to 16 u64 a
    // record: 4.2 MB to 260 MB).
    let mut log = Log::new();
    for t in 0..1_000_000 {
        log.append(T0 + t, &[1]);
    }
    let before = log.heap_bytes();
    let start = Instant::now();
    log.append(T0 + 1_000_000, &sixteen(1));
    let took = start.elapsed().as_secs_f64() * 1e3;
    println!(
        "1M-record plain log, one 16-cost record: {took:.2} ms, {:.1} MB -> {:.1} MB",
        before as f64 / 1e6,
        log.heap_bytes() as f64 / 1e6
    );
    let plain = bytes_per_record(&[1]);
    let weighted = bytes_per_record(&[7]);
    let wide = bytes_per_record(&sixteen(1));
    println!(
        "bytes per record: plain {plain:.2}, weighted (one cost) {weighted:.2}, 16 positions {wide:.2}"
    );
    // A refund of every record but the newest: the compactions it takes.
    let mut log = Log::new();
    for t in 0..RECORDS {
        log.append(T0 + t, &sixteen(1));
    }
    let start = Instant::now();
    let mut slowest = 0f64;
    for t in 0..RECORDS - 1 {
        let one = Instant::now();
        assert!(log.settle_share(T0 + t, &sixteen(1), &[0]));
        slowest = slowest.max(one.elapsed().as_secs_f64() * 1e3);
    }
    let all = start.elapsed().as_secs_f64() * 1e3;
    println!(
        "refunding {} of {RECORDS} 16-position records: {all:.1} ms in all, slowest one (a compaction) {slowest:.3} ms",
        RECORDS - 1
    );
}
