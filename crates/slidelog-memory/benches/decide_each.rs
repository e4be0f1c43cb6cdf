//! The memory store's decision under `slidelog serve`'s wrk load (issue 26):
//! 10,000 keys drawn at random, one limit of 1,000,000 per 60 s (every
//! check admitted and recorded), `Store::decide_each` with `Mode::Record`
//! as the Limiter calls it (the boxed `async_trait` future included), the
//! clock moving 1 ms every 80 decisions (80,000 decisions/s, so each key
//! holds ~480 live records: the log serve's decisions read).
//!
//! Run: `cargo bench -p slidelog-memory --bench decide_each` (wall time).
//!
//! Instructions, cache misses and allocations per decision, repeatable on a
//! noisy machine: build with `cargo bench -p slidelog-memory --bench
//! decide_each --no-run`, then run the binary it names under callgrind with
//! `DECIDE_EACH_CALLS=N` (the warm-up fills every log first, outside the
//! measured function):
//!
//! ```sh
//! DECIDE_EACH_CALLS=500000 valgrind --tool=callgrind \
//!   --toggle-collect='*decide_each::measured*' --cache-sim=yes \
//!   --LL=2097152,16,64 target/release/deps/decide_each-<hash>
//! callgrind_annotate --inclusive=yes callgrind.out.<pid> | grep -E 'measured|malloc|realloc|calloc'
//! ```
//!
//! Instructions per decision = the measured function's inclusive Ir / N;
//! allocations per decision = the calls of malloc + realloc + calloc in it / N.
//! (`--LL` models one core's 2 MiB L2 as the last level: the host's shared
//! L3 holds the whole working set.)

use criterion::{Criterion, Throughput, criterion_group};
use slidelog_core::{Detailed, Limit, Mode, Now, Request, Store};
use slidelog_memory::MemoryStore;
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

const KEYS: usize = 10_000;
/// Decisions per ms of the store's clock: 80,000 decisions/s.
const PER_MS: u64 = 80;
const WINDOW_MS: u64 = 60_000;
/// The time the measured decisions start from (any Unix ms).
const START_MS: u64 = 1_764_540_000_000;

/// The store's future is ready at once (the memory store never waits):
/// one poll, no runtime.
fn ready<T>(future: impl Future<Output = T>) -> T {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(value) => value,
        Poll::Pending => unreachable!("the memory store answers at once"),
    }
}

/// The workload's state: the store, one request per key, the clock and a
/// seeded random key sequence (xorshift: the same keys in every run).
struct Load {
    store: MemoryStore,
    requests: Vec<Request>,
    decisions: u64,
    rng: u64,
}

impl Load {
    /// Every key's log filled to its steady ~480 live records.
    fn warm() -> Self {
        let limit = Limit::new(1_000_000, WINDOW_MS).unwrap();
        let mut load = Self {
            store: MemoryStore::new(),
            requests: (0..KEYS)
                .map(|i| Request::single(format!("bench:{}", i + 1), limit).unwrap())
                .collect(),
            decisions: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
        };
        // A window and 10 s: every key's records expire as they are added,
        // and every log has grown to the room it keeps (its queue then
        // compacts once per ~540 appends, first ~58 s after the measured
        // decisions).
        let warm = (WINDOW_MS + 10_000) * PER_MS;
        for _ in 0..warm {
            load.step();
        }
        load
    }

    fn now(&self) -> u64 {
        START_MS + self.decisions / PER_MS
    }

    fn next_key(&mut self) -> usize {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % KEYS as u64) as usize
    }

    /// One decision, as the Limiter asks the store for it.
    #[inline(always)]
    fn step(&mut self) -> Detailed {
        let now = self.now();
        let k = self.next_key();
        self.decisions += 1;
        let detailed = ready(
            self.store
                .decide_each(&self.requests[k], Mode::Record, Now::At(now)),
        )
        .unwrap();
        assert!(detailed.decision.allowed);
        detailed
    }
}

/// The measured decisions (the name callgrind's `--toggle-collect` matches).
#[inline(never)]
fn measured(load: &mut Load, calls: u64) -> u64 {
    let mut count = 0;
    for _ in 0..calls {
        count += black_box(load.step()).decision.count;
    }
    count
}

fn decide_each(c: &mut Criterion) {
    let mut load = Load::warm();
    let records = load.store.record_count() as f64 / KEYS as f64;
    eprintln!("{records:.0} records per key");
    let mut group = c.benchmark_group("serve_load");
    group.throughput(Throughput::Elements(1));
    group.bench_function("decide_each", |b| {
        b.iter(|| black_box(load.step()));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = decide_each
}

fn main() {
    if let Some(calls) = std::env::var("DECIDE_EACH_CALLS")
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
    {
        let mut load = Load::warm();
        let records = load.store.record_count() as f64 / KEYS as f64;
        let sum = measured(&mut load, calls);
        let bytes = load.store.bytes_held() / load.store.key_count();
        println!(
            "{calls} decisions measured; {records:.1} records/key before, \
             {bytes} bytes/key held after (count sum {sum})"
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
