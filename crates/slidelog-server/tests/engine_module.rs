//! The built binary and the store URL's `engine=` (docs/design.md §4.4):
//! `serve` and `check` with `engine=module` against a Redis without the
//! module refuse to start (exit 2) naming the module and how to load it, as
//! for a wrong password; an unknown engine is a bad URL (exit 2); against a
//! Redis with the module, `check` decides through it (the key holds the
//! module's type) and `serve` logs the engine it uses, once: its store
//! check's answer is the one it serves with.

use slidelog_testkit::{RedisServer, ServerKind};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{child, raw_http};

const BIN: &str = env!("CARGO_BIN_EXE_slidelog");

/// Runs the binary until it exits (at most 30 s), its output captured.
fn run(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env_remove("SLIDELOG_STORE")
        .env_remove("SLIDELOG_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run slidelog");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let exited = child.try_wait().unwrap().is_some();
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        exited,
        "slidelog {args:?} did not exit within 30 s: {}",
        text(&out)
    );
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn serve(store: &str) -> Output {
    run(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--store",
        store,
    ])
}

fn check(store: &str) -> Output {
    run(&[
        "check", "k", "--max", "1", "--window", "60s", "--store", store,
    ])
}

#[test]
fn engine_module_without_the_module_refuses_to_start() {
    let server = RedisServer::start();
    let url = format!("{}?engine=module", server.url());
    for (what, out) in [("serve", serve(&url)), ("check", check(&url))] {
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{what}: {said}");
        assert!(
            said.contains("SLIDELOG.CHECK") && said.contains("--loadmodule"),
            "{what} names the module and how to load it: {said}"
        );
    }
}

#[test]
fn an_unknown_engine_is_a_bad_url() {
    let server = RedisServer::start();
    let out = check(&format!("{}?engine=lua", server.url()));
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("engine="), "{said}");
}

#[test]
fn check_decides_through_the_module_where_it_is_loaded() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    for engine in ["module", "auto"] {
        let url = format!("{}?engine={engine}", server.url());
        let key = format!("rate:sliding:{engine}");
        let out = run(&[
            "check", engine, "--max", "1", "--window", "60s", "--store", &url,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let t: String = redis::cmd("TYPE")
            .arg(&key)
            .query(&mut server.client())
            .unwrap();
        assert_eq!(t, "slide-log", "engine={engine}");
        let out = run(&[
            "check", engine, "--max", "1", "--window", "60s", "--store", &url,
        ]);
        assert_eq!(out.status.code(), Some(1), "rejected: {}", text(&out));
    }
    // engine=script writes a sorted set on the same server.
    let url = format!("{}?engine=script", server.url());
    let out = run(&[
        "check", "s", "--max", "1", "--window", "60s", "--store", &url,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t: String = redis::cmd("TYPE")
        .arg("rate:sliding:s")
        .query(&mut server.client())
        .unwrap();
    assert_eq!(t, "zset");
}

#[test]
fn serve_asks_for_the_engine_and_logs_it_once() {
    let server = RedisServer::start();
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(["--store", &server.url()])
        .env_remove("SLIDELOG_STORE")
        .env("RUST_LOG", "info");
    let service = child::spawn(command);
    // Decisions after the start: a store that had not asked yet would ask
    // now (in the background) and log the engine a second time.
    for _ in 0..3 {
        let (status, body) =
            raw_http::check(&service.addr, r#"{"key":"e","max":100,"window_ms":60000}"#);
        assert_eq!(status, 200, "{body}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut log = service.early_log.clone();
    log.extend(service.log.try_iter());
    // The answer to `auto` (the URL names no engine), and no other: a store
    // used to log the scripts as its default choice too when it was made
    // (`requested="script"`), before the URL's choice replaced it.
    let engine: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("decisions go through"))
        .collect();
    assert_eq!(
        engine.len(),
        1,
        "the engine asked and logged once: {log:#?}"
    );
    assert!(engine[0].contains(r#"requested="auto""#), "{log:#?}");
    assert!(engine[0].contains("Lua scripts"), "{log:#?}");
}
