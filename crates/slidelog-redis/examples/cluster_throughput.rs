//! Decisions per second on a local 3-master Redis Cluster against one Redis
//! master, same machine, same run (BENCHMARKS.md, "Redis Cluster"):
//!
//! ```text
//! cargo run --release -p slidelog-redis --example cluster_throughput -- [seconds] [tasks]
//! ```
//!
//! Each target gets `tasks` concurrent callers deciding (server time, one
//! limit of 100 per 60 s) on keys drawn from 100,000, for `seconds` (default
//! 5) after a 1 s warm-up. The servers are started here (testkit) on free
//! loopback ports and stopped at the end; nothing persists.

use rand::Rng;
use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions, RedisStore};
use slidelog_testkit::{RedisCluster, RedisServer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

async fn run(store: Arc<dyn Store>, tasks: usize, seconds: u64) -> (f64, u64) {
    let limit = Limit::new(100, 60_000).unwrap();
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut joins = Vec::new();
    for _ in 0..tasks {
        let (store, measuring, stop, done, errors) = (
            store.clone(),
            measuring.clone(),
            stop.clone(),
            done.clone(),
            errors.clone(),
        );
        joins.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let key = format!("bench:{}", rand::rng().random_range(0..100_000));
                let ok = store
                    .check(&Request::single(key, limit).unwrap())
                    .await
                    .is_ok();
                if measuring.load(Ordering::Relaxed) {
                    if ok {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for j in joins {
        j.await.unwrap();
    }
    (
        done.load(Ordering::Relaxed) as f64 / elapsed,
        errors.load(Ordering::Relaxed),
    )
}

/// CPU seconds (user + system) this process has used, from /proc.
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line, 11 and 12 after ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU seconds the Redis servers on `ports` have used (`INFO cpu`).
fn redis_cpu_s(ports: &[u16]) -> f64 {
    ports
        .iter()
        .map(|p| {
            let client = redis::Client::open(format!("redis://127.0.0.1:{p}")).unwrap();
            let mut c = client.get_connection().unwrap();
            let info: String = redis::cmd("INFO").arg("cpu").query(&mut c).unwrap();
            info.lines()
                .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
                .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
                .sum::<f64>()
        })
        .sum()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().map_or(5, |s| s.parse().expect("seconds"));
    let tasks: usize = args.next().map_or(64, |s| s.parse().expect("tasks"));
    let options = RedisOptions::default().with_timeout(Duration::from_secs(2));

    let single = RedisServer::start();
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with(3, 0))
        .await
        .unwrap();
    let one: Arc<dyn Store> = Arc::new(
        RedisStore::connect(&single.url(), options.clone())
            .await
            .unwrap(),
    );
    let three: Arc<dyn Store> = Arc::new(
        ClusterStore::connect_cluster(&cluster.url(), options)
            .await
            .unwrap(),
    );
    println!("{tasks} concurrent callers, {seconds} s each, keys from 100,000, server time");
    println!(
        "{:<36} {:>12} {:>8} {:>16} {:>16}",
        "target", "decisions/s", "errors", "client CPU µs/dec", "redis CPU µs/dec"
    );
    let single_port = [single.port()];
    let targets: [(&str, Arc<dyn Store>, Vec<u16>); 2] = [
        ("1 master (redis://)", one, single_port.to_vec()),
        (
            "3-master cluster (redis+cluster://)",
            three,
            cluster.ports(),
        ),
    ];
    for (name, store, ports) in targets {
        let (cpu0, redis0) = (process_cpu_s(), redis_cpu_s(&ports));
        let (rate, errors) = run(store, tasks, seconds).await;
        // CPU over warm-up + measurement, per decision of the whole run
        // (approximated from the measured rate).
        let decisions = rate * (seconds as f64 + 1.0);
        let client_us = (process_cpu_s() - cpu0) * 1e6 / decisions;
        let redis_us = (redis_cpu_s(&ports) - redis0) * 1e6 / decisions;
        println!("{name:<36} {rate:>12.0} {errors:>8} {client_us:>16.1} {redis_us:>16.1}");
    }
}
