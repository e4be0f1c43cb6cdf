//! The store's engine choice (docs/design.md §4.4) on real servers:
//! `engine=auto` decides through the module where the server has it and
//! through the scripts where it does not; `engine=module` refuses to open on
//! a server without it (a misconfiguration naming the module and how to load
//! it), and a lazily opened one answers misconfigured; the scripts hand a
//! key the module converted to `SLIDELOG.CHECK` (single-limit and general
//! script, check and peek), so a key decided by both engines in turn is
//! never admitted beyond its limit.

use slidelog_core::{Limit, Mode, Now, Request, Store, StoreError};
use slidelog_redis::{ConnectError, Engine, RedisEngine, RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::time::Duration;

fn options(test: &str) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(unique_prefix(test))
        .with_timeout(Duration::from_secs(5))
}

async fn open(server: &RedisServer, engine: &str, test: &str) -> RedisStore {
    RedisStore::connect(&format!("{}?engine={engine}", server.url()), options(test))
        .await
        .unwrap_or_else(|e| panic!("connect with engine={engine}: {e}"))
}

fn key_type(server: &RedisServer, key: &[u8]) -> String {
    redis::cmd("TYPE")
        .arg(key)
        .query(&mut server.client())
        .unwrap()
}

#[tokio::test]
async fn auto_without_the_module_decides_through_the_scripts() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), options("auto-plain"))
        .await
        .unwrap();
    assert_eq!(store.requested_engine(), RedisEngine::Auto);
    assert_eq!(store.engine_in_use(), Some(Engine::Script));
    let r = Request::single("k", Limit::new(2, 60_000).unwrap()).unwrap();
    assert!(store.check(&r).await.unwrap().allowed);
    assert_eq!(key_type(&server, &store.redis_key("k")), "zset");
}

#[tokio::test]
async fn auto_with_the_module_decides_through_it_on_redis_and_valkey() {
    for kind in ServerKind::ALL {
        let server = RedisServer::start_with_module(kind, &[]);
        let store = RedisStore::connect(&server.url(), options("auto-module"))
            .await
            .unwrap();
        assert_eq!(store.engine_in_use(), Some(Engine::Module), "{kind}");
        let r = Request::single("k", Limit::new(2, 60_000).unwrap()).unwrap();
        assert!(store.check(&r).await.unwrap().allowed);
        assert_eq!(
            key_type(&server, &store.redis_key("k")),
            "slide-log",
            "{kind}"
        );
        // engine=script on the same server keeps to the scripts.
        let scripts = open(&server, "script", "script-on-module").await;
        assert_eq!(scripts.engine_in_use(), Some(Engine::Script));
        scripts.check(&r).await.unwrap();
        assert_eq!(key_type(&server, &scripts.redis_key("k")), "zset");
    }
}

#[tokio::test]
async fn module_without_the_module_refuses_to_open() {
    let server = RedisServer::start();
    let url = format!("{}?engine=module", server.url());
    let e = RedisStore::connect(&url, options("refuse"))
        .await
        .expect_err("engine=module on a server without the module must not open");
    let ConnectError::Connect {
        transient, reason, ..
    } = &e
    else {
        panic!("not a connect error: {e}");
    };
    assert!(!transient, "a missing module is not transient: {e}");
    assert!(
        reason.contains("SLIDELOG.CHECK") && reason.contains("--loadmodule"),
        "{reason}"
    );
    assert!(reason.contains("libslidelog_module.so"), "{reason}");
}

#[tokio::test]
async fn a_lazy_module_store_without_the_module_answers_misconfigured() {
    let server = RedisServer::start();
    let url = format!("{}?engine=module", server.url());
    let store = RedisStore::connect_lazy(&url, options("lazy-refuse")).unwrap();
    let r = Request::single("k", Limit::new(2, 60_000).unwrap()).unwrap();
    let started = std::time::Instant::now();
    loop {
        match store.check(&r).await {
            Err(StoreError::Misconfigured(reason)) => {
                assert!(reason.contains("--loadmodule"), "{reason}");
                break;
            }
            Ok(d) => panic!("decided without the module: {d:?}"),
            Err(e) if started.elapsed() < Duration::from_secs(5) => {
                // The first calls go out before the answer is known.
                assert!(!e.is_transient(), "{e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("never reported as misconfigured: {e}"),
        }
    }
    // Nothing was written.
    assert_eq!(key_type(&server, &store.redis_key("k")), "none");
}

#[tokio::test]
async fn an_unknown_engine_is_an_invalid_url() {
    let e = RedisStore::connect_lazy("redis://127.0.0.1:1?engine=lua", RedisOptions::default())
        .unwrap_err();
    assert!(matches!(e, ConnectError::InvalidUrl { .. }), "{e}");
    assert!(e.to_string().contains("engine="), "{e}");
}

/// Decides `r` `times` at `at` (explicit time) and returns how many passed.
async fn admitted(store: &RedisStore, r: &Request, at: u64, times: usize) -> usize {
    let mut n = 0;
    for _ in 0..times {
        let d = store.decide(r, Mode::Record, Now::At(at)).await.unwrap();
        n += usize::from(d.allowed);
    }
    n
}

#[tokio::test]
async fn the_scripts_hand_a_module_key_to_the_module_on_redis_and_valkey() {
    for kind in ServerKind::ALL {
        let server = RedisServer::start_with_module(kind, &[]);
        let prefix = unique_prefix("handover");
        let module = RedisStore::connect(
            &format!("{}?engine=module", server.url()),
            options("unused").with_prefix(&prefix),
        )
        .await
        .unwrap();
        let scripts = RedisStore::connect(
            &format!("{}?engine=script", server.url()),
            options("unused").with_prefix(&prefix),
        )
        .await
        .unwrap();
        let t = 1_767_225_600_000;
        // Single limit, cost 1: scripts first (a sorted set the module
        // adopts), then the module, then the single-limit script again.
        let one = Request::single("one", Limit::new(6, 60_000).unwrap()).unwrap();
        assert_eq!(admitted(&scripts, &one, t, 2).await, 2);
        assert_eq!(admitted(&module, &one, t + 1, 2).await, 2);
        assert_eq!(key_type(&server, &module.redis_key("one")), "slide-log");
        let via_script = scripts
            .decide(&one, Mode::Record, Now::At(t + 2))
            .await
            .unwrap();
        let via_module = module
            .decide(&one, Mode::Peek, Now::At(t + 2))
            .await
            .unwrap();
        assert!(via_script.allowed);
        assert_eq!(via_script.count, 5, "{kind}");
        assert_eq!(
            (via_module.count, via_module.remaining),
            (6, 0),
            "{kind}: as if admitted"
        );
        assert_eq!(admitted(&scripts, &one, t + 3, 3).await, 1, "{kind}");
        let full = scripts
            .decide(&one, Mode::Record, Now::At(t + 4))
            .await
            .unwrap();
        let want = module
            .decide(&one, Mode::Record, Now::At(t + 4))
            .await
            .unwrap();
        assert_eq!(
            full, want,
            "{kind}: the single-limit script's translated reply"
        );
        assert_eq!((full.allowed, full.retry_after_ms), (false, 60_000 - 4));
        // The general script: several limits, a cost, a peek.
        let limits = vec![
            Limit::new(3, 1_000).unwrap(),
            Limit::new(10, 60_000).unwrap(),
        ];
        let two = Request::new("two", limits, 2).unwrap();
        assert_eq!(admitted(&module, &two, t, 1).await, 1);
        let peek = scripts
            .decide(&two, Mode::Peek, Now::At(t + 10))
            .await
            .unwrap();
        assert_eq!(
            peek,
            module
                .decide(&two, Mode::Peek, Now::At(t + 10))
                .await
                .unwrap()
        );
        assert!(!peek.allowed, "{kind}: 2 + 2 > 3 in the first limit");
        assert_eq!(admitted(&scripts, &two, t + 1_000, 2).await, 1, "{kind}");
        assert_eq!(key_type(&server, &module.redis_key("two")), "slide-log");
        let after = module
            .decide(&two, Mode::Peek, Now::At(t + 1_001))
            .await
            .unwrap();
        assert_eq!(
            after.count, 2,
            "{kind}: the first limit holds the one record at t + 1000"
        );
        // Server time through the delegation too.
        let now = Request::single("now", Limit::new(1, 60_000).unwrap()).unwrap();
        assert!(module.check(&now).await.unwrap().allowed);
        assert!(!scripts.check(&now).await.unwrap().allowed, "{kind}");
    }
}

#[tokio::test]
async fn a_reset_deletes_a_module_log() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let store = open(&server, "module", "reset").await;
    let r = Request::single("k", Limit::new(1, 60_000).unwrap()).unwrap();
    assert!(store.check(&r).await.unwrap().allowed);
    assert!(!store.check(&r).await.unwrap().allowed);
    assert!(store.reset("k").await.unwrap());
    assert!(!store.reset("k").await.unwrap());
    assert!(store.check(&r).await.unwrap().allowed);
}
