//! Settle and charge where the module holds the log (docs/design.md §4.5):
//! until the module has SLIDELOG.SETTLE / SLIDELOG.CHARGE, a store whose
//! engine is the module, and the scripts meeting a key the module adopted,
//! refuse with `StoreError::Unsupported` and change nothing.

use slidelog_core::{Limit, Mode, Now, Receipt, Request, Store, StoreError};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::time::Duration;

#[tokio::test]
async fn a_key_the_module_holds_is_refused_as_unsupported() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("usage-module"))
        .with_timeout(Duration::from_secs(5));
    let url = |engine: &str| format!("{}?engine={engine}", server.url());
    let scripts = RedisStore::connect(&url("script"), options.clone())
        .await
        .unwrap();
    let module = RedisStore::connect(&url("module"), options.clone())
        .await
        .unwrap();
    let limits = vec![
        Limit::new(5, 60_000).unwrap(),
        Limit::new(300, 60_000).unwrap(),
    ];
    let check = Request::with_costs("k", limits.clone(), vec![1, 100]).unwrap();
    let d = scripts.check(&check).await.unwrap();
    let receipt = Receipt::new(&check, d.record.unwrap());
    // The module adopts the sorted set on its first touch.
    // A peek the token limit decides (100 live + 250 > 300): 100 live.
    let big = Request::with_costs("k", limits.clone(), vec![1, 250]).unwrap();
    let d = module.decide(&big, Mode::Peek, Now::Server).await.unwrap();
    assert_eq!((d.allowed, d.limit, d.count), (false, 300, 100));
    let usage = Request::usage("k", limits.clone(), vec![1, 10]).unwrap();
    for store in [&scripts, &module] {
        let settle = store.settle(&usage, &receipt, Now::Server).await;
        assert!(
            matches!(
                settle,
                Err(StoreError::Unsupported {
                    operation: "settle",
                    ..
                })
            ),
            "{settle:?}"
        );
        let charge = store.charge(&usage, Now::Server).await;
        assert!(
            matches!(
                charge,
                Err(StoreError::Unsupported {
                    operation: "charge",
                    ..
                })
            ),
            "{charge:?}"
        );
    }
    let d = module.decide(&big, Mode::Peek, Now::Server).await.unwrap();
    assert_eq!((d.limit, d.count), (300, 100), "nothing changed");
}
