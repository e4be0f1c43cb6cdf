//! The library facade on the memory store: check, peek and reset through a
//! `Limiter`, input errors named by field, the store-error policy with a store
//! that really fails (a memory store at its key cap), client time on a manual
//! clock, and explicit times for replay.

use slidelog::store::{ManualClock, MemoryStore};
use slidelog::{FailurePolicy, InputError, Limit, Limiter, LimiterError, Mode, Now, Request};
use std::sync::Arc;
use std::time::Duration;

fn limit(max: u64, window_ms: u64) -> Limit {
    Limit::new(max, window_ms).expect("valid limit")
}

#[tokio::test]
async fn check_peek_and_reset_keep_the_rule() {
    let limiter = Limiter::from_url("memory://").await.unwrap();
    let limits = [limit(3, 60_000)];
    let d = limiter.check("k", &limits, 2).await.unwrap();
    assert_eq!((d.allowed, d.count, d.remaining), (true, 2, 1));
    // A peek of cost 2 is refused but records nothing; one of cost 1 fits.
    let p = limiter.peek("k", &limits, 2).await.unwrap();
    assert!(!p.allowed && p.retry_after_ms > 0);
    assert!(limiter.peek("k", &limits, 1).await.unwrap().allowed);
    assert!(limiter.check("k", &limits, 1).await.unwrap().allowed);
    assert!(!limiter.check("k", &limits, 1).await.unwrap().allowed);
    assert!(limiter.reset("k").await.unwrap());
    assert!(!limiter.reset("k").await.unwrap());
    assert_eq!(limiter.check("k", &limits, 3).await.unwrap().remaining, 0);
}

#[tokio::test]
async fn clones_share_one_store() {
    let a = Limiter::memory();
    let b = a.clone();
    let limits = [limit(1, 60_000)];
    assert!(a.check("shared", &limits, 1).await.unwrap().allowed);
    assert!(!b.check("shared", &limits, 1).await.unwrap().allowed);
}

#[tokio::test]
async fn bad_input_is_an_error_naming_the_field_never_a_clamp() {
    let limiter = Limiter::memory();
    let limits = [limit(5, 1_000)];
    let err = limiter.check("", &limits, 1).await.unwrap_err();
    assert!(matches!(err, LimiterError::Input(InputError::EmptyKey)));
    let err = limiter.check("k", &limits, 6).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "cost must be between 1 and 5 (the smallest max of the limits), got 6"
    );
    let err = limiter.check("k", &[], 1).await.unwrap_err();
    assert!(err.to_string().contains("limits"), "{err}");
    let err = limiter.reset(&"k".repeat(513)).await.unwrap_err();
    assert!(err.to_string().contains("512"), "{err}");
    // Input errors are never answered by the fail-open policy.
    assert_eq!(limiter.failure_policy(), FailurePolicy::FailOpen);
}

#[tokio::test]
async fn a_full_store_is_refused_under_either_policy() {
    let limits = [limit(10, 1_000), limit(2, 60_000)];
    for policy in [FailurePolicy::FailOpen, FailurePolicy::FailClosed] {
        let store = Arc::new(MemoryStore::new().with_key_cap(1));
        let limiter = Limiter::builder().failure_policy(policy).build(store);
        assert!(!limiter.check("one", &limits, 1).await.unwrap().degraded);
        // A full store is not an outage: fail-open does not admit past it.
        let second = limiter.check("two", &limits, 1).await.unwrap_err();
        assert!(
            second.to_string().contains("store full"),
            "{policy:?}: {second}"
        );
        // Existing keys are still decided exactly.
        assert_eq!(limiter.check("one", &limits, 1).await.unwrap().count, 2);
        // Reset has no policy: its errors are returned (here it succeeds).
        assert!(limiter.reset("one").await.unwrap());
        // With room again, decisions are exact with no restart.
        let d = limiter.check("two", &limits, 1).await.unwrap();
        assert!(d.allowed && !d.degraded);
    }
}

#[tokio::test]
async fn client_time_follows_the_given_clock() {
    let clock = ManualClock::new(1_000_000);
    let limiter = Limiter::builder()
        .clock(Arc::new(clock.clone()))
        .build(Arc::new(MemoryStore::new()));
    let limits = [limit(1, 1_000)];
    assert!(limiter.check("k", &limits, 1).await.unwrap().allowed);
    clock.advance(Duration::from_millis(400));
    let d = limiter.check("k", &limits, 1).await.unwrap();
    assert_eq!((d.allowed, d.retry_after_ms), (false, 600));
    clock.advance(Duration::from_millis(600));
    assert!(limiter.check("k", &limits, 1).await.unwrap().allowed);
}

#[tokio::test]
async fn explicit_times_replay_a_trace() {
    let limiter = Limiter::memory();
    let request = Request::new("trace", vec![limit(2, 100)], 1).unwrap();
    let allowed: Vec<bool> = {
        let mut out = Vec::new();
        for t in [0, 10, 20, 100, 110, 111] {
            let d = limiter
                .decide_at(&request, Mode::Record, Now::At(10_000 + t))
                .await
                .unwrap();
            out.push(d.allowed);
        }
        out
    };
    // 0 and 10 admitted; 20 rejected; at 100 the record of 0 has expired
    // (ts <= now - window), at 110 the one of 10; 111 is over again.
    assert_eq!(allowed, [true, true, false, true, true, false]);
}

#[tokio::test]
async fn an_unknown_store_url_is_an_error_naming_the_schemes() {
    let err = Limiter::from_url("postgres://x").await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("memory://") && msg.contains("redis://"),
        "{msg}"
    );
}

/// A memory store behind another `Store`: the limiter cannot call it
/// directly, so it decides through the trait (a boxed future per call).
#[derive(Debug)]
struct Wrapped(Arc<MemoryStore>);

#[async_trait::async_trait]
impl slidelog::store::Store for Wrapped {
    async fn decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<slidelog::Decision, slidelog::StoreError> {
        self.0.decide(request, mode, now).await
    }
    async fn decide_each(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<slidelog::Detailed, slidelog::StoreError> {
        self.0.decide_each(request, mode, now).await
    }
    async fn reset(&self, key: &str) -> Result<bool, slidelog::StoreError> {
        self.0.reset(key).await
    }
    async fn ping(&self) -> Result<(), slidelog::StoreError> {
        self.0.ping().await
    }
    fn kind(&self) -> &'static str {
        "wrapped"
    }
    fn in_process(&self) -> Option<&dyn slidelog_core::store::InProcess> {
        self.0.in_process()
    }
}

/// The limiter calls its own memory store directly (no task hop): the same
/// answers, on the store's clock or an explicit time, as through the
/// `Store` trait, and the full store's error through the policy alike.
#[tokio::test]
async fn the_memory_store_called_directly_answers_as_through_the_trait() {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let make = || Arc::new(MemoryStore::new().with_key_cap(2).with_clock(clock.clone()));
    let direct = Limiter::from_store(make());
    let wrapped = Limiter::from_store(Arc::new(Wrapped(make())));
    let limits = [limit(2, 1_000), limit(3, 60_000)];
    for step in 0..12u64 {
        clock.advance(Duration::from_millis(150));
        let key = ["a", "b", "c"][(step % 3) as usize];
        let request = Request::new(key, limits.to_vec(), 1).unwrap();
        let now = if step % 4 == 3 {
            Now::At(1_000_000 + step * 150)
        } else {
            Now::Server
        };
        let mode = if step % 5 == 4 {
            Mode::Peek
        } else {
            Mode::Record
        };
        let (d, w) = (
            direct.decide_each_at(&request, mode, now).await,
            wrapped.decide_each_at(&request, mode, now).await,
        );
        assert_eq!(format!("{d:?}"), format!("{w:?}"), "step {step}");
        let (d, w) = (
            direct.decide_at(&request, Mode::Peek, now).await,
            wrapped.decide_at(&request, Mode::Peek, now).await,
        );
        assert_eq!(format!("{d:?}"), format!("{w:?}"), "step {step}");
    }
    // Key "c" found the store full (cap 2) and was refused by both.
    let full = Request::new("c", limits.to_vec(), 1).unwrap();
    assert!(matches!(
        direct.decide_each(&full, Mode::Record).await,
        Err(LimiterError::Store(slidelog::StoreError::Full { .. }))
    ));
    assert_eq!(wrapped.store().kind(), "wrapped");
    assert!(direct.store().in_process().is_some());
}
