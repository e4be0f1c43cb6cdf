//! The built `slidelog` binary as a child process: `serve --http
//! 127.0.0.1:0` logs the address it bound, answers the API, and on SIGTERM
//! stops accepting, finishes the request in flight, and exits 0 in time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

mod common;

use common::child;
use common::raw_http::request;

/// `slidelog serve` with ARGS (gRPC on a free port, debug logs), ready once
/// it logged its address.
fn spawn(args: &[&str]) -> child::Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .arg("serve")
        .args(["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "debug");
    child::spawn(command)
}

/// Waits until the server answers `100 Continue` to a request sent with
/// `Expect: 100-continue`: it has accepted the connection, read the headers
/// and started reading the body, so the request is in flight (the signal
/// that a sleep used to stand in for).
fn wait_in_flight(tcp: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        let n = tcp.read(&mut byte).expect("read the interim response");
        assert_eq!(n, 1, "connection closed before 100 Continue");
        seen.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 100"), "{text}");
}

fn sigterm(child: &Child) {
    child::signal(child, "-TERM");
}

#[test]
fn the_binary_serves_and_drains_in_flight_requests_on_sigterm() {
    let mut service = spawn(&["--admin-token", "tok", "--shutdown-grace", "20s"]);
    let addr = service.addr.clone();
    let body = r#"{"key":"bin","max":1,"window_ms":60000}"#;
    let (status, answer) = request(&addr, "POST", "/v1/check", body, "");
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(r#""allowed":true"#), "{answer}");
    assert_eq!(request(&addr, "POST", "/v1/check", body, "").0, 429);
    assert_eq!(request(&addr, "DELETE", "/v1/keys/bin", "", "").0, 401);
    let (status, _) = request(
        &addr,
        "DELETE",
        "/v1/keys/bin",
        "",
        "Authorization: Bearer tok\r\n",
    );
    assert_eq!(status, 200);

    // A request in flight: headers sent, body not yet.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        slow,
        "POST /v1/check HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    slow.flush().unwrap();
    wait_in_flight(&mut slow);

    sigterm(&service.child);
    // Wait for the shutdown to begin, then check that new connections are refused.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let line = service
            .log
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("no shutdown log line within 10 s of SIGTERM");
        if line.contains("shutting down") {
            assert!(line.contains("SIGTERM"), "{line}");
            break;
        }
    }
    let refused = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        TcpStream::connect(&addr).is_err()
    });
    assert!(refused, "still accepting connections after SIGTERM");
    assert!(
        service.child.try_wait().unwrap().is_none(),
        "exited with a request in flight"
    );

    // The in-flight request completes with a real decision.
    slow.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    slow.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Then the process exits 0, well before the grace period.
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = service.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "did not exit within 10 s of draining"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_grace_period_bounds_the_shutdown() {
    let mut service = spawn(&["--shutdown-grace", "300ms"]);
    let addr = service.addr.clone();
    // A client that never finishes its body.
    let mut stuck = TcpStream::connect(&addr).unwrap();
    write!(
        stuck,
        "POST /v1/check HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\nExpect: 100-continue\r\n\r\n"
    )
    .unwrap();
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    wait_in_flight(&mut stuck);
    stuck.write_all(b"{").unwrap();
    let started = Instant::now();
    sigterm(&service.child);
    let status = loop {
        if let Some(status) = service.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "ignored the grace period"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    // It waited for the request in flight before giving up on it.
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "exited after {:?}, before the 300 ms grace period",
        started.elapsed()
    );
    let mut log = Vec::new();
    while let Ok(line) = service.log.recv_timeout(Duration::from_secs(10)) {
        log.push(line);
    }
    assert!(
        log.iter().any(|l| l.contains("grace period over")),
        "{log:?}"
    );
    drop(stuck);
}

#[test]
fn bad_flags_exit_2_with_a_message() {
    for (args, needle) in [
        (&["--on-store-error", "maybe"][..], "fail-open"),
        (&["--admin-token", ""][..], "--admin-token"),
        (&["--memory-key-cap", "0"][..], "--memory-key-cap"),
        (&["--store", "mongo://x"][..], "unknown store URL scheme"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
            .arg("serve")
            .args(["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn the_binary_starts_while_redis_is_down_and_becomes_ready_when_it_returns() {
    let mut redis = slidelog_testkit::RedisServer::start();
    redis.kill();
    let prefix = slidelog_testkit::unique_prefix("bin_redis");
    let service = spawn(&[
        "--store",
        &redis.url(),
        "--key-prefix",
        &prefix,
        "--on-store-error",
        "fail-closed",
    ]);
    let addr = service.addr.clone();
    let body = r#"{"key":"r","max":2,"window_ms":60000}"#;
    assert_eq!(request(&addr, "GET", "/readyz", "", "").0, 503);
    assert_eq!(request(&addr, "POST", "/v1/check", body, "").0, 503);

    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    while request(&addr, "GET", "/readyz", "", "").0 != 200 {
        assert!(
            Instant::now() < deadline,
            "not ready within 20 s of Redis returning"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let statuses: Vec<u16> = (0..3)
        .map(|_| request(&addr, "POST", "/v1/check", body, "").0)
        .collect();
    assert_eq!(statuses, [200, 200, 429]);
    // The decisions live in Redis, under the prefix, with a TTL.
    let mut conn = redis.client();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("{prefix}r"))
        .query(&mut conn)
        .unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "PTTL {ttl}");
}

#[test]
fn the_redis_password_never_reaches_the_log() {
    let mut redis = slidelog_testkit::RedisServer::start();
    let port = redis.port();
    redis.kill();
    let url = format!("redis://admin:hunter2@127.0.0.1:{port}/0");
    let mut service = spawn(&["--store", &url]);
    let addr = service.addr.clone();
    let body = r#"{"key":"pw","max":2,"window_ms":60000}"#;
    let (status, answer) = request(&addr, "POST", "/v1/check", body, "");
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(r#""degraded":true"#), "{answer}");
    let (status, answer) = request(&addr, "GET", "/readyz", "", "");
    assert_eq!(status, 503);
    assert!(!answer.contains("hunter2"), "{answer}");
    sigterm(&service.child);
    let _ = service.child.wait();
    // Every line until the reader thread sees the end of stderr.
    let mut log = std::mem::take(&mut service.early_log);
    while let Ok(line) = service.log.recv_timeout(Duration::from_secs(10)) {
        log.push(line);
    }
    let log = log.join("\n");
    assert!(
        log.contains("admin:***@"),
        "the masked URL is logged:\n{log}"
    );
    // By the first failed call, or first by the probe started with the
    // limiter (it finds the store down before any call).
    assert!(
        log.contains("store call failed") || log.contains("store down:"),
        "the outage is logged:\n{log}"
    );
    assert!(!log.contains("hunter2"), "password in the log:\n{log}");
}

#[test]
fn sigint_stops_the_service_too() {
    let mut service = spawn(&[]);
    assert_eq!(request(&service.addr, "GET", "/healthz", "", "").0, 200);
    child::signal(&service.child, "-INT");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = service.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "SIGINT ignored"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    let mut log = Vec::new();
    while let Ok(line) = service.log.recv_timeout(Duration::from_secs(10)) {
        log.push(line);
    }
    assert!(log.iter().any(|l| l.contains("SIGINT")), "{log:?}");
}
