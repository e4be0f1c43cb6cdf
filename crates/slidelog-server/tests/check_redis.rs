//! `slidelog check --store redis://…` against a real `redis-server`: exit 0
//! admitted, 1 rejected, 2 when Redis cannot be reached (quickly, with the
//! URL's password masked).

use slidelog_testkit::{RedisServer, unique_prefix};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn check(store: &str, prefix: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args([
            "check", "user123", "--max", "2", "--window", "60s", "--json",
        ])
        .args(["--store", store, "--key-prefix", prefix])
        // Behaviour, not latency: generous for a busy CI machine.
        .args(["--store-timeout", "5s"])
        .args(extra)
        .output()
        .expect("run slidelog")
}

#[test]
fn check_decides_on_redis_and_exits_by_the_decision() {
    let server = RedisServer::start();
    let prefix = unique_prefix("cli");
    for expected in [0, 0, 1] {
        let out = check(&server.url(), &prefix, &[]);
        assert_eq!(out.status.code(), Some(expected), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["allowed"], expected == 0);
        assert_eq!(json["limit"], 2);
    }
    // The record is where the original layout puts it.
    let mut c = server.client();
    let n: i64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}user123"))
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
    // Client time decides the same way.
    let out = check(&server.url(), &prefix, &["--client-time", "--peek"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn check_with_redis_down_fails_fast_with_exit_2_and_masks_the_password() {
    let mut server = RedisServer::start();
    let url = format!("redis://user:s3cret@127.0.0.1:{}", server.port());
    server.kill();
    let started = Instant::now();
    let out = check(&url, "p:", &["--connect-timeout", "500ms"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(stderr.contains("user:***@127.0.0.1"), "{stderr}");
    // Said once: "cannot open store: cannot connect to URL:
    // Connection refused (os error 111)", neither the refusal nor the URL a
    // second time.
    assert!(
        stderr.contains("cannot open store: cannot connect to redis://user:***@127.0.0.1"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("127.0.0.1").count(),
        1,
        "the store is named once: {stderr}"
    );
    assert_eq!(
        stderr.matches("Connection refused").count(),
        1,
        "the cause is said once: {stderr}"
    );
}
