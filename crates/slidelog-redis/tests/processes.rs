//! Exactness across OS processes: 8 processes (this test binary run again as
//! children) x 64 concurrent checks share one key on one Redis.
//! - max 100 per 60 s: exactly 100 admitted in all, and 100 records left.
//! - max 50 per 400 ms under ~1.5 s of sustained load: no interval of one
//!   window holds more than 50 admissions (from the admission times the
//!   script reports, which are the scores it wrote).
//! - the same at a granularity of 20 ms (docs/design.md §1.1) for 3 s: a
//!   record counts at its time rounded up (later, never earlier), so no
//!   exact window of the decision times holds more than 50 either.
//!
//! Each runs on Redis and on Valkey. A `harness = false` target: `main` is
//! the child when `SLIDELOG_CHILD_URL` is set and otherwise runs the cases
//! (slidelog_testkit::runner), so the child is never a test that passes by
//! returning early.

mod common;

use slidelog_core::{Limit, Mode, Now, Request};
use slidelog_redis::RedisStore;
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROCESSES: usize = 8;
const TASKS: usize = 64;

fn main() -> ExitCode {
    common::children::main(
        child_process,
        &[
            (
                "exactly_max_admitted_across_processes",
                exactly_max_admitted_across_processes,
            ),
            (
                "no_window_holds_more_than_max_under_sustained_load_across_processes",
                no_window_holds_more_than_max_under_sustained_load_across_processes,
            ),
            (
                "granular_limit_never_over_admits_across_processes",
                granular_limit_never_over_admits_across_processes,
            ),
        ],
    )
}

/// Starts the children, releases them together, and returns every admission
/// time they report.
fn run_children(
    server: &RedisServer,
    prefix: &str,
    (max, window_ms, granularity_ms): (u64, u64, u64),
    run_ms: u64,
) -> Vec<u64> {
    let env = [
        ("SLIDELOG_CHILD_MAX", max.to_string()),
        ("SLIDELOG_CHILD_WINDOW_MS", window_ms.to_string()),
        ("SLIDELOG_CHILD_GRANULARITY_MS", granularity_ms.to_string()),
        ("SLIDELOG_CHILD_RUN_MS", run_ms.to_string()),
    ];
    let mut times = Vec::new();
    for stdout in common::children::run_children(server, prefix, PROCESSES, &env) {
        let mine = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("ADMIT "))
            .map(|t| t.trim().parse::<u64>().unwrap());
        times.extend(mine);
    }
    times.sort_unstable();
    times
}

fn exactly_max_admitted_across_processes(kind: ServerKind) {
    let server = RedisServer::start_kind(kind);
    let prefix = unique_prefix("procs");
    let times = run_children(&server, &prefix, (100, 60_000, 1), 0);
    let mut c = server.client();
    let card: i64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}shared"))
        .query(&mut c)
        .unwrap();
    assert_eq!(
        times.len(),
        100,
        "admitted across {PROCESSES} processes; zcard {card}"
    );
    let mut left: Vec<u64> = scores(&mut c, &format!("{prefix}shared"));
    left.sort_unstable();
    assert_eq!(left, times, "the scores left in Redis are the admissions");
    // No window-long interval holds more than max records.
    assert!(times.len() <= 100 || times[100] - times[0] >= 60_000);
}

fn no_window_holds_more_than_max_under_sustained_load_across_processes(kind: ServerKind) {
    sustained_load(kind, "procs-slide", 1, 1_500);
}

fn granular_limit_never_over_admits_across_processes(kind: ServerKind) {
    sustained_load(kind, "procs-gran", 20, 3_000);
}

/// 50 per 400 ms at `granularity_ms` under `run_ms` of load: no window of
/// the decision times holds more than 50 admissions.
fn sustained_load(kind: ServerKind, test: &str, granularity_ms: u64, run_ms: u64) {
    let server = RedisServer::start_kind(kind);
    let prefix = unique_prefix(test);
    let (max, window) = (50usize, 400u64);
    let times = run_children(
        &server,
        &prefix,
        (max as u64, window, granularity_ms),
        run_ms,
    );
    assert!(
        times.len() > 2 * max,
        "the load spanned several windows: {}",
        times.len()
    );
    for i in 0..times.len().saturating_sub(max) {
        // A record at ts is live until ts + window, so max + 1 admissions
        // must span at least one window.
        assert!(
            times[i + max] - times[i] >= window,
            "{} admissions within {} ms from {}",
            max + 1,
            times[i + max] - times[i],
            times[i]
        );
    }
    // The scores left in Redis are the newest admissions, and obey the same rule.
    let mut c = server.client();
    let left = scores(&mut c, &format!("{prefix}shared"));
    assert!(left.len() <= max);
}

/// The scores of every record of the log `key`, oldest first.
fn scores(c: &mut redis::Connection, key: &str) -> Vec<u64> {
    common::records(c, key)
        .into_iter()
        .map(|(_, score)| score)
        .collect()
}

/// The child (`SLIDELOG_CHILD_URL` set by the parent): connects, waits
/// for the release, then runs 64 concurrent checks (once each, or in a loop
/// for `RUN_MS`) and prints each admission time.
fn child_process(url: String) {
    let env = |k: &str| std::env::var(k).unwrap();
    let max: u64 = env("SLIDELOG_CHILD_MAX").parse().unwrap();
    let window: u64 = env("SLIDELOG_CHILD_WINDOW_MS").parse().unwrap();
    let run_ms: u64 = env("SLIDELOG_CHILD_RUN_MS").parse().unwrap();
    let granularity: u64 = env("SLIDELOG_CHILD_GRANULARITY_MS").parse().unwrap();
    common::children::block_on(|prefix, options| async move {
        let store = Arc::new(RedisStore::connect(&url, options).await.unwrap());
        let mut conn = store.connection();
        common::children::ready_then_wait(&mut conn, &prefix).await;
        let limit = Limit::new(max, window).unwrap();
        let r = Request::single("shared", limit.with_granularity(granularity).unwrap()).unwrap();
        let until = Instant::now() + Duration::from_millis(run_ms);
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (store, r) = (store.clone(), r.clone());
                tokio::spawn(async move {
                    let mut admitted = Vec::new();
                    loop {
                        let o = store
                            .decide_timed(&r, Mode::Record, Now::Server)
                            .await
                            .unwrap();
                        if o.decision.allowed {
                            admitted.push(o.now_ms);
                        }
                        if Instant::now() >= until {
                            return admitted;
                        }
                        // Sustained, not saturating: leave room for the other processes.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
            })
            .collect();
        let mut out = String::new();
        for t in tasks {
            for ms in t.await.unwrap() {
                out.push_str(&format!("ADMIT {ms}\n"));
            }
        }
        println!("{out}CHILD DONE");
    });
}
