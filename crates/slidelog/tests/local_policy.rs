//! The local policy through the library (docs/design.md §6, "Local
//! answers"), on a store in front of a memory store that can be switched
//! down (refusing every call) and made to lose charge replies: local
//! answers at ceil(max × share), degraded; the charge-back counts each
//! local record exactly once on the store, even when a reply is lost; a
//! key awaiting charge-back is answered locally; joint decisions go local
//! as a whole; a charge is recorded locally and charged back; the
//! journal's cap refuses rather than grows.

use slidelog::store::MemoryStore;
use slidelog::{Checks, FailurePolicy, Limit, Limiter, LimiterError, Mode, Request};
use slidelog_core::{Decision, Detailed, JointDecision, Now, OnceMark, Store, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A remote-looking store over a memory store: `down` refuses every call;
/// `lose` charges but answers a timeout for that many charges.
#[derive(Debug, Default)]
struct Switched {
    memory: MemoryStore,
    down: AtomicBool,
    lose: AtomicU32,
    charges: AtomicU32,
}

impl Switched {
    fn up(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::Unavailable("Connection refused".into()))
        } else {
            Ok(())
        }
    }
}

#[async_trait::async_trait]
impl Store for Switched {
    async fn decide(&self, r: &Request, m: Mode, n: Now) -> Result<Decision, StoreError> {
        self.up()?;
        self.memory.decide(r, m, n).await
    }
    async fn decide_each(&self, r: &Request, m: Mode, n: Now) -> Result<Detailed, StoreError> {
        self.up()?;
        self.memory.decide_each(r, m, n).await
    }
    async fn decide_all(&self, c: &Checks, m: Mode, n: Now) -> Result<JointDecision, StoreError> {
        self.up()?;
        self.memory.decide_all(c, m, n).await
    }
    async fn charge(&self, r: &Request, n: Now) -> Result<Detailed, StoreError> {
        self.up()?;
        self.memory.charge(r, n).await
    }
    async fn charge_once(&self, r: &Request, n: Now, o: &OnceMark) -> Result<bool, StoreError> {
        self.up()?;
        self.charges.fetch_add(1, Ordering::SeqCst);
        let charged = self.memory.charge_once(r, n, o).await?;
        let lost = self
            .lose
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match lost {
            Ok(_) => Err(StoreError::Timeout(Duration::from_millis(100))),
            Err(_) => Ok(charged),
        }
    }
    async fn reset(&self, k: &str) -> Result<bool, StoreError> {
        self.up()?;
        self.memory.reset(k).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.up()
    }
    fn kind(&self) -> &'static str {
        "switched"
    }
}

fn limiter(store: &Arc<Switched>, share: f64) -> Limiter {
    Limiter::builder()
        .failure_policy(FailurePolicy::local(share).unwrap())
        .no_rejection_cache()
        .build(store.clone())
}

fn per_minute(max: u64) -> [Limit; 1] {
    [Limit::new(max, 60_000).unwrap()]
}

/// Live units of `key` on the store behind, as a peek sees them.
async fn stored(store: &Switched, key: &str, max: u64) -> u64 {
    let r = Request::new(key, per_minute(max).to_vec(), 1).unwrap();
    store
        .memory
        .decide(&r, Mode::Peek, Now::Server)
        .await
        .unwrap()
        .count
        - 1
}

/// Waits until `key` counts `want` on the store (the charge-back ran).
async fn until_stored(store: &Switched, key: &str, max: u64, want: u64) -> Duration {
    let started = Instant::now();
    while stored(store, key, max).await != want {
        assert!(started.elapsed() < Duration::from_secs(5), "never {want}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn an_outage_admits_the_share_locally_and_the_store_counts_it_once_after() {
    let store = Arc::new(Switched::default());
    let limiter = limiter(&store, 0.34);
    let limits = per_minute(30);
    for _ in 0..5 {
        assert!(!limiter.check("k", &limits, 1).await.unwrap().degraded);
    }
    store.down.store(true, Ordering::SeqCst);
    let mut admitted = 0;
    for _ in 0..20 {
        let d = limiter.check("k", &limits, 1).await.unwrap();
        assert!(d.degraded, "{d:?}");
        assert_eq!(d.limit, 11, "ceil(30 × 0.34)");
        admitted += u64::from(d.allowed);
    }
    assert_eq!(admitted, 11);
    store.down.store(false, Ordering::SeqCst);
    let took = until_stored(&store, "k", 30, 16).await;
    eprintln!("charged back within {took:?}");
    // Exact again on the store: 30 - 16 left.
    let mut more = 0;
    for _ in 0..20 {
        let d = limiter.check("k", &limits, 1).await.unwrap();
        more += u64::from(d.allowed && !d.degraded);
    }
    assert_eq!(more, 14);
    assert_eq!(store.charges.load(Ordering::SeqCst), 11);
}

#[tokio::test]
async fn a_lost_charge_reply_is_sent_again_and_counted_once() {
    let store = Arc::new(Switched::default());
    let limiter = limiter(&store, 0.5);
    store.down.store(true, Ordering::SeqCst);
    for _ in 0..4 {
        assert!(
            limiter
                .check("k", &per_minute(10), 1)
                .await
                .unwrap()
                .allowed
        );
    }
    // The first three charges are made but their replies are lost.
    store.lose.store(3, Ordering::SeqCst);
    store.down.store(false, Ordering::SeqCst);
    until_stored(&store, "k", 10, 4).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stored(&store, "k", 10).await, 4, "each record once");
    assert_eq!(store.charges.load(Ordering::SeqCst), 7, "4 + 3 sent again");
}

#[tokio::test]
async fn a_key_awaiting_charge_back_is_answered_locally_and_others_on_the_store() {
    let store = Arc::new(Switched::default());
    let limiter = limiter(&store, 0.5);
    store.down.store(true, Ordering::SeqCst);
    assert!(
        limiter
            .check("held", &per_minute(10), 1)
            .await
            .unwrap()
            .degraded
    );
    // Back, but the charge-back cannot run before the next await point.
    store.down.store(false, Ordering::SeqCst);
    let held = limiter.check("held", &per_minute(10), 1).await.unwrap();
    let other = limiter.check("other", &per_minute(10), 1).await.unwrap();
    assert!(held.degraded && !other.degraded);
    until_stored(&store, "held", 10, 2).await;
    assert!(
        !limiter
            .check("held", &per_minute(10), 1)
            .await
            .unwrap()
            .degraded
    );
}

#[tokio::test]
async fn joint_decisions_go_local_as_a_whole() {
    let store = Arc::new(Switched::default());
    let limiter = limiter(&store, 0.5);
    let user = Request::single("user", Limit::new(10, 60_000).unwrap()).unwrap();
    let login = Request::single("login", Limit::new(4, 60_000).unwrap()).unwrap();
    let both = Checks::new([user, login]).unwrap();
    store.down.store(true, Ordering::SeqCst);
    let mut admitted = 0;
    for _ in 0..6 {
        let j = limiter.decide_all(&both, Mode::Record).await.unwrap();
        assert!(j.degraded());
        admitted += u64::from(j.allowed);
    }
    assert_eq!(admitted, 2, "ceil(4 × 0.5) on login");
    store.down.store(false, Ordering::SeqCst);
    until_stored(&store, "login", 4, 2).await;
    until_stored(&store, "user", 10, 2).await;
}

#[tokio::test]
async fn the_journal_cap_refuses_a_local_admission_rather_than_grow() {
    let store = Arc::new(Switched::default());
    let limiter = Limiter::builder()
        .failure_policy(FailurePolicy::local(1.0).unwrap())
        .local_journal_cap(3)
        .build(store.clone());
    store.down.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        assert!(
            limiter
                .check("k", &per_minute(100), 1)
                .await
                .unwrap()
                .allowed
        );
    }
    let refused = limiter.check("k", &per_minute(100), 1).await.unwrap_err();
    assert!(matches!(
        refused,
        LimiterError::Store(StoreError::Unavailable(_))
    ));
    assert!(
        refused.to_string().contains("local journal full"),
        "{refused}"
    );
    // A peek records nothing: still answered.
    assert!(
        limiter
            .peek("k", &per_minute(100), 1)
            .await
            .unwrap()
            .degraded
    );
}

#[tokio::test]
async fn a_cost_above_the_local_share_is_refused_locally() {
    let store = Arc::new(Switched::default());
    let limiter = limiter(&store, 0.1);
    store.down.store(true, Ordering::SeqCst);
    let d = limiter.check("k", &per_minute(30), 5).await.unwrap();
    assert!(!d.allowed && d.degraded && d.limit == 3, "{d:?}");
    assert!(
        limiter
            .check("k", &per_minute(30), 3)
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn a_charge_during_the_outage_is_recorded_locally_and_charged_back() {
    let store = Arc::new(Switched::default());
    let limiter = limiter(&store, 0.5);
    let tokens = per_minute(1_000);
    store.down.store(true, Ordering::SeqCst);
    let charged = limiter.charge("llm", &tokens, 300).await.unwrap();
    assert!(charged.decision.degraded);
    // The local share (500) counts it: 200 more fit locally, 201 do not.
    assert!(!limiter.check("llm", &tokens, 201).await.unwrap().allowed);
    assert!(limiter.check("llm", &tokens, 200).await.unwrap().allowed);
    store.down.store(false, Ordering::SeqCst);
    until_stored(&store, "llm", 1_000, 500).await;
}
