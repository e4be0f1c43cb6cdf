//! What a joint decision costs Redis (docs/design.md §4.7), measured, not
//! asserted: `EVALSHA` `usec_per_call` of 2,000 decisions of each kind, each
//! kind on a fresh server: a single check of the general script, and joint
//! checks of 2 and 4 keys (admitted, then refused); and on a 3-master
//! Cluster, a joint check of 2 keys in one slot (one script call) beside 2
//! keys in two slots (reservations, then their settle: docs/design.md §4.7),
//! as every node's command time and the caller's wall time per request.
//! Run with
//! `cargo test -p slidelog-redis --test joint_cost -- --ignored --nocapture`.

mod common;

use slidelog_core::{Checks, Limit, Mode, Now, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions};
use slidelog_testkit::{RedisCluster, RedisServer, unique_prefix};
use std::time::Instant;

const CALLS: usize = 2_000;

fn req(key: String, max: u64) -> Request {
    // Two limits: the general script, as every joint check's key takes it.
    let limits = vec![
        Limit::new(max, 60_000).unwrap(),
        Limit::new(max * 10, 3_600_000).unwrap(),
    ];
    Request::new(key, limits, 1).unwrap()
}

fn commandstats(server: &RedisServer) -> String {
    redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client())
        .unwrap()
}

/// Microseconds `server` spent on commands (every `cmdstat_*` but INFO's).
fn usec_total(server: &RedisServer) -> f64 {
    commandstats(server)
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix("usec=")))
        .map(|v| v.parse::<f64>().unwrap())
        .sum()
}

fn usec_per_call(server: &RedisServer) -> f64 {
    let stats = commandstats(server);
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

/// Every node's command time and the wall time per joint request of two
/// keys named by `pair(i)`, on a fresh Cluster.
async fn measure_cluster(pair: fn(usize) -> [String; 2]) -> (f64, f64) {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let options = RedisOptions::default().with_prefix(unique_prefix("joint-cost"));
    let store = ClusterStore::connect_cluster(&cluster.url(), options)
        .await
        .unwrap();
    let nodes = || cluster.ports().into_iter().map(|p| cluster.node(p));
    let before: f64 = nodes().map(usec_total).sum();
    let started = Instant::now();
    for i in 0..CALLS {
        let checks = Checks::new(pair(i).map(|k| req(k, 100_000))).unwrap();
        store
            .decide_all(&checks, Mode::Record, Now::Server)
            .await
            .unwrap();
    }
    let wall = started.elapsed().as_secs_f64() * 1e6 / CALLS as f64;
    let after: f64 = nodes().map(usec_total).sum();
    ((after - before) / CALLS as f64, wall)
}

#[tokio::test]
#[ignore = "a measurement"]
async fn cluster_joint_decisions_cost() {
    let one_slot: fn(usize) -> [String; 2] = |i| {
        [
            format!("{{u{}}}:user", i % 100),
            format!("{{u{}}}:route", i % 100),
        ]
    };
    // `user:N` and `route` hash apart: two slots, most often on two masters.
    let two_slots: fn(usize) -> [String; 2] = |i| [format!("user:{}", i % 100), "route".into()];
    for (what, pair) in [
        ("2 keys, one slot", one_slot),
        ("2 keys, two slots", two_slots),
    ] {
        let (usec, wall) = measure_cluster(pair).await;
        eprintln!("{what}: {usec:.2} usec of Redis, {wall:.0} usec wall per request");
    }
}
