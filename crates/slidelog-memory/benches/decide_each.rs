//! The memory store's decision under `slidelog serve`'s wrk load:
//! 10,000 keys drawn at random, one limit of 1,000,000 per 60 s (every
//! check admitted and recorded), `InProcess::decide_each_now` with
//! `Mode::Record` as the Limiter calls it, the clock moving 1 ms every 80
//! decisions (80,000 decisions/s, so each key holds ~480 live records: the
//! log serve's decisions read). Each decision's request is built on the
//! stack from its key's bytes, as serve builds it from a body
//! (`Request::from_slices`), so the request itself is never a cache miss: the
//! misses counted are the store's (a table of 10,000 prebuilt requests would
//! add two or three per decision that serve does not have).
//!
//! Run: `cargo bench -p slidelog-memory --bench decide_each` (wall time).
//!
//! Instructions, cache misses and allocations per decision, repeatable on a
//! noisy machine: build with `cargo bench -p slidelog-memory --bench
//! decide_each --no-run`, then run the binary it names under callgrind with
//! `DECIDE_EACH_CALLS=N` (the warm-up fills every log first, outside the
//! measured function; `DECIDE_EACH_KEYS=10` for the same decisions on 10
//! hot keys):
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
//! The store's own share is `decide_each_now`'s inclusive Ir / N (the
//! request's building and the key's formatting are the bench's). (`--LL`
//! models one core's 2 MiB L2 as the last level: the host's shared L3 holds
//! the whole working set.) Callgrind counts misses, not their overlap: two
//! misses issued together cost about one, so wall time is still the judge of
//! reordered loads. Without valgrind, `DECIDE_EACH_CALLS=N` prints the wall
//! time per measured decision: run builds alternately, several times.

use criterion::{Criterion, Throughput, criterion_group};
use slidelog_core::store::InProcess;
use slidelog_core::{Detailed, Limit, Mode, Now, Request};
use slidelog_memory::MemoryStore;
use std::hint::black_box;
use std::time::Duration;

/// Keys the decisions go to: 10,000, or `DECIDE_EACH_KEYS` (e.g. 1, to see
/// what the spread of 10,000 logs over memory costs).
fn keys() -> usize {
    std::env::var("DECIDE_EACH_KEYS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(10_000)
}
/// Decisions per ms of the store's clock: 80,000 decisions/s.
const PER_MS: u64 = 80;
const WINDOW_MS: u64 = 60_000;
/// The time the measured decisions start from (any Unix ms).
const START_MS: u64 = 1_764_540_000_000;

/// The workload's state: the store, the number of keys, the limit, the
/// clock and a seeded random key sequence (xorshift: the same keys in every
/// run).
struct Load {
    store: MemoryStore,
    keys: usize,
    limit: Limit,
    decisions: u64,
    rng: u64,
}

/// `bench:<n>` written into `buf` (at most 26 bytes for any `u64`).
fn key_of(n: u64, buf: &mut [u8; 26]) -> &str {
    let mut at = buf.len();
    let mut n = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    at -= 6;
    buf[at..at + 6].copy_from_slice(b"bench:");
    std::str::from_utf8(&buf[at..]).expect("ASCII")
}

impl Load {
    /// Every key's log filled to its steady ~480 live records.
    fn warm() -> Self {
        let mut load = Self {
            store: MemoryStore::new(),
            keys: keys(),
            limit: Limit::new(1_000_000, WINDOW_MS).unwrap(),
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
        (self.rng % self.keys as u64) as usize
    }

    /// One decision, as the Limiter asks the store for it.
    #[inline(always)]
    fn step(&mut self) -> Detailed {
        let now = self.now();
        let k = self.next_key();
        self.decisions += 1;
        let mut buf = [0; 26];
        let key = key_of(k as u64 + 1, &mut buf);
        let request = Request::from_slices(key, &[self.limit], 1).unwrap();
        let detailed = self
            .store
            .decide_each_now(&request, Mode::Record, Now::At(now))
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
    let records = load.store.record_count() as f64 / load.keys as f64;
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
        let records = load.store.record_count() as f64 / load.keys as f64;
        let start = std::time::Instant::now();
        let sum = measured(&mut load, calls);
        let ns = start.elapsed().as_nanos() as f64 / calls as f64;
        let bytes = load.store.bytes_held() / load.store.key_count();
        println!(
            "{calls} decisions measured, {ns:.1} ns each; {records:.1} records/key \
             before, {bytes} bytes/key held after (count sum {sum})"
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
