//! Why the script exists: under concurrency the original's pipelined,
//! non-atomic variant admits more than `max`, while the script on the same
//! Redis and the same load admits exactly `max`.

mod common;

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{RedisOptions, UnsafePipelinedStore};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::sync::Arc;

/// `n` concurrent checks on one key; how many were admitted.
async fn burst(store: Arc<dyn Store>, key: &str, max: u64, n: usize) -> u64 {
    let r = Request::single(key, Limit::new(max, 60_000).unwrap()).unwrap();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (store, r) = (store.clone(), r.clone());
            tokio::spawn(async move { store.check(&r).await.unwrap().allowed })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += u64::from(t.await.unwrap());
    }
    admitted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipelined_variant_overshoots_and_the_script_does_not() {
    let server = RedisServer::start();
    // A generous timeout: 400 calls at once on a debug build on a busy machine.
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("unsafe"))
        .with_timeout(std::time::Duration::from_secs(10));
    let script = common::store_with(&server, options.clone()).await;
    let unsafe_store: Arc<dyn Store> = Arc::new(UnsafePipelinedStore::with_connection(
        script.connection(),
        &options,
    ));
    let script: Arc<dyn Store> = Arc::new(script);
    let (max, n) = (20, 400);
    let mut worst = 0;
    // The race needs interleaving; a few rounds make the demonstration certain.
    for round in 0..5 {
        assert_eq!(
            burst(script.clone(), &format!("s{round}"), max, n).await,
            max
        );
        worst = worst.max(burst(unsafe_store.clone(), &format!("p{round}"), max, n).await);
        if worst > max {
            break;
        }
    }
    assert!(
        worst > max,
        "the pipelined variant admitted {worst} of max {max}"
    );
    assert_eq!(unsafe_store.kind(), "redis-unsafe-pipelined");
}
