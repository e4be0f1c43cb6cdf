//! `Limiter::until_ready`: waiters of one process are served in arrival
//! order, one store call per admission plus at most one per waiter; a wait
//! that cannot succeed fails at once; a dropped waiter records nothing and
//! blocks no one. With a real Redis down: `until_ready_outage.rs` (a binary
//! of its own, so that the thousand waiters here never share its timing).

#[path = "support/counting.rs"]
mod counting;

use counting::Counting;
use slidelog::{Limit, Limiter, Wait, WaitError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The current-thread runtime of `#[tokio::test]` runs spawned tasks in
/// the order they were spawned, so waiter `i` queues before waiter `i + 1`.
#[tokio::test]
async fn a_thousand_waiters_on_one_key_wake_in_order_each_once() {
    let store = Counting::new();
    let limiter = Limiter::from_store(store.clone());
    let limits = [Limit::new(100, 100).unwrap()]; // 1,000 in ~1 s
    let woken = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..1_000 {
        let (limiter, woken) = (limiter.clone(), woken.clone());
        tasks.push(tokio::spawn(async move {
            let wait = Wait::up_to(Duration::from_secs(30));
            let d = limiter.until_ready("k", &limits, 1, wait).await.unwrap();
            assert!(d.allowed && !d.degraded);
            woken.lock().push(i);
        }));
        tokio::task::yield_now().await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let woken = woken.lock().clone();
    assert_eq!(
        woken,
        (0..1_000).collect::<Vec<_>>(),
        "in arrival order, each once"
    );
    let calls = store.calls();
    assert!(
        calls <= 2_000,
        "{calls} store calls for 1,000 admissions and 1,000 waiters"
    );
    println!("1,000 waiters: {calls} store calls");
}

#[tokio::test]
async fn what_can_never_fit_fails_at_once() {
    let limiter = Limiter::memory();
    let limits = [Limit::new(1, 10_000).unwrap()];
    let wait = || Wait::up_to(Duration::from_secs(1));
    let started = Instant::now();
    let over = limiter.until_ready("k", &limits, 2, wait()).await;
    assert!(
        matches!(over, Err(WaitError::InsufficientCapacity(_))),
        "{over:?}"
    );
    limiter.until_ready("k", &limits, 1, wait()).await.unwrap();
    // The unit frees in 10 s, after the deadline.
    let late = limiter.until_ready("k", &limits, 1, wait()).await;
    match late {
        Err(WaitError::TooLate {
            retry_after,
            decision,
            ..
        }) => {
            assert!(retry_after > Duration::from_secs(9) && !decision.allowed)
        }
        other => panic!("{other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_dropped_waiter_records_nothing_and_blocks_no_one() {
    let limiter = Limiter::memory();
    let limits = [Limit::new(1, 300).unwrap()];
    let wait = || Wait::up_to(Duration::from_secs(5));
    limiter.until_ready("k", &limits, 1, wait()).await.unwrap();
    // One asleep until the unit frees, one queued behind it: both dropped.
    let asleep = limiter.until_ready("k", &limits, 1, wait());
    let queued = limiter.until_ready("k", &limits, 1, wait());
    let both = async { tokio::join!(asleep, queued) };
    assert!(
        tokio::time::timeout(Duration::from_millis(100), both)
            .await
            .is_err()
    );
    // The next waiter is served as soon as the unit frees: nothing was recorded.
    let started = Instant::now();
    limiter.until_ready("k", &limits, 1, wait()).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(290),
        "{:?}",
        started.elapsed()
    );
}
