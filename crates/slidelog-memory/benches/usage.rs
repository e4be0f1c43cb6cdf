//! Settle and charge on the memory store beside a check (docs/design.md
//! §4.6), on one key under 1 request + N tokens per second, the clock
//! moving 1 ms a call (about 1,000 live records, weighted):
//!
//! - `check`: an admitted check of [1, 10];
//! - `check+settle newest`: that check, then a settle of its own record
//!   (the newest: the running sums of no later record move);
//! - `check+settle 100 back`: that check, then a settle of the record
//!   checked 100 calls earlier (the sums of 100 later records move: a
//!   reservation settled 100 ms after it was made, at 1,000 calls/s);
//! - `check+refund`: that check, then a settle of it to 0 (removed);
//! - `charge`: a charge of [1, 10].
//!
//! Run: `cargo bench -p slidelog-memory --bench usage`

use criterion::{Criterion, criterion_group, criterion_main};
use slidelog_core::{Limit, Mode, Receipt, Request};
use slidelog_memory::MemoryStore;
use std::collections::VecDeque;
use std::hint::black_box;

fn limits() -> Vec<Limit> {
    windows(1_000)
}

fn windows(window_ms: u64) -> Vec<Limit> {
    vec![
        Limit::new(10_000_000, window_ms).unwrap(),
        Limit::new(10_000_000, window_ms)
            .unwrap()
            .named("tokens")
            .unwrap(),
    ]
}

/// Prints the bytes a key of 10,000 records holds: plain (cost 1), after one
/// settle to [1, 1250] (the log keeps running sums from then on), after
/// every record is settled so, and after all are refunded.
fn bytes_report() {
    let (store, base) = (MemoryStore::new(), 1u64 << 40);
    let one = Request::new("key", windows(3_600_000), 1).unwrap();
    let receipts: Vec<Receipt> = (0..10_000)
        .map(|t| {
            let d = store.decide_at(&one, Mode::Record, base + t).unwrap();
            Receipt::new(&one, d.record.unwrap())
        })
        .collect();
    let plain = store.bytes_held();
    let settled = Request::usage("key", windows(3_600_000), vec![1, 1_250]).unwrap();
    let now = base + 10_000;
    store.settle_at(&settled, &receipts[5_000], now);
    let first = store.bytes_held();
    for r in receipts.iter().filter(|r| r.ts() != base + 5_000) {
        store.settle_at(&settled, r, now);
    }
    let all = store.bytes_held();
    let refund = Request::usage("key", windows(3_600_000), vec![0]).unwrap();
    for r in &receipts {
        store.settle_at(
            &refund,
            &Receipt::new(
                &settled,
                slidelog_core::RecordRef {
                    ts: r.ts(),
                    id: None,
                },
            ),
            now,
        );
    }
    eprintln!(
        "bytes held by a key of 10,000 records: plain {plain}, after one settle {first}, \
         after all settled {all}, after all refunded {} (records {})",
        store.bytes_held(),
        store.record_count()
    );
}

fn bench(c: &mut Criterion) {
    bytes_report();
    let check = Request::with_costs("key", limits(), vec![1, 10]).unwrap();
    let settled = Request::usage("key", limits(), vec![1, 7]).unwrap();
    let refund = Request::usage("key", limits(), vec![0]).unwrap();
    let mut group = c.benchmark_group("memory usage");
    group.bench_function("check", |b| {
        let (store, mut now) = (MemoryStore::new(), 1u64 << 40);
        b.iter(|| {
            now += 1;
            black_box(store.decide_at(&check, Mode::Record, now).unwrap())
        });
    });
    for back in [0usize, 100] {
        let name = if back == 0 {
            "check+settle newest".into()
        } else {
            format!("check+settle {back} back")
        };
        group.bench_function(name, |b| {
            let (store, mut now) = (MemoryStore::new(), 1u64 << 40);
            let mut receipts = VecDeque::new();
            b.iter(|| {
                now += 1;
                let d = store.decide_at(&check, Mode::Record, now).unwrap();
                receipts.push_back(Receipt::new(&check, d.record.unwrap()));
                if receipts.len() > back {
                    let r = receipts.pop_front().unwrap();
                    black_box(store.settle_at(&settled, &r, now));
                }
            });
        });
    }
    group.bench_function("check+refund", |b| {
        let (store, mut now) = (MemoryStore::new(), 1u64 << 40);
        b.iter(|| {
            now += 1;
            let d = store.decide_at(&check, Mode::Record, now).unwrap();
            let r = Receipt::new(&check, d.record.unwrap());
            black_box(store.settle_at(&refund, &r, now))
        });
    });
    group.bench_function("charge", |b| {
        let (store, mut now) = (MemoryStore::new(), 1u64 << 40);
        let charge = Request::usage("key", limits(), vec![1, 10]).unwrap();
        b.iter(|| {
            now += 1;
            black_box(store.charge_at(&charge, now).unwrap())
        });
    });
    group.bench_function("receipt encode+decode", |b| {
        let (store, now) = (MemoryStore::new(), 1u64 << 40);
        let d = store.decide_at(&check, Mode::Record, now).unwrap();
        b.iter(|| {
            let text = Receipt::issue(&check, d.record).unwrap();
            black_box(Receipt::for_request(&text, &settled).unwrap())
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
