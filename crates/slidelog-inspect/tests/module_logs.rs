//! `inspect` on a server with slidelog's module (docs/design.md §4.3): logs
//! of the module's type are read through `SLIDELOG.INFO` (records, units,
//! oldest and newest), `MEMORY USAGE` and `PTTL`, beside sorted sets, and
//! judged by the same problems (no TTL, records in the future, above 2 x
//! max: by units, since the requests of one millisecond are one record);
//! they are never "wrong type", and a key of another type still is. A
//! granular log's granules (`SLIDELOG.INFO`, docs/design.md §1.1) are in
//! the report and its text.

use slidelog_inspect::{InspectOptions, inspect};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// `n` admissions into the module log `key` at `at`, `at + 1`, … (max 100
/// per hour, so all admitted).
fn module_log(conn: &mut redis::Connection, key: &str, at: u64, n: u64) {
    admissions(conn, key, at, 1, n);
}

/// `n` admissions into `key` at `at`, `at + step`, ….
fn admissions(conn: &mut redis::Connection, key: &str, at: u64, step: u64, n: u64) {
    for i in 0..n {
        let reply: Vec<i64> = redis::cmd("SLIDELOG.CHECK")
            .arg(key)
            .arg("RECORD")
            .arg(at + i * step)
            .arg(0)
            .arg(1)
            .arg(100)
            .arg(3_600_000)
            .arg(1)
            .query(conn)
            .unwrap();
        assert_eq!(reply[0], 1, "{key}: admitted");
    }
}

#[tokio::test]
async fn module_logs_are_read_and_judged_beside_sorted_sets() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let mut conn = server.client();
    let p = unique_prefix("inspect-module");
    let now = now_ms();
    module_log(&mut conn, &format!("{p}clean"), now - 1_000, 5);
    module_log(&mut conn, &format!("{p}no_ttl"), now - 1_000, 3);
    redis::cmd("PERSIST")
        .arg(format!("{p}no_ttl"))
        .exec(&mut conn)
        .unwrap();
    module_log(&mut conn, &format!("{p}future"), now + 1_800_000, 2);
    module_log(&mut conn, &format!("{p}oversized"), now - 1_000, 25);
    // 25 requests in one millisecond: one record of 25 units, oversized.
    admissions(&mut conn, &format!("{p}merged"), now - 500, 0, 25);
    // A sorted set written by the scripts, and a key of another type.
    redis::cmd("ZADD")
        .arg(format!("{p}zset"))
        .arg(now as f64)
        .arg("01JDQ3W7ZK0000ABCDEFGHJKMN")
        .exec(&mut conn)
        .unwrap();
    redis::cmd("PEXPIRE")
        .arg(format!("{p}zset"))
        .arg(60_000)
        .exec(&mut conn)
        .unwrap();
    redis::cmd("SET")
        .arg(format!("{p}string"))
        .arg("v")
        .exec(&mut conn)
        .unwrap();

    let options = InspectOptions {
        pattern: format!("{p}*"),
        max: Some(10),
        max_source: Some("--max".into()),
        count: 3,
        ..InspectOptions::default()
    };
    let report = inspect(&server.url(), &options, None).await.unwrap();
    let flagged: BTreeMap<&str, Vec<String>> = report
        .problems
        .iter()
        .filter(|pr| pr.count > 0)
        .map(|pr| {
            let mut keys: Vec<String> = pr
                .keys
                .iter()
                .map(|k| k.key.strip_prefix(&p).unwrap().to_owned())
                .collect();
            keys.sort();
            (pr.kind.as_str(), keys)
        })
        .collect();
    let expected: BTreeMap<&str, Vec<String>> = [
        ("no_ttl", vec!["no_ttl".to_owned()]),
        ("future_scores", vec!["future".to_owned()]),
        (
            "oversized",
            vec!["merged".to_owned(), "oversized".to_owned()],
        ),
        ("wrong_type", vec!["string".to_owned()]),
    ]
    .into_iter()
    .collect();
    assert_eq!(flagged, expected);
    let s = &report.summary;
    assert_eq!(s.keys, 6, "five module logs and one sorted set");
    assert_eq!(s.records, 5 + 3 + 2 + 25 + 1 + 1);
    assert_eq!(s.other_type_keys, 1);
    assert_eq!(s.max_zcard, 25);
    assert!(s.memory_bytes > 0, "MEMORY USAGE of the module logs");
    let top = &report.top_by_records[0];
    assert_eq!(
        (top.key.as_str(), top.records),
        (format!("{p}oversized").as_str(), 25)
    );
    assert!(top.pttl_ms > 0 && top.memory_bytes > 0, "{top:?}");
    assert_eq!(top.oldest_score, Some((now - 1_000) as f64));
    assert_eq!(top.newest_score, Some((now - 1_000 + 24) as f64));
}

/// Checks of `key` under one limit of `window` (`<window_ms>[@<g>]`) at
/// `times`, all admitted.
fn checks_at(conn: &mut redis::Connection, key: &str, window: &str, times: &[u64]) {
    for &t in times {
        let reply: Vec<i64> = redis::cmd("SLIDELOG.CHECK")
            .arg(key)
            .arg("RECORD")
            .arg(t)
            .arg(0)
            .arg(1)
            .arg(1_000)
            .arg(window)
            .arg(1)
            .query(conn)
            .unwrap();
        assert_eq!(reply[0], 1, "{key}: admitted");
    }
}

#[tokio::test]
async fn granular_module_logs_report_their_granules() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let mut conn = server.client();
    let p = unique_prefix("inspect-granules");
    // Whole seconds, so the granules are multiples of 100 ms.
    let start = now_ms() / 1_000 * 1_000 - 10_000;
    // 40 checks 37 ms apart at 100 ms: 15 granules; and an exact log.
    let times: Vec<u64> = (0..40).map(|i| start + 1 + i * 37).collect();
    checks_at(&mut conn, &format!("{p}g100"), "60000@100", &times);
    // Consecutive ms: their gcd is 1 whatever the start.
    let ms: Vec<u64> = (0..12).map(|i| start + 1 + i).collect();
    checks_at(&mut conn, &format!("{p}exact"), "60000", &ms);
    let options = InspectOptions {
        pattern: format!("{p}*"),
        ..InspectOptions::default()
    };
    let report = inspect(&server.url(), &options, None).await.unwrap();
    assert_eq!(report.summary.granular_keys, 1);
    let entry = |name: &str| {
        let key = format!("{p}{name}");
        report
            .top_by_records
            .iter()
            .find(|e| e.key == key)
            .unwrap_or_else(|| panic!("{key} in {:?}", report.top_by_records))
            .clone()
    };
    let g = entry("g100");
    assert_eq!((g.records, g.granule_ms), (15, Some(100)));
    let tiers: Vec<(u64, u64)> = g.tiers.iter().map(|t| (t.granule_ms, t.records)).collect();
    assert_eq!(tiers, [(100, 15)]);
    let e = entry("exact");
    assert_eq!((e.records, e.granule_ms), (12, Some(1)));
    let text = slidelog_inspect::render::human(&report);
    assert!(text.contains("granular        1 module logs"), "{text}");
    assert!(text.contains("(granules 100 ms x 15)"), "{text}");
    // The JSON carries them, and reads back.
    let json = serde_json::to_string(&report).unwrap();
    assert!(json.contains("\"granule_ms\":100"), "{json}");
    let back: slidelog_inspect::Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, report);
}
