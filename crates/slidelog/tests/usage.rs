//! `Limiter::settle` and `Limiter::charge` (docs/design.md §4.6): the
//! rejection cache forgets what a settle frees, bad receipts are named input
//! errors, and a failed settle or charge is reported, never answered by the
//! failure policy.

use slidelog::rejection_cache::RejectionCache;
use slidelog::store::{ManualClock, MemoryStore, Store};
use slidelog::{
    Decision, Detailed, FailurePolicy, InputError, Limit, Limiter, LimiterError, Mode, Now,
    Receipt, ReceiptError, Request, Settled, StoreError,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A memory store seen as a network store (so the limiter caches
/// rejections), on a manual clock, that can be made to fail.
#[derive(Debug)]
struct Remote {
    inner: MemoryStore,
    clock: ManualClock,
    down: AtomicBool,
}

impl Remote {
    fn at(&self, now: Now) -> Result<Now, StoreError> {
        if self.down.load(Ordering::Relaxed) {
            return Err(StoreError::Backend("injected failure".into()));
        }
        Ok(match now {
            Now::Server => Now::At(slidelog::store::Clock::now_ms(&self.clock)),
            at => at,
        })
    }
}

#[async_trait::async_trait]
impl Store for Remote {
    async fn decide(&self, r: &Request, mode: Mode, now: Now) -> Result<Decision, StoreError> {
        self.inner.decide(r, mode, self.at(now)?).await
    }
    async fn settle(&self, r: &Request, rc: &Receipt, now: Now) -> Result<Settled, StoreError> {
        self.inner.settle(r, rc, self.at(now)?).await
    }
    async fn charge(&self, r: &Request, now: Now) -> Result<Detailed, StoreError> {
        self.inner.charge(r, self.at(now)?).await
    }
    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        self.inner.reset(key).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn kind(&self) -> &'static str {
        "remote-memory"
    }
}

fn limiter() -> (Limiter, Arc<Remote>) {
    let clock = ManualClock::new(1_767_225_600_000);
    let store = Arc::new(Remote {
        inner: MemoryStore::new(),
        clock: clock.clone(),
        down: AtomicBool::new(false),
    });
    let cache = RejectionCache::with_clock(1_000, Arc::new(clock));
    let limiter = Limiter::builder()
        .rejection_cache(cache)
        .build(store.clone());
    (limiter, store)
}

fn tokens() -> Vec<Limit> {
    vec![Limit::new(100, 60_000).unwrap()]
}

#[tokio::test]
async fn a_settle_that_frees_units_is_seen_by_the_next_check_not_a_cached_rejection() {
    let (limiter, _) = limiter();
    let request = Request::new("k", tokens(), 100).unwrap();
    let reserved = limiter.decide(&request, Mode::Record).await.unwrap();
    let receipt = limiter.receipt(&request, reserved.record).unwrap();
    // Rejected twice: the second answer is the cache's.
    for _ in 0..2 {
        assert!(!limiter.check("k", &tokens(), 1).await.unwrap().allowed);
    }
    assert!(limiter.rejection_cache().unwrap().stats().local_answers >= 1);
    let settled = limiter.settle("k", &tokens(), &receipt, 30).await.unwrap();
    assert!(settled.settled);
    assert_eq!(
        (settled.decision.count, settled.decision.remaining),
        (30, 70)
    );
    assert!(limiter.check("k", &tokens(), 10).await.unwrap().allowed);
    // A charge takes the key over its max: later checks are rejected.
    let after = limiter.charge("k", &tokens(), 500).await.unwrap().decision;
    assert_eq!((after.allowed, after.count), (false, 540));
    assert!(!limiter.check("k", &tokens(), 1).await.unwrap().allowed);
}

#[tokio::test]
async fn bad_receipts_are_named_input_errors() {
    let (limiter, _) = limiter();
    let request = Request::new("alice", tokens(), 5).unwrap();
    let d = limiter.decide(&request, Mode::Record).await.unwrap();
    let receipt = limiter.receipt(&request, d.record).unwrap();
    let err = |e: LimiterError| match e {
        LimiterError::Input(InputError::Receipt(r)) => r,
        other => panic!("not a receipt error: {other:?}"),
    };
    let e = limiter
        .settle("bob", &tokens(), &receipt, 1)
        .await
        .unwrap_err();
    // The tag covers the key: another key's receipt does not open.
    assert_eq!(err(e), ReceiptError::Forged);
    let other = [Limit::new(100, 1_000).unwrap()];
    let e = limiter
        .settle("alice", &other, &receipt, 1)
        .await
        .unwrap_err();
    assert_eq!(err(e), ReceiptError::OtherLimits);
    // 10,000 forged receipts: each a typed error, none settles anything.
    let mut state = 7u64;
    for i in 0..10_000 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(i);
        let bytes: Vec<u8> = (0..(state % 60) as usize)
            .map(|j| (state >> (j % 56)) as u8)
            .collect();
        let forged = match i % 3 {
            0 => String::from_utf8_lossy(&bytes).into_owned(),
            1 => base64_url(&bytes),
            _ => {
                let mut r = receipt.clone().into_bytes();
                let at = (state as usize) % r.len();
                r[at] = b"AZaz09-_"[(state >> 8) as usize % 8];
                String::from_utf8(r).unwrap()
            }
        };
        match limiter.settle("alice", &tokens(), &forged, 1).await {
            Err(e) => {
                err(e);
            }
            // A changed character may decode to the same receipt (the last
            // character's spare bits): then it is the real one.
            // A changed character may also name another record of this key
            // (the receipt is not a secret): none is there to settle.
            Ok(s) => {
                let opened = |text: &str| limiter.receipt_key().open(text, &request);
                assert!(
                    !s.settled || opened(&forged) == opened(&receipt),
                    "{forged}: {s:?}"
                )
            }
        }
    }
    // Costs above the absolute bound are an input error too.
    let e = limiter
        .settle("alice", &tokens(), &receipt, 10_000_001)
        .await
        .unwrap_err();
    assert!(
        matches!(e, LimiterError::Input(InputError::UsageCost { .. })),
        "{e:?}"
    );
}

fn base64_url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    bytes
        .iter()
        .map(|b| A[usize::from(b % 64)] as char)
        .collect()
}

#[tokio::test]
async fn a_failed_settle_or_charge_is_an_error_even_when_failing_open() {
    let (limiter, store) = limiter();
    assert_eq!(limiter.failure_policy(), FailurePolicy::FailOpen);
    let request = Request::new("k", tokens(), 5).unwrap();
    let d = limiter.decide(&request, Mode::Record).await.unwrap();
    let receipt = limiter.receipt(&request, d.record).unwrap();
    store.down.store(true, Ordering::Relaxed);
    assert!(matches!(
        limiter.settle("k", &tokens(), &receipt, 1).await,
        Err(LimiterError::Store(StoreError::Backend(_)))
    ));
    assert!(matches!(
        limiter.charge("k", &tokens(), 1).await,
        Err(LimiterError::Store(StoreError::Backend(_)))
    ));
    // A check still fails open.
    assert!(limiter.check("k", &tokens(), 1).await.unwrap().degraded);
}

#[tokio::test]
async fn a_store_without_settle_says_so() {
    #[derive(Debug)]
    struct Old(MemoryStore);
    #[async_trait::async_trait]
    impl Store for Old {
        async fn decide(&self, r: &Request, m: Mode, n: Now) -> Result<Decision, StoreError> {
            self.0.decide(r, m, n).await
        }
        async fn reset(&self, key: &str) -> Result<bool, StoreError> {
            self.0.reset(key).await
        }
        async fn ping(&self) -> Result<(), StoreError> {
            Ok(())
        }
        fn kind(&self) -> &'static str {
            "old"
        }
    }
    let limiter = Limiter::from_store(Arc::new(Old(MemoryStore::new())));
    let e = limiter.charge("k", &tokens(), 1).await.unwrap_err();
    assert!(matches!(
        e,
        LimiterError::Store(StoreError::Unsupported {
            store: "old",
            operation: "charge"
        })
    ));
}
