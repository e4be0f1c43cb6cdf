//! The module engine on Redis Cluster (docs/design.md §4.3): 3 masters, the
//! module loaded on every node. `SLIDELOG.CHECK` is routed by its key (the
//! module declares the key position), exactness holds across concurrent
//! clients (a killed master: module_cluster_failover.rs), and a sealed
//! receipt's settle (with `SPEND`) goes to its key's master, which refuses
//! its replay. `auto` on a cluster where one primary lacks the module
//! decides through the scripts, and `module` refuses to open naming that
//! node.

mod ha;

use slidelog_core::{Limit, Mode, Now, Receipt, ReceiptError, Request, Spend, Store};
use slidelog_redis::{ClusterStore, ConnectError, Engine, RedisOptions};
use slidelog_testkit::{RedisCluster, module_path, unique_prefix};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_millis(250);

/// A cluster of `masters` masters with `replicas` replicas each; the first
/// `without` nodes of each start attempt have no module (the testkit
/// starts fresh nodes when joining fails).
async fn cluster(masters: usize, replicas: usize, without: usize) -> RedisCluster {
    let path = module_path();
    tokio::task::spawn_blocking(move || {
        let started = AtomicUsize::new(0);
        RedisCluster::start_with_node_args(masters, replicas, &|| {
            let count = masters * (1 + replicas);
            if started.fetch_add(1, Ordering::SeqCst) % count < without {
                Vec::new()
            } else {
                vec!["--loadmodule".into(), path.display().to_string()]
            }
        })
    })
    .await
    .unwrap()
}

async fn connect(
    cluster: &RedisCluster,
    engine: &str,
    prefix: &str,
) -> Result<ClusterStore, ConnectError> {
    let options = RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(TIMEOUT);
    ClusterStore::connect_cluster(&format!("{}?engine={engine}", cluster.url()), options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_max_admitted_on_a_module_cluster() {
    let cluster = cluster(3, 0, 0).await;
    let prefix = unique_prefix("mod-cluster");
    let store = Arc::new(connect(&cluster, "auto", &prefix).await.expect("connect"));
    assert_eq!(store.engine_in_use(), Some(Engine::Module));
    // 16 clients x 10 checks on one key, and on keys of every master.
    for key in ["shared", "a", "b", "c", "d", "e"] {
        let r = Request::single(key, Limit::new(100, 60_000).unwrap()).unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (store, r) = (store.clone(), r.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    for _ in 0..10 {
                        n += usize::from(store.check(&r).await.expect("check").allowed);
                    }
                    n
                })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap();
        }
        assert_eq!(admitted, 100, "{key}");
        assert_eq!(
            store.peek(&r).await.unwrap().count,
            100,
            "{key}: the log holds them"
        );
    }
    ha::differential(
        store.as_ref(),
        &(0..30).map(|i| format!("d{i}")).collect::<Vec<_>>(),
        400,
        5,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_primary_without_the_module_means_the_scripts_or_a_refusal() {
    let cluster = cluster(3, 0, 1).await;
    let prefix = unique_prefix("mod-cluster-partial");
    let store = connect(&cluster, "auto", &prefix)
        .await
        .expect("auto opens");
    assert_eq!(store.engine_in_use(), Some(Engine::Script));
    let r = Request::single("k", Limit::new(1, 60_000).unwrap()).unwrap();
    assert!(store.check(&r).await.unwrap().allowed);
    assert!(!store.check(&r).await.unwrap().allowed);
    let e = connect(&cluster, "module", &prefix)
        .await
        .expect_err("module refuses");
    let ConnectError::Connect {
        transient, reason, ..
    } = &e
    else {
        panic!("{e}");
    };
    assert!(!transient, "{e}");
    assert!(
        reason.contains("--loadmodule") && reason.contains("127.0.0.1:"),
        "{reason}"
    );
}

/// Single use on a module cluster (docs/design.md §4.6): on keys of every
/// master, a receipt with its nonce settles once and its replay is
/// refused as `Spent`, changing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_settles_once_on_a_module_cluster() {
    let cluster = cluster(3, 0, 0).await;
    let prefix = unique_prefix("mod-cluster-spend");
    let store = connect(&cluster, "module", &prefix).await.expect("connect");
    let limits = vec![Limit::new(10, 60_000).unwrap()];
    for (nonce, key) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
        let check = Request::new(key, limits.clone(), 3).unwrap();
        let d = store
            .decide(&check, Mode::Record, Now::Server)
            .await
            .unwrap();
        let record = d.record.expect("admitted");
        let spend = Spend {
            nonce: nonce as u64,
            until_ms: record.ts + 60_000,
        };
        let receipt = Receipt::new(&check, record).with_spend(Some(spend));
        let usage = Request::usage(key, limits.clone(), vec![1]).unwrap();
        let s = store.settle(&usage, &receipt, Now::Server).await.unwrap();
        assert!(s.settled && s.refused.is_none(), "{key}: {s:?}");
        let again = store.settle(&usage, &receipt, Now::Server).await.unwrap();
        assert_eq!(
            (again.settled, again.refused, again.decision.count),
            (false, Some(ReceiptError::Spent), 1),
            "{key}"
        );
    }
}
