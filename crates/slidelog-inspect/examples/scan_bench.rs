//! Measures `inspect` on a fresh redis-server seeded with N keys (default
//! 100,000; key i holds 1..=12 ULID-like records): seeding time, scan time,
//! keys per second, and the exactness of the totals. Used for BENCHMARKS.md:
//!
//! ```sh
//! cargo run --release -p slidelog-inspect --example scan_bench -- 100000 [COUNT]
//! ```

use slidelog_inspect::{InspectOptions, inspect};
use slidelog_testkit::RedisServer;
use slidelog_testkit::seed::{records_of, seed_logs};
use std::time::Instant;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let keys: u64 = args.next().map_or(100_000, |a| a.parse().expect("N keys"));
    let count: u32 = args.next().map_or(1_000, |a| a.parse().expect("COUNT"));
    let server = RedisServer::start();
    let mut conn = server.client();
    let now = 1_764_400_000_000u64;
    let started = Instant::now();
    seed_logs(&mut conn, "rate:sliding:", keys, now, 3_600_000);
    println!("seeded {keys} keys in {:.2?}", started.elapsed());

    let options = InspectOptions {
        count,
        ..InspectOptions::default()
    };
    let started = Instant::now();
    let report = inspect(&server.url(), &options, None)
        .await
        .expect("inspect");
    let took = started.elapsed();
    let expected: u64 = (0..keys).map(records_of).sum();
    assert_eq!(report.summary.keys, keys);
    assert_eq!(report.summary.records, expected);
    println!(
        "scanned {} keys ({} records, {} bytes) with COUNT {count} in {:.2?}: {:.0} keys/s",
        report.summary.keys,
        report.summary.records,
        report.summary.memory_bytes,
        took,
        keys as f64 / took.as_secs_f64()
    );
}
