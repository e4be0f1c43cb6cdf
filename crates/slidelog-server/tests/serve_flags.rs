//! What `slidelog serve` needs from the machine and says at startup: the
//! gRPC API can be turned off (`--no-grpc`, then nothing listens on 8081); a
//! taken port stops it with a message naming the flag that moves it; and
//! without `--config` it says that the Envoy APIs answer every descriptor
//! unlimited.

mod common;

use common::child;

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

fn serve_fails(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .arg("serve")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A serve that does not fail would run forever: bound the wait.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve {args:?} kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn a_taken_port_names_the_flag_that_moves_it() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();

    let stderr = serve_fails(&["--http", &addr, "--no-grpc"]);
    assert!(stderr.contains(&format!("--http {addr}")), "{stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
    assert!(stderr.contains("choose another with --http"), "{stderr}");

    let stderr = serve_fails(&["--http", "127.0.0.1:0", "--grpc", &addr]);
    assert!(stderr.contains(&format!("--grpc {addr}")), "{stderr}");
    assert!(stderr.contains("choose another with --grpc"), "{stderr}");
    assert!(stderr.contains("--no-grpc"), "{stderr}");
    // Said once.
    assert_eq!(stderr.matches("in use").count(), 1, "{stderr}");
}

#[test]
fn no_grpc_binds_only_http_and_json_still_answers() {
    let service = child::serve(&[]);
    let log = service.early_log.join("\n");
    assert!(log.contains("grpc_addr=off"), "{log}");
    // The only listening sockets of the process are the HTTP one: the
    // default gRPC address is not bound (it may be another program's).
    let out = Command::new("curl")
        .args(["-s", "-d"])
        .arg(r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}"#)
        .arg(service.url("/json"))
        .output()
        .expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains(r#""overallCode":"OK""#), "{body}");
    assert!(
        !log.contains("127.0.0.1:8081"),
        "--no-grpc must not bind the default gRPC address: {log}"
    );
}

#[test]
fn no_grpc_conflicts_with_grpc() {
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--no-grpc", "--grpc", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--no-grpc") && stderr.contains("--grpc"),
        "{stderr}"
    );
}

#[test]
fn without_config_the_startup_log_says_every_descriptor_is_unlimited() {
    let with_grpc = child::spawn({
        let mut c = Command::new(env!("CARGO_BIN_EXE_slidelog"));
        c.args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]);
        c
    });
    let log = with_grpc.early_log.join("\n");
    assert!(
        log.contains(
            "no --config: gRPC ShouldRateLimit and POST /json answer every descriptor OK, unlimited"
        ),
        "{log}"
    );
    let without_grpc = child::serve(&[]);
    let log = without_grpc.early_log.join("\n");
    assert!(
        log.contains("no --config: POST /json answers every descriptor OK, unlimited"),
        "{log}"
    );
    // With a config, no such line.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(
        &path,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n",
    )
    .unwrap();
    let configured = child::serve(&["--config", path.to_str().unwrap()]);
    let log = configured.early_log.join("\n");
    assert!(!log.contains("unlimited"), "{log}");
}
