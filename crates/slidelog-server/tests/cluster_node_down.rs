//! One Redis Cluster master down, as `slidelog serve` shows it:
//! `/metrics` says how many masters are known down and for how long
//! (`slidelog_store_nodes_down`, `slidelog_store_nodes_down_seconds`) while
//! `slidelog_store_down_seconds` stays 0 and `slidelog_store_up` 1 (the
//! other masters decide), and 0 again once the master is back. The log tells the outage once: the cluster store's
//! "cluster master down" / "cluster master up" lines, and one limiter
//! episode ("store failing" ... "store answers again") that does not end
//! and start again while only the live masters' keys are asked for longer
//! than the episode's quiet second.

use slidelog_testkit::RedisCluster;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::child;
use common::raw_http;

/// `slidelog serve` on the cluster (fail-open, 100 ms store timeout).
fn serve(url: &str) -> child::Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--no-grpc"])
        .args(["--store", url, "--store-timeout", "100ms"])
        .env_remove("SLIDELOG_STORE")
        .env("RUST_LOG", "info");
    child::spawn(command)
}

/// POSTs a check of `key` (1,000 a minute); returns the status and body.
fn check(addr: &str, key: &str) -> (u16, String) {
    let body = format!(r#"{{"key":"{key}","max":1000,"window_ms":60000}}"#);
    raw_http::check(addr, &body)
}

/// The value of the unlabelled series `name` on `/metrics`, if shown.
fn metric(addr: &str, name: &str) -> Option<f64> {
    let (status, text) = raw_http::get(addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(|v| v.trim().parse().expect("a number"))
}

/// Every log line so far (after a moment for the reader thread).
fn lines(service: &child::Serve) -> Vec<String> {
    std::thread::sleep(Duration::from_millis(200));
    service.log.try_iter().collect()
}

fn count(lines: &[String], text: &str) -> usize {
    lines.iter().filter(|l| l.contains(text)).count()
}

#[test]
fn one_master_down_is_a_metric_and_one_episode_in_the_log() {
    let mut cluster = RedisCluster::start_with_node_args(3, 0, &|| {
        vec!["--cluster-require-full-coverage".into(), "no".into()]
    });
    let service = serve(&cluster.url());
    let addr = service.addr.clone();
    let victim = cluster.master_ports()[1];
    let on_victim = |key: &str| {
        cluster.master_of_slot(cluster.key_slot(&format!("rate:sliding:{key}"))) == victim
    };
    let dead = (0..)
        .map(|i| format!("d{i}"))
        .find(|k| on_victim(k))
        .unwrap();
    let live: Vec<String> = (0..)
        .map(|i| format!("l{i}"))
        .filter(|k| !on_victim(k))
        .take(4)
        .collect();
    for key in live.iter().chain([&dead]) {
        assert_eq!(check(&addr, key).0, 200, "{key}");
    }
    assert_eq!(metric(&addr, "slidelog_store_nodes"), Some(3.0));
    assert_eq!(metric(&addr, "slidelog_store_nodes_down"), Some(0.0));
    assert_eq!(
        metric(&addr, "slidelog_store_nodes_down_seconds"),
        Some(0.0)
    );
    lines(&service);

    cluster.kill(victim);
    let killed = Instant::now();
    // Calls for its keys make it suspect; the probe finds it down.
    while metric(&addr, "slidelog_store_nodes_down") != Some(1.0) {
        assert!(killed.elapsed() < Duration::from_secs(10), "never down");
        check(&addr, &dead);
    }
    let known_down = killed.elapsed();
    // The store as a whole is not down: the other masters decide.
    assert_eq!(metric(&addr, "slidelog_store_down_seconds"), Some(0.0));
    let (status, body) = check(&addr, &dead);
    assert_eq!(status, 200, "fail-open: {body}");
    assert!(body.contains(r#""degraded":true"#), "{body}");
    // The store is up: a call failed for the dead master's slot is counted
    // as a store error, but does not turn slidelog_store_up to 0 (it
    // alternated with every call before).
    assert_eq!(metric(&addr, "slidelog_store_up"), Some(1.0));

    // Three rounds of live keys only for longer than the quiet second, then
    // a dead key again: the episode neither ends nor starts again.
    for _ in 0..3 {
        let round = Instant::now();
        while round.elapsed() < Duration::from_millis(1_300) {
            for key in &live {
                let (status, body) = check(&addr, key);
                assert_eq!(status, 200, "{body}");
                assert!(!body.contains(r#""degraded":true"#), "{key}: {body}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        check(&addr, &dead);
        assert_eq!(
            metric(&addr, "slidelog_store_up"),
            Some(1.0),
            "steady while only the dead master's keys fail"
        );
    }
    let seconds = metric(&addr, "slidelog_store_nodes_down_seconds").unwrap();
    assert!(seconds >= 3.5, "down for {seconds} s");
    let outage = lines(&service);
    eprintln!("known down after {known_down:?}; the outage's log: {outage:#?}");
    assert_eq!(count(&outage, "cluster master down"), 1, "{outage:#?}");
    assert_eq!(count(&outage, "store failing"), 1, "{outage:#?}");
    assert_eq!(count(&outage, "answers again"), 0, "{outage:#?}");

    cluster.restart(victim);
    let restarted = Instant::now();
    while metric(&addr, "slidelog_store_nodes_down") != Some(0.0) {
        assert!(restarted.elapsed() < Duration::from_secs(30), "never up");
        check(&addr, &dead);
        std::thread::sleep(Duration::from_millis(20));
    }
    let up_after = restarted.elapsed();
    assert_eq!(
        metric(&addr, "slidelog_store_nodes_down_seconds"),
        Some(0.0)
    );
    let (status, body) = check(&addr, &dead);
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains(r#""degraded":true"#), "exact again: {body}");
    // A quiet second later a success ends the limiter's episode, once.
    std::thread::sleep(Duration::from_millis(1_100));
    check(&addr, &live[0]);
    check(&addr, &dead);
    let after = lines(&service);
    eprintln!("up {up_after:?} after the restart; the recovery's log: {after:#?}");
    assert_eq!(count(&after, "cluster master up"), 1, "{after:#?}");
    assert_eq!(count(&after, "answers again"), 1, "{after:#?}");
    assert_eq!(count(&after, "store failing"), 0, "{after:#?}");
    assert_eq!(count(&after, "cluster master down"), 0, "{after:#?}");
}
