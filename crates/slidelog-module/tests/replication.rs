//! Replication and persistence stay exact: a replica holds logs
//! byte-identical (`DUMP`) to its primary's after 10,000 decisions, settles
//! and charges on the server's clock (each change is propagated with the
//! time it used, so the replica never reads a clock; settles down, up, to 0
//! in a limit and refunds, charges above the max; every settle single-use,
//! with `SPEND`, and replays of settled receipts refused); a server
//! restarted from the primary's RDB, and one from its AOF (rewritten
//! midway, so the module's `aof_rewrite` output is replayed too: records,
//! horizons, settled receipts), hold the same logs and decide the next
//! 1,000 checks exactly as the primary does.

mod common;

use common::persist::{aof_primary, copy_dir, dumps, replica_of, rewrite_aof, server_ms};
use common::{Limits, ServerKind, check};
use redis::Connection;
use slidelog_testkit::RedisServer;
use std::time::Duration;

const KEYS: usize = 25;

fn limits_of(k: usize) -> Vec<(u64, u64, u64)> {
    match k % 3 {
        0 => vec![(300, 60_000, 1)],
        1 => vec![(30, 2_000, 1 + (k as u64 % 4)), (300, 120_000, 1)],
        _ => vec![(400, 90_000, 1), (4_000, 120_000, 25)],
    }
}

/// The costs a check of `limits` records, as a receipt lists them (one for
/// all when equal).
fn record_costs(limits: &Limits) -> Vec<u64> {
    let costs: Vec<u64> = limits.iter().map(|l| l.2).collect();
    if costs.iter().all(|&c| c == costs[0]) {
        vec![costs[0]]
    } else {
        costs
    }
}

fn comma(costs: &[u64]) -> String {
    let parts: Vec<String> = costs.iter().map(u64::to_string).collect();
    parts.join(",")
}

/// A settle's receipt: the record's time and costs, and its single use
/// (`SPEND <nonce> <until_ms>`).
type Named<'a> = (u64, &'a [u64], Option<(u64, u64)>);

/// `SLIDELOG.SETTLE` of the record a receipt names (`Some`) or
/// `SLIDELOG.CHARGE`, to `costs` (one per limit), on the server's clock.
fn usage(
    conn: &mut Connection,
    key: &str,
    record: Option<Named<'_>>,
    limits: &Limits,
    costs: &[u64],
) -> Vec<i64> {
    let mut cmd = redis::cmd(if record.is_some() {
        "SLIDELOG.SETTLE"
    } else {
        "SLIDELOG.CHARGE"
    });
    cmd.arg(key).arg("*").arg(0);
    if let Some((ts, old, _)) = record {
        cmd.arg(ts).arg(comma(old));
    }
    cmd.arg(limits.len());
    for (&(max, window, _), cost) in limits.iter().zip(costs) {
        cmd.arg(max).arg(window).arg(cost);
    }
    if let Some((_, _, Some((nonce, until)))) = record {
        cmd.arg("SPEND").arg(nonce).arg(until);
    }
    cmd.query(conn).unwrap()
}

/// The costs the `i`-th settle or charge of a key of `limits` uses: down,
/// 0 in a limit, 0 everywhere (a refund), and in the last tenth (a key
/// over its max refuses checks for a whole window) up past a max.
fn usage_costs(i: usize, limits: &Limits) -> Vec<u64> {
    limits
        .iter()
        .enumerate()
        .map(|(p, &(max, _, cost))| match (i / 3 + p) % 5 {
            0 => 0,
            1 if i > 9_000 => max + 7,
            2 => cost,
            _ => cost * (1 + i as u64 % 3),
        })
        .collect()
}

/// The same 1,000 checks (caller's time, after every record, 100 ms apart:
/// past the windows, so records expire) on a server.
fn next_checks(conn: &mut Connection, start: u64) -> Vec<Vec<i64>> {
    (0..1_000u64)
        .map(|i| {
            let k = (i as usize * 7) % KEYS;
            let limits: &Limits = &limits_of(k);
            check(
                conn,
                &format!("log:{k}"),
                i % 9 != 0,
                Some(start + i * 100),
                0,
                limits,
            )
            .unwrap()
        })
        .collect()
}

fn exact(kind: ServerKind) {
    let primary = aof_primary(kind);
    let replica = replica_of(kind, &primary);
    let mut p = primary.client();
    let mut r = replica.client();
    // Every receipt settles for an hour from the start.
    let until = server_ms(&mut p) + 3_600_000;

    let mut admitted = 0;
    // The last record admitted or charged on each key: (ts, costs).
    let mut last: Vec<Option<(u64, Vec<u64>)>> = vec![None; KEYS];
    // The last receipt settled on each key: (ts, costs, nonce).
    let mut spent: Vec<Option<(u64, Vec<u64>, u64)>> = vec![None; KEYS];
    let (mut settled, mut replays_refused) = (0, 0);
    for i in 0..10_000usize {
        let k = i % KEYS;
        let key = format!("log:{k}");
        let limits = limits_of(k);
        if i % 7 == 3 {
            let costs = usage_costs(i, &limits);
            let reply = usage(&mut p, &key, None, &limits, &costs);
            if reply[0] == 1 {
                let used: Vec<(u64, u64, u64)> = limits
                    .iter()
                    .zip(&costs)
                    .map(|(l, &c)| (l.0, l.1, c))
                    .collect();
                last[k] = Some((reply[8] as u64, record_costs(&used)));
            }
            continue;
        }
        if i % 5 == 1
            && let Some((ts, old)) = last[k].take()
        {
            let costs = usage_costs(i, &limits);
            let named = (ts, &old[..], Some((i as u64, until)));
            let reply = usage(&mut p, &key, Some(named), &limits, &costs);
            settled += reply[0];
            spent[k] = Some((ts, old, i as u64)).filter(|_| reply[0] == 1);
            continue;
        }
        if i % 15 == 1
            && let Some((ts, old, nonce)) = &spent[k]
        {
            // A replay: refused (2), or, when a refund emptied the key and
            // it was deleted with what it spent, settling nothing (0).
            let named = (*ts, &old[..], Some((*nonce, until)));
            let reply = usage(&mut p, &key, Some(named), &limits, &[0, 0]);
            assert!(reply[0] == 2 || reply[0] == 0, "a replay: {reply:?}");
            replays_refused += i64::from(reply[0] == 2);
            continue;
        }
        let reply = check(&mut p, &key, i % 13 != 0, None, 0, &limits).unwrap();
        admitted += reply[0];
        if reply[0] == 1 && i % 13 != 0 {
            last[k] = Some((reply[7] as u64, record_costs(&limits)));
        }
        if i == 5_000 {
            rewrite_aof(&mut p);
        }
    }
    assert!(admitted > 1_500 && admitted < 9_000, "admitted {admitted}");
    assert!(settled > 300, "settled {settled}");
    assert!(replays_refused > 100, "replays refused {replays_refused}");
    let _: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut p).unwrap();
    let primary_logs = dumps(&mut p);
    assert_eq!(primary_logs.len(), KEYS);
    assert_eq!(
        dumps(&mut r),
        primary_logs,
        "the replica's logs differ from the primary's"
    );

    // Restarts: one server from a copy of the RDB, one from the AOF.
    let _: String = redis::cmd("SAVE").query(&mut p).unwrap();
    let rdb_dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        primary.dir().join("dump.rdb"),
        rdb_dir.path().join("dump.rdb"),
    )
    .unwrap();
    let aof_dir = tempfile::tempdir().unwrap();
    copy_dir(
        &primary.dir().join("appendonlydir"),
        &aof_dir.path().join("appendonlydir"),
    );
    let from_rdb =
        RedisServer::start_with_module(kind, &["--dir", rdb_dir.path().to_str().unwrap()]);
    let from_aof = RedisServer::start_with_module(
        kind,
        &[
            "--dir",
            aof_dir.path().to_str().unwrap(),
            "--appendonly",
            "yes",
        ],
    );
    let (mut b, mut a) = (from_rdb.client(), from_aof.client());
    assert_eq!(dumps(&mut b), primary_logs, "restarted from RDB");
    assert_eq!(dumps(&mut a), primary_logs, "restarted from AOF");

    let newest: u64 = redis::cmd("TIME")
        .query::<Vec<u64>>(&mut p)
        .map(|t| t[0] * 1_000 + t[1] / 1_000)
        .unwrap()
        + 50_000;
    let want = next_checks(&mut p, newest);
    assert_eq!(
        next_checks(&mut b, newest),
        want,
        "RDB restart decides differently"
    );
    assert_eq!(
        next_checks(&mut a, newest),
        want,
        "AOF restart decides differently"
    );
}

#[test]
fn replicas_and_restarts_are_exact_on_redis() {
    exact(ServerKind::Redis);
}

#[test]
fn replicas_and_restarts_are_exact_on_valkey() {
    exact(ServerKind::Valkey);
}

/// A log of an encoding version this module does not read is refused
/// loudly (RESTORE answers an error and the server's log says why), and a
/// payload of the right version restores the same log.
#[test]
fn an_unknown_encoding_version_is_refused() {
    let server =
        RedisServer::start_with_module(ServerKind::Redis, &["--enable-debug-command", "yes"]);
    let mut conn = server.client();
    check(&mut conn, "k", true, Some(1_000), 0, &[(5, 60_000, 2)]).unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP").arg("k").query(&mut conn).unwrap();
    // RDB_TYPE_MODULE_2, then the 64-bit module id (9 name characters of 6
    // bits, then the 10-bit encoding version, 1), big-endian after 0x81.
    assert_eq!((dump[0], dump[1], dump[9] & 0x03), (7, 0x81, 1));
    let _: () = redis::cmd("RESTORE")
        .arg("same")
        .arg(0)
        .arg(&dump)
        .query(&mut conn)
        .unwrap();
    let (a, b): (Vec<u8>, Vec<u8>) = (
        redis::cmd("DUMP").arg("same").query(&mut conn).unwrap(),
        dump.clone(),
    );
    assert_eq!(a, b);
    let mut newer = dump;
    newer[9] = (newer[9] & !0x03) | 2;
    let _: () = redis::cmd("DEBUG")
        .arg("SET-SKIP-CHECKSUM-VALIDATION")
        .arg(1)
        .query(&mut conn)
        .unwrap();
    let err = redis::cmd("RESTORE")
        .arg("newer")
        .arg(0)
        .arg(&newer)
        .query::<()>(&mut conn)
        .unwrap_err();
    assert!(err.to_string().contains("Bad data format"), "{err}");
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
    let log = std::fs::read_to_string(server.log_path()).unwrap();
    assert!(
        log.contains("encoding version 2"),
        "the server log says why"
    );
}

/// The horizon (docs/design.md §1) and charges merged into a full key's
/// newest record (§4.6) reach the replica exactly: a check of a 1 ms window
/// on a key of an hour drops nothing the hour counts, on the primary and
/// on the replica, and the key's TTL stays the hour's; 2,000 charges into
/// a key of max 10 keep it at a few records; both `DUMP`s (which carry the
/// horizon) are equal.
#[test]
fn the_horizon_and_merged_charges_replicate() {
    let primary = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let replica = replica_of(ServerKind::Redis, &primary);
    let (mut p, mut r) = (primary.client(), replica.client());
    let hour: &Limits = &[(3, 3_600_000, 1)];
    for _ in 0..3 {
        assert_eq!(check(&mut p, "victim", true, None, 0, hour).unwrap()[0], 1);
    }
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(3));
        let short = check(&mut p, "victim", true, None, 0, &[(1, 1, 1)]).unwrap();
        assert_eq!(short[0], 1, "the 1 ms check is admitted");
    }
    let peek = check(&mut p, "victim", false, None, 0, hour).unwrap();
    assert_eq!(
        (peek[0], peek[3]),
        (0, 5),
        "the hour still counts every record"
    );
    let pttl: i64 = redis::cmd("PTTL").arg("victim").query(&mut p).unwrap();
    assert!(pttl > 3_590_000, "the TTL follows the horizon: {pttl}");
    let max_10: &Limits = &[(10, 3_600_000, 1)];
    for _ in 0..2_000 {
        let reply = usage(&mut p, "hog", None, max_10, &[1]);
        assert_eq!(reply[0], 1);
    }
    let info: std::collections::HashMap<String, i64> = redis::cmd("SLIDELOG.INFO")
        .arg("hog")
        .query(&mut p)
        .unwrap();
    assert!(info["records"] <= 12, "{info:?}");
    assert_eq!(info["units"], 2_000);
    let _: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut p).unwrap();
    assert_eq!(dumps(&mut r), dumps(&mut p), "the replica's logs differ");
    let info: std::collections::HashMap<String, i64> = redis::cmd("SLIDELOG.INFO")
        .arg("victim")
        .query(&mut r)
        .unwrap();
    assert_eq!(info["units"], 5, "the replica keeps the hour's records");
}
