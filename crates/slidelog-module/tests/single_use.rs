//! Single-use receipts on the module (docs/design.md §4.3, §4.6 "Single
//! use"), where they must hold beyond one server:
//!
//! - an AOF rewrite (`aof-use-rdb-preamble no`, `BGREWRITEAOF`, restart
//!   from the AOF alone) keeps every log's horizon and settled receipts:
//!   the restarted server's `DUMP`s equal the primary's, a replayed
//!   receipt is refused there, and a 1 ms check does not cut a log of an
//!   hour; on Redis and Valkey;
//! - a key holding `MAX_SPENT` settled receipts answers `3` and changes
//!   nothing; once they are past their validity, a settle sweeps them (even
//!   one that then settles nothing), and the replica sweeps alike: its
//!   `DUMP`s equal the primary's at every step.

mod common;

use common::persist::{aof_primary, dumps, from_aof, replica_of, rewrite_aof, server_ms};
use common::{Limits, ServerKind, check};
use redis::Connection;
use slidelog_testkit::RedisServer;
use std::collections::HashMap;

/// `SLIDELOG.SETTLE` of the record at `ts` of cost 1 to cost `to` under one
/// limit `(max, window)`, at `now` (`None`: the server's clock), single-use
/// with `spend = (nonce, until_ms)`.
fn settle_cmd(key: &str, now: Option<u64>, ts: u64, limit: (u64, u64), to: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("SLIDELOG.SETTLE");
    cmd.arg(key)
        .arg(now.map_or("*".to_string(), |n| n.to_string()))
        .arg(0)
        .arg(ts)
        .arg(1)
        .arg(1)
        .arg(limit.0)
        .arg(limit.1)
        .arg(to);
    cmd
}

fn spend(mut cmd: redis::Cmd, nonce: u64, until: u64) -> redis::Cmd {
    cmd.arg("SPEND").arg(nonce).arg(until);
    cmd
}

fn first(conn: &mut Connection, cmd: &redis::Cmd) -> i64 {
    let reply: Vec<i64> = cmd.query(conn).unwrap();
    reply[0]
}

fn info(conn: &mut Connection, key: &str) -> HashMap<String, i64> {
    redis::cmd("SLIDELOG.INFO").arg(key).query(conn).unwrap()
}

fn rewritten_aof_keeps_horizons_and_settled_receipts(kind: ServerKind) {
    let primary = aof_primary(kind);
    let mut p = primary.client();
    let now = server_ms(&mut p);
    let hour: &Limits = &[(5, 3_600_000, 1)];
    // A log of an hour, then a 1 ms check: its horizon stays the hour.
    for t in 0..3 {
        assert_eq!(
            check(&mut p, "hour", true, Some(now + t), 0, hour).unwrap()[0],
            1
        );
    }
    assert_eq!(
        check(&mut p, "hour", true, Some(now + 3), 0, &[(1, 1, 1)]).unwrap()[0],
        1
    );
    // Two receipts of the hour's records settled (one to 2, one refunded).
    let until = now + 3_600_000;
    let at = Some(now + 10);
    let settle =
        |ts, to, nonce| spend(settle_cmd("hour", at, ts, (5, 3_600_000), to), nonce, until);
    assert_eq!(first(&mut p, &settle(now, 2, 41)), 1);
    assert_eq!(first(&mut p, &settle(now + 1, 0, u64::MAX)), 1);
    assert_eq!(first(&mut p, &settle(now, 0, 41)), 2, "a replay");
    // A plain log beside it.
    check(&mut p, "plain", true, Some(now), 0, &[(10, 60_000, 1)]).unwrap();
    rewrite_aof(&mut p);
    let want = dumps(&mut p);
    assert_eq!(want.len(), 2);

    let (restarted, _dir) = from_aof(kind, &primary);
    let mut a = restarted.client();
    assert_eq!(
        dumps(&mut a),
        want,
        "the rewritten AOF rebuilds the same logs"
    );
    assert_eq!(first(&mut a, &settle(now, 0, 41)), 2, "still settled");
    assert_eq!(first(&mut a, &settle(now + 1, 0, u64::MAX)), 2);
    // The horizon: a 1 ms check drops none of the hour's records.
    check(&mut a, "hour", true, Some(now + 20), 0, &[(1, 1, 1)]).unwrap();
    let i = info(&mut a, "hour");
    assert_eq!((i["records"], i["units"]), (4, 5), "{i:?}");
    let peek = check(&mut a, "hour", false, Some(now + 21), 0, hour).unwrap();
    assert_eq!(
        (peek[0], peek[3]),
        (0, 5),
        "the hour still counts every unit"
    );
}

#[test]
fn a_rewritten_aof_keeps_horizons_and_settled_receipts_on_redis() {
    rewritten_aof_keeps_horizons_and_settled_receipts(ServerKind::Redis);
}

#[test]
fn a_rewritten_aof_keeps_horizons_and_settled_receipts_on_valkey() {
    rewritten_aof_keeps_horizons_and_settled_receipts(ServerKind::Valkey);
}

/// `MAX_SPENT` (100,000) settles of one record (cost 1 to 1: it stays) at
/// `at`, nonces `0..`, valid until `until`, pipelined.
fn fill(conn: &mut Connection, key: &str, at: u64, until: u64) {
    let limit = (10, 86_400_000);
    for chunk in 0..100u64 {
        let mut pipe = redis::pipe();
        for n in chunk * 1_000..(chunk + 1) * 1_000 {
            pipe.add_command(spend(settle_cmd(key, Some(at), at, limit, 1), n, until));
        }
        let replies: Vec<Vec<i64>> = pipe.query(conn).unwrap();
        assert!(replies.iter().all(|r| r[0] == 1), "chunk {chunk}");
    }
}

fn same_dumps(p: &mut Connection, r: &mut Connection, when: &str) {
    let _: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(p).unwrap();
    assert_eq!(dumps(r), dumps(p), "{when}: the replica's logs differ");
}

#[test]
fn a_full_key_refuses_settles_and_sweeps_alike_on_the_replica() {
    let kind = ServerKind::Redis;
    let primary = RedisServer::start_with_module(kind, &[]);
    let replica = replica_of(kind, &primary);
    let (mut p, mut r) = (primary.client(), replica.client());
    // Two hours ago on the caller's clock: the receipts' validity (a
    // minute) and the 5 minutes kept after it are over by now.
    let t0 = server_ms(&mut p) - 7_200_000;
    let day: &Limits = &[(10, 86_400_000, 1)];
    assert_eq!(check(&mut p, "full", true, Some(t0), 0, day).unwrap()[0], 1);
    fill(&mut p, "full", t0, t0 + 60_000);
    let limit = (10, 86_400_000);
    let at = |now: u64, nonce| {
        spend(
            settle_cmd("full", Some(now), t0, limit, 1),
            nonce,
            now + 60_000,
        )
    };
    // Full, every receipt still kept at t0: a new one is refused (3), a
    // settled one too (2); nothing changed.
    let before = dumps(&mut p);
    assert_eq!(first(&mut p, &at(t0, 100_000)), 3);
    assert_eq!(first(&mut p, &at(t0, 5)), 2);
    assert_eq!(dumps(&mut p), before);
    same_dumps(&mut p, &mut r, "full");
    // Past their validity and margin, a settle of a record that is not
    // there sweeps them and settles nothing: the replica sweeps too.
    let later = t0 + 60_000 + 300_001;
    let gone = spend(
        settle_cmd("full", Some(later), t0 + 1, limit, 1),
        100_001,
        later + 60_000,
    );
    assert_eq!(first(&mut p, &gone), 0);
    assert!(dumps(&mut p)[0].1.len() < before[0].1.len() / 100, "swept");
    same_dumps(&mut p, &mut r, "swept");
    // The old nonces are forgotten; a settle now keeps its own.
    assert_eq!(first(&mut p, &at(later, 5)), 1);
    assert_eq!(first(&mut p, &at(later, 5)), 2);
    same_dumps(&mut p, &mut r, "after");
}
