//! Upgrading from the previous release (docs/guide/upgrade.md): the RDB and
//! the AOF its module wrote load into this module with every record; its
//! memory snapshot loads into this `serve`; its receipts are refused by
//! name; and a rolling deploy that runs its instances beside this build's
//! on one Redis, on either engine, never admits beyond a limit.
//!
//! The previous release (binary and module) is built from this clone's
//! history by `scripts/build-previous.sh` (`scripts/test.sh` runs it) into
//! `target/previous/bin`: nothing here is a recording of it.

mod common;

use common::child::{self, Serve};
use common::raw_http;
use slidelog_testkit::{RedisServer, ServerKind};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where `scripts/build-previous.sh` puts the previous release.
fn previous(file: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/previous/bin")
        .join(file);
    assert!(
        path.is_file(),
        "{} is missing: the upgrade tests need the previous release, built by \
         scripts/build-previous.sh (scripts/test.sh runs it)",
        path.display()
    );
    path
}

/// The previous release's `slidelog serve` on a free loopback port.
fn previous_serve(args: &[&str]) -> Serve {
    let mut command = Command::new(previous("slidelog"));
    command
        .arg("serve")
        .args(["--http", "127.0.0.1:0", "--no-grpc"])
        .args(args);
    child::spawn(command)
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A module command at an explicit time, in the argument layout both
/// releases read.
fn module_call(conn: &mut redis::Connection, args: &[String]) -> redis::Value {
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    cmd.query(conn)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// The logs the previous module writes: plain, same-millisecond, weighted
/// with two limits, settled and charged (all 1 h windows: live for the
/// whole test).
fn write_previous_logs(conn: &mut redis::Connection, t: u64) {
    for i in 0..7 {
        module_call(
            conn,
            &words(&format!(
                "SLIDELOG.CHECK plain RECORD {} 0 1 10 3600000 1",
                t + i
            )),
        );
    }
    for _ in 0..3 {
        module_call(
            conn,
            &words(&format!("SLIDELOG.CHECK same RECORD {t} 0 1 10 3600000 1")),
        );
    }
    for (i, tokens) in [300, 500, 200].into_iter().enumerate() {
        let at = t + 10 * i as u64;
        module_call(
            conn,
            &words(&format!(
                "SLIDELOG.CHECK weighted RECORD {at} 0 2 20 60000 1 5000 3600000 {tokens}"
            )),
        );
    }
    module_call(
        conn,
        &words(&format!(
            "SLIDELOG.CHECK settled RECORD {t} 0 1 1000 3600000 50"
        )),
    );
    module_call(
        conn,
        &words(&format!(
            "SLIDELOG.SETTLE settled {} 0 {t} 50 1 1000 3600000 20",
            t + 5
        )),
    );
    module_call(
        conn,
        &words(&format!("SLIDELOG.CHARGE charged {t} 0 1 10 3600000 7")),
    );
}

/// Every log's standing: its units, oldest and newest times
/// (`SLIDELOG.INFO`), and a peek's answer at `at`. Not its records: the
/// previous module kept one record per request of a millisecond, this one
/// reads them as one (docs/design.md §4.1).
fn standings(conn: &mut redis::Connection, at: u64) -> Vec<(String, Vec<String>, Vec<i64>)> {
    let peeks = [
        ("plain", "1 10 3600000 1"),
        ("same", "1 10 3600000 1"),
        ("weighted", "2 20 60000 1 5000 3600000 1"),
        ("settled", "1 1000 3600000 1"),
        ("charged", "1 10 3600000 1"),
    ];
    peeks
        .iter()
        .map(|(key, limits)| {
            let info: Vec<redis::Value> = redis::cmd("SLIDELOG.INFO").arg(key).query(conn).unwrap();
            let kept: [&[u8]; 3] = [b"units", b"oldest_ms", b"newest_ms"];
            let info: Vec<String> = info
                .chunks(2)
                .filter(|pair| matches!(&pair[0], redis::Value::BulkString(b) if kept.contains(&b.as_slice())))
                .map(|pair| format!("{:?}={:?}", pair[0], pair[1]))
                .collect();
            let peek: Vec<i64> = redis::cmd("SLIDELOG.CHECK")
                .arg(key)
                .arg("PEEK")
                .arg(at)
                .arg(0)
                .arg(words(limits))
                .query(conn)
                .unwrap();
            (key.to_string(), info, peek)
        })
        .collect()
}

/// Admits on `plain` (10 per hour, 7 recorded) until refused: exactly 3.
fn admits_the_rest_exactly(conn: &mut redis::Connection, at: u64) {
    let admitted = (0..10)
        .filter(|_| {
            let reply: Vec<i64> = redis::cmd("SLIDELOG.CHECK")
                .arg(words(&format!("plain RECORD {at} 0 1 10 3600000 1")))
                .query(conn)
                .unwrap();
            reply[0] == 1
        })
        .count();
    assert_eq!(
        admitted, 3,
        "the loaded log's 7 records count: 3 more fit in 10"
    );
}

/// A server of `kind` with this build's module on a copy of `files` of
/// `from`'s data directory (and `args`).
fn loaded(
    kind: ServerKind,
    from: &RedisServer,
    files: &str,
    args: &[&str],
) -> (RedisServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-r")
        .arg(from.dir().join(files))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "copy {files}");
    let mut all = vec!["--dir", dir.path().to_str().unwrap()];
    all.extend_from_slice(args);
    (RedisServer::start_with_module(kind, &all), dir)
}

#[test]
fn the_previous_module_s_rdb_and_aof_load_into_this_one() {
    let old_module = previous("libslidelog_module.so");
    for kind in [ServerKind::Redis, ServerKind::Valkey] {
        // An AOF of commands (no RDB preamble): the previous module's own
        // replication of its changes is what this one replays.
        let old = RedisServer::start_kind_with_args(
            kind,
            &[
                "--loadmodule",
                old_module.to_str().unwrap(),
                "--appendonly",
                "yes",
                "--aof-use-rdb-preamble",
                "no",
            ],
        );
        let mut conn = old.client();
        let t = wall_ms();
        write_previous_logs(&mut conn, t);
        let before = standings(&mut conn, t + 100);
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        // The AOF is written every second: wait until it holds the last change.
        std::thread::sleep(Duration::from_millis(1_200));

        let (rdb, _dir) = loaded(kind, &old, "dump.rdb", &[]);
        let mut conn = rdb.client();
        assert_eq!(
            standings(&mut conn, t + 100),
            before,
            "{kind}: the previous module's RDB"
        );
        admits_the_rest_exactly(&mut conn, t + 100);

        let (aof, _dir) = loaded(kind, &old, "appendonlydir", &["--appendonly", "yes"]);
        let mut conn = aof.client();
        assert_eq!(
            standings(&mut conn, t + 100),
            before,
            "{kind}: the previous module's AOF"
        );
        admits_the_rest_exactly(&mut conn, t + 100);
    }
}

/// `POST /v1/check` of `body` on `service`: allowed (200) or refused (429).
fn allowed(service: &Serve, body: &str) -> bool {
    allowed_at(&service.addr, body)
}

/// `POST /v1/check` of `body` at `addr`: allowed (200) or refused (429).
fn allowed_at(addr: &str, body: &str) -> bool {
    match raw_http::check(addr, body) {
        (200, _) => true,
        (429, _) => false,
        (status, text) => panic!("{body} on {addr}: {status} {text}"),
    }
}

fn body(key: &str, max: u64, cost: u64) -> String {
    format!(r#"{{"key":"{key}","max":{max},"window_ms":3600000,"cost":{cost}}}"#)
}

#[test]
fn the_previous_release_s_memory_snapshot_loads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("snapshot");
    let file = file.to_str().unwrap();
    let mut old = previous_serve(&["--memory-snapshot", file]);
    assert!((0..7).all(|_| allowed(&old, &body("k", 10, 1))));
    assert!((0..2).all(|_| allowed(&old, &body("w", 10, 4))));
    child::signal(&old.child, "-TERM");
    child::exit_status(&mut old.child, Duration::from_secs(10), "SIGTERM");

    let new = child::serve(&["--memory-snapshot", file]);
    let admitted = (0..10).filter(|_| allowed(&new, &body("k", 10, 1))).count();
    assert_eq!(
        admitted, 3,
        "the snapshot's 7 records count: 3 more fit in 10"
    );
    assert!(allowed(&new, &body("w", 10, 2)), "8 units held, 2 more fit");
    assert!(!allowed(&new, &body("w", 10, 1)), "10 units held");
}

#[test]
fn the_previous_release_s_receipts_are_refused_by_name() {
    let redis = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let old = previous_serve(&["--store", &redis.url()]);
    let (status, answer) = raw_http::check(&old.addr, &body("u", 100, 40));
    assert_eq!(status, 200, "{answer}");
    let receipt = answer
        .split(r#""receipt":""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("a receipt in {answer}"));
    let new = child::serve(&["--store", &redis.url()]);
    let settle =
        format!(r#"{{"key":"u","max":100,"window_ms":3600000,"cost":10,"receipt":"{receipt}"}}"#);
    let (status, text) = raw_http::request(&new.addr, "POST", "/v1/settle", &settle, "");
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains("unsigned"),
        "the refusal names the cause: {text}"
    );
    // The estimate stands: 40 units held, 60 more fit.
    assert!(allowed(&new, &body("u", 100, 60)));
    assert!(!allowed(&new, &body("u", 100, 1)));
}

/// Sends `each` checks of `key` from each of 8 threads, spread over
/// `services` in turn, the thread's cost `1 + thread % costs`; returns the
/// units admitted.
fn hammer(services: &[Serve], key: &str, max: u64, costs: u64, each: usize) -> u64 {
    // The addresses only: a `Serve` holds its log's receiver, not shared.
    let addrs: Vec<&str> = services.iter().map(|s| s.addr.as_str()).collect();
    let addrs = &addrs;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8u64)
            .map(|thread| {
                scope.spawn(move || {
                    let cost = 1 + thread % costs;
                    (0..each)
                        .filter(|i| {
                            let addr = addrs[(thread as usize + i) % addrs.len()];
                            allowed_at(addr, &body(key, max, cost))
                        })
                        .count() as u64
                        * cost
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    })
}

/// The units `key`'s log holds, read by this build's module.
fn units(redis: &RedisServer, key: &str) -> u64 {
    let info: Vec<redis::Value> = redis::cmd("SLIDELOG.INFO")
        .arg(key)
        .query(&mut redis.client())
        .unwrap();
    let at = info
        .iter()
        .position(|v| matches!(v, redis::Value::BulkString(b) if b == b"units"))
        .unwrap_or_else(|| panic!("units in SLIDELOG.INFO {key}: {info:?}"));
    redis::from_redis_value(info[at + 1].clone()).unwrap()
}

#[test]
fn a_rolling_deploy_of_both_releases_on_one_redis_never_admits_beyond_a_limit() {
    for engine in ["script", "module"] {
        // This build's module is loaded first (the upgrade page's order);
        // the scripts engine ignores it, and SLIDELOG.INFO reads either layout.
        let redis = RedisServer::start_with_module(ServerKind::Redis, &[]);
        let url = format!("{}?engine={engine}", redis.url());
        let services = [
            previous_serve(&["--store", &url]),
            child::serve(&["--store", &url]),
            previous_serve(&["--store", &url]),
            child::serve(&["--store", &url]),
        ];
        // 8 threads x 30 requests of cost 1 on 50 per hour: exactly 50.
        let admitted = hammer(&services, "plain", 50, 1, 30);
        assert_eq!(admitted, 50, "{engine}: admissions on 50 per hour");
        assert_eq!(
            units(&redis, "rate:sliding:plain"),
            50,
            "{engine}: recorded units"
        );
        // Costs 1..=4 on 100 per hour, then units of 1 until refused: 100
        // admitted in all, and the log holds exactly those (refusals are
        // recorded nowhere).
        let mut admitted = hammer(&services, "weighted", 100, 4, 30);
        admitted += (0..100)
            .take_while(|i| allowed(&services[i % 4], &body("weighted", 100, 1)))
            .count() as u64;
        assert_eq!(admitted, 100, "{engine}: units admitted on 100 per hour");
        assert_eq!(
            units(&redis, "rate:sliding:weighted"),
            100,
            "{engine}: recorded units"
        );
    }
}
