//! `serve --memory-snapshot`: the in-memory store survives a restart. SIGTERM
//! then restart admits nothing beyond a limit; kill -9 loses at most the
//! records admitted since the last complete write began; a damaged file
//! refuses to start (exit 2, naming the file and the discard flag) unless the
//! flag discards it.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod common;

use common::child;
use common::raw_http::{check, get, metric};

const FIVE_PER_HOUR: &str = r#"{"key":"deploy","max":5,"window_ms":3600000}"#;

fn serve(path: &Path, extra: &[&str]) -> child::Serve {
    let mut args = vec!["--memory-snapshot", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    child::serve(&args)
}

/// SIGTERM, then waits (at most 30 s) for exit 0.
fn stop(mut service: child::Serve) {
    child::signal(&service.child, "-TERM");
    let status = child::exit_status(&mut service.child, Duration::from_secs(30), "SIGTERM");
    assert!(status.success(), "serve exited with {status}");
}

fn admitted(addr: &str, body: &str) -> bool {
    let (status, answer) = check(addr, body);
    assert!(status == 200 || status == 429, "{status} {answer}");
    status == 200
}

#[test]
fn sigterm_then_restart_admits_nothing_beyond_the_limit_across_3_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    // An interval far longer than the test: what survives is the shutdown write.
    let mut total = 0;
    for (run, checks) in [4, 4, 4, 3].into_iter().enumerate() {
        let service = if run < 3 {
            serve(&path, &["--memory-snapshot-interval", "1h"])
        } else {
            // The last run names the file through the environment.
            let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
            command
                .args(["serve", "--http", "127.0.0.1:0", "--no-grpc"])
                .args(["--memory-snapshot-interval", "1h"])
                .env("SLIDELOG_MEMORY_SNAPSHOT", &path);
            child::spawn(command)
        };
        total += (0..checks)
            .filter(|_| admitted(&service.addr, FIVE_PER_HOUR))
            .count();
        stop(service);
    }
    assert_eq!(total, 5, "15 checks of 5 per hour over 3 restarts");
}

#[test]
fn kill_9_loses_at_most_the_records_since_the_last_complete_write_began() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    let service = serve(&path, &["--memory-snapshot-interval", "200ms"]);
    let body = r#"{"key":"crash","max":100000,"window_ms":3600000}"#;
    let mut times = Vec::new();
    let (started, checks_began) = (Instant::now(), SystemTime::now());
    // Checks for 3 s, and on until a write has completed since they began
    // (at most 30 s: a busy CI disk has taken seconds per write). Then the
    // last complete write as the service reports it, read just before the
    // kill: a write that completes after this read only keeps more.
    let (last_end, duration) = loop {
        assert!(admitted(&service.addr, body));
        times.push(SystemTime::now());
        std::thread::sleep(Duration::from_millis(5));
        if started.elapsed() < Duration::from_secs(3) {
            continue;
        }
        let (_, text) = get(&service.addr, "/metrics");
        let last_end = metric(
            &text,
            "slidelog_memory_snapshot_last_success_timestamp_seconds",
        );
        if UNIX_EPOCH + Duration::from_secs_f64(last_end) > checks_began {
            break (
                last_end,
                metric(&text, "slidelog_memory_snapshot_duration_seconds"),
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no write completed in 30 s of checks"
        );
    };
    // The write's start is its end less its duration; the end is stamped
    // when the writer task runs again after the fsyncs, so it is moved back
    // by a scheduling slack. On a quiet host a write takes a few ms; on a
    // busy CI disk the fsyncs have taken seconds, which is why the bound is
    // the write's own start and not "one interval before the kill".
    let slack = 0.25;
    let write_began = UNIX_EPOCH + Duration::from_secs_f64(last_end - duration - slack);
    let mut service = service;
    child::signal(&service.child, "-KILL");
    let _ = service.child.wait();
    let service = serve(&path, &[]);
    let peek = common::raw_http::request(&service.addr, "POST", "/v1/peek", body, "");
    let count: u64 = serde_json::from_str::<serde_json::Value>(&peek.1).unwrap()["count"]
        .as_u64()
        .unwrap();
    let kept = count - 1; // the peek counts itself
    let lost = times.len() as u64 - kept;
    let recent = times.iter().filter(|&&t| t >= write_began).count() as u64;
    eprintln!(
        "kill -9: {} admitted, {kept} kept, {lost} lost; {recent} admitted since the last \
         complete write began ({duration:.3} s long)",
        times.len()
    );
    assert!(
        lost <= recent,
        "lost {lost}, more than the {recent} admitted since the last complete write began"
    );
    assert!(kept > 0, "nothing survived");
}

/// `serve ARGS` run to its exit (at most 30 s).
fn run_to_exit(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .arg("serve")
        .args(["--http", "127.0.0.1:0", "--no-grpc"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(30));
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    });
    let out = child.wait_with_output().unwrap();
    drop(watchdog);
    out
}

/// A valid snapshot with one key at its limit, written by a service.
fn valid_snapshot(path: &Path) -> Vec<u8> {
    let service = serve(path, &[]);
    for _ in 0..5 {
        assert!(admitted(&service.addr, FIVE_PER_HOUR));
    }
    stop(service);
    std::fs::read(path).unwrap()
}

#[test]
fn damaged_files_refuse_to_start_and_the_discard_flag_starts_empty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    let good = valid_snapshot(&path);
    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x10;
    let cases: [(&str, Vec<u8>); 4] = [
        ("truncated", good[..good.len() - 7].to_vec()),
        ("bit-flipped", flipped),
        ("empty", Vec::new()),
        ("foreign", b"domain: api\ndescriptors: []\n".to_vec()),
    ];
    let shown = path.display().to_string();
    for (what, bytes) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let out = run_to_exit(&["--memory-snapshot", &shown]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(
            stderr.contains(&shown),
            "{what}: the file is not named: {stderr}"
        );
        assert!(
            stderr.contains("--memory-snapshot-discard-invalid"),
            "{what}: the flag is not named: {stderr}"
        );
        // The cause, said once.
        let cause = match what {
            "empty" => "empty (0 bytes)",
            "foreign" => "not a slidelog memory snapshot",
            _ => "truncated or corrupt",
        };
        assert_eq!(
            stderr.matches(cause).count(),
            1,
            "{what}: the cause is said once: {stderr}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{what}: the file was changed"
        );
        // With the flag: an empty store, said so, the file kept aside.
        let mut service = serve(&path, &["--memory-snapshot-discard-invalid"]);
        let said = service.early_log.iter().any(|l| l.contains("discarded"));
        assert!(
            said,
            "{what}: no word of the discarded file: {:?}",
            service.early_log
        );
        assert!(
            admitted(&service.addr, FIVE_PER_HOUR),
            "{what}: the store is not empty"
        );
        let aside = dir.path().join("memory.snap.invalid");
        assert_eq!(std::fs::read(&aside).unwrap(), bytes, "{what}");
        let _ = service.child.kill();
        std::fs::remove_file(aside).unwrap();
    }
}

#[test]
fn snapshots_are_for_the_memory_store_and_their_metrics_are_exported() {
    let out = run_to_exit(&[
        "--store",
        "redis://127.0.0.1:1",
        "--memory-snapshot",
        "/tmp/x.snap",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--memory-snapshot"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    let service = serve(&path, &["--memory-snapshot-interval", "100ms"]);
    assert!(admitted(&service.addr, FIVE_PER_HOUR));
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let (_, text) = get(&service.addr, "/metrics");
        if text.contains("slidelog_memory_snapshot_bytes") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for name in [
        "slidelog_memory_snapshot_last_success_timestamp_seconds",
        "slidelog_memory_snapshot_age_seconds",
        "slidelog_memory_snapshot_duration_seconds",
        "slidelog_memory_snapshot_bytes",
        "slidelog_memory_snapshot_lock_hold_seconds",
        "slidelog_memory_snapshot_failures_total 0",
    ] {
        assert!(text.contains(name), "{name} not in\n{text}");
    }
}
