//! Adoption: logs the Lua scripts wrote (sorted sets: plain members, the
//! weighted layout with its weights hash, and the original design's script)
//! become module logs on the first SLIDELOG.CHECK, every record and cost
//! kept, and are then decided exactly as the engine decides the same
//! records. Written with the scripts' own sources through EVAL.

mod common;

use common::{Limits, ServerKind, check, decision, request, server};
use redis::Connection;
use slidelog_core::{Log, engine};

/// The general script as slidelog-redis builds and sends it.
const GENERAL: &str = slidelog_redis::script::SOURCE;
const SINGLE: &str = include_str!("../../slidelog-redis/src/single_limit.lua");
const ORIGINAL: &str = include_str!("../../slidelog-redis/tests/original_sliding_window.lua");

/// The member the Redis store writes for these costs (`slidelog_redis::members`).
fn member(id: usize, limits: &Limits) -> String {
    let costs: Vec<u64> = limits.iter().map(|l| l.2).collect();
    if costs.iter().all(|&c| c == 1) {
        format!("m{id:024}")
    } else if costs.iter().all(|&c| c == costs[0]) {
        format!("m{id:024}#{}", costs[0])
    } else {
        let list: Vec<String> = costs.iter().map(u64::to_string).collect();
        format!("m{id:024}#{}", list.join(","))
    }
}

/// One check through sliding_log.lua at `now` (caller's time).
fn general(conn: &mut Connection, key: &str, now: u64, limits: &Limits, id: usize) -> Vec<i64> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(GENERAL).arg(2).arg(key).arg(format!("{{{key}}}#w"));
    cmd.arg(1).arg(now).arg(limits.len());
    for &(m, w, c) in limits {
        cmd.arg(m).arg(w).arg(c);
    }
    cmd.arg(member(id, limits)).arg(-1);
    cmd.query(conn).unwrap()
}

fn module_type(conn: &mut Connection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query(conn).unwrap()
}

/// Checks at `times` on the module and on the engine's copy, all equal.
fn agree(conn: &mut Connection, key: &str, log: &mut Log, times: &[u64], limits: &Limits) {
    for &t in times {
        let (got, _) = decision(&check(conn, key, true, Some(t), 0, limits).unwrap());
        assert_eq!(
            got,
            engine::decide_and_record(log, t, &request(limits)),
            "{key} at {t}"
        );
    }
}

fn adopts(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    // 2026-01-01: a time in the past, as the module takes a caller's time
    // at most an hour ahead of its clock (docs/design.md §4.3).
    let t0 = 1_767_225_600_000u64;

    // A weighted log (one cost, and a cost per limit) with its weights hash.
    let limits: &Limits = &[(20, 1_000, 1), (500, 10_000, 1)];
    let mut log = Log::new();
    for i in 0..40u64 {
        let costs: &Limits = &match i % 4 {
            0 => [(20, 1_000, 1), (500, 10_000, 1)],
            1 => [(20, 1_000, 3), (500, 10_000, 3)],
            _ => [(20, 1_000, 1), (500, 10_000, 40)],
        };
        let t = t0 + i * 120;
        let reply = general(&mut conn, "w", t, costs, i as usize);
        let want = engine::decide_and_record(&mut log, t, &request(costs));
        assert_eq!(
            reply[0] == 1,
            want.allowed,
            "script and engine disagree at {i}"
        );
    }
    let weights: bool = redis::cmd("EXISTS").arg("{w}#w").query(&mut conn).unwrap();
    assert!(weights, "the script kept a weights hash");
    assert_eq!(module_type(&mut conn, "w"), "zset");
    agree(
        &mut conn,
        "w",
        &mut log,
        &[t0 + 4_900, t0 + 4_950, t0 + 9_000, t0 + 9_100],
        limits,
    );
    assert_eq!(module_type(&mut conn, "w"), "slide-log");
    let weights: bool = redis::cmd("EXISTS").arg("{w}#w").query(&mut conn).unwrap();
    assert!(!weights, "adoption removes the weights hash");

    // Plain records of single_limit.lua.
    let one: &Limits = &[(10, 5_000, 1)];
    let mut log = Log::new();
    for i in 0..14u64 {
        let t = t0 + i * 300;
        let _: Vec<i64> = redis::cmd("EVAL")
            .arg(SINGLE)
            .arg(1)
            .arg("p")
            .arg(10)
            .arg(5_000)
            .arg(member(i as usize, one))
            .arg(-1)
            .arg(t)
            .query(&mut conn)
            .unwrap();
        engine::decide_and_record(&mut log, t, &request(one));
    }
    agree(
        &mut conn,
        "p",
        &mut log,
        &[t0 + 4_000, t0 + 5_000, t0 + 5_600, t0 + 8_000],
        one,
    );
    assert_eq!(module_type(&mut conn, "p"), "slide-log");

    // The original design's script: ms timestamps, window in seconds.
    let mut log = Log::new();
    for i in 0..7u64 {
        let t = t0 + i * 1_000;
        let _: Vec<i64> = redis::cmd("EVAL")
            .arg(ORIGINAL)
            .arg(1)
            .arg("o")
            .arg(t)
            .arg(10)
            .arg(5)
            .arg(format!("orig-{i}"))
            .query(&mut conn)
            .unwrap();
        engine::decide_and_record(&mut log, t, &request(&[(5, 10_000, 1)]));
    }
    agree(
        &mut conn,
        "o",
        &mut log,
        &[t0 + 7_000, t0 + 10_000, t0 + 10_500],
        &[(5, 10_000, 1)],
    );

    // A peek adopts too (and changes nothing else); INFO reads a sorted set
    // as the log it would become, without converting it.
    let _: () = redis::cmd("ZADD")
        .arg("q")
        .arg(t0)
        .arg("a")
        .arg(t0 + 1)
        .arg("b#4")
        .query(&mut conn)
        .unwrap();
    let info: Vec<redis::Value> = redis::cmd("SLIDELOG.INFO")
        .arg("q")
        .query(&mut conn)
        .unwrap();
    // Six fields, the span, granule and tier count, one tier (2 records at
    // t0 and t0 + 1: 1 ms).
    assert_eq!(info.len(), 22);
    assert_eq!(module_type(&mut conn, "q"), "zset");
    let peek = check(&mut conn, "q", false, Some(t0 + 2), 0, &[(10, 1_000, 1)]).unwrap();
    assert_eq!(decision(&peek).0.count, 6);
    assert_eq!(module_type(&mut conn, "q"), "slide-log");
    let ttl: i64 = redis::cmd("PTTL").arg("q").query(&mut conn).unwrap();
    assert!(ttl > 0, "an adopted log expires like the scripts' ({ttl})");
    // RESET works on either representation.
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(t0)
        .arg("a")
        .query(&mut conn)
        .unwrap();
    let reset: i64 = redis::cmd("SLIDELOG.RESET")
        .arg("z")
        .query(&mut conn)
        .unwrap();
    assert_eq!(reset, 1);
    let reset: i64 = redis::cmd("SLIDELOG.RESET")
        .arg("q")
        .query(&mut conn)
        .unwrap();
    assert_eq!(reset, 1);
}

#[test]
fn script_logs_are_adopted_on_redis() {
    adopts(ServerKind::Redis);
}

#[test]
fn script_logs_are_adopted_on_valkey() {
    adopts(ServerKind::Valkey);
}
