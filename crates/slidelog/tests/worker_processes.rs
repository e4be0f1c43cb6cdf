//! Two processes of the worker example (examples/worker.rs) share "5 jobs
//! a second" on one real Redis: 40 jobs between them, no 1-second interval
//! (on Redis's clock, from the admissions' own record times) holding more
//! than 5, all done within 8.5 s of a common start (the ideal is 7 s: 8
//! windows of 5, the last starting at 7 s).
//!
//! The processes are this test binary run again (`worker_child`), so they
//! run the example's own `run`.

#[allow(dead_code)]
#[path = "../examples/worker.rs"]
mod worker;

use slidelog::Limiter;
use slidelog::url::StoreOptions;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Unix ms now.
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The child: connects, waits for the common start, runs its jobs, prints
/// each admission time. Does nothing when not started by the parent.
#[test]
fn worker_child() {
    let (Ok(url), Ok(prefix), Ok(start)) = (
        std::env::var("WORKER_STORE"),
        std::env::var("WORKER_PREFIX"),
        std::env::var("WORKER_START_AT"),
    ) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let options = StoreOptions::default().prefix(prefix);
        // Behaviour, not latency: a store call slowed by a loaded machine
        // is waited for (fail-closed, generous timeout), never admitted
        // degraded, which would count nothing.
        let limiter = Limiter::builder()
            .timeout(Duration::from_secs(2))
            .fail_closed()
            .open(&url, options)
            .await
            .unwrap();
        let start: u64 = start.parse().unwrap();
        tokio::time::sleep(Duration::from_millis(start.saturating_sub(unix_ms()))).await;
        for at in worker::run(&limiter, 20).await.unwrap() {
            println!("admitted {at}");
        }
    });
}

/// The most admissions in any half-open interval `[t, t + 1000)` ms.
fn busiest_second(times: &[u64]) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort_unstable();
    (0..sorted.len())
        .map(|i| {
            sorted[i..]
                .iter()
                .take_while(|t| **t < sorted[i] + 1_000)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn two_worker_processes_share_five_a_second() {
    let redis = slidelog_testkit::RedisServer::start();
    let prefix = slidelog_testkit::unique_prefix("workers");
    // Time to start both processes and connect before the common start.
    let start = unix_ms() + 2_000;
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "worker_child", "--nocapture", "--test-threads=1"])
                .env("WORKER_STORE", redis.url())
                .env("WORKER_PREFIX", &prefix)
                .env("WORKER_START_AT", start.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut times = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "worker failed: {out:?}");
        // libtest writes "test worker_child ... " before the first line.
        let text = String::from_utf8(out.stdout).unwrap();
        times.extend(
            text.lines()
                .filter_map(|l| l.split_once("admitted ")?.1.parse::<u64>().ok()),
        );
    }
    assert_eq!(times.len(), 40, "{times:?}");
    assert!(
        times.iter().all(|t| *t > 0),
        "a job admitted without a record: {times:?}"
    );
    assert_eq!(busiest_second(&times), 5, "{times:?}");
    let first = *times.iter().min().unwrap();
    let last = *times.iter().max().unwrap();
    println!(
        "first job {} ms after the start, last {} ms",
        first as i64 - start as i64,
        last - start
    );
    assert!(first + 50 >= start, "a job started before the common start");
    assert!(last <= start + 8_500, "40 jobs took {} ms", last - start);
}
