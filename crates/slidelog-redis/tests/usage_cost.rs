//! What a settle and a charge cost Redis beside a check (docs/design.md
//! §4.5): `usec_per_call` of `EVALSHA` from `INFO commandstats`, one phase
//! at a time on a fresh server, for a token-limited key holding about
//! `live` records. A measurement, not a pass/fail test:
//! `cargo test -p slidelog-redis --test usage_cost -- --ignored --nocapture`.

mod common;

use slidelog_core::{Limit, Mode, Now, Receipt, Request, Store};
use slidelog_testkit::RedisServer;

fn usec_per_call(c: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    info.lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split(',').find_map(|f| f.strip_prefix("usec_per_call=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn reset_stats(c: &mut redis::Connection) {
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(c).unwrap();
}

#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn settle_and_charge_usec_per_call_beside_a_check() {
    let server = RedisServer::start();
    let redis = common::store(&server, "usage-cost").await;
    let url = format!("redis://127.0.0.1:{}", server.port());
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let limits = vec![
        Limit::new(1_000_000, 600_000).unwrap(),
        Limit::new(10_000_000, 600_000).unwrap(),
    ];
    for live in [10u64, 100, 1_000] {
        let key = format!("tokens-{live}");
        let check = Request::with_costs(key.clone(), limits.clone(), vec![1, 500]).unwrap();
        let mut receipts = Vec::new();
        for _ in 0..live {
            let d = redis
                .decide(&check, Mode::Record, Now::Server)
                .await
                .unwrap();
            receipts.push(Receipt::new(&check, d.record.unwrap()));
        }
        reset_stats(&mut c);
        let n = 2_000usize;
        let mut fresh = Vec::new();
        for _ in 0..n {
            let d = redis.decide(&check, Mode::Peek, Now::Server).await.unwrap();
            assert!(d.allowed);
        }
        let peek = usec_per_call(&mut c);
        reset_stats(&mut c);
        for _ in 0..n / 2 {
            let d = redis
                .decide(&check, Mode::Record, Now::Server)
                .await
                .unwrap();
            fresh.push(Receipt::new(&check, d.record.unwrap()));
        }
        let checked = usec_per_call(&mut c);
        reset_stats(&mut c);
        let settle = Request::usage(key.clone(), limits.clone(), vec![1, 321]).unwrap();
        for r in &fresh {
            assert!(redis.settle(&settle, r, Now::Server).await.unwrap().settled);
        }
        let settled = usec_per_call(&mut c);
        reset_stats(&mut c);
        let charge = Request::usage(key.clone(), limits.clone(), vec![1, 77]).unwrap();
        for _ in 0..n / 2 {
            redis.charge(&charge, Now::Server).await.unwrap();
        }
        let charged = usec_per_call(&mut c);
        println!(
            "live {live:>5} (+ up to {}) records: weighted check {checked:.2} us, peek {peek:.2} us, settle {settled:.2} us, charge {charged:.2} us (EVALSHA usec_per_call)",
            n
        );
    }
}

/// A charge into a full log (docs/design.md §4.5: merged into the newest
/// record) and a settle, each `usec_per_call` of `EVALSHA` over 2,000 calls
/// on a fresh key: cost 1 into max 10 per hour (a plain log, then one
/// weighted record), costs `[1, 77]` into a full requests-and-tokens log,
/// and settles of fresh receipts on a key of 10 live records.
#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn charge_into_a_full_log_and_settle_usec_per_call() {
    let server = RedisServer::start();
    let redis = common::store(&server, "usage-full").await;
    let url = format!("redis://127.0.0.1:{}", server.port());
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let n = 2_000;
    let one = vec![Limit::new(10, 3_600_000).unwrap()];
    let two = vec![
        Limit::new(10, 3_600_000).unwrap(),
        Limit::new(1_000, 3_600_000).unwrap(),
    ];
    for (name, limits, costs) in [("one", &one, vec![1]), ("two", &two, vec![1, 77])] {
        let charge = Request::usage(name, limits.clone(), costs).unwrap();
        for _ in 0..20 {
            redis.charge(&charge, Now::Server).await.unwrap();
        }
        reset_stats(&mut c);
        for _ in 0..n {
            redis.charge(&charge, Now::Server).await.unwrap();
        }
        let charged = usec_per_call(&mut c);
        let zcard: u64 = redis::cmd("ZCARD")
            .arg(format!("{}{name}", redis.prefix()))
            .query(&mut c)
            .unwrap();
        println!("charge into a full log ({name} limit(s)): {charged:.2} us, ZCARD {zcard}");
    }
    let limits = vec![
        Limit::new(1_000_000, 600_000).unwrap(),
        Limit::new(10_000_000, 600_000).unwrap(),
    ];
    let check = Request::with_costs("settle", limits.clone(), vec![1, 500]).unwrap();
    let settle = Request::usage("settle", limits.clone(), vec![1, 321]).unwrap();
    let mut receipts = Vec::new();
    for _ in 0..10 + n {
        let d = redis
            .decide(&check, Mode::Record, Now::Server)
            .await
            .unwrap();
        receipts.push(Receipt::new(&check, d.record.unwrap()));
    }
    for r in &receipts[..10] {
        assert!(redis.settle(&settle, r, Now::Server).await.unwrap().settled);
    }
    reset_stats(&mut c);
    for r in &receipts[10..] {
        assert!(redis.settle(&settle, r, Now::Server).await.unwrap().settled);
    }
    let settled = usec_per_call(&mut c);
    println!("settle ({} live records): {settled:.2} us", 10 + n);
}
