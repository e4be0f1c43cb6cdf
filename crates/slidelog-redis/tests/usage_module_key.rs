//! Settle and charge where the module holds the log (docs/design.md §4.5):
//! a store whose engine is the module sends `SLIDELOG.SETTLE` /
//! `SLIDELOG.CHARGE`, and a store on the scripts meeting a key the module
//! adopted (`usage.lua` answers `MODULEKEY`, having changed nothing) sends
//! them to the module too. A receipt of the scripts' check settles the
//! adopted record (found by its time and costs), a module check's receipt
//! settles, refunds and every limit's state (`decide_each` with `EACH`)
//! agree with `slidelog_core::engine` on a `Log`.

use slidelog_core::engine::{self, Log};
use slidelog_core::{Limit, Mode, Now, Receipt, RecordRef, Request, Store};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::time::Duration;

#[tokio::test]
async fn a_key_the_module_holds_settles_and_charges_through_the_module() {
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
    let usage = |costs: &[u64]| Request::usage("k", limits.clone(), costs.to_vec()).unwrap();
    let mut model = Log::new();
    // At most an hour past the server clock: the module refuses later times.
    let t0 = 1_767_225_600_000u64;

    // A check through the scripts: a sorted set and a receipt naming its member.
    let check = Request::with_costs("k", limits.clone(), vec![1, 100]).unwrap();
    let d = scripts
        .decide(&check, Mode::Record, Now::At(t0))
        .await
        .unwrap();
    engine::decide_and_record(&mut model, t0, &check);
    let receipt = Receipt::new(&check, d.record.unwrap());
    // The module adopts the sorted set on its first touch.
    let big = Request::with_costs("k", limits.clone(), vec![1, 250]).unwrap();
    let d = module
        .decide(&big, Mode::Peek, Now::At(t0 + 1))
        .await
        .unwrap();
    assert_eq!((d.allowed, d.limit, d.count), (false, 300, 100));

    // The scripts' store settles the adopted record through the module.
    let s = scripts
        .settle(&usage(&[1, 10]), &receipt, Now::At(t0 + 2))
        .await
        .unwrap();
    let want = engine::settle(&mut model, t0 + 2, &usage(&[1, 10]), &receipt);
    assert!(s.settled);
    assert_eq!((s.decision, &s.limits), (want.decision, &want.limits));
    assert_eq!(s.limits[1].counts.unwrap().count, 10, "every limit's state");
    // Settled once: the same receipt names no record now (its costs changed).
    let again = module
        .settle(&usage(&[1, 50]), &receipt, Now::At(t0 + 3))
        .await
        .unwrap();
    assert!(!again.settled);

    // A charge through either store, above the token limit's max.
    let c = scripts
        .charge(&usage(&[1, 400]), Now::At(t0 + 4))
        .await
        .unwrap();
    let want = engine::charge(&mut model, t0 + 4, &usage(&[1, 400]));
    assert_eq!(c, want);
    assert_eq!((c.decision.allowed, c.decision.count), (false, 410));
    let charged = Receipt::new(&usage(&[1, 400]), c.decision.record.unwrap());
    // Refund it: the token limit has room again.
    let r = module
        .settle(&usage(&[0]), &charged, Now::At(t0 + 5))
        .await
        .unwrap();
    let want = engine::settle(&mut model, t0 + 5, &usage(&[0]), &charged);
    assert!(r.settled && r.decision.record.is_none());
    assert_eq!((r.decision, &r.limits), (want.decision, &want.limits));

    // A module check's receipt (named by its time and costs) settles down.
    let check = Request::with_costs("k", limits.clone(), vec![1, 200]).unwrap();
    let d = module
        .decide(&check, Mode::Record, Now::At(t0 + 6))
        .await
        .unwrap();
    engine::decide_and_record(&mut model, t0 + 6, &check);
    assert_eq!(
        d.record,
        Some(RecordRef {
            ts: t0 + 6,
            id: None
        })
    );
    let receipt = Receipt::new(&check, d.record.unwrap());
    let s = module
        .settle(&usage(&[1, 0]), &receipt, Now::At(t0 + 7))
        .await
        .unwrap();
    let want = engine::settle(&mut model, t0 + 7, &usage(&[1, 0]), &receipt);
    assert!(s.settled);
    assert_eq!((s.decision, &s.limits), (want.decision, &want.limits));

    // Every limit's state from the module (SLIDELOG.CHECK ... EACH).
    let peek = Request::with_costs("k", limits.clone(), vec![1, 5]).unwrap();
    let each = module
        .decide_each(&peek, Mode::Peek, Now::At(t0 + 8))
        .await
        .unwrap();
    assert_eq!(each, engine::evaluate_each(&model, t0 + 8, &peek));
    assert!(each.limits.iter().all(|l| l.counts.is_some()));
}

#[tokio::test]
async fn the_module_engine_settles_and_charges_on_valkey() {
    let server = RedisServer::start_with_module(ServerKind::Valkey, &[]);
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("usage-module-valkey"))
        .with_timeout(Duration::from_secs(5));
    let store = RedisStore::connect(&format!("{}?engine=module", server.url()), options)
        .await
        .unwrap();
    let limits = vec![Limit::new(3, 60_000).unwrap()];
    let check = Request::new("v", limits.clone(), 2).unwrap();
    // The server's clock: the receipt carries the time the module used.
    let d = store.check(&check).await.unwrap();
    let receipt = Receipt::new(&check, d.record.unwrap());
    let refund = Request::usage("v", limits.clone(), vec![0]).unwrap();
    let s = store.settle(&refund, &receipt, Now::Server).await.unwrap();
    assert!(s.settled);
    assert_eq!(s.decision.count, 0);
    let c = store
        .charge(&Request::usage("v", limits, vec![7]).unwrap(), Now::Server)
        .await
        .unwrap();
    assert_eq!((c.decision.allowed, c.decision.count), (false, 7));
}
