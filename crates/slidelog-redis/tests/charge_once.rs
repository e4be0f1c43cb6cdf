//! `Store::charge_once` on real servers (docs/design.md §6, "Local
//! answers"): a charge sent twice with one id counts once, on the scripts
//! (`usage.lua` with the once key in the log's slot) and on the module
//! (`SLIDELOG.CHARGE ... ONCE`), Redis and Valkey, a plain server and a
//! Cluster (the once key declared beside the log, so no CROSSSLOT); the
//! once key expires after its TTL; the module's once key reaches a replica.

use slidelog_core::{Limit, Mode, Now, OnceMark, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions, RedisStore};
use slidelog_testkit::{RedisCluster, RedisServer, ServerKind, module_path, unique_prefix};
use std::time::Duration;

fn options(test: &str) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(unique_prefix(test))
        .with_timeout(Duration::from_secs(5))
}

fn charge(key: &str, max: u64) -> Request {
    Request::usage(key, vec![Limit::new(max, 60_000).unwrap()], vec![1]).unwrap()
}

/// Live units of `key` as a peek counts them.
async fn count(store: &dyn Store, key: &str, max: u64) -> u64 {
    let r = Request::new(key, vec![Limit::new(max, 60_000).unwrap()], 1).unwrap();
    store
        .decide(&r, Mode::Peek, Now::Server)
        .await
        .unwrap()
        .count
        - 1
}

/// The same id twice counts once; another id counts again; a past
/// timestamp is kept (the charge-back's case), also into a full log.
async fn once_semantics(store: &dyn Store, what: &str) {
    let now = slidelog_core::Clock::now_ms(&slidelog_core::SystemClock);
    let at = Now::At(now - 1_000);
    let first = OnceMark::new("abc:1", 61_000).unwrap();
    assert!(
        store
            .charge_once(&charge("k", 2), at, &first)
            .await
            .unwrap(),
        "{what}"
    );
    assert!(
        !store
            .charge_once(&charge("k", 2), at, &first)
            .await
            .unwrap(),
        "{what}"
    );
    assert_eq!(count(store, "k", 2).await, 1, "{what}: once");
    for seq in 2..=4 {
        let once = OnceMark::new(format!("abc:{seq}"), 61_000).unwrap();
        assert!(
            store.charge_once(&charge("k", 2), at, &once).await.unwrap(),
            "{what}"
        );
        assert!(
            !store.charge_once(&charge("k", 2), at, &once).await.unwrap(),
            "{what}"
        );
    }
    // Past the max the charges merge into the newest record: still 4 units.
    assert_eq!(count(store, "k", 100).await, 4, "{what}: each once, merged");
}

#[tokio::test]
async fn scripts_and_module_charge_once_on_redis_and_valkey() {
    for kind in ServerKind::ALL {
        let plain = RedisServer::start_kind(kind);
        let store = RedisStore::connect(&plain.url(), options("once-scripts"))
            .await
            .unwrap();
        once_semantics(&store, &format!("scripts on {kind}")).await;
        let with = RedisServer::start_with_module(kind, &[]);
        let url = format!("{}?engine=module", with.url());
        let store = RedisStore::connect(&url, options("once-module"))
            .await
            .unwrap();
        once_semantics(&store, &format!("module on {kind}")).await;
    }
}

#[tokio::test]
async fn the_once_key_expires_after_its_ttl_on_both_engines() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    for engine in ["script", "module"] {
        let url = format!("{}?engine={engine}", server.url());
        let store = RedisStore::connect(&url, options(engine)).await.unwrap();
        let once = OnceMark::new("ttl:1", 150).unwrap();
        assert!(
            store
                .charge_once(&charge("t", 10), Now::Server, &once)
                .await
                .unwrap()
        );
        assert!(
            !store
                .charge_once(&charge("t", 10), Now::Server, &once)
                .await
                .unwrap()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(
            store
                .charge_once(&charge("t", 10), Now::Server, &once)
                .await
                .unwrap(),
            "{engine}: the mark expired"
        );
        assert_eq!(count(&store, "t", 10).await, 2, "{engine}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_takes_the_once_key_beside_the_log_on_both_engines() {
    let path = module_path();
    let cluster = tokio::task::spawn_blocking(move || {
        RedisCluster::start_with_node_args(3, 0, &|| {
            vec!["--loadmodule".into(), path.display().to_string()]
        })
    })
    .await
    .unwrap();
    for engine in ["script", "module"] {
        let url = format!("{}?engine={engine}", cluster.url());
        let store = ClusterStore::connect_cluster(&url, options(engine))
            .await
            .unwrap();
        for key in ["a", "b{x}c", "d}e", "f"] {
            let once = OnceMark::new("cl:1", 61_000).unwrap();
            let r = charge(key, 5);
            assert!(
                store.charge_once(&r, Now::Server, &once).await.unwrap(),
                "{engine} {key}"
            );
            assert!(
                !store.charge_once(&r, Now::Server, &once).await.unwrap(),
                "{engine} {key}"
            );
            assert_eq!(count(&store, key, 5).await, 1, "{engine} {key}");
        }
    }
}

#[test]
fn the_module_once_key_reaches_a_replica() {
    let primary = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let replicaof = format!("127.0.0.1 {}", primary.port());
    let replica = RedisServer::start_with_module(ServerKind::Redis, &["--replicaof", &replicaof]);
    let mut p = primary.client();
    let once_key = "{p:k}#o:r:1";
    let reply: Vec<i64> = redis::cmd("SLIDELOG.CHARGE")
        .arg("p:k")
        .arg("*")
        .arg(0)
        .arg(1)
        .arg(10)
        .arg(60_000)
        .arg(1)
        .arg("ONCE")
        .arg(once_key)
        .arg(60_000)
        .query(&mut p)
        .unwrap();
    assert_eq!(reply[0], 1);
    let mut r = replica.client();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let pttl: i64 = redis::cmd("PTTL").arg(once_key).query(&mut r).unwrap();
        let units: std::collections::HashMap<String, i64> = redis::cmd("SLIDELOG.INFO")
            .arg("p:k")
            .query(&mut r)
            .unwrap_or_default();
        if pttl > 50_000 && units.get("units") == Some(&1) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "replica: pttl {pttl}, {units:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Sent again: answered 4, nothing changed.
    let again: Vec<i64> = redis::cmd("SLIDELOG.CHARGE")
        .arg("p:k")
        .arg("*")
        .arg(0)
        .arg(1)
        .arg(10)
        .arg(60_000)
        .arg(1)
        .arg("ONCE")
        .arg(once_key)
        .arg(60_000)
        .query(&mut p)
        .unwrap();
    assert_eq!((again[0], again[4]), (4, 1), "{again:?}");
    // A once key outside the log's slot is refused, naming the field.
    let wrong = redis::cmd("SLIDELOG.CHARGE")
        .arg("p:k")
        .arg("*")
        .arg(0)
        .arg(1)
        .arg(10)
        .arg(60_000)
        .arg(1)
        .arg("ONCE")
        .arg("elsewhere")
        .arg(60_000)
        .query::<Vec<i64>>(&mut p)
        .unwrap_err();
    assert!(wrong.to_string().contains("once_key"), "{wrong}");
}
