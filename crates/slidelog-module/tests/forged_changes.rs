//! Forged changes and times (docs/design.md §4.3), on Redis and Valkey:
//! - `SLIDELOG.APPLY` from a client (plain, in MULTI/EXEC, from a script)
//!   is an error and changes nothing: not the wipe `<now>:1:_:0`, not the
//!   block `9007199254740991:0:4611686018427387903:10000000`;
//! - forged APPLYs appended to an AOF are refused at replay by their
//!   bounds (the server's log names the field), while the real changes
//!   before them replay to the same log and one 90 minutes ahead (within
//!   a replica's skew) is taken;
//! - `now_ms` more than an hour ahead of the server's clock is refused by
//!   CHECK, SETTLE and CHARGE, naming `now_ms` and the bound, and changes
//!   nothing; past times and times within the hour are decided; a module
//!   key reached through `sliding_log.lua` with a caller's time works;
//! - a log an older version left with a record at 2^53 - 1 (restored from
//!   a DUMP payload) gets an expiry of at most 366 days + 2 h.

mod common;

use common::dump::{payload, real_dump, value_of};
use common::{ServerKind, check, server};
use redis::{Connection, RedisResult, Value};

/// The general script as slidelog-redis builds and sends it.
const GENERAL: &str = slidelog_redis::script::SOURCE;

/// The server's clock, Unix ms.
fn server_ms(conn: &mut Connection) -> u64 {
    let t: Vec<u64> = redis::cmd("TIME").query(conn).unwrap();
    t[0] * 1_000 + t[1] / 1_000
}

fn send(conn: &mut Connection, words: &[String]) -> RedisResult<Value> {
    let mut cmd = redis::cmd(&words[0]);
    for w in &words[1..] {
        cmd.arg(w);
    }
    cmd.query(conn)
}

fn words(text: &str) -> Vec<String> {
    text.split(' ').map(String::from).collect()
}

fn error_of(r: RedisResult<Value>, what: &str) -> String {
    match r {
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
        Ok(v) => panic!("{what} answered {v:?}"),
    }
}

/// The key's DUMP and PTTL (`None` for a missing key).
fn state(conn: &mut Connection, key: &str) -> (Option<Vec<u8>>, i64) {
    let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(key).query(conn).unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(conn).unwrap();
    (dump, ttl)
}

/// A victim log of a few records on the server's clock.
fn victim(conn: &mut Connection) {
    for _ in 0..3 {
        let r = check(conn, "victim", true, None, 0, &[(10, 60_000, 1)]).unwrap();
        assert_eq!(r[0], 1);
    }
}

const NOT_REPLICATED: &str = "slidelog.apply replays a primary's changes only";

fn apply_from_clients_changes_nothing(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    victim(&mut conn);
    let before = state(&mut conn, "victim");
    let now = server_ms(&mut conn);
    let forged = [
        format!("{now}:1:_:0"),
        "9007199254740991:0:4611686018427387903:10000000".to_string(),
        format!("{now}:60000:60000:1"),
        format!("{now}:0:_:0,0:{now}/1/1"),
    ];
    for change in &forged {
        for key in ["victim", "fresh"] {
            let call = vec!["SLIDELOG.APPLY".to_string(), key.into(), change.clone()];
            let e = error_of(send(&mut conn, &call), change);
            assert!(e.contains(NOT_REPLICATED), "{kind} {change}: {e}");
        }
        // Inside a transaction and from a script: the same refusal.
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SLIDELOG.APPLY")
            .arg("victim")
            .arg(change);
        let exec = format!("{:?}", pipe.query::<Value>(&mut conn));
        assert!(exec.contains(NOT_REPLICATED), "{kind} MULTI: {exec}");
        let script = "return redis.call('SLIDELOG.APPLY', KEYS[1], ARGV[1])";
        let r = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg("victim")
            .arg(change)
            .query::<Value>(&mut conn);
        assert!(error_of(r, "EVAL").contains(NOT_REPLICATED), "{kind} EVAL");
    }
    let after = state(&mut conn, "victim");
    assert_eq!(after.0, before.0, "{kind}: the victim's log is unchanged");
    assert!(after.1 > 0 && after.1 <= before.1, "{kind}: PTTL {after:?}");
    assert_eq!(state(&mut conn, "fresh"), (None, -2));
}

#[test]
fn apply_from_clients_changes_nothing_on_redis() {
    apply_from_clients_changes_nothing(ServerKind::Redis);
}

#[test]
fn apply_from_clients_changes_nothing_on_valkey() {
    apply_from_clients_changes_nothing(ServerKind::Valkey);
}

/// One command in the AOF's format (RESP).
fn resp(words: &[String]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        out.extend_from_slice(format!("${}\r\n{w}\r\n", w.len()).as_bytes());
    }
    out
}

/// The incremental file of the server's AOF (appendonlydir).
fn incr_aof(dir: &std::path::Path) -> std::path::PathBuf {
    let aofs = dir.join("appendonlydir");
    std::fs::read_dir(&aofs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("an incremental AOF file")
}

fn forged_aof_changes_are_refused(kind: ServerKind) {
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let mut server = slidelog_testkit::RedisServer::start_with_module(kind, &args);
    let mut conn = server.client();
    victim(&mut conn);
    let before = state(&mut conn, "victim").0;
    let now = server_ms(&mut conn);
    server.kill();
    let hour = 3_600_000;
    let forged = [
        (
            "victim",
            "9007199254740991:0:4611686018427387903:10000000".into(),
        ),
        ("victim", format!("{now}:0:4611686018427387903:5")),
        (
            "victim",
            format!("{now}:0:{}:5", 366 * 24 * hour + 4 * hour),
        ),
        ("fresh", format!("{}:1000:1000:1", now + 3 * hour)),
    ];
    let mut aof = std::fs::read(incr_aof(server.dir())).unwrap();
    for (key, change) in forged {
        aof.extend(resp(&words(&format!("SLIDELOG.APPLY {key} {change}"))));
    }
    // Within a replica's skew (2 h): taken.
    let ahead = format!("SLIDELOG.APPLY ahead {}:60000:60000:1", now + 90 * 60_000);
    aof.extend(resp(&words(&ahead)));
    std::fs::write(incr_aof(server.dir()), aof).unwrap();
    server.restart();
    let mut conn = server.client();
    assert_eq!(state(&mut conn, "victim").0, before, "{kind}: replayed");
    assert_eq!(state(&mut conn, "fresh"), (None, -2), "{kind}: refused");
    let (ahead, ttl) = state(&mut conn, "ahead");
    assert!(ahead.is_some() && ttl > 90 * 60_000, "{kind}: ahead {ttl}");
    let log = std::fs::read_to_string(server.log_path()).unwrap();
    for want in [
        "now_ms must be at most the server's clock plus 7200000 ms",
        "expire_in_ms must leave the key's expiry (now_ms + expire_in_ms) at most the server's clock plus 31633200000 ms",
    ] {
        assert!(log.contains(want), "{kind}: the log says {want:?}:\n{log}");
    }
}

#[test]
fn forged_aof_changes_are_refused_on_redis() {
    forged_aof_changes_are_refused(ServerKind::Redis);
}

#[test]
fn forged_aof_changes_are_refused_on_valkey() {
    forged_aof_changes_are_refused(ServerKind::Valkey);
}

const AHEAD: &str = "now_ms must be at most the server's clock plus 3600000 ms";

fn far_ahead_times_are_refused(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    let now = server_ms(&mut conn);
    let far = [
        9_007_199_254_740_991,
        now + 2 * 3_600_000,
        now + 3_600_000 + 5_000,
    ];
    for t in far {
        for call in [
            format!("SLIDELOG.CHECK victim RECORD {t} 0 1 10 60000 1"),
            format!("SLIDELOG.CHECK victim PEEK {t} 0 1 10 60000 1 EACH"),
            format!("SLIDELOG.CHARGE victim {t} 0 1 10 60000 1"),
            format!("SLIDELOG.SETTLE victim {t} 0 {now} 1 1 10 60000 0"),
        ] {
            let e = error_of(send(&mut conn, &words(&call)), &call);
            assert!(e.starts_with(&format!("ERR {AHEAD}")), "{kind} {call}: {e}");
            assert!(e.contains(&format!("got {t}")), "{kind} {call}: {e}");
        }
    }
    assert_eq!(
        state(&mut conn, "victim"),
        (None, -2),
        "{kind}: nothing written"
    );
    // Within the hour, and any time in the past: decided.
    let soon = now + 30 * 60_000;
    for t in [soon, 1_000, 1_767_225_600_000] {
        let r = check(
            &mut conn,
            &format!("k{t}"),
            true,
            Some(t),
            0,
            &[(5, 60_000, 1)],
        );
        assert_eq!(r.unwrap()[..1], [1], "{kind} at {t}");
    }
    let ttl: i64 = redis::cmd("PTTL")
        .arg(format!("k{soon}"))
        .query(&mut conn)
        .unwrap();
    assert!(ttl > 50_000 && ttl <= 60_000, "{kind}: PTTL {ttl}");
    let charge = format!("SLIDELOG.CHARGE c {soon} 0 1 10 60000 4");
    assert!(send(&mut conn, &words(&charge)).is_ok(), "{kind} {charge}");
}

#[test]
fn far_ahead_times_are_refused_on_redis() {
    far_ahead_times_are_refused(ServerKind::Redis);
}

#[test]
fn far_ahead_times_are_refused_on_valkey() {
    far_ahead_times_are_refused(ServerKind::Valkey);
}

/// `sliding_log.lua` with a caller's time on a key the module holds: the
/// script hands the check to the module with that time.
fn script(conn: &mut Connection, key: &str, now: u64) -> RedisResult<Vec<i64>> {
    redis::cmd("EVAL")
        .arg(GENERAL)
        .arg(2)
        .arg(key)
        .arg(format!("{{{key}}}#w"))
        .arg(1)
        .arg(now)
        .arg(1)
        .arg(5)
        .arg(60_000)
        .arg(1)
        .arg("m000000000000000000000001")
        .arg(-1)
        .query(conn)
}

fn scripts_hand_caller_times_to_the_module(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    victim(&mut conn);
    let now = server_ms(&mut conn);
    for t in [now, now + 10 * 60_000, 1_767_225_600_000] {
        let r = script(&mut conn, "victim", t).unwrap();
        assert_eq!((r.len(), r[7]), (8, t as i64), "{kind} at {t}: {r:?}");
    }
    let e = script(&mut conn, "victim", now + 2 * 3_600_000).unwrap_err();
    assert!(e.to_string().contains(AHEAD), "{kind}: {e}");
}

#[test]
fn scripts_hand_caller_times_to_the_module_on_redis() {
    scripts_hand_caller_times_to_the_module(ServerKind::Redis);
}

#[test]
fn scripts_hand_caller_times_to_the_module_on_valkey() {
    scripts_hand_caller_times_to_the_module(ServerKind::Valkey);
}

/// A log with a record at 2^53 - 1 and no TTL, as a `CHECK` of an older
/// version left it: the next change gives the key an expiry of at most
/// 366 days + 2 h, not one at the end of time.
fn a_record_at_the_end_of_time_expires(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    let d = real_dump(&mut conn);
    let mut log = slidelog_core::Log::new();
    log.append(9_007_199_254_740_991, &[1]);
    let mut bytes = Vec::new();
    slidelog_core::codec::encode(&log, &mut bytes);
    let _: () = redis::cmd("RESTORE")
        .arg("old")
        .arg(0)
        .arg(payload(&d, &value_of(&bytes)))
        .query(&mut conn)
        .unwrap();
    assert_eq!(state(&mut conn, "old").1, -1);
    let r = check(&mut conn, "old", true, None, 0, &[(2, 60_000, 1)]).unwrap();
    assert_eq!(r[0], 1, "{kind}: one place left");
    let max_ttl = (366 * 24 + 2) * 3_600_000;
    let ttl = state(&mut conn, "old").1;
    assert!(
        ttl > max_ttl - 60_000 && ttl <= max_ttl,
        "{kind}: PTTL {ttl}"
    );
}

#[test]
fn a_record_at_the_end_of_time_expires_on_redis() {
    a_record_at_the_end_of_time_expires(ServerKind::Redis);
}

#[test]
fn a_record_at_the_end_of_time_expires_on_valkey() {
    a_record_at_the_end_of_time_expires(ServerKind::Valkey);
}
