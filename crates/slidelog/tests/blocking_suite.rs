//! The shared behavioural suite (docs/design.md §1–§2) through the blocking
//! limiter (`slidelog::blocking::Limiter`), on the memory store and on a
//! real Redis started by the testkit: a `Store` adapter runs each blocking
//! call in `spawn_blocking`, as an async program would call it.

use slidelog::store::Store;
use slidelog::url::StoreOptions;
use slidelog::{
    Checks, Decision, Detailed, JointDecision, Limiter, LimiterError, Mode, Now, Request,
    StoreError, blocking,
};
use std::sync::Arc;
use std::time::Duration;

/// The blocking limiter as a store.
#[derive(Debug)]
struct Blocking(blocking::Limiter);

/// A store error as it is; the suite never sends bad input.
fn store_error(e: LimiterError) -> StoreError {
    match e {
        LimiterError::Store(e) => e,
        LimiterError::Input(e) => panic!("the suite sent bad input: {e}"),
    }
}

/// Runs `call` on the blocking limiter in a blocking thread.
async fn off_thread<T: Send + 'static>(
    limiter: &blocking::Limiter,
    call: impl FnOnce(&blocking::Limiter) -> Result<T, LimiterError> + Send + 'static,
) -> Result<T, StoreError> {
    let limiter = limiter.clone();
    let answer = tokio::task::spawn_blocking(move || call(&limiter));
    answer.await.expect("blocking call").map_err(store_error)
}

#[async_trait::async_trait]
impl Store for Blocking {
    async fn decide(&self, r: &Request, mode: Mode, now: Now) -> Result<Decision, StoreError> {
        let r = r.clone();
        off_thread(&self.0, move |l| l.decide_at(&r, mode, now)).await
    }

    async fn decide_each(&self, r: &Request, mode: Mode, now: Now) -> Result<Detailed, StoreError> {
        let r = r.clone();
        off_thread(&self.0, move |l| l.decide_each_at(&r, mode, now)).await
    }

    async fn decide_all(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        let checks = checks.clone();
        off_thread(&self.0, move |l| l.decide_all_at(&checks, mode, now)).await
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        let key = key.to_owned();
        off_thread(&self.0, move |l| l.reset(&key)).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        off_thread(&self.0, |l| l.ping()).await
    }

    fn kind(&self) -> &'static str {
        "blocking"
    }
}

/// Fail-closed: a store error reaches the suite instead of a degraded admission.
fn builder() -> slidelog::LimiterBuilder {
    Limiter::builder()
        .fail_closed()
        // Behaviour, not latency: generous for a busy CI machine.
        .timeout(Duration::from_secs(5))
}

mod memory {
    use super::*;

    slidelog_testkit::store_suite!(|| async {
        let store = Arc::new(slidelog::store::MemoryStore::new());
        let limiter = tokio::task::spawn_blocking(|| blocking::Limiter::build(builder(), store));
        let limiter = limiter.await.unwrap().expect("blocking limiter");
        (Arc::new(Blocking(limiter)) as Arc<dyn Store>, ())
    });
}

mod redis {
    use super::*;
    use slidelog_testkit::{RedisServer, unique_prefix};

    slidelog_testkit::store_suite!(|| async {
        let server = RedisServer::start();
        let (url, prefix) = (server.url(), unique_prefix("blocking-suite"));
        let open = move || {
            blocking::Limiter::open(builder(), &url, StoreOptions::default().prefix(prefix))
        };
        let limiter = tokio::task::spawn_blocking(open).await.unwrap();
        let limiter = limiter.expect("blocking limiter on redis");
        (Arc::new(Blocking(limiter)) as Arc<dyn Store>, server)
    });
}

#[test]
fn a_blocking_worker_waits_for_room_without_a_runtime_of_its_own() {
    let limiter = blocking::Limiter::memory().unwrap();
    let limits = ["2/200ms".parse().unwrap()];
    let started = std::time::Instant::now();
    for _ in 0..6 {
        let wait = slidelog::Wait::up_to(Duration::from_secs(2));
        let d = limiter.until_ready("job", &limits, 1, wait).unwrap();
        assert!(d.allowed && !d.degraded);
    }
    // Units 5 and 6 wait for units 3 and 4, 200 ms after 1 and 2.
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
}
