//! What a snapshot of the memory store costs: file size and write time per
//! 1,000,000 records, load time, the longest a shard lock is held for the
//! copy, and the decision latency of 64 deciding threads with and without
//! snapshots running back to back (BENCHMARKS.md, "Memory store snapshots").
//!
//! Run: `cargo bench -p slidelog-memory --bench snapshot`
//!
//! Decisions use one explicit time, so "5 per hour" is exact whatever the
//! run's length, and every key's admissions are counted: none may exceed 5.

use slidelog_core::{Limit, Mode, Request};
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

const KEYS: usize = 1_000_000;
const THREADS: usize = 64;
const NOW: u64 = 1_800_000_000_000;

fn request(k: usize) -> Request {
    Request::single(format!("user:{k}"), Limit::new(5, 3_600_000).unwrap()).unwrap()
}

fn filled(records_per_key: usize) -> MemoryStore {
    let store = MemoryStore::new().with_key_cap(KEYS);
    for k in 0..KEYS {
        let r = request(k);
        for j in 0..records_per_key {
            store
                .decide_at(&r, Mode::Record, NOW - 1_000 + j as u64)
                .unwrap();
        }
    }
    store
}

fn main() {
    for per_key in [1, 5] {
        let store = filled(per_key);
        let mut bytes = Vec::new();
        let report = store.save_at(&mut bytes, NOW).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.snap");
        let file = store.save_path(&path).unwrap();
        let started = Instant::now();
        let loaded = MemoryStore::new().with_key_cap(KEYS);
        let load = loaded.load_bytes_at(&bytes, NOW).unwrap();
        let load_time = started.elapsed();
        let per_m = |d: Duration| d.as_secs_f64() * 1e3 * 1e6 / report.records as f64;
        println!(
            "{} keys x {per_key} records: {} bytes ({:.2} bytes/record, {:.1} MB per 1M records); \
             to memory {:.0} ms ({:.0} ms per 1M records), to a file with fsync {:.0} ms; \
             lock holds {}, mean {:.3} ms, longest {:.2} ms; load {:.0} ms ({} keys)",
            report.keys,
            report.bytes,
            report.bytes as f64 / report.records as f64,
            report.bytes as f64 / report.records as f64,
            report.duration.as_secs_f64() * 1e3,
            per_m(report.duration),
            file.duration.as_secs_f64() * 1e3,
            report.lock_holds,
            report.total_lock_hold.as_secs_f64() * 1e3 / report.lock_holds as f64,
            report.longest_lock_hold.as_secs_f64() * 1e3,
            load_time.as_secs_f64() * 1e3,
            load.keys,
        );
    }
    let store = Arc::new(filled(1));
    // Every key holds 1 record already.
    let admitted: Arc<Vec<AtomicU8>> = Arc::new((0..KEYS).map(|_| AtomicU8::new(1)).collect());
    for every in [None, Some(Duration::from_secs(1)), Some(Duration::ZERO)] {
        under_load(&store, &admitted, every);
    }
}

/// 64 threads check random keys for 5 s, while a snapshot is written to a
/// file every `every` (the default interval is 1 s; zero: back to back), or never.
fn under_load(store: &Arc<MemoryStore>, admitted: &Arc<Vec<AtomicU8>>, every: Option<Duration>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, admitted, stop) = (store.clone(), admitted.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut latencies = Vec::with_capacity(1 << 20);
                let mut k = t * 7_919;
                while !stop.load(Ordering::Relaxed) {
                    k = (k * 48_271 + 11) % KEYS;
                    let r = request(k);
                    let started = Instant::now();
                    let d = store.decide_at(&r, Mode::Record, NOW).unwrap();
                    latencies.push(started.elapsed().as_nanos() as u64);
                    if d.allowed {
                        admitted[k].fetch_add(1, Ordering::Relaxed);
                    }
                }
                latencies
            })
        })
        .collect();
    let started = Instant::now();
    let (mut taken, mut hold, mut holds, mut held) = (0, Duration::ZERO, 0, Duration::ZERO);
    while started.elapsed() < Duration::from_secs(5) {
        let Some(every) = every else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let began = Instant::now();
        let report = store.save_path(&path).unwrap();
        hold = hold.max(report.longest_lock_hold);
        (holds, held) = (holds + report.lock_holds, held + report.total_lock_hold);
        taken += 1;
        std::thread::sleep(every.saturating_sub(began.elapsed()));
    }
    stop.store(true, Ordering::Relaxed);
    let mut all: Vec<u64> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    all.sort_unstable();
    let q = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)] as f64 / 1e3;
    let most = admitted
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .max()
        .unwrap();
    println!(
        "64 threads, snapshots {}: {} decisions, p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us; \
         {taken} snapshots, lock holds mean {:.3} ms, longest {:.2} ms; most admitted on one key: {most} (limit 5)",
        match every {
            None => "off".to_owned(),
            Some(Duration::ZERO) => "back to back".to_owned(),
            Some(every) => format!("every {every:?}"),
        },
        all.len(),
        q(0.5),
        q(0.99),
        q(0.999),
        *all.last().unwrap() as f64 / 1e3,
        held.as_secs_f64() * 1e3 / holds.max(1) as f64,
        hold.as_secs_f64() * 1e3,
    );
    assert!(
        most <= 5,
        "a key admitted {most} times against a limit of 5"
    );
}
