//! `slidelog check --wait` on a real Redis: two workers, each running the
//! CLI once per job (20 jobs each) under "5 a second" on one key, start 40
//! jobs with no 1-second interval holding more than 5, all within 8.5 s of
//! the start (the ideal is 7 s). The admissions' times are Redis's own: the
//! records in the key's log, kept by a second limit of 1,000 an hour that
//! never binds (40 jobs) but makes the log hold every record to the end.
//! With Redis down, `--wait` exits 2 once its duration has passed; a retry
//! time past it exits 1 at once.

use slidelog_testkit::{RedisServer, unique_prefix};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn check_wait(url: &str, prefix: &str, key: &str, wait: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["check", key, "--limit", "5/second", "--limit", "1000/hour"])
        .args(["--wait", wait, "--store", url, "--key-prefix", prefix])
        // A slow call on a loaded machine is retried within --wait anyway;
        // generous, so the down-store case is the only one that fails.
        .args(["--store-timeout", "1s"])
        .output()
        .expect("run slidelog")
}

/// The most admissions in any half-open interval `[t, t + 1000)` ms.
fn busiest_second(sorted: &[u64]) -> usize {
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
fn two_cli_workers_share_five_a_second() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("check-wait");
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let workers: Vec<_> = (0..2)
        .map(|_| {
            let (url, prefix) = (redis.url(), prefix.clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    let out = check_wait(&url, &prefix, "jobs", "30s");
                    assert_eq!(out.status.code(), Some(0), "{out:?}");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let mut c = redis.client();
    let scores: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(format!("{prefix}jobs"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    let times: Vec<u64> = scores.iter().map(|(_, ts)| *ts as u64).collect();
    assert_eq!(times.len(), 40, "{scores:?}");
    assert_eq!(busiest_second(&times), 5, "{times:?}");
    let last = times[39] - start;
    println!(
        "first job {} ms after the start, last {last} ms",
        times[0] - start
    );
    assert!(last <= 8_500, "40 jobs took {last} ms");
}

#[test]
fn wait_fails_at_once_past_its_duration_and_at_the_duration_with_redis_down() {
    let mut redis = RedisServer::start();
    let prefix = unique_prefix("check-wait-fail");
    for _ in 0..5 {
        assert_eq!(
            check_wait(&redis.url(), &prefix, "k", "1s").status.code(),
            Some(0)
        );
    }
    // Full for ~1 s: a wait of 100 ms cannot end admitted.
    let started = Instant::now();
    let out = check_wait(&redis.url(), &prefix, "k", "100ms");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("rejected"),
        "{out:?}"
    );
    redis.kill();
    let started_down = Instant::now();
    let out = check_wait(&redis.url(), &prefix, "k", "1500ms");
    let took = started_down.elapsed();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(took >= Duration::from_millis(1_500), "{took:?}");
    println!(
        "refused at once in {:?}; down: exit 2 after {took:?}",
        started.elapsed() - took
    );
}
