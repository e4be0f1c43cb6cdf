//! Weighted records against plain ones, on the memory store and on a local
//! `redis-server` this benchmark starts, in one run (docs/design.md §4.1).
//!
//! The workload of an LLM gateway: 1,000 keys, each with 3,000 requests per
//! minute *and* 1,000,000 tokens per minute; a request costs 1 against the
//! first and 1–4,000 tokens (uniform) against the second. Beside it, the same
//! keys and limits at cost 1 for both. For each: decisions/s with 16 tasks,
//! admitted share, records and bytes per key (memory store: the bytes it
//! accounts; Redis: `MEMORY USAGE` of the log and its weights key), and Redis
//! CPU per decision (`usec_per_call` of `EVALSHA` in `INFO commandstats`,
//! after `CONFIG RESETSTAT`). Prints a Markdown table for BENCHMARKS.md.
//!
//! `cargo bench -p slidelog-redis --bench weighted` runs it in full; under
//! `cargo test` it runs a tiny smoke version.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_core::{Limit, Mode, Now, Request, Store};
use slidelog_memory::MemoryStore;
use slidelog_redis::keys::weights_key;
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::RedisServer;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const KEYS: u64 = 1_000;
const TASKS: usize = 16;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    Plain,
    Weighted,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Self::Plain => "cost 1",
            Self::Weighted => "1 request + 1–4,000 tokens",
        }
    }
}

struct Outcome {
    rate: f64,
    admitted: f64,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (memory_n, redis_n) = if full {
        (2_000_000, 300_000)
    } else {
        (2_000, 500)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    println!(
        "| store | workload | decisions | decisions/s | admitted | records/key | bytes/key | Redis µs/decision |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for workload in [Workload::Plain, Workload::Weighted] {
        let memory = Arc::new(MemoryStore::new());
        let o = rt.block_on(load(memory.clone(), workload, memory_n));
        println!(
            "| memory | {} | {memory_n} | {:.0} | {:.1}% | {:.0} | {:.0} | – |",
            workload.name(),
            o.rate,
            o.admitted * 100.0,
            memory.record_count() as f64 / KEYS as f64,
            memory.bytes_held() as f64 / KEYS as f64,
        );
    }
    for workload in [Workload::Plain, Workload::Weighted] {
        let prefix = match workload {
            Workload::Plain => "wb:plain:",
            Workload::Weighted => "wb:weighted:",
        };
        let store = rt.block_on(async {
            let options = RedisOptions::default()
                .with_prefix(prefix)
                .with_timeout(Duration::from_secs(10));
            RedisStore::connect(&server.url(), options).await.unwrap()
        });
        let store = Arc::new(store);
        let mut c = server.client();
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
        let o = rt.block_on(load(store.clone(), workload, redis_n));
        let usec = evalsha_usec_per_call(&mut c);
        let (records, bytes) = redis_footprint(&store, &mut c);
        println!(
            "| redis | {} | {redis_n} | {:.0} | {:.1}% | {:.0} | {:.0} | {usec:.2} |",
            workload.name(),
            o.rate,
            o.admitted * 100.0,
            records as f64 / KEYS as f64,
            bytes as f64 / KEYS as f64,
        );
    }
}

/// `n` checks from [`TASKS`] tasks over [`KEYS`] keys.
async fn load(store: Arc<dyn Store>, workload: Workload, n: u64) -> Outcome {
    let limits = vec![
        Limit::new(3_000, 60_000).unwrap(),
        Limit::new(1_000_000, 60_000).unwrap(),
    ];
    let next = Arc::new(AtomicU64::new(0));
    let admitted = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..TASKS)
        .map(|task| {
            let (store, next, admitted, limits) = (
                store.clone(),
                next.clone(),
                admitted.clone(),
                limits.clone(),
            );
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(task as u64);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let key = format!("user{}", i.wrapping_mul(2_654_435_761) % KEYS);
                    let request = match workload {
                        Workload::Plain => Request::new(key, limits.clone(), 1),
                        Workload::Weighted => Request::with_costs(
                            key,
                            limits.clone(),
                            vec![1, rng.random_range(1..=4_000)],
                        ),
                    }
                    .unwrap();
                    let d = store
                        .decide(&request, Mode::Record, Now::Server)
                        .await
                        .unwrap();
                    if d.allowed {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.await.unwrap();
    }
    Outcome {
        rate: n as f64 / start.elapsed().as_secs_f64(),
        admitted: admitted.load(Ordering::Relaxed) as f64 / n as f64,
    }
}

/// `usec_per_call` of `EVALSHA` since the last `CONFIG RESETSTAT`.
fn evalsha_usec_per_call(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec_per_call=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Records and bytes (log and weights key) over every key of the workload.
fn redis_footprint(store: &RedisStore, c: &mut redis::Connection) -> (u64, u64) {
    let (mut records, mut bytes) = (0u64, 0u64);
    for k in 0..KEYS {
        let log = store.redis_key(&format!("user{k}"));
        records += redis::cmd("ZCARD").arg(&log).query::<u64>(c).unwrap();
        for key in [log.clone(), weights_key(&log)] {
            let b: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&key)
                .arg("SAMPLES")
                .arg(0)
                .query(c)
                .unwrap();
            bytes += b.unwrap_or(0);
        }
    }
    (records, bytes)
}
