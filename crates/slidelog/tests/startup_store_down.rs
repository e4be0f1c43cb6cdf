//! Redis down at startup: fail-open covers it (the limiter opens, answers
//! degraded, and decides exactly once a real redis-server comes up on that
//! port); fail-closed fails fast and says the store is unreachable, unless
//! told to connect lazily. The port is one a test server held and gave back
//! (nothing listens); the server is started again on it later.

use slidelog::url::StoreOptions;
use slidelog::{Limit, Limiter, LimiterError};
use slidelog_testkit::RedisServer;
use std::time::{Duration, Instant};

/// A server that listened on a port and is gone: nothing listens there now.
fn redis_down() -> RedisServer {
    let mut redis = RedisServer::start();
    redis.kill();
    redis
}

/// Waits until a check on `limiter` is decided by the store again.
async fn until_exact(limiter: &Limiter, limits: &[Limit]) -> Duration {
    let started = Instant::now();
    loop {
        match limiter.check("probe", limits, 1).await {
            Ok(d) if !d.degraded => return started.elapsed(),
            _ if started.elapsed() > Duration::from_secs(20) => {
                panic!("the limiter never reached the restarted Redis")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test]
async fn fail_open_starts_without_redis_answers_degraded_then_exact() {
    let mut redis = redis_down();
    let started = Instant::now();
    let limiter = Limiter::builder()
        .fail_open()
        .open(&redis.url(), Default::default())
        .await
        .expect("fail-open must open while Redis is down");
    // One refused attempt, not a connect timeout.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let limits = ["2/minute".parse().unwrap()];
    for _ in 0..3 {
        let d = limiter.check("user", &limits, 1).await.unwrap();
        assert!(d.allowed && d.degraded, "{d:?}");
    }
    // Redis comes up on that port: decisions are exact again, and recorded.
    redis.restart();
    let waited = until_exact(&limiter, &limits).await;
    eprintln!("exact again {waited:?} after redis-server started");
    assert!(limiter.check("user", &limits, 1).await.unwrap().allowed);
    assert!(limiter.check("user", &limits, 1).await.unwrap().allowed);
    let third = limiter.check("user", &limits, 1).await.unwrap();
    assert!(!third.allowed && !third.degraded, "{third:?}");
}

#[tokio::test]
async fn fail_closed_fails_fast_and_says_why_unless_lazy() {
    let mut redis = redis_down();
    let started = Instant::now();
    let err = Limiter::builder()
        .fail_closed()
        .open(&redis.url(), Default::default())
        .await
        .expect_err("fail-closed must not open while Redis is down");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(err.is_transient(), "{err}");
    // The message says what failed; its source names the store and why.
    let text = err.with_causes();
    assert!(
        text.contains(&redis.url()) || text.contains(&redis.port().to_string()),
        "{text}"
    );
    assert_eq!(
        text.matches(&redis.port().to_string()).count(),
        1,
        "the store is named once: {text}"
    );
    eprintln!("fail-closed open: {text}");
    // With lazy_connect it starts, and every decision is a store error (503
    // in the layer) until Redis answers.
    let limiter = Limiter::builder()
        .fail_closed()
        .open(&redis.url(), StoreOptions::default().lazy_connect())
        .await
        .expect("lazy_connect opens while Redis is down");
    let limits = ["2/minute".parse().unwrap()];
    let e = limiter.check("user", &limits, 1).await.unwrap_err();
    assert!(
        matches!(e, LimiterError::Store(ref s) if s.is_transient()),
        "{e}"
    );
    redis.restart();
    until_exact(&limiter, &limits).await;
}

#[tokio::test]
async fn a_store_that_refuses_the_configuration_fails_under_either_policy() {
    let redis = RedisServer::start_with_args(&["--requirepass", "right"]);
    let url = format!("redis://:not-it-7f3a@127.0.0.1:{}", redis.port());
    let err = Limiter::builder()
        .fail_open()
        .open(&url, Default::default())
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "{err}");
    let said = err.with_causes();
    assert!(!said.contains("not-it-7f3a"), "password printed: {said}");
    let err = Limiter::builder()
        .fail_closed()
        .open(&url, Default::default())
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "{err}");
}

/// `engine=module` opened while Redis is down, then Redis returns without
/// the module: in every policy the limiter says so — the first decision
/// logs one error naming the module and `--loadmodule`, `store_health()`
/// reports a misconfiguration (never `Up`), and fail-closed answers the
/// misconfiguration as its error.
#[tokio::test]
async fn the_module_engine_on_a_server_without_the_module_is_a_misconfiguration() {
    for fail_open in [true, false] {
        let mut redis = redis_down();
        let url = format!("{}?engine=module", redis.url());
        let builder = Limiter::builder();
        let builder = if fail_open {
            builder.fail_open()
        } else {
            builder.fail_closed()
        };
        let options = StoreOptions {
            lazy_connect: true,
            ..Default::default()
        };
        let limiter = builder
            .open(&url, options)
            .await
            .expect("a lazy store opens");
        redis.restart();
        let limits = ["5/minute".parse::<Limit>().unwrap()];
        let started = Instant::now();
        let cause = loop {
            let answer = limiter.check("user", &limits, 1).await;
            if let slidelog::StoreHealth::Misconfigured { cause } = limiter.store_health() {
                if !fail_open {
                    let err = answer.expect_err("fail-closed answers the misconfiguration");
                    assert!(err.to_string().contains("module"), "{err}");
                }
                break cause;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "fail_open={fail_open}: still {:?} / {answer:?} after 5 s",
                limiter.store_health()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(cause.contains("--loadmodule"), "{cause}");
        assert!(limiter.misconfiguration().is_some());
    }
}
