//! The Limiter's own cost per decision (docs/design.md §5): what
//! `Limiter::decide_each_at` (the call `slidelog serve`'s `POST /v1/check`
//! handler makes) costs beyond the bare memory store on the same workload:
//! one limit, 10,000 keys, every check admitted and recorded
//! (max 1,000,000 per 60 s), `Mode::Record` on the store's clock, and
//! serve's Limiter configuration (the memory store as `StoreOptions`
//! makes it, 100 ms timeout, fail-open, `Bounds::SERVICE` raised to
//! max 1,000,000, a metrics hook; the builder's own choice of timer and
//! rejection cache for an in-process store).
//!
//! Steps, each alone (a fresh store per step, every key created before
//! counting):
//!
//! - `request`: `Request::new(&str, Vec<Limit>, 1)`, as serve's body does;
//! - `slices`: `Request::from_slices(&str, &[Limit], 1)`, its borrowed variant;
//! - `sync`: `MemoryStore::decide_each_at` (no future, no clock);
//! - `store`: `Store::decide_each` through `Arc<dyn Store>` (its boxed
//!   future), `Now::Server`;
//! - `limiter`: `Limiter::decide_each_at` on the same prebuilt requests;
//! - `serve`: `Request::new` then `Limiter::decide_each_at`: the handler's
//!   slidelog part;
//! - `serve_slices`: the same with `Request::from_slices`;
//! - `store_decide`, `limiter_decide`: `Store::decide` and
//!   `Limiter::decide_at` (the deciding limit only: the Envoy service's call);
//! - `receipt`: the receipt text of an admitted check
//!   (`Receipt::new` + `encode_with`, as serve's answer writes it).
//!
//! ```sh
//! cargo bench -p slidelog --bench limiter_cost              # allocations and ns per call, every step
//! # instructions per call: callgrind the same binary twice, N and N + 100,000 calls;
//! # the difference / 100,000 leaves out the setup
//! B=$(cargo bench -p slidelog --bench limiter_cost --no-run 2>&1 | grep -o 'target/[^ )]*limiter_cost-[0-9a-f]*')
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null $B calls limiter 20000
//! ```

use slidelog::metrics::{MetricsHook, Op};
use slidelog::store::{MemoryStore, Store};
use slidelog::{Bounds, Decision, Limit, Limiter, Mode, Now, Request, StoreError};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counts every allocation and reallocation.
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Distinct keys, as in the wrk runs.
const KEYS: usize = 10_000;

/// A hook as cheap as a recorder can be: the Limiter's cost of reporting
/// (timing the call, calling the hook), not a recorder's.
#[derive(Debug, Default)]
struct Counting {
    allowed: AtomicU64,
    nanos: AtomicU64,
    failed: AtomicU64,
}

impl MetricsHook for Counting {
    fn decided(&self, _: Op, decision: &Decision, elapsed: Duration) {
        if decision.allowed {
            self.allowed.fetch_add(1, Ordering::Relaxed);
        }
        self.nanos
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
    }
    fn store_failed(&self, _: Op, _: &StoreError, _: bool, _: Duration) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The workload's keys and its one limit.
struct Workload {
    keys: Vec<String>,
    limit: Limit,
    requests: Vec<Request>,
}

impl Workload {
    fn new() -> Self {
        let limit = Limit::new(1_000_000, 60_000).expect("limit");
        let keys: Vec<String> = (0..KEYS).map(|i| format!("bench:{i}")).collect();
        let requests = keys
            .iter()
            .map(|k| Request::new(k.as_str(), vec![limit], 1).expect("request"))
            .collect();
        Self {
            keys,
            limit,
            requests,
        }
    }
}

/// Serve's memory store and Limiter (app.rs `limiter_builder`, serve's
/// default flags; `--max-limit 1000000` so the workload's max passes).
fn serve_limiter(store: Arc<MemoryStore>) -> Limiter {
    Limiter::builder()
        .timeout(Duration::from_millis(100))
        .failure_policy(slidelog::FailurePolicy::FailOpen)
        .bounds(Bounds {
            max_limit: 1_000_000,
            ..Bounds::SERVICE
        })
        .metrics(Arc::new(Counting::default()))
        .build(store)
}

fn store() -> Arc<MemoryStore> {
    Arc::new(slidelog::url::StoreOptions::default().memory_store())
}

/// The steps, by name.
const STEPS: [&str; 10] = [
    "request",
    "slices",
    "sync",
    "store",
    "limiter",
    "serve",
    "serve_slices",
    "store_decide",
    "limiter_decide",
    "receipt",
];

/// Runs `calls` calls of `step` after every key was created; returns what
/// the calls allocated and how long they took.
fn run(step: &str, calls: usize, count: bool) -> (u64, Duration) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let w = Workload::new();
    let memory = store();
    let dyn_store: Arc<dyn Store> = memory.clone();
    let limiter = serve_limiter(memory.clone());
    runtime.block_on(async {
        for r in &w.requests {
            let each = limiter.decide_each_at(r, Mode::Record, Now::Server).await;
            assert!(each.expect("decided").decision.allowed);
        }
        let region = count.then(|| Region::new(GLOBAL));
        let started = Instant::now();
        match step {
            "request" => {
                for i in 0..calls {
                    let key = w.keys[i % KEYS].as_str();
                    black_box(Request::new(key, vec![w.limit], 1).expect("request"));
                }
            }
            "slices" => {
                for i in 0..calls {
                    let key = w.keys[i % KEYS].as_str();
                    let limits = [w.limit];
                    black_box(Request::from_slices(key, &limits, 1).expect("request"));
                }
            }
            "sync" => {
                for i in 0..calls {
                    let r = &w.requests[i % KEYS];
                    let now = memory.now_ms();
                    let each = memory.decide_each_at(r, Mode::Record, now);
                    assert!(black_box(each).expect("decided").decision.allowed);
                }
            }
            "store" => {
                for i in 0..calls {
                    let r = &w.requests[i % KEYS];
                    let each = dyn_store.decide_each(r, Mode::Record, Now::Server).await;
                    assert!(black_box(each).expect("decided").decision.allowed);
                }
            }
            "limiter" => {
                for i in 0..calls {
                    let r = &w.requests[i % KEYS];
                    let each = limiter.decide_each_at(r, Mode::Record, Now::Server).await;
                    assert!(black_box(each).expect("decided").decision.allowed);
                }
            }
            "serve" => {
                for i in 0..calls {
                    let key = w.keys[i % KEYS].as_str();
                    let r = Request::new(key, vec![w.limit], 1).expect("request");
                    let each = limiter.decide_each_at(&r, Mode::Record, Now::Server).await;
                    assert!(black_box(each).expect("decided").decision.allowed);
                }
            }
            "serve_slices" => {
                for i in 0..calls {
                    let key = w.keys[i % KEYS].as_str();
                    let limits = [w.limit];
                    let r = Request::from_slices(key, &limits, 1).expect("request");
                    let each = limiter.decide_each_at(&r, Mode::Record, Now::Server).await;
                    assert!(black_box(each).expect("decided").decision.allowed);
                }
            }
            "store_decide" => {
                for i in 0..calls {
                    let r = &w.requests[i % KEYS];
                    let decision = dyn_store.decide(r, Mode::Record, Now::Server).await;
                    assert!(black_box(decision).expect("decided").allowed);
                }
            }
            "limiter_decide" => {
                for i in 0..calls {
                    let r = &w.requests[i % KEYS];
                    let decision = limiter.decide_at(r, Mode::Record, Now::Server).await;
                    assert!(black_box(decision).expect("decided").allowed);
                }
            }
            "receipt" => {
                let record = slidelog::RecordRef {
                    ts: 1_764_540_000_000,
                    id: None,
                };
                for i in 0..calls {
                    let r = &w.requests[i % KEYS];
                    let receipt = slidelog::Receipt::new(r, record);
                    black_box(receipt.encode_with(|text| text.len()));
                }
            }
            other => panic!("unknown step {other}; one of {STEPS:?}"),
        }
        let took = started.elapsed();
        let allocations = region.map_or(0, |r| {
            let stats = r.change();
            (stats.allocations + stats.reallocations) as u64
        });
        (allocations, took)
    })
}

/// The size of the futures a transport awaits (a handler's future holds
/// the Limiter's inline, and is moved as a whole).
fn print_future_sizes() {
    let w = Workload::new();
    let memory = store();
    let dyn_store: Arc<dyn Store> = memory.clone();
    let limiter = serve_limiter(memory);
    let r = &w.requests[0];
    let limiter_future = limiter.decide_each_at(r, Mode::Record, Now::Server);
    let store_future = dyn_store.decide_each(r, Mode::Record, Now::Server);
    println!(
        "future sizes: Limiter::decide_each_at {} B, Store::decide_each (boxed) {} B",
        std::mem::size_of_val(&limiter_future),
        std::mem::size_of_val(&store_future)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `calls STEP N`: N calls of one step and nothing else (for callgrind).
    if let [mode, step, n] = args.as_slice()
        && mode == "calls"
    {
        let n: usize = n.parse().expect("a number of calls");
        black_box(run(step, n, false));
        return;
    }
    // `cargo bench` passes `--bench`; a number is the calls per step.
    let calls = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(200_000usize);
    println!("{calls} calls per step, 10,000 keys, every check admitted");
    print_future_sizes();
    println!(
        "{:<10} {:>18} {:>12}",
        "step", "allocations/call", "ns/call"
    );
    for step in STEPS {
        let (allocations, took) = run(step, calls, true);
        println!(
            "{step:<10} {:>18.2} {:>12.0}",
            allocations as f64 / calls as f64,
            took.as_nanos() as f64 / calls as f64
        );
    }
}
