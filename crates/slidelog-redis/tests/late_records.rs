//! A check that timed out is never recorded later
//! (docs/design.md §6). Before the fix, 60 checks sent during a 5 s SIGSTOP of Redis all
//! timed out, yet ZCARD was 60 after SIGCONT: Redis ran its backlog and
//! recorded them, using up quota for requests that were refused or admitted
//! degraded. Each check now carries a deadline the script compares with
//! Redis TIME. The late-record counters are the store's own.

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn checks_that_timed_out_during_a_sigstop_are_never_recorded() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("late");
    let options = RedisOptions::default()
        .with_prefix(prefix.clone())
        .with_timeout(Duration::from_millis(100));
    let store = Arc::new(RedisStore::connect(&redis.url(), options).await.unwrap());
    let request = Request::single("k", Limit::new(1_000, 60_000).unwrap()).unwrap();
    // Two recorded before the stop.
    for _ in 0..2 {
        assert!(store.check(&request).await.unwrap().allowed);
    }
    redis.pause();
    // 60 checks over ~5 s, from 4 tasks, every one timing out.
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (store, request) = (store.clone(), request.clone());
        tasks.push(tokio::spawn(async move {
            let mut timed_out = 0;
            for _ in 0..15 {
                let e = store.check(&request).await.expect_err("Redis is stopped");
                assert!(e.is_transient(), "{e}");
                timed_out += 1;
                tokio::time::sleep(Duration::from_millis(230)).await;
            }
            timed_out
        }));
    }
    let mut timed_out = 0;
    for t in tasks {
        timed_out += t.await.unwrap();
    }
    redis.resume();
    assert_eq!(timed_out, 60);
    // Let Redis run its backlog, and the late-reply window pass.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let records: u64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}k"))
        .query(&mut redis.client())
        .unwrap();
    println!(
        "records after SIGCONT: {records} (2 before the stop); late records {}, unknown outcomes {}",
        store.stats().late_records,
        store.stats().unknown_outcomes
    );
    assert_eq!(records, 2, "checks that timed out were recorded later");
    assert_eq!(store.stats().late_records, 0);
    // Decisions come from Redis again, and record.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while store.check(&request).await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "no decision after SIGCONT"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
