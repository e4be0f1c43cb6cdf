//! `open_store` opens Redis Cluster (`redis+cluster://`) and Sentinel
//! (`redis+sentinel://…/master-name`) URLs, as the CLI and the service do,
//! and the stores decide.

use slidelog::url::{StoreOptions, open_store};
use slidelog_core::{Limit, Request};
use slidelog_testkit::{RedisCluster, SentinelGroup, unique_prefix};
use std::time::Duration;

/// The per-call timeout: behaviour, not latency, on a busy machine.
const PATIENT: Duration = Duration::from_secs(2);

fn options(test: &str) -> StoreOptions {
    StoreOptions {
        key_prefix: unique_prefix(test),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_and_sentinel_urls_open_stores_that_decide() {
    let (cluster, group) = tokio::task::spawn_blocking(|| {
        std::thread::scope(|s| {
            let c = s.spawn(RedisCluster::start);
            let g = s.spawn(SentinelGroup::start);
            (c.join().unwrap(), g.join().unwrap())
        })
    })
    .await
    .unwrap();
    let request = Request::single("user123", Limit::new(2, 60_000).unwrap()).unwrap();
    for (url, kind) in [
        (cluster.url(), "redis-cluster"),
        (group.url(), "redis-sentinel"),
    ] {
        let store = open_store(&url, &options(kind), PATIENT)
            .await
            .expect("open");
        assert_eq!(store.kind(), kind);
        assert!(store.check(&request).await.unwrap().allowed);
        assert!(store.check(&request).await.unwrap().allowed);
        assert!(!store.check(&request).await.unwrap().allowed);
        store.ping().await.unwrap();
        // Lazy: opens without waiting, decides once connected.
        let lazy = StoreOptions {
            lazy_connect: true,
            ..options(kind)
        };
        let store = open_store(&url, &lazy, PATIENT).await.expect("open lazily");
        let mut tries = 0;
        while store.check(&request).await.is_err() {
            tries += 1;
            assert!(tries < 100, "a lazy {kind} store never connected");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn bad_cluster_and_sentinel_urls_are_clear_errors() {
    let o = options("bad");
    let e = open_store("redis+cluster://user:secret@h", &o, PATIENT)
        .await
        .unwrap_err()
        .with_causes();
    assert!(e.contains("host:port"), "{e}");
    assert!(!e.contains("secret"), "{e}");
    let e = open_store("redis+sentinel://127.0.0.1:1", &o, PATIENT)
        .await
        .unwrap_err()
        .with_causes();
    assert!(e.contains("master name"), "{e}");
    let e = open_store("redis+sentinel://h:1/m/99", &o, PATIENT)
        .await
        .unwrap_err()
        .with_causes();
    assert!(e.contains("db"), "{e}");
}
