//! Replicas, restarts and the AOF, for the tests that compare a primary's
//! logs with a replica's or a restarted server's: `INFO` fields, waiting,
//! every key's `DUMP`, a copy of a data directory, a replica of a primary.

use redis::Connection;
use slidelog_testkit::{RedisServer, ServerKind};
use std::path::Path;
use std::time::{Duration, Instant};

/// One field of an `INFO` section.
pub fn info_field(conn: &mut Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Polls `ok` every 50 ms for up to 30 s.
pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every key and its `DUMP`, by key.
pub fn dumps(conn: &mut Connection) -> Vec<(String, Vec<u8>)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let d: Vec<u8> = redis::cmd("DUMP").arg(&k).query(conn).unwrap();
            (k, d)
        })
        .collect()
}

/// Copies the files of `from` into `to` (created).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A replica of `primary` with the module, once its link is up.
pub fn replica_of(kind: ServerKind, primary: &RedisServer) -> RedisServer {
    let replicaof = format!("127.0.0.1 {}", primary.port());
    let replica = RedisServer::start_with_module(kind, &["--replicaof", &replicaof]);
    let mut r = replica.client();
    wait_until("the replica's link", || {
        info_field(&mut r, "replication", "master_link_status") == "up"
    });
    replica
}

/// `BGREWRITEAOF`, and its end.
pub fn rewrite_aof(conn: &mut Connection) {
    let _: String = redis::cmd("BGREWRITEAOF").query(conn).unwrap();
    wait_until("the AOF rewrite", || {
        info_field(conn, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(conn, "persistence", "aof_rewrite_scheduled") == "0"
    });
}

/// A server of `kind` started from a copy of `primary`'s AOF directory
/// (the AOF is what it loads).
pub fn from_aof(kind: ServerKind, primary: &RedisServer) -> (RedisServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &primary.dir().join("appendonlydir"),
        &dir.path().join("appendonlydir"),
    );
    let server = RedisServer::start_with_module(
        kind,
        &["--dir", dir.path().to_str().unwrap(), "--appendonly", "yes"],
    );
    (server, dir)
}

/// The server's clock, Unix ms.
pub fn server_ms(conn: &mut Connection) -> u64 {
    let t: Vec<u64> = redis::cmd("TIME").query(conn).unwrap();
    t[0] * 1_000 + t[1] / 1_000
}

/// A primary with the AOF on, rewritten without an RDB preamble (so a
/// rewrite is the module's `aof_rewrite` output).
pub fn aof_primary(kind: ServerKind) -> RedisServer {
    RedisServer::start_with_module(
        kind,
        &[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--aof-use-rdb-preamble",
            "no",
        ],
    )
}
