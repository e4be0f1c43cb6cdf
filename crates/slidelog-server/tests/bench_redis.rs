//! `slidelog bench` end to end: against Redis and the memory store an exact
//! store admits exactly max per key (window longer than the run) with no
//! overshoot; the unsafe pipelined variant's overshoot is what the judge counts.

use slidelog_testkit::RedisServer;
use std::process::Command;

fn bench(store: &str, extra: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["bench", "--store", store, "--json", "--window", "60s"])
        .args(["--store-timeout", "5s"])
        .args(extra)
        .output()
        .expect("run slidelog bench");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[test]
fn an_exact_store_admits_max_per_key_and_never_overshoots() {
    let server = RedisServer::start();
    let args = [
        "--keys",
        "5",
        "--concurrency",
        "16",
        "--requests",
        "1000",
        "--max",
        "20",
    ];
    for store in [server.url(), "memory://".to_owned()] {
        let r = bench(&store, &args);
        assert_eq!(r["admitted"], 100, "{r}");
        assert_eq!(r["rejected"], 900, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        assert_eq!(r["over_limit"], 0, "{r}");
        assert!(r["throughput_per_s"].as_f64().unwrap() > 0.0);
        assert!(
            r["latency_us"]["p99"].as_u64().unwrap() >= r["latency_us"]["p50"].as_u64().unwrap()
        );
    }
}

#[test]
fn the_unsafe_pipelined_overshoot_is_counted() {
    let server = RedisServer::start();
    let r = bench(
        &server.url(),
        &[
            "--unsafe-pipelined",
            "--keys",
            "1",
            "--concurrency",
            "64",
            "--requests",
            "1000",
            "--max",
            "20",
        ],
    );
    assert_eq!(r["kind"], "redis-unsafe-pipelined");
    let admitted = r["admitted"].as_u64().unwrap();
    // The whole run lies within one window: every unit beyond 20 is certain.
    assert_eq!(
        r["over_limit"].as_u64().unwrap(),
        admitted.saturating_sub(20),
        "{r}"
    );
}
