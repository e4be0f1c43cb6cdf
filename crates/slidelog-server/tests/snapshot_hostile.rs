//! `serve --memory-snapshot PATH` on a hostile path: a named pipe, a link to
//! `/dev/zero`, a directory, a file above twice `--memory-limit`, a key held
//! twice, a record hours past the clock. Each refuses to start (exit 2)
//! within a second, naming the flag and the path; none blocks (the binary
//! runs under a watchdog) or reads without bound. With `--trust-client-time`
//! a record ahead of the clock loads: clients may stamp their own time.

use slidelog_core::{Limit, Mode, Request};
use slidelog_memory::MemoryStore;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::child;

/// `serve --memory-snapshot PATH ARGS` run to its exit under a 10 s
/// watchdog; returns its output and how long it ran.
fn start(path: &Path, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--http", "127.0.0.1:0", "--no-grpc"])
        .arg("--memory-snapshot")
        .arg(path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (done, watched) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if watched.recv_timeout(Duration::from_secs(10)).is_err() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    });
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let _ = done.send(());
    watchdog.join().unwrap();
    (out, took)
}

/// Starts on `path` and checks the refusal: exit 2 within 1 s, the flag,
/// the path and `says` in the message. Returns the message.
fn refused(what: &str, path: &Path, args: &[&str], says: &str) -> String {
    let (out, took) = start(path, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{what}: refused in {took:?}");
    assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
    assert!(took < Duration::from_secs(1), "{what}: took {took:?}");
    assert!(stderr.contains("--memory-snapshot"), "{what}: {stderr}");
    assert!(
        stderr.contains(&path.display().to_string()),
        "{what}: the path is not named: {stderr}"
    );
    assert!(stderr.contains(says), "{what}: no {says:?} in {stderr}");
    stderr
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A snapshot holding `keys`, each with one record at `at`.
fn snapshot(keys: &[&str], at: u64) -> Vec<u8> {
    let store = MemoryStore::new();
    for key in keys {
        let request = Request::single(*key, Limit::new(5, 3_600_000).unwrap()).unwrap();
        store.decide_at(&request, Mode::Record, at).unwrap();
    }
    let mut bytes = Vec::new();
    store.save_at(&mut bytes, at).unwrap();
    bytes
}

#[test]
fn paths_that_are_no_regular_file_refuse_to_start_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.snap");
    common::mkfifo(&fifo);
    refused("FIFO", &fifo, &[], "named pipe");
    let zero = dir.path().join("zero.snap");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    refused("link to /dev/zero", &zero, &[], "character device");
    let sub = dir.path().join("sub.snap");
    std::fs::create_dir(&sub).unwrap();
    refused("directory", &sub, &[], "directory");
    // Not even the discard flag moves them: they are no snapshot to keep aside.
    refused(
        "FIFO with the discard flag",
        &fifo,
        &["--memory-snapshot-discard-invalid"],
        "named pipe",
    );
    assert!(fifo.exists() && zero.exists() && sub.is_dir());
}

#[test]
fn a_file_above_twice_the_memory_budget_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.snap");
    let mut bytes = snapshot(&["a"], now_ms());
    bytes.resize((1 << 21) + 1, 0);
    std::fs::write(&path, &bytes).unwrap();
    let message = refused(
        "oversize",
        &path,
        &["--memory-limit", "1048576"],
        "above the 2097152 bytes a load reads",
    );
    assert!(message.contains("--memory-limit"), "{message}");
}

#[test]
fn a_key_held_twice_refuses_to_start_naming_the_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("twice.snap");
    // A snapshot of "alice" and "bob", whose second entry is renamed
    // "alice" (same length) and whose checksum is recomputed.
    let mut bytes = snapshot(&["alice", "bobby"], now_ms());
    let at = bytes.windows(5).position(|w| w == b"bobby").unwrap();
    bytes[at..at + 5].copy_from_slice(b"alice");
    let len = bytes.len();
    // The CRC-32 a snapshot ends with: what anyone who edits one can
    // recompute (the same crate the store uses).
    let crc = crc32fast::hash(&bytes[..len - 4]);
    bytes[len - 4..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let message = refused("duplicate key", &path, &[], "repeats the key of entry");
    assert!(
        !message.contains("alice"),
        "the key is not shown: {message}"
    );
}

#[test]
fn a_record_hours_ahead_refuses_to_start_unless_clients_give_the_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.snap");
    std::fs::write(&path, snapshot(&["k"], now_ms() + 3 * 3_600_000)).unwrap();
    refused(
        "future record",
        &path,
        &[],
        "a load accepts records at most 3600000 ms ahead",
    );
    let service = child::serve(&[
        "--memory-snapshot",
        path.to_str().unwrap(),
        "--trust-client-time",
    ]);
    let loaded = service
        .early_log
        .iter()
        .any(|l| l.contains("memory snapshot loaded"));
    assert!(loaded, "{:?}", service.early_log);
}
