//! The Redis store when Redis misbehaves: NOSCRIPT after `SCRIPT FLUSH` and
//! after a restart; Redis killed (calls fail within the timeout, never hang,
//! with transient errors) and restarted (exact again without a new store);
//! Redis down when the store is opened lazily.

mod common;

use slidelog_core::{Limit, Request, Store, StoreError};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn limit(max: u64) -> Request {
    Request::single("k", Limit::new(max, 60_000).unwrap()).unwrap()
}

/// Checks until one succeeds, at most `within`.
async fn until_ok(store: &RedisStore, r: &Request, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        match store.check(r).await {
            Ok(_) => return started.elapsed(),
            Err(e) => {
                assert!(e.is_transient(), "{e}");
                assert!(started.elapsed() < within, "not back after {within:?}: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// `n` concurrent checks; how many were admitted.
async fn admitted(store: &RedisStore, r: &Request, n: usize) -> usize {
    let store = Arc::new(store.clone());
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (store, r) = (store.clone(), r.clone());
            tokio::spawn(async move { store.check(&r).await.unwrap().allowed })
        })
        .collect();
    let mut yes = 0;
    for t in tasks {
        yes += usize::from(t.await.unwrap());
    }
    yes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_is_recovered_by_reloading_the_script() {
    let server = RedisServer::start();
    let store = common::store(&server, "flush").await;
    let r = limit(3);
    assert!(store.check(&r).await.unwrap().allowed);
    let mut c = server.client();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    // A check of one limit runs the single-limit script, a peek the
    // general one: both are loaded again after the flush.
    let d = store.check(&r).await.unwrap();
    assert_eq!((d.allowed, d.count), (true, 2));
    let p = store.peek(&r).await.unwrap();
    assert_eq!((p.allowed, p.count), (true, 3));
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(slidelog_redis::script::SINGLE.get_hash())
        .arg(slidelog_redis::script::SCRIPT.get_hash())
        .query(&mut c)
        .unwrap();
    assert_eq!(exists, vec![true, true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_redis_fails_fast_and_a_restart_is_exact_again() {
    let mut server = RedisServer::start();
    let timeout = Duration::from_millis(100);
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("kill"))
        .with_timeout(timeout);
    // `store` has a short timeout, to show calls fail fast; `patient`, made
    // before the kill too, checks exactness afterwards without flaking on a
    // busy machine.
    let patient = common::store_with(&server, options.clone().with_timeout(common::PATIENT)).await;
    let store = common::store_with(&server, options).await;
    let r = limit(5);
    assert!(patient.check(&r).await.unwrap().allowed);

    server.kill();
    for _ in 0..10 {
        let started = Instant::now();
        let e = store.check(&r).await.unwrap_err();
        let took = started.elapsed();
        assert!(e.is_transient(), "{e}");
        assert!(took < Duration::from_secs(1), "took {took:?}: {e}");
        assert!(
            matches!(e, StoreError::Timeout(_) | StoreError::Unavailable(_)),
            "{e}"
        );
        let started = Instant::now();
        assert!(store.ping().await.is_err());
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    // Restarted (empty, no scripts loaded): the same store is exact again.
    server.restart();
    let probe = Request::single("probe", Limit::new(1_000, 60_000).unwrap()).unwrap();
    until_ok(&store, &probe, Duration::from_secs(10)).await;
    until_ok(&patient, &probe, Duration::from_secs(10)).await;
    assert_eq!(admitted(&patient, &limit(5), 40).await, 5);
    let mut c = server.client();
    let n: i64 = redis::cmd("ZCARD")
        .arg(patient.redis_key("k"))
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_while_redis_is_down_works_once_it_is_up() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    // An eager connect fails, quickly and transiently.
    let started = Instant::now();
    let options = RedisOptions {
        connect_timeout: Duration::from_millis(300),
        ..RedisOptions::default()
            .with_prefix(unique_prefix("down"))
            .with_timeout(Duration::from_millis(300))
    };
    let e = RedisStore::connect(&url, options.clone())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{e}");
    assert!(
        matches!(
            e,
            slidelog_redis::ConnectError::Connect {
                transient: true,
                ..
            }
        ),
        "{e}"
    );
    // A lazy store answers with transient errors until Redis is up.
    let store = RedisStore::connect_lazy(&url, options).unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        assert!(store.check(&limit(2)).await.unwrap_err().is_transient());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
    server.restart();
    let probe = Request::single("probe", Limit::new(1_000, 60_000).unwrap()).unwrap();
    until_ok(&store, &probe, Duration::from_secs(10)).await;
    // Exact once up (retrying a transient error, as a caller would).
    let mut allowed = Vec::new();
    while allowed.len() < 3 {
        match store.check(&limit(2)).await {
            Ok(d) => allowed.push(d.allowed),
            Err(e) => assert!(e.is_transient(), "{e}"),
        }
    }
    assert_eq!(allowed, vec![true, true, false]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_times_out_and_answers_again_when_it_resumes() {
    let server = RedisServer::start();
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("frozen"))
        .with_timeout(Duration::from_millis(100));
    let patient = common::store_with(&server, options.clone().with_timeout(common::PATIENT)).await;
    let store = common::store_with(&server, options).await;
    assert!(patient.check(&limit(3)).await.unwrap().allowed);
    server.pause();
    for _ in 0..5 {
        let started = Instant::now();
        let e = store.check(&limit(3)).await.unwrap_err();
        assert_eq!(e, StoreError::Timeout(Duration::from_millis(100)));
        assert!(e.is_transient());
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
    server.resume();
    let probe = Request::single("probe", Limit::new(1_000, 60_000).unwrap()).unwrap();
    until_ok(&store, &probe, Duration::from_secs(10)).await;
    // The timed-out checks carried a deadline that passed while Redis was
    // frozen: none was applied, and the record that exists is counted. (A
    // peek reports the count as if admitted: live + its cost when allowed.)
    let d = patient.peek(&limit(3)).await.unwrap();
    let mut c = server.client();
    let n: u64 = redis::cmd("ZCARD")
        .arg(patient.redis_key("k"))
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 1, "a timed-out check was recorded after the freeze");
    assert_eq!((d.allowed, d.count), (true, n + 1));
}

#[tokio::test]
async fn wrong_type_is_a_backend_error_not_transient() {
    let server = RedisServer::start();
    let store = common::store(&server, "wrongtype").await;
    let mut c = server.client();
    let _: () = redis::cmd("SET")
        .arg(store.redis_key("k"))
        .arg("x")
        .query(&mut c)
        .unwrap();
    let e = store.check(&limit(1)).await.unwrap_err();
    assert!(matches!(e, StoreError::Backend(_)), "{e}");
    assert!(!e.is_transient());
}
