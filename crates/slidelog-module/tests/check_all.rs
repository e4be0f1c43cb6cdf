//! `SLIDELOG.CHECKALL` (docs/design.md §4.3, §4.7): its keys declared for
//! Cluster (`COMMAND GETKEYS`), bad input refused naming the field before
//! any key changes, the caller's deadline and time bounds kept, and its
//! changes propagated per key: a replica and a server restarted from the
//! AOF hold `DUMP`-identical logs after 2,000 joint decisions (adopted
//! sorted sets among them), on Redis and Valkey.

mod common;

use common::persist::{aof_primary, dumps, from_aof, replica_of, server_ms};
use common::{ServerKind, server};
use redis::{Connection, RedisResult};

/// `SLIDELOG.CHECKALL <mode> <now> <deadline> (<key> <limits>)*`.
fn check_all(
    conn: &mut Connection,
    record: bool,
    now: &str,
    deadline: u64,
    checks: &[(&str, &str)],
) -> RedisResult<Vec<i64>> {
    let mut cmd = redis::cmd("SLIDELOG.CHECKALL");
    cmd.arg(if record { "RECORD" } else { "PEEK" })
        .arg(now)
        .arg(deadline);
    for (key, limits) in checks {
        cmd.arg(*key).arg(*limits);
    }
    cmd.query(conn)
}

#[test]
fn its_keys_are_declared_for_cluster() {
    let server = server(ServerKind::Redis);
    let mut c = server.client();
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("SLIDELOG.CHECKALL")
        .arg("RECORD")
        .arg("*")
        .arg(0)
        .arg("user")
        .arg("1,10,60000,1")
        .arg("route")
        .arg("1,3,60000,1")
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["user", "route"]);
}

#[test]
fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    for kind in ServerKind::ALL {
        let server = server(kind);
        let mut c = server.client();
        let _: () = redis::cmd("SET").arg("s").arg("x").query(&mut c).unwrap();
        let refused = |c: &mut Connection, checks: &[(&str, &str)], now: &str| {
            check_all(c, true, now, 0, checks).unwrap_err().to_string()
        };
        let e = refused(&mut c, &[("a", "1,10,60000,1"), ("a", "1,3,60000,1")], "*");
        assert!(e.contains("key_2 repeats key_1"), "{e}");
        let e = refused(&mut c, &[("a", "2,10,60000,1")], "*");
        assert!(e.contains("check 1 limits must be n then n triples"), "{e}");
        let e = refused(&mut c, &[("a", "1,10,60000,1"), ("b", "1,0,60000,1")], "*");
        assert!(e.contains("check 2 max_1 must be an integer from 1"), "{e}");
        let e = refused(&mut c, &[("a", "1,10,60000,1"), ("s", "1,3,60000,1")], "*");
        assert!(e.contains("WRONGTYPE"), "{e}");
        let ahead = (server_ms(&mut c) + 2 * 3_600_000).to_string();
        let e = refused(&mut c, &[("a", "1,10,60000,1")], &ahead);
        assert!(
            e.contains("now_ms must be at most the server's clock plus"),
            "{e}"
        );
        let e = check_all(&mut c, true, "*", 0, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("wrong number of arguments"), "{e}");
        let exists: i64 = redis::cmd("EXISTS")
            .arg("a")
            .arg("b")
            .query(&mut c)
            .unwrap();
        assert_eq!(exists, 0, "{kind}: nothing was recorded");
    }
}

#[test]
fn a_deadline_passed_records_nothing_and_a_refusal_records_nothing() {
    let server = server(ServerKind::Redis);
    let mut c = server.client();
    let past = server_ms(&mut c) - 1_000;
    let checks = [("u", "1,10,60000,1"), ("r", "1,1,60000,1")];
    let e = check_all(&mut c, true, "*", past, &checks).unwrap_err();
    assert_eq!(e.code(), Some("DEADLINE"), "{e}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("u")
        .arg("r")
        .query(&mut c)
        .unwrap();
    assert_eq!(exists, 0);
    let first = check_all(&mut c, true, "*", 0, &checks).unwrap();
    assert_eq!((first[0], first[12]), (1, 1));
    // The route is full: refused, whatever the deadline, and the user's
    // log keeps its one record (its own answer: as if admitted, 2).
    let again = check_all(&mut c, true, "*", past, &checks).unwrap();
    assert_eq!((again[0], again[3], again[12]), (1, 2, 0));
    let info: Vec<redis::Value> = redis::cmd("SLIDELOG.INFO").arg("u").query(&mut c).unwrap();
    assert_eq!(info[3], redis::Value::Int(1), "one unit in the user's log");
}

/// 2,000 joint decisions over 6 keys on the server's clock: some start as
/// sorted sets (adopted on their first joint touch), a tenth are peeks.
fn joint_load(c: &mut Connection) {
    for k in 0..6 {
        if k % 3 == 0 {
            let _: () = redis::cmd("ZADD")
                .arg(format!("k{k}"))
                .arg(server_ms(c))
                .arg(format!("01J{k}#2"))
                .query(c)
                .unwrap();
        }
    }
    let limits = ["1,40,60000,1", "2,20,2000,2,300,120000,1", "1,400,90000,3"];
    for i in 0..2_000usize {
        let keys: Vec<String> = (0..1 + i % 3)
            .map(|j| format!("k{}", (i + 2 * j) % 6))
            .collect();
        let checks: Vec<(&str, &str)> = keys
            .iter()
            .map(|k| (k.as_str(), limits[k.as_bytes()[1] as usize % 3]))
            .collect();
        let reply = check_all(c, i % 10 != 0, "*", 0, &checks);
        assert!(reply.is_ok(), "{i}: {reply:?}");
    }
}

#[test]
fn a_replica_and_the_aof_hold_the_same_logs() {
    for kind in ServerKind::ALL {
        let primary = aof_primary(kind);
        let replica = replica_of(kind, &primary);
        let mut p = primary.client();
        joint_load(&mut p);
        let synced: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut p).unwrap();
        assert_eq!(synced, 1);
        let want = dumps(&mut p);
        assert!(want.len() >= 6, "{kind}: {}", want.len());
        assert_eq!(dumps(&mut replica.client()), want, "{kind}: replica");
        let (restarted, _dir) = from_aof(kind, &primary);
        assert_eq!(dumps(&mut restarted.client()), want, "{kind}: from the AOF");
    }
}
