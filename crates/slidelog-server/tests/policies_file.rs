//! `slidelog serve --policies FILE` as an operator runs it: a file that does
//! not parse stops the start naming file:line:col; a change is picked up
//! while serving; a broken change keeps the last good policies
//! (docs/design.md §5.3).

mod common;

use common::child;
use common::raw_http::check;
use std::process::Command;
use std::time::{Duration, Instant};

/// Checks under `policy` until the status is `want` (30 s at most).
fn until_status(addr: &str, policy: &str, want: u16) {
    let body = format!(r#"{{"key":"k-{policy}","policy":"{policy}"}}"#);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, answer) = check(addr, &body);
        if status == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{policy}: still {status} {answer}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_invalid_file_stops_the_start_naming_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policies.txt");
    std::fs::write(&file, "api-key: requests=100/minute\nlogin 5/minute\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--http", "127.0.0.1:0", "--no-grpc", "--policies"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = format!("{}:2:1:", file.display());
    assert!(
        stderr.contains("--policies") && stderr.contains(&at),
        "{stderr}"
    );
}

#[test]
fn a_changed_file_is_reloaded_and_a_broken_one_keeps_the_last_good() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policies.txt");
    std::fs::write(&file, "a: 2/minute\n").unwrap();
    let path = file.to_str().unwrap();
    let service = child::serve(&["--policies", path, "--config-poll-interval", "100ms"]);
    let addr = service.addr.clone();
    until_status(&addr, "a", 200);
    until_status(&addr, "b", 400);
    std::fs::write(&file, "a: 2/minute\nb: 1/minute\n").unwrap();
    until_status(&addr, "b", 200);
    until_status(&addr, "b", 429);
    // Broken: the last good policies stay (b still refuses past its max).
    std::fs::write(&file, "a: 2/minute\nb 1/minute\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    until_status(&addr, "b", 429);
    until_status(&addr, "a", 200);
}

#[test]
fn require_policy_needs_policies() {
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--no-grpc",
            "--require-policy",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--policies"), "{stderr}");
}
