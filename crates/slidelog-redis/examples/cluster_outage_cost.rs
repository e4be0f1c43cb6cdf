//! What the per-master outage mode of the cluster store
//! (`src/cluster/nodes.rs`) costs a healthy cluster's calls: its slot check
//! (the key's CRC16 and one atomic load) and its timer (each keyed call is
//! bounded by half the store timeout), measured side by side in one process
//! on one 3-master cluster, with the mode on and bypassed
//! (`ClusterConnection::bypass_node_health_for_measurement`, which sends keyed calls
//! straight to redis-rs as before the mode existed). BENCHMARKS.md, "Cluster
//! outage mode".
//!
//! ```text
//! cargo build --release -p slidelog-redis --example cluster_outage_cost
//! # Alternating rounds (on, bypassed, on, ...): ops/s and client CPU per call.
//! target/release/examples/cluster_outage_cost ab [seconds per round] [rounds] [tasks]
//! # N sequential checks on one thread with the mode on or bypassed (for
//! # callgrind: run two N and divide the difference in instructions by the
//! # difference in N).
//! valgrind --tool=callgrind target/release/examples/cluster_outage_cost calls N on|off
//! ```
//!
//! The cluster is started here (testkit) on free loopback ports and stopped
//! at the end; nothing persists.

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions};
use slidelog_testkit::RedisCluster;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// CPU seconds (user + system) this process has used, from /proc.
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// One round of `tasks` callers for `seconds`: (ops/s, client CPU µs per
/// call, errors).
async fn round(store: &Arc<ClusterStore>, tasks: usize, seconds: f64) -> (f64, f64, u64) {
    let limit = Limit::new(100, 60_000).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (done, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let cpu = process_cpu_s();
    let started = Instant::now();
    let mut joins = Vec::new();
    for t in 0..tasks {
        let (store, stop, done, errors) =
            (store.clone(), stop.clone(), done.clone(), errors.clone());
        joins.push(tokio::spawn(async move {
            let mut i = t as u64;
            while !stop.load(Ordering::Relaxed) {
                i = i.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let key = format!("bench:{}", (i >> 33) % 100_000);
                match store.check(&Request::single(key, limit).unwrap()).await {
                    Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                    Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for j in joins {
        j.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let calls = done.load(Ordering::Relaxed) + errors.load(Ordering::Relaxed);
    let cpu_us = (process_cpu_s() - cpu) * 1e6 / calls.max(1) as f64;
    (
        done.load(Ordering::Relaxed) as f64 / elapsed,
        cpu_us,
        errors.load(Ordering::Relaxed),
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // One thread for the instruction counts (no work stealing or parking
    // between workers to vary from run to run); the machine's cores for
    // throughput.
    let runtime = if args.first().map(String::as_str) == Some("calls") {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .expect("a runtime");
    runtime.block_on(run(args));
}

async fn run(args: Vec<String>) {
    let arg = |i: usize| args.get(i).map(String::as_str);
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with(3, 0))
        .await
        .unwrap();
    let options = RedisOptions::default().with_timeout(Duration::from_millis(500));
    let store = Arc::new(
        ClusterStore::connect_cluster(&cluster.url(), options)
            .await
            .expect("connect"),
    );
    match arg(0).unwrap_or("ab") {
        "calls" => {
            let n: u64 = arg(1).map_or(10_000, |s| s.parse().expect("N"));
            let bypass = match arg(2).unwrap_or("on") {
                "on" => false,
                "off" => true,
                other => panic!("on or off, not {other}"),
            };
            store
                .connection()
                .bypass_node_health_for_measurement(bypass);
            let limit = Limit::new(100, 60_000).unwrap();
            for i in 0..n {
                let key = format!("bench:{}", i % 1_000);
                store
                    .check(&Request::single(key, limit).unwrap())
                    .await
                    .expect("decides");
            }
            println!(
                "{n} calls, outage mode {}",
                if bypass { "bypassed" } else { "on" }
            );
        }
        "ab" => {
            let seconds: f64 = arg(1).map_or(3.0, |s| s.parse().expect("seconds"));
            let rounds: usize = arg(2).map_or(6, |s| s.parse().expect("rounds"));
            let tasks: usize = arg(3).map_or(64, |s| s.parse().expect("tasks"));
            // Warm-up: connections, scripts loaded on every master.
            round(&store, tasks, 1.0).await;
            let (mut on, mut off) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
            println!("round | outage mode | ops/s | client CPU µs/call | errors");
            for r in 0..rounds * 2 {
                let bypass = r % 2 == 1;
                store
                    .connection()
                    .bypass_node_health_for_measurement(bypass);
                let (ops, cpu, errors) = round(&store, tasks, seconds).await;
                let mode = if bypass { "bypassed" } else { "on" };
                println!("{r} | {mode} | {ops:.0} | {cpu:.2} | {errors}");
                let into = if bypass { &mut off } else { &mut on };
                into.0.push(ops);
                into.1.push(cpu);
            }
            store.connection().bypass_node_health_for_measurement(false);
            println!(
                "median, {tasks} tasks, {rounds} rounds of {seconds} s each: on {:.0} ops/s {:.2} µs/call; bypassed {:.0} ops/s {:.2} µs/call",
                median(&mut on.0),
                median(&mut on.1),
                median(&mut off.0),
                median(&mut off.1)
            );
        }
        other => panic!("mode ab or calls, not {other}"),
    }
    drop(store);
    drop(cluster);
}
