//! Store outages are logged per episode, not per request: before the fix,
//! 20 alternating requests at the memory store's key cap gave 21 WARN and
//! 20 INFO lines. Now a store that fails every other request is one
//! episode: one line when it starts failing, one when it has answered
//! again with no failure for a quiet second; a Redis killed and restarted
//! too. A full memory store is no outage: one warning per full episode,
//! which lasts until the store has room again (docs/design.md §6).

use slidelog_testkit::RedisServer;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::child;
use common::raw_http;

/// `slidelog serve` with ARGS (gRPC on a free port), ready once it listens.
fn serve(args: &[&str]) -> child::Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(args)
        .env_remove("SLIDELOG_STORE")
        .env("RUST_LOG", "info");
    child::spawn(command)
}

/// POSTs a check of `key` (1,000 a minute); returns the status.
fn check(addr: &str, key: &str) -> u16 {
    let body = format!(r#"{{"key":"{key}","max":1000,"window_ms":60000}}"#);
    raw_http::check(addr, &body).0
}

/// The store log lines (WARN/INFO/ERROR about the store) so far.
fn store_lines(service: &child::Serve) -> Vec<String> {
    std::thread::sleep(Duration::from_millis(200));
    service
        .log
        .try_iter()
        .filter(|l| l.contains("store"))
        .filter(|l| l.contains("WARN") || l.contains("INFO") || l.contains("ERROR"))
        .collect()
}

#[test]
fn alternating_requests_at_the_key_cap_are_one_episode() {
    let service = serve(&["--memory-key-cap", "1"]);
    assert_eq!(check(&service.addr, "held"), 200);
    store_lines(&service);
    for i in 0..20 {
        let key = if i % 2 == 0 {
            format!("new{i}")
        } else {
            "held".into()
        };
        check(&service.addr, &key);
    }
    let lines = store_lines(&service);
    let warn = lines.iter().filter(|l| l.contains("WARN")).count();
    let info = lines.iter().filter(|l| l.contains("INFO")).count();
    assert_eq!((warn, info), (1, 0), "{lines:#?}");
    assert!(lines[0].contains("memory store full"), "{lines:#?}");
    // A full store is no outage: a quiet second and a success later it is
    // still full, and the next refusal is the same episode. No line at
    // all (it closes once the store has room and has refused nothing for
    // 10 s: slidelog-memory's full.rs).
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(check(&service.addr, "held"), 200);
    assert_eq!(check(&service.addr, "new-late"), 503);
    let lines = store_lines(&service);
    assert!(lines.is_empty(), "{lines:#?}");
}

#[test]
fn a_redis_outage_is_one_warn_line_and_one_info_line() {
    let mut redis = RedisServer::start();
    let service = serve(&["--store", &redis.url()]);
    assert_eq!(check(&service.addr, "k"), 200);
    // The lines before the outage (the engine it chose at start) are not
    // the outage's.
    store_lines(&service);
    redis.kill();
    for _ in 0..20 {
        check(&service.addr, "k");
    }
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    // Requests every 100 ms until the recovery line shows.
    while !lines.iter().any(|l: &String| l.contains("answers again")) {
        assert!(Instant::now() < deadline, "{lines:#?}");
        check(&service.addr, "k");
        lines.extend(store_lines(&service));
    }
    let warn = lines.iter().filter(|l| l.contains("WARN")).count();
    let info = lines.iter().filter(|l| l.contains("INFO")).count();
    assert_eq!((warn, info), (1, 1), "{lines:#?}");
}
