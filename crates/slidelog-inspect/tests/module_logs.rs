//! `inspect` on a server with slidelog's module (docs/design.md §4.3): logs
//! of the module's type are read through `SLIDELOG.INFO` (records, units,
//! oldest and newest), `MEMORY USAGE` and `PTTL`, beside sorted sets, and
//! judged by the same problems (no TTL, records in the future, above 2 x
//! max: by units, since the requests of one millisecond are one record);
//! they are never "wrong type", and a key of another type still is.

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
