//! The memory store against governor's keyed limiter, the in-process limiter
//! a Rust user would otherwise pick, on the same workloads in the same run:
//! one hot key, 100,000 random keys, and both with 2 threads.
//!
//! Run: `cargo bench -p slidelog-memory --bench memory_vs_governor`
//!
//! Both use their default clocks (the system clock for slidelog, quanta for
//! governor) and a limit of 100 per second; governor answers by GCRA, slidelog
//! by an exact log, so the work per call differs, not the question asked.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};
use slidelog_core::{Limit, Mode, Request};
use slidelog_memory::MemoryStore;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: usize = 100_000;
const MAX: u32 = 100;

fn limit() -> Limit {
    Limit::new(u64::from(MAX), 1_000).unwrap()
}

fn governor_limiter() -> governor::DefaultKeyedRateLimiter<String> {
    RateLimiter::keyed(Quota::per_second(NonZeroU32::new(MAX).unwrap()))
}

/// Key indices in a fixed random order, so both limiters see the same sequence.
fn key_order() -> Arc<Vec<usize>> {
    let mut order: Vec<usize> = (0..KEYS).collect();
    order.shuffle(&mut StdRng::seed_from_u64(7));
    Arc::new(order)
}

fn slidelog_check(store: &MemoryStore, request: &Request) -> bool {
    store
        .decide_at(request, Mode::Record, store.now_ms())
        .unwrap()
        .allowed
}

/// Runs `op(thread, i)` `iters` times split over `threads` threads; wall time.
fn run_threads<F>(threads: usize, iters: u64, op: F) -> Duration
where
    F: Fn(usize, u64) + Send + Sync + 'static,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let op = op.clone();
            std::thread::spawn(move || {
                for i in 0..iters / threads as u64 {
                    op(t, i);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    start.elapsed()
}

fn hot_key(c: &mut Criterion) {
    let mut group = c.benchmark_group("hot_key");
    group.throughput(Throughput::Elements(1));
    for threads in [1usize, 2] {
        let store = Arc::new(MemoryStore::new());
        let request = Arc::new(Request::single("hot", limit()).unwrap());
        group.bench_function(BenchmarkId::new("slidelog", threads), |b| {
            b.iter_custom(|iters| {
                let (store, request) = (store.clone(), request.clone());
                run_threads(threads, iters, move |_, _| {
                    black_box(slidelog_check(&store, &request));
                })
            })
        });
        let limiter = Arc::new(governor_limiter());
        let key = Arc::new("hot".to_owned());
        group.bench_function(BenchmarkId::new("governor", threads), |b| {
            b.iter_custom(|iters| {
                let (limiter, key) = (limiter.clone(), key.clone());
                run_threads(threads, iters, move |_, _| {
                    black_box(limiter.check_key(&key).is_ok());
                })
            })
        });
    }
    group.finish();
}

fn random_keys(c: &mut Criterion) {
    let mut group = c.benchmark_group("100k_random_keys");
    group.throughput(Throughput::Elements(1));
    let order = key_order();
    for threads in [1usize, 2] {
        let store = Arc::new(MemoryStore::new());
        let requests: Arc<Vec<Request>> = Arc::new(
            (0..KEYS)
                .map(|i| Request::single(format!("user:{i}"), limit()).unwrap())
                .collect(),
        );
        group.bench_function(BenchmarkId::new("slidelog", threads), |b| {
            b.iter_custom(|iters| {
                let (store, requests, order) = (store.clone(), requests.clone(), order.clone());
                run_threads(threads, iters, move |t, i| {
                    let k = order[(i as usize * threads + t) % KEYS];
                    black_box(slidelog_check(&store, &requests[k]));
                })
            })
        });
        let limiter = Arc::new(governor_limiter());
        let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("user:{i}")).collect());
        group.bench_function(BenchmarkId::new("governor", threads), |b| {
            b.iter_custom(|iters| {
                let (limiter, keys, order) = (limiter.clone(), keys.clone(), order.clone());
                run_threads(threads, iters, move |t, i| {
                    let k = order[(i as usize * threads + t) % KEYS];
                    black_box(limiter.check_key(&keys[k]).is_ok());
                })
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = hot_key, random_keys
}
criterion_main!(benches);
