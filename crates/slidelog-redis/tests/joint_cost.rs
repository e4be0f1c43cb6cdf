//! What a joint decision costs Redis (docs/design.md §4.7), measured, not
//! asserted: `EVALSHA` `usec_per_call` of 2,000 decisions of each kind, each
//! kind on a fresh server: a single check of the general script, and joint
//! checks of 2 and 4 keys (admitted, then refused). Run with
//! `cargo test -p slidelog-redis --test joint_cost -- --ignored --nocapture`.

mod common;

use slidelog_core::{Checks, Limit, Mode, Now, Request, Store};
use slidelog_testkit::RedisServer;

const CALLS: usize = 2_000;

fn req(key: String, max: u64) -> Request {
    // Two limits: the general script, as every joint check's key takes it.
    let limits = vec![
        Limit::new(max, 60_000).unwrap(),
        Limit::new(max * 10, 3_600_000).unwrap(),
    ];
    Request::new(key, limits, 1).unwrap()
}

fn usec_per_call(server: &RedisServer) -> f64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client())
        .unwrap();
    let line = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap();
    let field = line
        .split(',')
        .find(|f| f.starts_with("usec_per_call="))
        .unwrap();
    field["usec_per_call=".len()..].parse().unwrap()
}

async fn measure(keys: usize, max: u64) -> f64 {
    let server = RedisServer::start();
    let store = common::store(&server, "joint-cost").await;
    for i in 0..CALLS {
        let requests = (0..keys).map(|k| req(format!("k{}:{k}", i % 100), max));
        let checks = Checks::new(requests).unwrap();
        if keys == 1 {
            store
                .decide_each(&checks.as_slice()[0], Mode::Record, Now::Server)
                .await
                .unwrap();
        } else {
            store
                .decide_all(&checks, Mode::Record, Now::Server)
                .await
                .unwrap();
        }
    }
    usec_per_call(&server)
}

#[tokio::test]
#[ignore = "a measurement"]
async fn joint_decisions_cost() {
    for (keys, max, what) in [
        (1, 1_000, "one key, admitted"),
        (2, 1_000, "2 keys, admitted"),
        (4, 1_000, "4 keys, admitted"),
        (1, 5, "one key, mostly refused"),
        (2, 5, "2 keys, mostly refused"),
        (4, 5, "4 keys, mostly refused"),
    ] {
        let usec = measure(keys, max).await;
        eprintln!("{what}: {usec:.2} usec per call");
    }
}
