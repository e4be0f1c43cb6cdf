//! `SLIDELOG.INFO` reports records and granules (docs/design.md §1.1,
//! §4.3): after the six fields it always had, in their order, the span,
//! the finest granule and the tiers, on an exact log, a granular one, a
//! key with coarse tiers and a missing key, on Redis and Valkey.

mod common;

use common::{ServerKind, server};
use redis::{Connection, Value};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// INFO's names in order, and its pairs.
fn info(conn: &mut Connection, key: &str) -> (Vec<String>, HashMap<String, i64>) {
    let flat: Vec<Value> = redis::cmd("SLIDELOG.INFO").arg(key).query(conn).unwrap();
    let mut names = Vec::new();
    let mut pairs = HashMap::new();
    for pair in flat.chunks(2) {
        let (Value::BulkString(name), Value::Int(v)) = (&pair[0], &pair[1]) else {
            panic!("INFO pair {pair:?}");
        };
        let name = String::from_utf8(name.clone()).unwrap();
        names.push(name.clone());
        pairs.insert(name, *v);
    }
    (names, pairs)
}

/// Checks of `key` under `limits` (`n max window[@g] cost` as arguments)
/// at each time; how many were admitted.
fn checks(
    conn: &mut Connection,
    key: &str,
    limits: &[&str],
    times: impl Iterator<Item = u64>,
) -> usize {
    let mut pipe = redis::pipe();
    for t in times {
        pipe.cmd("SLIDELOG.CHECK")
            .arg(key)
            .arg("RECORD")
            .arg(t)
            .arg(0)
            .arg(limits);
    }
    let replies: Vec<Vec<i64>> = pipe.query(conn).unwrap();
    replies.iter().filter(|r| r[0] == 1).count()
}

/// The tiers as `(granule_ms, records)`, oldest first.
fn tiers(i: &HashMap<String, i64>) -> Vec<(i64, i64)> {
    (1..=i["tiers"])
        .map(|t| {
            (
                i[&format!("tier_{t}_granule_ms")],
                i[&format!("tier_{t}_records")],
            )
        })
        .collect()
}

fn reports_granules(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    // A minute boundary an hour behind the clock.
    let start = wall_ms() / 60_000 * 60_000 - 3_600_000;

    let (names, empty) = info(&mut conn, "none");
    let first = [
        "records",
        "units",
        "oldest_ms",
        "newest_ms",
        "bytes",
        "weighted",
    ];
    assert_eq!(
        names[..6],
        first,
        "the fields it always had, first, in order"
    );
    assert_eq!(names[6..], ["span_ms", "granule_ms", "tiers"]);
    assert_eq!((empty["records"], empty["span_ms"]), (0, 0));
    assert_eq!((empty["granule_ms"], empty["tiers"]), (0, 0));

    let exact = ["1", "1000", "60000", "1"];
    let times = [0, 1, 3, 3, 10].map(|d| start + d);
    assert_eq!(checks(&mut conn, "exact", &exact, times.into_iter()), 5);
    let (_, e) = info(&mut conn, "exact");
    assert_eq!((e["records"], e["units"], e["span_ms"]), (4, 5, 10));
    assert_eq!((e["granule_ms"], tiers(&e)), (1, vec![(1, 4)]));

    // A check every 37 ms for 3.7 s at 100 ms: the granules 100 to 3,700.
    let granular = ["1", "1000", "60000@100", "1"];
    let times = (0..100).map(|i| start + 1 + i * 37);
    assert_eq!(checks(&mut conn, "g100", &granular, times), 100);
    let (_, g) = info(&mut conn, "g100");
    assert_eq!(g["granule_ms"], 100);
    assert_eq!(tiers(&g), [(100, g["records"])]);
    assert_eq!(g["span_ms"], g["newest_ms"] - g["oldest_ms"]);
    assert_eq!((g["span_ms"], g["records"]), (3_600, 37), "{g:?}");

    // 10 per second at 10 ms and 100,000 per day at 1 minute, a check every
    // 7 ms for 42 s: the records the fine limit no longer counts move to
    // coarser granules (oldest coarsest), the last second stays at 10 ms.
    let tiered = ["2", "10", "1000@10", "1", "100000", "86400000@60000", "1"];
    let admitted = checks(&mut conn, "day", &tiered, (0..6_000).map(|i| start + i * 7));
    assert!(admitted > 400, "{admitted}");
    let (_, d) = info(&mut conn, "day");
    let t = tiers(&d);
    assert_eq!(d["granule_ms"], 10, "{d:?}");
    assert!(t.len() >= 2, "coarse tiers and the fine one: {t:?}");
    assert!(t[0].0 > 10 && t.last().unwrap().0 == 10, "{t:?}");
    assert!(
        t.windows(2).all(|w| w[0].0 > w[1].0),
        "coarsest first: {t:?}"
    );
    assert_eq!(t.iter().map(|t| t.1).sum::<i64>(), d["records"]);
}

#[test]
fn info_reports_records_and_granules_on_redis() {
    reports_granules(ServerKind::Redis);
}

#[test]
fn info_reports_records_and_granules_on_valkey() {
    reports_granules(ServerKind::Valkey);
}
