//! Exactness across OS processes on a Redis Cluster and a Valkey cluster:
//! several processes (this test binary run again as workers) hammer the same
//! keys, spread over all masters, at once; across all of them exactly `max`
//! requests per key are admitted.
//!
//! A `harness = false` target: its `main` is the worker when
//! `SLIDELOG_CLUSTER_WORKER` is set, and otherwise runs the cases, so no
//! worker stub counts as a passing test.

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions};
use slidelog_testkit::runner::{self, Case};
use slidelog_testkit::{RedisCluster, ServerKind, unique_prefix};
use std::process::{Command, ExitCode};
use std::time::Duration;

const WORKER_ENV: &str = "SLIDELOG_CLUSTER_WORKER";
const PROCESSES: usize = 4;
const KEYS: usize = 12;
const MAX: u64 = 25;
const TRIES_PER_KEY: u64 = 60;

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var(WORKER_ENV) {
        block_on(worker(spec));
        return ExitCode::SUCCESS;
    }
    runner::run(
        ServerKind::ALL
            .into_iter()
            .map(|kind| {
                Case::new(
                    format!("several_processes_admit_exactly_max_per_key_{kind}"),
                    move || block_on(several_processes_admit_exactly_max_per_key(kind)),
                )
            })
            .collect(),
    )
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// The worker (`SLIDELOG_CLUSTER_WORKER=url|prefix|start_ms`): decides
/// `TRIES_PER_KEY` times on every key from 4 tasks and prints what it
/// admitted.
async fn worker(spec: String) {
    let mut parts = spec.split('|');
    let (url, prefix, start_at) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap().parse::<u64>().unwrap(),
    );
    let options = RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(Duration::from_secs(5));
    let store = std::sync::Arc::new(ClusterStore::connect_cluster(url, options).await.unwrap());
    let limit = Limit::new(MAX, 600_000).unwrap();
    // All processes start deciding at the same moment, so they overlap.
    let wait = start_at.saturating_sub(unix_ms());
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let mut tasks = Vec::new();
    for t in 0..4u64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut admitted = vec![0u64; KEYS];
            for n in 0..TRIES_PER_KEY / 4 * KEYS as u64 {
                let k = ((n + t) % KEYS as u64) as usize;
                let r = Request::single(format!("k{k}"), limit).unwrap();
                if store.check(&r).await.expect("decide").allowed {
                    admitted[k] += 1;
                }
            }
            admitted
        }));
    }
    let mut admitted = [0u64; KEYS];
    for t in tasks {
        for (a, b) in admitted.iter_mut().zip(t.await.unwrap()) {
            *a += b;
        }
    }
    println!(
        "ADMITTED {}",
        admitted
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
}

async fn several_processes_admit_exactly_max_per_key(kind: ServerKind) {
    let cluster = tokio::task::spawn_blocking(move || RedisCluster::start_kind(kind))
        .await
        .unwrap();
    let prefix = unique_prefix("cluster-procs");
    let exe = std::env::current_exe().unwrap();
    let start_at = unix_ms() + 1_500;
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .env(WORKER_ENV, format!("{}|{prefix}|{start_at}", cluster.url()))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn a worker process")
        })
        .collect();
    let mut total = vec![0u64; KEYS];
    for child in children {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "worker failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("ADMITTED ").map(|(_, r)| r.trim()))
            .unwrap_or_else(|| panic!("no result from a worker: {stdout}"));
        for (t, n) in total.iter_mut().zip(line.split(',')) {
            *t += n.parse::<u64>().unwrap();
        }
    }
    // Every key saw PROCESSES * TRIES_PER_KEY > MAX tries; exactly MAX got in.
    assert_eq!(
        total,
        vec![MAX; KEYS],
        "admitted per key across {PROCESSES} processes"
    );
    // And the cluster holds exactly MAX records per key.
    let store = ClusterStore::connect_cluster(
        &cluster.url(),
        RedisOptions::default()
            .with_prefix(&prefix)
            .with_timeout(Duration::from_secs(2)),
    )
    .await
    .unwrap();
    for k in 0..KEYS {
        let r = Request::single(format!("k{k}"), Limit::new(MAX, 600_000).unwrap()).unwrap();
        assert_eq!(store.peek(&r).await.unwrap().count, MAX);
    }
}
