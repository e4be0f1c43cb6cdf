//! `inspect` against a real redis-server seeded with one key per problem of
//! docs/design.md §7 (no TTL, second-valued scores, scores in the future, a set above
//! 2 × max, timestamp members, a key of the wrong type, a huge set): each is
//! found on its own key, and a clean key flags nothing.

use slidelog_inspect::{InspectOptions, ProblemKind, Report, inspect};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A ULID-looking member: what slidelog writes.
fn ulid_like(i: usize) -> String {
    format!("01JDQ3W7ZK{i:04}ABCDEFGHJKMN")
}

/// Adds `members` with scores to `key`, with a TTL unless `ttl_ms` is None.
fn seed(conn: &mut redis::Connection, key: &str, records: &[(String, f64)], ttl_ms: Option<u64>) {
    let mut cmd = redis::cmd("ZADD");
    cmd.arg(key);
    for (member, score) in records {
        cmd.arg(*score).arg(member);
    }
    cmd.exec(conn).unwrap();
    if let Some(ttl) = ttl_ms {
        redis::cmd("PEXPIRE").arg(key).arg(ttl).exec(conn).unwrap();
    }
}

fn ms_records(n: usize, now: u64) -> Vec<(String, f64)> {
    (0..n)
        .map(|i| (ulid_like(i), (now - 1000 + i as u64) as f64))
        .collect()
}

/// problem kind → the keys flagged with it (suffix after the prefix).
fn flagged(report: &Report, prefix: &str) -> BTreeMap<&'static str, Vec<String>> {
    report
        .problems
        .iter()
        .filter(|p| p.count > 0)
        .map(|p| {
            assert_eq!(p.count as usize, p.keys.len(), "{:?} truncated", p.kind);
            let mut keys: Vec<String> = p
                .keys
                .iter()
                .map(|k| k.key.strip_prefix(prefix).unwrap().to_owned())
                .collect();
            keys.sort();
            (p.kind.as_str(), keys)
        })
        .collect()
}

#[tokio::test]
async fn each_seeded_problem_is_found_and_nothing_else() {
    let server = RedisServer::start();
    let mut conn = server.client();
    let p = unique_prefix("problems");
    let now = now_ms();
    let hour = Some(3_600_000);

    seed(&mut conn, &format!("{p}clean"), &ms_records(5, now), hour);
    seed(&mut conn, &format!("{p}no_ttl"), &ms_records(3, now), None);
    let seconds: Vec<_> = (0..4)
        .map(|i| (ulid_like(i), (now / 1000 - 2 + i as u64) as f64))
        .collect();
    seed(&mut conn, &format!("{p}seconds"), &seconds, hour);
    let mut future = ms_records(2, now);
    future.push((ulid_like(99), (now + 3_600_000) as f64));
    seed(&mut conn, &format!("{p}future"), &future, hour);
    seed(
        &mut conn,
        &format!("{p}oversized"),
        &ms_records(25, now),
        hour,
    );
    let stamps: Vec<_> = (0..3)
        .map(|i| ((now - 10 + i).to_string(), (now - 10 + i) as f64))
        .collect();
    seed(&mut conn, &format!("{p}timestamps"), &stamps, hour);
    redis::cmd("SET")
        .arg(format!("{p}string"))
        .arg("v")
        .exec(&mut conn)
        .unwrap();
    // Outside the pattern: never reported.
    seed(&mut conn, "other:no_ttl", &ms_records(3, now), None);

    let options = InspectOptions {
        pattern: format!("{p}*"),
        max: Some(10),
        max_source: Some("--max".into()),
        count: 3, // several SCAN rounds even for a handful of keys
        ..InspectOptions::default()
    };
    let report = inspect(&server.url(), &options, None).await.unwrap();
    let expected: BTreeMap<&str, Vec<String>> = [
        ("no_ttl", vec!["no_ttl".to_owned()]),
        ("seconds_scores", vec!["seconds".to_owned()]),
        ("future_scores", vec!["future".to_owned()]),
        ("oversized", vec!["oversized".to_owned()]),
        ("duplicate_prone_members", vec!["timestamps".to_owned()]),
        ("wrong_type", vec!["string".to_owned()]),
    ]
    .into_iter()
    .collect();
    assert_eq!(flagged(&report, &p), expected);
    assert_eq!(report.problem_keys, 6);
    assert!(report.has_problems());

    let s = &report.summary;
    assert_eq!(s.keys, 6);
    assert_eq!(s.records, 5 + 3 + 4 + 3 + 25 + 3);
    assert_eq!(s.other_type_keys, 1);
    assert_eq!(s.max_zcard, 25);
    assert!(s.memory_bytes > 0 && s.bytes_per_record > 0.0);
    assert_eq!(report.top_by_records[0].key, format!("{p}oversized"));
    assert_eq!(report.top_by_records[0].records, 25);
    assert_eq!(report.nodes.len(), 1);
    assert_eq!(report.limit.max, Some(10));
    // Histogram: 3,3,4,3,5 → bucket 2-10; 25 → 11-100.
    assert_eq!(report.zcard_histogram[1].keys, 5);
    assert_eq!(report.zcard_histogram[2].keys, 1);
    assert_eq!(
        report.zcard_histogram.iter().map(|b| b.keys).sum::<u64>(),
        6
    );

    // Without a known max nothing is oversized; a low huge threshold flags
    // exactly the large set.
    let mut options = InspectOptions {
        pattern: format!("{p}*"),
        ..InspectOptions::default()
    };
    options.thresholds.huge_zcard = 20;
    let report = inspect(&server.url(), &options, None).await.unwrap();
    let flags = flagged(&report, &p);
    assert_eq!(flags.get("huge_sets"), Some(&vec!["oversized".to_owned()]));
    assert_eq!(flags.get("oversized"), None);
    assert_eq!(report.problem(ProblemKind::Oversized).unwrap().count, 0);

    // A pattern with only the clean key: no problem at all.
    let options = InspectOptions {
        pattern: format!("{p}clean"),
        max: Some(5),
        ..InspectOptions::default()
    };
    let report = inspect(&server.url(), &options, None).await.unwrap();
    assert!(!report.has_problems(), "{:#?}", report.problems);
    assert_eq!(report.summary.keys, 1);
    assert_eq!(report.problem_keys, 0);
    assert_eq!(report.problems.len(), ProblemKind::ALL.len());
}

#[tokio::test]
async fn bad_options_and_unreachable_stores_are_clear_errors() {
    let bad = InspectOptions {
        count: 0,
        ..InspectOptions::default()
    };
    let e = inspect("redis://127.0.0.1:1", &bad, None)
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "invalid --count: 0 (must be 1 ..= 100000)");
    let bad = InspectOptions {
        max: Some(10_000_001),
        ..InspectOptions::default()
    };
    let e = inspect("redis://127.0.0.1:1", &bad, None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("--max"), "{e}");

    let e = inspect("memory://", &InspectOptions::default(), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no key space"), "{e}");

    let port = slidelog_testkit::free_port();
    let e = inspect(
        &format!("redis://:secret@127.0.0.1:{port}"),
        &InspectOptions::default(),
        None,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains(&format!("127.0.0.1:{port}")), "{e}");
    assert!(!e.contains("secret"), "{e}");
}
