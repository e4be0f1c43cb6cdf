//! `Limiter::until_ready` with a real Redis down (docs/design.md §6):
//! fail-closed errors at the deadline (not before, and after it by less
//! than one store timeout), fail-open answers degraded at once. A binary of
//! its own: the timing it asserts is not shared with other tests' load.

use slidelog::url::StoreOptions;
use slidelog::{FailurePolicy, Limit, Limiter, Wait, WaitError};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::{Duration, Instant};

async fn on_redis(redis: &RedisServer, policy: FailurePolicy, test: &str) -> Limiter {
    Limiter::builder()
        .timeout(Duration::from_millis(100))
        .failure_policy(policy)
        .open(
            &redis.url(),
            StoreOptions::default().prefix(unique_prefix(test)),
        )
        .await
        .expect("open the test redis")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_fail_closed_errors_at_the_deadline_and_fail_open_says_degraded() {
    let mut redis = RedisServer::start();
    let closed = on_redis(&redis, FailurePolicy::FailClosed, "wait-closed").await;
    let open = on_redis(&redis, FailurePolicy::FailOpen, "wait-open").await;
    let limits = [Limit::new(5, 1_000).unwrap()];
    let deadline = Duration::from_millis(1_500);
    closed
        .until_ready("k", &limits, 1, Wait::up_to(deadline))
        .await
        .unwrap();
    redis.kill();
    for _ in 0..3 {
        let started = Instant::now();
        let answer = closed
            .until_ready("k", &limits, 1, Wait::up_to(deadline))
            .await;
        let took = started.elapsed();
        assert!(
            matches!(answer, Err(WaitError::Store(ref e)) if e.is_transient()),
            "{answer:?}"
        );
        // Not before the deadline; after it by less than one store timeout
        // (the bound of a call in flight) and scheduling on a loaded machine.
        assert!(
            took >= deadline && took < deadline + Duration::from_millis(300),
            "{took:?}"
        );
    }
    let started = Instant::now();
    let d = open
        .until_ready("k", &limits, 1, Wait::up_to(deadline))
        .await
        .unwrap();
    assert!(d.allowed && d.degraded, "{d:?}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
}
