//! A scan of 100,000 keys on a real redis-server finishes and its totals are
//! exact: keys, records, the histogram, the largest set, and the progress
//! counters agree with what was seeded.

use slidelog_inspect::{InspectOptions, ScanProgress, inspect};
use slidelog_testkit::seed::{records_of, seed_logs};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const KEYS: u64 = 100_000;

#[tokio::test]
async fn a_scan_of_100k_keys_has_exact_totals() {
    let server = RedisServer::start();
    let mut conn = server.client();
    let p = unique_prefix("large");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;

    // Seeded inside Redis by a Lua loop (our own server).
    let seeding = Instant::now();
    seed_logs(&mut conn, &p, KEYS, now, 600_000);
    let expected_records: u64 = (0..KEYS).map(records_of).sum();
    let one = (0..KEYS).filter(|i| records_of(*i) == 1).count() as u64;
    // Noise outside the pattern.
    redis::cmd("SET")
        .arg("unrelated")
        .arg(1)
        .exec(&mut conn)
        .unwrap();
    eprintln!("seeded {KEYS} keys in {:?}", seeding.elapsed());

    let progress = ScanProgress::new();
    let options = InspectOptions {
        pattern: format!("{p}*"),
        max: Some(12),
        ..InspectOptions::default()
    };
    let scanning = Instant::now();
    let report = inspect(&server.url(), &options, Some(&progress))
        .await
        .unwrap();
    eprintln!("scanned {KEYS} keys in {:?}", scanning.elapsed());

    let s = &report.summary;
    assert_eq!(s.keys, KEYS);
    assert_eq!(s.records, expected_records);
    assert_eq!(s.max_zcard, 12);
    assert_eq!(s.other_type_keys, 0);
    assert_eq!(s.vanished_keys, 0);
    assert!(!report.has_problems(), "{:#?}", report.problems);
    assert_eq!(report.zcard_histogram[0].keys, one);
    assert_eq!(
        report.zcard_histogram[1].keys,
        KEYS - one - report.zcard_histogram[2].keys
    );
    assert_eq!(
        report
            .zcard_histogram
            .iter()
            .map(|b| b.records)
            .sum::<u64>(),
        expected_records
    );
    assert_eq!(report.top_by_records.len(), 10);
    assert!(report.top_by_records.iter().all(|e| e.records == 12));
    assert_eq!(progress.keys(), KEYS);
    assert_eq!(progress.records(), expected_records);
    assert_eq!(progress.memory_bytes(), s.memory_bytes);
    assert_eq!(progress.fraction(), 1.0);
}
