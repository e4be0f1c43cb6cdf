//! Coarse tiers replicate (docs/design.md §1.1): on a key under 10 per
//! second at 10 ms and 100,000 per day at 1 minute, the primary moves old
//! records to minutes and propagates each rebuild as `SLIDELOG.APPLY …
//! round/…`; after checks, settles of records already moved and charges,
//! the replica's log is byte-identical (`DUMP`) to the primary's, and it
//! holds minutes, not 10 ms granules.

mod common;

use common::ServerKind;
use common::persist::{dumps, replica_of};
use redis::Connection;
use slidelog_testkit::RedisServer;
use std::time::{SystemTime, UNIX_EPOCH};

const LIMITS: [&str; 7] = ["2", "10", "1000@10", "1", "100000", "86400000@60000", "1"];

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn check(conn: &mut Connection, now: u64) -> Vec<i64> {
    redis::cmd("SLIDELOG.CHECK")
        .arg("day")
        .arg("RECORD")
        .arg(now)
        .arg(0)
        .arg(&LIMITS[..])
        .query(conn)
        .unwrap()
}

fn settle(conn: &mut Connection, now: u64, ts: u64, costs: &str) -> Vec<i64> {
    redis::cmd("SLIDELOG.SETTLE")
        .arg("day")
        .arg(now)
        .arg(0)
        .arg(ts)
        .arg("1")
        .arg(LIMITS[0])
        .arg(&LIMITS[1..3])
        .arg(costs)
        .arg(&LIMITS[4..6])
        .arg(costs)
        .query(conn)
        .unwrap()
}

fn exact(kind: ServerKind) {
    let primary = RedisServer::start_with_module(kind, &[]);
    let replica = replica_of(kind, &primary);
    let (mut p, mut r) = (primary.client(), replica.client());
    // A minute boundary an hour ago: the run's times stay behind the clock.
    let start = (wall_ms() - 3_600_000) / 60_000 * 60_000;
    let mut admitted = Vec::new();
    let mut settled = 0;
    for i in 0..6_000u64 {
        let now = start + i * 7;
        let reply = check(&mut p, now);
        if reply[0] == 1 {
            admitted.push(now.div_ceil(10) * 10);
        }
        // Every 50th step, refund or settle up a record 2 to 5 s old:
        // moved to its minute by then (the fine limit's second is over).
        if i % 50 == 0 && admitted.len() > 40 {
            let ts = admitted[admitted.len() - 40];
            let to = if i % 100 == 0 { "0" } else { "2" };
            settled += settle(&mut p, now, ts, to)[0];
        }
    }
    assert!(settled > 20, "settles found their moved records: {settled}");
    let info: std::collections::HashMap<String, i64> = redis::cmd("SLIDELOG.INFO")
        .arg("day")
        .query(&mut p)
        .unwrap();
    // 42 s of traffic: about 100 granules of the last second, and minutes.
    assert!(info["records"] < 200, "{info:?}");
    // INFO reports the tiers: coarser granules oldest, 10 ms newest.
    assert_eq!(info["granule_ms"], 10, "{info:?}");
    assert!(
        info["tiers"] >= 2 && info["tier_1_granule_ms"] > 10,
        "{info:?}"
    );
    let _: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut p).unwrap();
    assert_eq!(dumps(&mut r), dumps(&mut p), "the replica's log differs");
    let on_replica: std::collections::HashMap<String, i64> = redis::cmd("SLIDELOG.INFO")
        .arg("day")
        .query(&mut r)
        .unwrap();
    for (name, v) in &info {
        if name.starts_with("tier") || name.ends_with("_ms") || name == "records" {
            assert_eq!(on_replica[name], *v, "{name} on the replica");
        }
    }
}

#[test]
fn coarse_tiers_replicate_on_redis() {
    exact(ServerKind::Redis);
}

#[test]
fn coarse_tiers_replicate_on_valkey() {
    exact(ServerKind::Valkey);
}
