//! The built binary against a real redis-server
//! (docs/design.md §6): a misconfigured store is loud — `serve` and `check` refuse to
//! start (exit 2) naming the cause; `serve --allow-store-misconfig` starts,
//! logs an error line and answers 503 on /readyz with the cause — and no
//! password or token is ever printed: not by `--help` with the env set, not
//! in errors of `check`, `serve` and `inspect`, whatever characters the
//! password holds. The admin token can come from a file.

use slidelog_testkit::RedisServer;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_slidelog");

/// Starts the binary with ARGS and ENVS, no secret from the environment,
/// its output captured.
fn spawn(args: &[&str], envs: &[(&str, &str)]) -> std::process::Child {
    Command::new(BIN)
        .args(args)
        .envs(envs.iter().copied())
        .env_remove("SLIDELOG_STORE")
        .env_remove("SLIDELOG_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run slidelog")
}

/// Waits up to `limit` for `child` to exit, then kills it; its output, and
/// whether it exited by itself.
fn wait_or_kill(mut child: std::process::Child, limit: Duration) -> (Output, bool) {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let exited = child.try_wait().unwrap().is_some();
    if !exited {
        let _ = child.kill();
    }
    (child.wait_with_output().unwrap(), exited)
}

/// Runs the binary to completion (bounded: 30 s).
fn run(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let (out, exited) = wait_or_kill(spawn(args, envs), Duration::from_secs(30));
    assert!(exited, "slidelog {args:?} did not exit within 30 s");
    out
}

/// `serve` on free ports: the start of every serve run here.
const SERVE: [&str; 5] = ["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];

/// `serve` on the store at `url`, run until it exits (a store it refuses).
fn serve_to_exit(url: &str) -> Output {
    run(&[&SERVE[..], &["--store", url]].concat(), &[])
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

mod common;

use common::child;
use common::raw_http::request;

/// `slidelog serve` with ARGS (gRPC on a free port) and no secret in its
/// environment, ready once it listens.
fn serve(args: &[&str]) -> child::Serve {
    let mut command = Command::new(BIN);
    command
        .args(SERVE)
        .args(args)
        .env_remove("SLIDELOG_STORE")
        .env_remove("SLIDELOG_ADMIN_TOKEN");
    child::spawn(command)
}

#[test]
fn serve_and_check_refuse_a_wrong_password_naming_the_cause() {
    let redis = RedisServer::start_with_args(&["--requirepass", "right"]);
    let url = format!("redis://:hunter2@{}", redis.addr());
    let out = serve_to_exit(&url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("authentication failed"), "{said}");
    assert!(said.contains("--allow-store-misconfig"), "{said}");
    assert!(!said.contains("hunter2"), "{said}");

    let out = run(
        &[
            "check", "k", "--max", "1", "--window", "1s", "--store", &url,
        ],
        &[],
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("authentication failed"), "{said}");
    assert!(!said.contains("hunter2"), "{said}");
}

#[test]
fn serve_refuses_noperm_found_by_a_peek_decision() {
    let redis = RedisServer::start();
    // A user that may only PING and SELECT: connecting works, deciding does not.
    let acl = ["SETUSER", "pinger", "on", ">pw", "~*", "+ping", "+select"];
    redis::cmd("ACL")
        .arg(&acl[..])
        .query::<()>(&mut redis.client())
        .unwrap();
    let url = format!("redis://pinger:pw@{}", redis.addr());
    let out = serve_to_exit(&url);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("NOPERM"), "{said}");
}

#[test]
fn allowed_to_start_misconfigured_it_is_unready_with_the_cause() {
    let redis = RedisServer::start_with_args(&["--requirepass", "right"]);
    let url = format!("redis://:hunter2@{}", redis.addr());
    let service = serve(&["--store", &url, "--allow-store-misconfig"]);
    let error_line = service
        .early_log
        .iter()
        .find(|l| l.contains("ERROR"))
        .unwrap_or_else(|| panic!("no error line:\n{}", service.early_log.join("\n")));
    assert!(error_line.contains("authentication failed"), "{error_line}");
    let (status, body) = request(&service.addr, "GET", "/readyz", "", "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("authentication failed"), "{body}");
    assert!(!body.contains("hunter2"), "{body}");
    // Decisions keep failing, and the error is not logged again per request.
    for _ in 0..10 {
        request(
            &service.addr,
            "POST",
            "/v1/check",
            r#"{"key":"k","max":1,"window_ms":1000}"#,
            "",
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let later: Vec<String> = service.log.try_iter().collect();
    assert!(
        later.iter().filter(|l| l.contains("ERROR")).count() <= 1,
        "{later:?}"
    );
}

#[test]
fn help_never_shows_secret_env_values() {
    let out = run(
        &["serve", "--help"],
        &[
            ("SLIDELOG_STORE", "redis://default:s3cr3t@h:1"),
            ("SLIDELOG_ADMIN_TOKEN", "t0k3n"),
        ],
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("SLIDELOG_STORE"), "{said}");
    assert!(
        !said.contains("s3cr3t") && !said.contains("t0k3n"),
        "{said}"
    );
    for sub in ["check", "inspect"] {
        let out = run(
            &[sub, "--help"],
            &[("SLIDELOG_STORE", "redis://default:s3cr3t@h:1")],
        );
        assert!(!text(&out).contains("s3cr3t"), "{sub}: {}", text(&out));
    }
}

#[test]
fn a_password_that_needs_percent_encoding_is_never_printed() {
    // Nothing listens on port 1: every command fails and prints the URL.
    let url = "redis://default:pa/ss@127.0.0.1:1";
    let runs: [&[&str]; 3] = [
        &[
            "check",
            "k",
            "--max",
            "1",
            "--window",
            "1s",
            "--store",
            url,
            "--connect-timeout",
            "300ms",
        ],
        &[&SERVE[..], &["--store", url, "--connect-timeout", "300ms"]].concat(),
        &["inspect", "--store", url],
    ];
    for args in runs {
        // serve keeps running (Redis down is a passing fault): give it time
        // to log its start, then stop it.
        let (out, _) = wait_or_kill(spawn(args, &[]), Duration::from_secs(5));
        let said = text(&out);
        assert!(
            said.contains("127.0.0.1:1") || said.contains("default:***"),
            "{args:?}: {said}"
        );
        assert!(
            !said.contains("pa/ss") && !said.contains("ss@"),
            "{args:?} printed the password: {said}"
        );
    }
}

#[test]
fn the_admin_token_can_come_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "from-file\n").unwrap();
    let service = serve(&["--admin-token-file", file.to_str().unwrap()]);
    assert_eq!(
        request(&service.addr, "DELETE", "/v1/keys/k", "", "").0,
        401
    );
    let ok = request(
        &service.addr,
        "DELETE",
        "/v1/keys/k",
        "",
        "Authorization: Bearer from-file\r\n",
    );
    assert_eq!(ok.0, 200, "{}", ok.1);
    assert!(!service.early_log.join("\n").contains("from-file"));
    // A missing file is an error naming the file.
    let out = run(&["serve", "--admin-token-file", "/nonexistent/token"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("/nonexistent/token"), "{}", text(&out));
}

/// The secret files a flag names are read bounded: a named pipe or a device
/// stops the start at once, naming the flag; a receipt secret shorter than
/// its bound is refused naming the bound, never printed.
#[test]
fn secret_files_that_are_no_regular_file_or_too_short_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    for flag in ["--admin-token-file", "--receipt-secret-file"] {
        for path in [fifo, "/dev/zero"] {
            let out = run(&["serve", flag, path], &[]);
            assert_eq!(out.status.code(), Some(2), "{flag} {path}");
            assert!(text(&out).contains(flag), "{}", text(&out));
            assert!(text(&out).contains("not a regular file"), "{}", text(&out));
        }
    }
    let short = dir.path().join("short");
    std::fs::write(&short, "only-20-bytes-secret").unwrap();
    let out = run(
        &["serve", "--receipt-secret-file", short.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("at least 32 bytes, got 20"),
        "{}",
        text(&out)
    );
    assert!(
        !text(&out).contains("only-20-bytes-secret"),
        "{}",
        text(&out)
    );
}
