//! The local rejection cache (`slidelog::rejection_cache`): exact against
//! the store. A deterministic differential on one instance (every field of
//! every answer, local or not, is the store's answer at that moment), and
//! several limiters on one real redis-server (every local answer is a
//! rejection the store also gives, with no later `retry_after_ms`; the key
//! admits exactly its max; far fewer store calls).

use slidelog::rejection_cache::RejectionCache;
use slidelog::store::{Clock, ManualClock, Store};
use slidelog::{Decision, Limit, Limiter, Mode, Now, Request, StoreError};
use slidelog_testkit::RedisServer;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A memory store whose own clock ("server time") is a manual clock.
#[derive(Debug)]
struct ClockedStore {
    inner: slidelog::store::MemoryStore,
    clock: ManualClock,
}

type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

impl Store for ClockedStore {
    fn decide<'a, 'b, 'c>(&'a self, request: &'b Request, mode: Mode, now: Now) -> Fut<'c, Decision>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        let now = match now {
            Now::Server => Now::At(self.clock.now_ms()),
            at => at,
        };
        Box::pin(async move { self.inner.decide(request, mode, now).await })
    }
    fn reset<'a, 'b, 'c>(&'a self, key: &'b str) -> Fut<'c, bool>
    where
        'a: 'c,
        'b: 'c,
        Self: 'c,
    {
        Box::pin(async move { self.inner.reset(key).await })
    }
    fn ping<'a, 'c>(&'a self) -> Fut<'c, ()>
    where
        'a: 'c,
        Self: 'c,
    {
        Box::pin(async move { Ok(()) })
    }
    fn kind(&self) -> &'static str {
        "clocked-memory"
    }
}

/// A small deterministic generator (no dependency for one test).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[tokio::test]
async fn one_instance_every_answer_is_the_stores_answer_at_that_moment() {
    let start = 1_767_225_600_000;
    let clock = ManualClock::new(start);
    let store = Arc::new(ClockedStore {
        inner: slidelog::store::MemoryStore::new(),
        clock: clock.clone(),
    });
    let cache = RejectionCache::with_clock(1_000, Arc::new(clock.clone()));
    let limiter = Limiter::builder()
        .rejection_cache(cache)
        .build(store.clone());
    let l = |m, w| Limit::new(m, w).unwrap();
    let keys: [(&str, Vec<Limit>, Vec<u64>); 3] = [
        ("plain", vec![l(5, 1_000)], vec![1]),
        ("two", vec![l(3, 500), l(8, 2_000)], vec![1, 1]),
        ("weighted", vec![l(10, 1_000), l(40, 3_000)], vec![2, 5]),
    ];
    let mut rng = Lcg(42);
    let (mut local, mut total) = (0, 0);
    for step in 0..6_000 {
        clock.advance(Duration::from_millis(rng.below(40)));
        let (key, limits, costs) = &keys[rng.below(3) as usize];
        if rng.below(200) == 0 {
            limiter.reset(key).await.unwrap();
            continue;
        }
        // Costs at least the key's usual ones: sometimes larger.
        let bump = u64::from(rng.below(4) == 0);
        let costs: Vec<u64> = costs.iter().map(|c| c + bump).collect();
        let request = Request::with_costs(*key, limits.clone(), costs).unwrap();
        let truth = store
            .decide(&request, Mode::Peek, Now::Server)
            .await
            .unwrap();
        let before = limiter.rejection_cache().unwrap().stats().local_answers;
        let got = limiter.decide(&request, Mode::Record).await.unwrap();
        let was_local = limiter.rejection_cache().unwrap().stats().local_answers > before;
        assert_eq!(got.allowed, truth.allowed, "step {step} {request:?}");
        if was_local {
            local += 1;
            assert!(got.retry_after_ms <= truth.retry_after_ms, "step {step}");
            if bump == 0 {
                // The cached cost itself: every field is the store's.
                assert_eq!(got, truth, "step {step} {request:?}");
            }
        } else {
            assert_eq!(got, truth, "step {step} {request:?}");
        }
        total += 1;
    }
    assert!(local > total / 5, "{local} of {total} answered locally");
}

#[tokio::test]
async fn several_instances_on_one_redis_stay_exact() {
    let server = RedisServer::start();
    let prefix = slidelog_testkit::unique_prefix("rejcache");
    let open = |cache: bool| {
        let b = Limiter::builder().timeout(Duration::from_secs(5));
        let b = if cache { b } else { b.no_rejection_cache() };
        let url = server.url();
        let options = slidelog::url::StoreOptions::default().prefix(prefix.clone());
        async move { b.open(&url, options).await.unwrap() }
    };
    let truth = open(false).await;
    assert!(truth.rejection_cache().is_none());
    let max = 20;
    let limits = [Limit::new(max, 1_500).unwrap()];
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let limiter = open(true).await;
        assert!(
            limiter.rejection_cache().is_some(),
            "on by default for Redis"
        );
        let truth = truth.clone();
        tasks.push(tokio::spawn(async move {
            let (mut admitted, mut local, mut calls) = (Vec::new(), 0u64, 0u64);
            let end = Instant::now() + Duration::from_millis(4_000);
            while Instant::now() < end {
                let seen = truth.peek("hot", &limits, 1).await.unwrap();
                let before = limiter.rejection_cache().unwrap().stats().local_answers;
                let d = limiter.check("hot", &limits, 1).await.unwrap();
                if limiter.rejection_cache().unwrap().stats().local_answers > before {
                    local += 1;
                    // The store already rejected it just before, waiting at
                    // least as long as the local answer says.
                    assert!(!d.allowed && !seen.allowed, "{d:?} {seen:?}");
                    assert!(d.retry_after_ms <= seen.retry_after_ms, "{d:?} {seen:?}");
                } else {
                    calls += 1;
                }
                if d.allowed {
                    admitted.push(Instant::now());
                }
                tokio::task::yield_now().await;
            }
            (admitted, local, calls)
        }));
    }
    let mut admitted = Vec::new();
    let (mut local, mut calls) = (0, 0);
    for t in tasks {
        let (a, l, c) = t.await.unwrap();
        admitted.extend(a);
        local += l;
        calls += c;
    }
    admitted.sort();
    // Never more than max in a window (the store's guarantee, unchanged) and
    // not stricter than the store: each window's slots are taken again as
    // they free, so about max per window over 4 s of demand.
    let n = admitted.len() as u64;
    assert!(n <= max * 4, "{n} admitted");
    assert!(n >= max * 2, "{n} admitted: stricter than the store");
    assert!(local > calls, "{local} local answers, {calls} store calls");
}
