//! Benchmark of the Redis store against one local `redis-server` it starts:
//! decisions per second through the library with 1, 16 and 64 concurrent
//! tasks, next to `redis-benchmark` running the same script (`EVALSHA`, same
//! arguments) unpipelined and with `-P 16` on the same server in the same
//! run; then memory per record (`MEMORY USAGE` / `ZCARD`) at 10, 100, 1,000
//! and 10,000 records. Prints a Markdown table for BENCHMARKS.md.
//!
//! `cargo bench -p slidelog-redis --bench redis_store` runs it in full; under
//! `cargo test` (no `--bench` argument) it runs a tiny smoke version.

use slidelog_core::{Limit, Mode, Now, Request, Store};
use slidelog_redis::{RedisOptions, RedisStore, script::SCRIPT};
use slidelog_testkit::RedisServer;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Keys the load spreads over (as `redis-benchmark -r`).
const KEYS: u64 = 100_000;
const MAX: u64 = 100;
const WINDOW_MS: u64 = 60_000;

struct Scale {
    /// Requests per library run, by task count.
    library: fn(usize) -> u64,
    /// Requests per redis-benchmark run.
    redis_benchmark: u64,
    /// Record counts for the memory table.
    records: &'static [u64],
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full {
        Scale {
            library: |tasks| if tasks == 1 { 30_000 } else { 300_000 },
            redis_benchmark: 300_000,
            records: &[10, 100, 1_000, 10_000],
        }
    } else {
        Scale {
            library: |_| 200,
            redis_benchmark: 200,
            records: &[10, 100],
        }
    };
    let server = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(async {
        let options = RedisOptions::default()
            .with_prefix("bench:lib:")
            .with_timeout(Duration::from_secs(10));
        RedisStore::connect(&server.url(), options).await.unwrap()
    });
    let store = Arc::new(store);
    // Load the script once, so redis-benchmark's EVALSHA finds it.
    let mut c = server.client();
    let _: String = SCRIPT.prepare_invoke().load(&mut c).unwrap();

    println!("| client | concurrency | decisions/s |");
    println!("|---|---|---|");
    for pipeline in [1, 16] {
        let rate = redis_benchmark(&server, scale.redis_benchmark, pipeline);
        println!("| redis-benchmark EVALSHA, 50 clients, -P {pipeline} | 50 | {rate:.0} |");
    }
    for tasks in [1, 16, 64] {
        let n = (scale.library)(tasks);
        let rate = rt.block_on(library_load(store.clone(), tasks, n));
        println!("| slidelog library (RedisStore) | {tasks} tasks | {rate:.0} |");
    }
    // Once more, so both sides of the comparison see the same server state.
    let rate = redis_benchmark(&server, scale.redis_benchmark, 16);
    println!("| redis-benchmark EVALSHA, 50 clients, -P 16 (again) | 50 | {rate:.0} |");

    println!();
    redis_cpu_table(&server, scale.redis_benchmark);

    println!();
    println!("| records | encoding | MEMORY USAGE (B) | bytes per record |");
    println!("|---|---|---|---|");
    for &n in scale.records {
        let (bytes, encoding) = rt.block_on(memory_for(&store, &server, n));
        println!(
            "| {n} | {encoding} | {bytes} | {:.1} |",
            bytes as f64 / n as f64
        );
    }
}

/// The original design's script, as the tests keep it.
const ORIGINAL: &str = include_str!("../tests/original_sliding_window.lua");

/// Redis CPU per decision (`usec_per_call` of `EVALSHA` in `INFO
/// commandstats` after `CONFIG RESETSTAT`), the original script against
/// slidelog's on the same server in the same run, alternating, each over
/// fresh keys: admitted (100k keys, max 100) and rejected (one full key).
fn redis_cpu_table(server: &RedisServer, n: u64) {
    let mut c = server.client();
    let original: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(ORIGINAL)
        .query(&mut c)
        .unwrap();
    let ours = SCRIPT.get_hash().to_owned();
    let per_call = |c: &mut redis::Connection| -> f64 {
        let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
        info.lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .and_then(|l| l.split("usec_per_call=").nth(1))
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    println!(
        "| workload (redis-benchmark -P 16, 50 clients) | round | original µs/call | slidelog µs/call | ratio |"
    );
    println!("|---|---|---|---|---|");
    for (label, keys, max) in [
        ("admitted, 100k keys", KEYS, MAX),
        ("rejected, 1 full key", 1, 1),
    ] {
        for round in 1..=3 {
            let mut cpu = [0.0; 2];
            for (i, sha) in [&original, &ours].into_iter().enumerate() {
                let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
                let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
                let mut cmd = Command::new("redis-benchmark");
                cmd.args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
                    .args(["-c", "50", "-n", &n.to_string(), "-r", &keys.to_string()])
                    .args(["-P", "16", "-q", "EVALSHA", sha.as_str()]);
                let key = if keys == 1 {
                    "cpu:hot"
                } else {
                    "cpu:__rand_int__"
                };
                if i == 0 {
                    // KEYS[1]; now (ms); window (s); max; member.
                    cmd.args([
                        "1",
                        key,
                        "1767225600000",
                        "60",
                        &max.to_string(),
                        "m:__rand_int__",
                    ]);
                } else {
                    let wkey = format!("{{{key}}}#w");
                    cmd.args([
                        "2",
                        key,
                        &wkey,
                        "1",
                        "-1",
                        "1",
                        &max.to_string(),
                        "60000",
                        "1",
                    ])
                    .arg("m:__rand_int__");
                }
                let out = cmd
                    .output()
                    .expect("redis-benchmark (apt-get install -y redis-tools)");
                assert!(out.status.success());
                cpu[i] = per_call(&mut c);
            }
            println!(
                "| {label} | {round} | {:.2} | {:.2} | {:.2} |",
                cpu[0],
                cpu[1],
                cpu[1] / cpu[0]
            );
        }
    }
}

/// `n` checks from `tasks` concurrent tasks over [`KEYS`] keys; decisions/s.
async fn library_load(store: Arc<RedisStore>, tasks: usize, n: u64) -> f64 {
    let limit = Limit::new(MAX, WINDOW_MS).unwrap();
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (store, next) = (store.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    // A multiplicative hash spreads consecutive requests over keys.
                    let key = (i.wrapping_mul(2_654_435_761)) % KEYS;
                    let r = Request::single(format!("{key}"), limit).unwrap();
                    store.decide(&r, Mode::Record, Now::Server).await.unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.await.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// redis-benchmark running the same script with the same arguments (a random
/// key of [`KEYS`] and its weights key, record mode, Redis TIME, one limit
/// of cost 1, one member).
fn redis_benchmark(server: &RedisServer, n: u64, pipeline: u32) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", "50", "-n", &n.to_string(), "-r", &KEYS.to_string()])
        .args(["-P", &pipeline.to_string(), "--csv"])
        .args(["EVALSHA", SCRIPT.get_hash(), "2", "bench:rb:__rand_int__"])
        .arg("{bench:rb:__rand_int__}#w")
        .args([
            "1",
            "-1",
            "1",
            &MAX.to_string(),
            &WINDOW_MS.to_string(),
            "1",
        ])
        .arg("m:__rand_int__")
        .output()
        .expect("redis-benchmark (apt-get install -y redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout);
    // CSV: a header line, then "test","rps",...
    text.lines()
        .filter_map(|l| l.split(',').nth(1))
        .filter_map(|v| v.trim_matches('"').parse::<f64>().ok())
        .next()
        .unwrap_or_else(|| panic!("no rate in redis-benchmark output: {text}"))
}

/// A key with `n` records written by the script (ULID members); its
/// `MEMORY USAGE` (exact: SAMPLES 0) and encoding.
async fn memory_for(store: &RedisStore, server: &RedisServer, n: u64) -> (u64, String) {
    let key = format!("mem{n}");
    let r = Request::single(key.as_str(), Limit::new(1_000_000, 3_600_000).unwrap()).unwrap();
    for _ in 0..n {
        assert!(store.check(&r).await.unwrap().allowed);
    }
    let mut c = server.client();
    let full = store.redis_key(&key);
    let card: u64 = redis::cmd("ZCARD").arg(&full).query(&mut c).unwrap();
    assert_eq!(card, n);
    let bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&full)
        .arg("SAMPLES")
        .arg(0)
        .query(&mut c)
        .unwrap();
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(&full)
        .query(&mut c)
        .unwrap();
    (bytes, encoding)
}
