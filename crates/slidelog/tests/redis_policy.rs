//! The layer and the limiter on a real Redis (a `redis-server` this test
//! starts on a free port): exact admissions under concurrency through an axum
//! app, fail-open and fail-closed while Redis is stopped or paused past the
//! timeout, and exact decisions again once it is back, with no restart of
//! the app.

mod common;

use axum::Router;
use axum::extract::Request;
use axum::routing::get;
use common::{client, concurrent_gets, count, serve};
use slidelog::middleware::{Header, RateLimitLayer, RouteLimits};
use slidelog::url::StoreOptions;
use slidelog::{Decision, FailurePolicy, Limit, Limiter, LimiterError, StoreError};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::{Duration, Instant};

async fn echo_degraded(request: Request) -> &'static str {
    match request.extensions().get::<Decision>() {
        Some(d) if d.degraded => "degraded",
        Some(_) => "counted",
        None => "not limited",
    }
}

/// A limiter on `redis` with a generous timeout (the machine is noisy: a
/// timeout must not turn exact decisions into degraded ones).
async fn limiter(redis: &RedisServer, policy: FailurePolicy, test: &str) -> Limiter {
    Limiter::builder()
        .timeout(Duration::from_secs(2))
        .failure_policy(policy)
        .open(
            &redis.url(),
            StoreOptions::default().prefix(unique_prefix(test)),
        )
        .await
        .expect("open the test redis")
}

fn app(limiter: Limiter, max: u64) -> Router {
    let routes = RouteLimits::new([Limit::new(max, 60_000).unwrap()]).unwrap();
    let layer = RateLimitLayer::new(limiter, Header::named("x-api-key").unwrap(), routes);
    Router::new().route("/", get(echo_degraded)).layer(layer)
}

/// Waits (bounded) until the limiter reaches its store again.
async fn until_reachable(limiter: &Limiter) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while limiter.ping().await.is_err() {
        assert!(Instant::now() < deadline, "redis did not come back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_is_exact_on_redis_under_concurrency() {
    let redis = RedisServer::start();
    let limiter = limiter(&redis, FailurePolicy::FailClosed, "layer_exact").await;
    let base = serve(app(limiter, 20)).await;
    let codes = concurrent_gets(&format!("{base}/"), 64, &[("x-api-key", "k")]).await;
    assert_eq!(
        (count(&codes, 200), count(&codes, 429)),
        (20, 44),
        "{codes:?}"
    );
    let r = client()
        .get(format!("{base}/"))
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["ratelimit"].to_str().unwrap().split(';').nth(1),
        Some("r=0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_fails_open_or_closed_then_exact_again_when_restarted() {
    let mut redis = RedisServer::start();
    let open = limiter(&redis, FailurePolicy::FailOpen, "stopped_open").await;
    let closed = limiter(&redis, FailurePolicy::FailClosed, "stopped_closed").await;
    let open_base = serve(app(open.clone(), 3)).await;
    let closed_base = serve(app(closed.clone(), 3)).await;
    let http = client();
    let get = |base: &str, key: &str| {
        http.get(format!("{base}/"))
            .header("x-api-key", key.to_owned())
            .send()
    };

    for base in [&open_base, &closed_base] {
        let r = get(base, "before").await.unwrap();
        assert_eq!(r.text().await.unwrap(), "counted");
    }

    redis.kill();
    let started = Instant::now();
    for _ in 0..3 {
        let r = get(&open_base, "during").await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("ratelimit").is_none());
        assert_eq!(r.text().await.unwrap(), "degraded");
        let r = get(&closed_base, "during").await.unwrap();
        assert_eq!(r.status(), 503);
        assert!(r.text().await.unwrap().contains("rate limiter unavailable"));
    }
    // A stopped store never hangs callers: six answers take at most six
    // timeouts of 2 s (a refused connection is answered at once).
    assert!(
        started.elapsed() < Duration::from_secs(13),
        "{:?}",
        started.elapsed()
    );

    redis.restart();
    until_reachable(&open).await;
    until_reachable(&closed).await;
    for base in [&open_base, &closed_base] {
        let codes = concurrent_gets(&format!("{base}/"), 8, &[("x-api-key", "after")]).await;
        assert_eq!(
            (count(&codes, 200), count(&codes, 429)),
            (3, 5),
            "{codes:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_slower_than_the_timeout_is_a_store_failure() {
    let redis = RedisServer::start();
    let timeout = Duration::from_millis(300);
    let open = Limiter::builder()
        .timeout(timeout)
        .fail_open()
        .open(
            &redis.url(),
            StoreOptions::default().prefix(unique_prefix("paused")),
        )
        .await
        .unwrap();
    let closed = Limiter::builder()
        .timeout(timeout)
        .fail_closed()
        .open(
            &redis.url(),
            StoreOptions::default().prefix(unique_prefix("paused")),
        )
        .await
        .unwrap();
    let limits = [Limit::new(5, 60_000).unwrap()];
    assert!(!open.check("k", &limits, 1).await.unwrap().degraded);

    // Every client of this server waits 3 s: longer than the timeout.
    let mut admin = redis.client();
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "3000", "ALL"])
        .query(&mut admin)
        .unwrap();
    let started = Instant::now();
    let d = open.check("k", &limits, 1).await.unwrap();
    assert!(d.allowed && d.degraded);
    let err = closed.check("k", &limits, 1).await.unwrap_err();
    // The call's own timeout, or the same timeout met first by the
    // limiter's probe (started when the limiter was built: on a loaded
    // machine its PING can meet the pause), which then answers it as
    // known down.
    assert!(
        matches!(&err, LimiterError::Store(StoreError::Timeout(_)))
            || matches!(&err, LimiterError::Store(StoreError::Unavailable(m)) if m.contains("timed out")),
        "{err:?}"
    );
    // Both answered within about their timeout, not after the pause.
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "{:?}",
        started.elapsed()
    );

    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut admin)
        .unwrap();
    until_reachable(&closed).await;
    let d = closed.check("fresh", &limits, 5).await.unwrap();
    assert!(d.allowed && !d.degraded && d.remaining == 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_limiter_opens_while_redis_is_down_and_decides_exactly_once_it_is_up() {
    let mut redis = RedisServer::start();
    redis.kill();
    let limiter = Limiter::builder()
        .timeout(Duration::from_secs(2))
        .fail_open()
        .open(
            &redis.url(),
            StoreOptions::default()
                .prefix(unique_prefix("lazy"))
                .connect_timeout(Duration::from_millis(500))
                .lazy_connect(),
        )
        .await
        .expect("a lazy limiter opens without Redis");
    let limits = [Limit::new(2, 60_000).unwrap()];
    let d = limiter.check("k", &limits, 1).await.unwrap();
    assert!(d.allowed && d.degraded);

    redis.restart();
    until_reachable(&limiter).await;
    let allowed: Vec<bool> = {
        let mut out = Vec::new();
        for _ in 0..3 {
            let d = limiter.check("k", &limits, 1).await.unwrap();
            assert!(!d.degraded);
            out.push(d.allowed);
        }
        out
    };
    assert_eq!(allowed, [true, true, false]);
}
