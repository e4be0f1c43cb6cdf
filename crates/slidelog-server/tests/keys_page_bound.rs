//! The key browser's bound measured on 1,000,000 keys (docs/design.md §5.3):
//! the slowest page, over a full listing and over pages whose prefix
//! matches nothing (the page's whole budget visited), on the memory store
//! and on Redis. Ignored (it fills a store with a million keys); run with
//! `cargo test --release -p slidelog-server --test keys_page_bound -- --ignored --nocapture`.

use slidelog::store::MemoryStore;
use slidelog::store::Store;
use slidelog::{Limit, Request};
use slidelog_server::app::{App, AppConfig};
use slidelog_server::browse::{self, KeySpace};
use slidelog_testkit::RedisServer;
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: usize = 1_000_000;

/// The slowest page and the pages of a full listing under `prefix`, then
/// the slowest of 20 pages whose prefix matches nothing.
async fn measure(app: &App, what: &str) -> (Duration, Duration) {
    let (mut slowest, mut cursor, mut listed, mut pages) = (Duration::ZERO, None, 0, 0);
    loop {
        let started = Instant::now();
        let page = browse::list(app, "k", cursor.as_deref(), 1000)
            .await
            .unwrap();
        slowest = slowest.max(started.elapsed());
        listed += page.keys.len();
        pages += 1;
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert!(listed >= KEYS, "{what}: listed {listed}");
    let mut empty = Duration::ZERO;
    let mut cursor = None;
    for _ in 0..20 {
        let started = Instant::now();
        let page = browse::list(app, "nothing-matches", cursor.as_deref(), 1000)
            .await
            .unwrap();
        empty = empty.max(started.elapsed());
        assert!(page.keys.is_empty());
        cursor = page.cursor;
    }
    println!(
        "{what}: {listed} keys in {pages} pages of 1000, slowest page {slowest:?}; \
         slowest page matching nothing {empty:?}"
    );
    (slowest, empty)
}

#[tokio::test]
#[ignore = "a measurement: fills a store with 1,000,000 keys"]
async fn a_page_on_a_million_keys_stays_within_its_bound() {
    let store = Arc::new(MemoryStore::new().with_key_cap(KEYS + 10));
    let limit = Limit::new(10, 3_600_000).unwrap();
    for i in 0..KEYS {
        let request = Request::single(format!("k{i}"), limit).unwrap();
        store.check(&request).await.unwrap();
    }
    let app = App::with_memory_store(store, AppConfig::default());
    let (memory_page, memory_empty) = measure(&app, "memory").await;

    let redis = RedisServer::start();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // A million one-record logs, written inside Redis in batches.
    let fill = "for i = ARGV[1], ARGV[2] do redis.call('ZADD', 'rate:sliding:k' .. i, 1767225600000, 'm') \
                redis.call('PEXPIRE', 'rate:sliding:k' .. i, 3600000) end";
    for start in (0..KEYS).step_by(10_000) {
        let _: () = redis::cmd("EVAL")
            .arg(fill)
            .arg(0)
            .arg(start)
            .arg(start + 9_999)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let store =
        slidelog::url::open_store(&redis.url(), &Default::default(), Duration::from_secs(5))
            .await
            .unwrap();
    let config = AppConfig {
        key_space: KeySpace::new(&redis.url(), "rate:sliding:", Duration::from_secs(5)),
        ..AppConfig::default()
    };
    let (redis_page, redis_empty) = measure(&App::new(store, config), "redis").await;
    // The bounds docs/design.md §5.3 states, with room for a loaded machine.
    for (what, took, bound) in [
        ("memory page", memory_page, 50),
        ("memory empty page", memory_empty, 50),
        ("redis page", redis_page, 500),
        ("redis empty page", redis_empty, 500),
    ] {
        assert!(took < Duration::from_millis(bound), "{what}: {took:?}");
    }
}
