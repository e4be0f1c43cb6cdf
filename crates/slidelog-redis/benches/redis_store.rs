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
use slidelog_redis::script::{SCRIPT, SINGLE};
use slidelog_redis::{RedisOptions, RedisStore};
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
    // Load the scripts once, so redis-benchmark's EVALSHA finds them.
    let mut c = server.client();
    let _: String = SCRIPT.prepare_invoke().load(&mut c).unwrap();
    let _: String = SINGLE.prepare_invoke().load(&mut c).unwrap();

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

/// A deadline far ahead (year 2286), 13 digits like the library's, so the
/// single-limit script compares it as the library's checks make it do.
const FAR_DEADLINE: &str = "9999999999999";

/// One workload of the CPU table: keys (1 = one hot key, `cpu:hot`) and max.
struct CpuWorkload {
    label: &'static str,
    keys: u64,
    max: u64,
}

/// Redis CPU per decision (`usec_per_call` of `EVALSHA` in `INFO
/// commandstats` after `CONFIG RESETSTAT`): the original design's script,
/// slidelog's general script (`sliding_log.lua`, one limit, cost 1) and the
/// single-limit script the library sends such checks to, on the same server
/// in the same run, alternating within each round, each over fresh keys.
/// Set `SLIDELOG_BENCH_CHRT=1` to run the server under `chrt -f 10` (a busy
/// machine's preemption otherwise inflates `usec_per_call`).
fn redis_cpu_table(server: &RedisServer, n: u64) {
    let mut c = server.client();
    if std::env::var("SLIDELOG_BENCH_CHRT").is_ok_and(|v| v == "1") {
        let pid = server.pid().expect("the server's pid").to_string();
        let ok = Command::new("chrt")
            .args(["-f", "-p", "10", &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "chrt -f -p 10 {pid} failed (needs root)");
    }
    let original: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(ORIGINAL)
        .query(&mut c)
        .unwrap();
    let general = SCRIPT.get_hash().to_owned();
    let single = SINGLE.get_hash().to_owned();
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
        "| workload (redis-benchmark -P 16, 50 clients) | round | original µs/call | general µs/call | single-limit µs/call | single / original |"
    );
    println!("|---|---|---|---|---|---|");
    let workloads = [
        CpuWorkload {
            label: "admitted, 100k keys (max 100)",
            keys: KEYS,
            max: MAX,
        },
        CpuWorkload {
            label: "admitted, 1k live keys (max 1M)",
            keys: 1_000,
            max: 1_000_000,
        },
        CpuWorkload {
            label: "rejected, 1 full key (max 1)",
            keys: 1,
            max: 1,
        },
        CpuWorkload {
            label: "rejected, 1 full key (max 100)",
            keys: 1,
            max: 100,
        },
    ];
    for w in &workloads {
        let key = if w.keys == 1 {
            "cpu:hot"
        } else {
            "cpu:__rand_int__"
        };
        let max = w.max.to_string();
        let wkey = format!("{{{key}}}#w");
        // KEYS[1]; now (ms); window (s); max; member.
        let original_args = vec!["1", key, "1767225600000", "60", &max, "m:__rand_int__"];
        let general_args = vec![
            "2",
            key,
            &wkey,
            "1",
            "-1",
            "1",
            &max,
            "60000",
            "1",
            "m:__rand_int__",
        ];
        let single_args = vec!["1", key, &max, "60000", "m:__rand_int__", FAR_DEADLINE];
        for round in 1..=3 {
            let mut cpu = [0.0; 3];
            for (i, (sha, args)) in [
                (&original, &original_args),
                (&general, &general_args),
                (&single, &single_args),
            ]
            .into_iter()
            .enumerate()
            {
                let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
                let run = |n: u64, pipeline: &str| {
                    let out = Command::new("redis-benchmark")
                        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
                        .args(["-c", "50", "-n", &n.to_string(), "-r", &w.keys.to_string()])
                        .args(["-P", pipeline, "-q", "EVALSHA", sha.as_str()])
                        .args(args.iter())
                        .output()
                        .expect("redis-benchmark (apt-get install -y redis-tools)");
                    assert!(out.status.success());
                };
                if w.keys == 1 {
                    // Fill the hot key first, so the measured calls reject.
                    run(w.max, "1");
                }
                let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
                run(n, "16");
                cpu[i] = per_call(&mut c);
            }
            println!(
                "| {} | {round} | {:.2} | {:.2} | {:.2} | {:.2} |",
                w.label,
                cpu[0],
                cpu[1],
                cpu[2],
                cpu[2] / cpu[0]
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

/// redis-benchmark running the script the library sends these checks to
/// (`single_limit.lua`: a random key of [`KEYS`], one limit, Redis TIME, a
/// member and a deadline) with the same arguments.
fn redis_benchmark(server: &RedisServer, n: u64, pipeline: u32) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", "50", "-n", &n.to_string(), "-r", &KEYS.to_string()])
        .args(["-P", &pipeline.to_string(), "--csv"])
        .args(["EVALSHA", SINGLE.get_hash(), "1", "bench:rb:__rand_int__"])
        .args([&MAX.to_string(), &WINDOW_MS.to_string(), "m:__rand_int__"])
        .arg(FAR_DEADLINE)
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
