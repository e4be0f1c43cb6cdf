//! Basic behaviour of the Redis store against a real `redis-server`: a check,
//! a rejection, peek, reset, ping, the key layout and the TTL.

use redis::Commands;
use slidelog_core::{Limit, Mode, Now, Request, Store, StoreError};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::Duration;

async fn store(server: &RedisServer, prefix: &str) -> RedisStore {
    // The default per-call timeout is 100 ms; these tests check behaviour on
    // a busy CI machine, so they allow more.
    assert_eq!(RedisOptions::default().timeout, Duration::from_millis(100));
    let options = RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(Duration::from_secs(5));
    RedisStore::connect(&server.url(), options)
        .await
        .expect("connect")
}

#[tokio::test]
async fn checks_reject_at_max_and_keep_the_original_layout() {
    let server = RedisServer::start();
    let prefix = unique_prefix("basic");
    let store = store(&server, &prefix).await;
    let request = Request::single("user123", Limit::new(2, 60_000).unwrap()).unwrap();
    let first = store.check(&request).await.unwrap();
    assert!(first.allowed);
    assert_eq!(
        (first.limit, first.window_ms, first.count, first.remaining),
        (2, 60_000, 1, 1)
    );
    assert_eq!(first.reset_after_ms, 60_000);
    assert!(store.check(&request).await.unwrap().allowed);
    let third = store.check(&request).await.unwrap();
    assert!(!third.allowed);
    assert_eq!((third.count, third.remaining), (2, 0));
    assert!(third.retry_after_ms > 59_000 && third.retry_after_ms <= 60_000);

    // The layout: a sorted set at prefix + key, scores in ms, ULID members, a TTL in ms.
    let mut c = server.client();
    let key = format!("{prefix}user123");
    let scores: Vec<(String, f64)> = c.zrange_withscores(&key, 0, -1).unwrap();
    assert_eq!(scores.len(), 2);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    for (member, score) in &scores {
        assert_eq!(member.len(), 26, "a ULID: {member}");
        assert!((score - now_ms).abs() < 10_000.0, "a ms timestamp: {score}");
    }
    let pttl: i64 = c.pttl(&key).unwrap();
    assert!(pttl > 55_000 && pttl <= 60_000, "{pttl}");

    // Peek appends nothing; reset deletes; ping answers.
    let peek = store.peek(&request).await.unwrap();
    assert!(!peek.allowed);
    assert_eq!(c.zcard::<_, i64>(&key).unwrap(), 2);
    assert!(store.reset("user123").await.unwrap());
    assert!(!store.reset("user123").await.unwrap());
    assert!(store.check(&request).await.unwrap().allowed);
    store.ping().await.unwrap();
    assert_eq!(store.kind(), "redis");
}

#[tokio::test]
async fn explicit_time_is_used_as_given() {
    let server = RedisServer::start();
    let store = store(&server, &unique_prefix("basic")).await;
    let r = Request::single("k", Limit::new(1, 60_000).unwrap()).unwrap();
    let at = |ms| Now::At(ms);
    assert!(
        store
            .decide(&r, Mode::Record, at(1_000_000))
            .await
            .unwrap()
            .allowed
    );
    let d = store.decide(&r, Mode::Record, at(1_059_999)).await.unwrap();
    assert_eq!((d.allowed, d.retry_after_ms), (false, 1));
    assert!(
        store
            .decide(&r, Mode::Record, at(1_060_000))
            .await
            .unwrap()
            .allowed
    );
    let e = store
        .decide(&r, Mode::Record, at(1 << 60))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Backend(_)), "{e}");
}
