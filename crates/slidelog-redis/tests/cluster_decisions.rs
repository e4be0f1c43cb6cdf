//! The cluster store on a local 3-master Redis Cluster: keys spread over
//! every master and well over a thousand slots decide exactly as the memory
//! store does (no CROSSSLOT, ever), the script reaches masters that lost it,
//! and the key layout and TTL are those of a single Redis. The first two run
//! on a Redis Cluster and on a Valkey 8 cluster.

mod ha;

use redis::Commands;
use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions};
use slidelog_testkit::{RedisCluster, ServerKind, unique_prefix};
use std::collections::BTreeSet;
use std::time::Duration;

fn options(prefix: &str) -> RedisOptions {
    // Generous: the machine is shared and this is a debug build.
    RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(Duration::from_secs(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_over_every_master_decide_as_the_memory_store_does() {
    keys_over_every_master_decide_as_the_memory_store_does_on(ServerKind::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_over_every_master_decide_as_the_memory_store_does_on_valkey() {
    keys_over_every_master_decide_as_the_memory_store_does_on(ServerKind::Valkey).await;
}

async fn keys_over_every_master_decide_as_the_memory_store_does_on(kind: ServerKind) {
    let cluster = tokio::task::spawn_blocking(move || RedisCluster::start_kind(kind))
        .await
        .unwrap();
    let prefix = unique_prefix("cluster-diff");
    let store = ClusterStore::connect_cluster(&cluster.url(), options(&prefix))
        .await
        .expect("connect to the cluster");
    assert_eq!(store.kind(), "redis-cluster");

    // 60 keys for the differential run, which land on all three masters,
    // and keys whose weights key needs each of its three slot rules (no
    // hash tag, a tag of their own, a `}` without a tag).
    let keys = ha::keys_over_every_master(&cluster, &prefix, 60);
    ha::differential(&store, &keys, 1_500, 7).await;

    // One decision on each of 3,000 more keys: well over a thousand slots,
    // every master, and not one error (CROSSSLOT or other).
    let limit = Limit::new(1, 60_000).unwrap();
    let mut slots = BTreeSet::new();
    for i in 0..3_000 {
        let key = format!("spread:{i}");
        let d = store
            .check(&Request::single(key.clone(), limit).unwrap())
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(d.allowed);
        if i % 10 == 0 {
            slots.insert(cluster.key_slot(&format!("{prefix}{key}")));
        }
    }
    assert!(slots.len() > 250, "sampled slots: {}", slots.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_reaches_masters_that_lost_it_and_the_layout_is_kept() {
    the_script_reaches_masters_that_lost_it_and_the_layout_is_kept_on(ServerKind::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_reaches_masters_that_lost_it_and_the_layout_is_kept_on_valkey() {
    the_script_reaches_masters_that_lost_it_and_the_layout_is_kept_on(ServerKind::Valkey).await;
}

async fn the_script_reaches_masters_that_lost_it_and_the_layout_is_kept_on(kind: ServerKind) {
    let cluster = tokio::task::spawn_blocking(move || RedisCluster::start_kind(kind))
        .await
        .unwrap();
    let prefix = unique_prefix("cluster-noscript");
    let store = ClusterStore::connect_cluster(&cluster.url(), options(&prefix))
        .await
        .unwrap();
    let limit = Limit::new(3, 60_000).unwrap();
    let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
    for key in &keys {
        assert!(
            store
                .check(&Request::single(key.clone(), limit).unwrap())
                .await
                .unwrap()
                .allowed
        );
    }
    // Every master forgets every script (as a new master after a failover
    // has never loaded it): decisions go on, exact.
    for port in cluster.master_ports() {
        let mut c = cluster.node(port).client();
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    }
    for key in &keys {
        let d = store
            .check(&Request::single(key.clone(), limit).unwrap())
            .await
            .unwrap();
        assert!(d.allowed && d.count == 2, "{key}: {d:?}");
    }
    // The script came back by EVAL on each key's own master, never by
    // SCRIPT LOAD (which goes to every master and fails while one is down).
    for port in cluster.master_ports() {
        let mut c = cluster.node(port).client();
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut c)
            .unwrap();
        assert!(stats.contains("cmdstat_eval:"), "{stats}");
        assert!(!stats.contains("cmdstat_script|load"), "{stats}");
    }
    // The layout on the owning master: a sorted set with a TTL in ms.
    let key = format!("{prefix}{}", keys[0]);
    let owner = cluster.master_of_slot(cluster.key_slot(&key));
    let mut c = cluster.node(owner).client();
    assert_eq!(c.zcard::<_, u64>(&key).unwrap(), 2);
    let pttl: i64 = c.pttl(&key).unwrap();
    assert!(pttl > 50_000 && pttl <= 60_000, "{pttl}");
    assert!(store.reset(&keys[0]).await.unwrap());
    store.ping().await.unwrap();
}

#[tokio::test]
async fn a_cluster_that_is_not_there_fails_within_the_connect_timeout() {
    let port = slidelog_testkit::free_port();
    let mut opts = options("x:");
    opts.connect_timeout = Duration::from_millis(500);
    let started = std::time::Instant::now();
    let err = ClusterStore::connect_cluster(&format!("redis+cluster://127.0.0.1:{port}"), opts)
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(err.to_string().contains("127.0.0.1"), "{err}");
    let bad = ClusterStore::connect_cluster("redis+cluster://h", options("x:")).await;
    assert!(bad.unwrap_err().to_string().contains("host:port"));
}
