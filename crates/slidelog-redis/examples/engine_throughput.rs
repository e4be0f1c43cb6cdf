//! Decisions/s of the library on one Redis with slidelog's module loaded,
//! 64 Tokio tasks on one multiplexed connection: `engine=script` (the Lua
//! scripts) against `engine=module` (`SLIDELOG.CHECK`), in alternating
//! rounds on the same server, with Redis CPU per decision (`INFO cpu`,
//! user + sys of the server process, over the decisions of the round) and
//! Redis's own `usec_per_call` of the command (`INFO commandstats`).
//!
//! Workloads (one limit of 100 per 60 s, cost 1, Redis's clock):
//! - `admit`: keys drawn from 100,000, so nearly every check is an admission;
//! - `hot`: one key, so nearly every check is a rejection.
//!
//! ```sh
//! cargo run --release -p slidelog-redis --example engine_throughput -- [SECONDS] [ROUNDS]
//! ```

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{Engine, RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TASKS: usize = 64;
const KEYS: u64 = 100_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(2);
    let kind = ServerKind::from_env();
    let server = RedisServer::start_with_module(kind, &[]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| round | workload | engine | decisions/s | admitted | Redis CPU µs/decision | usec_per_call |"
    );
    println!("|---|---|---|---|---|---|---|");
    for round in 1..=rounds {
        for workload in ["admit", "hot"] {
            for engine in ["script", "module"] {
                let row = rt.block_on(run(&server, engine, workload, round, seconds));
                println!("| {round} | {workload} | {engine} | {row} |");
            }
        }
    }
}

/// One round: the store on `engine`, 64 tasks for `seconds` after a 1 s
/// warm-up; the row's figures.
async fn run(
    server: &RedisServer,
    engine: &str,
    workload: &str,
    round: usize,
    seconds: u64,
) -> String {
    let options = RedisOptions::default()
        .with_prefix(format!("bench:{engine}:{workload}:{round}:"))
        .with_timeout(Duration::from_secs(10));
    let url = format!("{}?engine={engine}", server.url());
    let store = Arc::new(RedisStore::connect(&url, options).await.unwrap());
    let want = if engine == "module" {
        Engine::Module
    } else {
        Engine::Script
    };
    assert_eq!(store.engine_in_use(), Some(want));
    load(&store, workload, Duration::from_secs(1)).await;
    let mut c = server.client();
    redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
    let cpu_before = redis_cpu_s(&mut c);
    let started = Instant::now();
    let (decisions, admitted) = load(&store, workload, Duration::from_secs(seconds)).await;
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = redis_cpu_s(&mut c) - cpu_before;
    let command = if engine == "module" {
        "slidelog.check"
    } else {
        "evalsha"
    };
    format!(
        "{:.0} | {:.1}% | {:.2} | {}",
        decisions as f64 / elapsed,
        100.0 * admitted as f64 / decisions as f64,
        cpu * 1e6 / decisions as f64,
        usec_per_call(&mut c, command)
    )
}

/// 64 tasks checking for `time`: (decisions, admitted).
async fn load(store: &Arc<RedisStore>, workload: &str, time: Duration) -> (u64, u64) {
    let (decisions, admitted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let until = Instant::now() + time;
    let hot = workload == "hot";
    let tasks: Vec<_> = (0..TASKS as u64)
        .map(|t| {
            let (store, decisions, admitted) = (store.clone(), decisions.clone(), admitted.clone());
            tokio::spawn(async move {
                let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                while Instant::now() < until {
                    // xorshift: a key of 100,000 without a shared RNG.
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let key = if hot {
                        "hot".to_owned()
                    } else {
                        format!("k{}", x % KEYS)
                    };
                    let r = Request::single(key, Limit::new(100, 60_000).unwrap()).unwrap();
                    let d = store.check(&r).await.expect("check");
                    decisions.fetch_add(1, Ordering::Relaxed);
                    admitted.fetch_add(u64::from(d.allowed), Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (
        decisions.load(Ordering::Relaxed),
        admitted.load(Ordering::Relaxed),
    )
}

/// `used_cpu_user + used_cpu_sys` of the server, seconds.
fn redis_cpu_s(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("cpu").query(c).unwrap();
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| *k == "used_cpu_user" || *k == "used_cpu_sys")
        .map(|(_, v)| v.trim().parse::<f64>().unwrap())
        .sum()
}

/// `usec_per_call` of `command` since the last `CONFIG RESETSTAT`.
fn usec_per_call(c: &mut redis::Connection, command: &str) -> String {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    let prefix = format!("cmdstat_{command}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|f| f.strip_prefix("usec_per_call="))
        })
        .unwrap_or("?")
        .to_owned()
}
