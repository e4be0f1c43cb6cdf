//! Timings of a settle and a charge on a big module log (docs/design.md
//! §4.1, §4.3): one key of 200,000 records under 16 limits, then one
//! `SLIDELOG.CHARGE` of 16 different costs and one `SLIDELOG.SETTLE` of
//! the oldest record to 16 different costs, each timed from the client
//! (one round trip on loopback included), and `MEMORY USAGE` of the key
//! before and after. Ignored: it prints numbers. Run:
//!
//! `cargo test --release -p slidelog-module --test timings -- --ignored --nocapture`

mod common;

use common::ServerKind;
use slidelog_testkit::RedisServer;
use std::time::Instant;

const RECORDS: u64 = 200_000;
const T0: u64 = 1_767_225_600_000;

/// 16 limits of 10,000,000 per hour (and a ms more each) with `costs`.
fn limits(cmd: &mut redis::Cmd, costs: &[u64]) {
    cmd.arg(16);
    for (i, c) in costs.iter().cycle().take(16).enumerate() {
        cmd.arg(10_000_000).arg(3_600_000 + i as u64).arg(c);
    }
}

fn memory(conn: &mut redis::Connection) -> i64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg("big")
        .query(conn)
        .unwrap()
}

#[test]
#[ignore = "prints timings; run in release"]
fn a_charge_and_a_settle_on_200k_records_under_16_limits() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let mut conn = server.client();
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(10_000) {
        let mut pipe = redis::pipe();
        for &t in chunk {
            let mut cmd = redis::cmd("SLIDELOG.CHECK");
            cmd.arg("big").arg("RECORD").arg(T0 + t).arg(0);
            limits(&mut cmd, &[1]);
            pipe.add_command(cmd).ignore();
        }
        let () = pipe.query(&mut conn).unwrap();
    }
    let now = T0 + RECORDS;
    let plain = memory(&mut conn);
    let sixteen: Vec<u64> = (1..=16).collect();
    let mut charge = redis::cmd("SLIDELOG.CHARGE");
    charge.arg("big").arg(now).arg(0);
    limits(&mut charge, &sixteen);
    let start = Instant::now();
    let reply: Vec<i64> = charge.query(&mut conn).unwrap();
    let charged = start.elapsed().as_secs_f64() * 1e3;
    assert_eq!(reply[0], 1);
    let mut settle = redis::cmd("SLIDELOG.SETTLE");
    settle.arg("big").arg(now).arg(0).arg(T0).arg(1);
    limits(&mut settle, &(100..116).collect::<Vec<u64>>());
    let start = Instant::now();
    let reply: Vec<i64> = settle.query(&mut conn).unwrap();
    let settled = start.elapsed().as_secs_f64() * 1e3;
    assert_eq!(reply[0], 1);
    let after = memory(&mut conn);
    println!(
        "module log of {RECORDS} records under 16 limits: 16-cost charge {charged:.3} ms, settle of the oldest {settled:.3} ms; MEMORY USAGE {plain} B plain ({:.2} B a record), {after} B after ({:.2} B a record)",
        plain as f64 / RECORDS as f64,
        after as f64 / RECORDS as f64,
    );
}
