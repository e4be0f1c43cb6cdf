//! Every limit's state from the rejection cache (a cached
//! rejection listed the deciding limit only, so repeated 429s showed the
//! other limits as `null`). A deterministic differential on one instance
//! through `Limiter::decide_each`: every count a local answer reports is the
//! store's own at that moment (every field, for the cached cost), a limit is
//! left without counts only where the store's own could have moved, and the
//! limits that stay exact (another full limit, an empty one) are reported,
//! in the layer's repeated 429s too.

use slidelog::rejection_cache::RejectionCache;
use slidelog::store::{Clock, ManualClock, Store};
use slidelog::{Decision, Detailed, Limit, Limiter, Mode, Now, Request, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// A memory store whose own clock ("server time") is a manual clock, and
/// which is not in process (so the limiter keeps a rejection cache).
#[derive(Debug)]
struct ClockedStore {
    inner: slidelog::store::MemoryStore,
    clock: ManualClock,
}

impl ClockedStore {
    fn at(&self, now: Now) -> Now {
        match now {
            Now::Server => Now::At(self.clock.now_ms()),
            at => at,
        }
    }
}

#[async_trait::async_trait]
impl Store for ClockedStore {
    async fn decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, StoreError> {
        self.inner.decide(request, mode, self.at(now)).await
    }
    async fn decide_each(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, StoreError> {
        self.inner.decide_each(request, mode, self.at(now)).await
    }
    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        self.inner.reset(key).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
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

fn setup() -> (ManualClock, Arc<ClockedStore>, Limiter) {
    let clock = ManualClock::new(1_767_225_600_000);
    let store = Arc::new(ClockedStore {
        inner: slidelog::store::MemoryStore::new(),
        clock: clock.clone(),
    });
    let cache = RejectionCache::with_clock(1_000, Arc::new(clock.clone()));
    let limiter = Limiter::builder()
        .rejection_cache(cache)
        .build(store.clone());
    (clock, store, limiter)
}

fn local_answers(limiter: &Limiter) -> u64 {
    limiter.rejection_cache().unwrap().stats().local_answers
}

#[tokio::test]
async fn a_cached_rejection_reports_every_limit_whose_counts_are_still_the_stores() {
    let (clock, _store, limiter) = setup();
    let named = |name, max, window_ms| Limit::new(max, window_ms).unwrap().named(name).unwrap();
    // 2 requests a second, 100 tokens a minute; each request 1 and 30.
    let limits = vec![named("requests", 2, 1_000), named("tokens", 100, 60_000)];
    let request = Request::with_costs("k", limits, vec![1, 30]).unwrap();
    for _ in 0..2 {
        assert!(
            limiter
                .decide_each(&request, Mode::Record)
                .await
                .unwrap()
                .decision
                .allowed
        );
    }
    clock.advance(Duration::from_millis(100));
    // requests 2/2 (the deciding limit), tokens 60/100: refused by the store.
    let stored = limiter.decide_each(&request, Mode::Record).await.unwrap();
    assert!(!stored.decision.allowed);
    assert_eq!(stored.decision.limit, 2);
    let tokens = stored.limits[1].counts.unwrap();
    assert_eq!((tokens.count, tokens.remaining), (60, 40));
    // Answered locally: the deciding limit exact; tokens without counts (its
    // oldest record may expire at a moment the store did not report).
    clock.advance(Duration::from_millis(100));
    let before = local_answers(&limiter);
    let local = limiter.decide_each(&request, Mode::Record).await.unwrap();
    assert_eq!(local_answers(&limiter), before + 1);
    let requests = local.limits[0].counts.unwrap();
    assert_eq!((requests.count, requests.retry_after_ms), (2, 800));
    assert_eq!(local.limits[1].counts, None);

    // Two full limits and one with nothing counted: all three stay exact.
    // a: 1 a second, b: 3 in 2 s (cost 2), daily: cost 0.
    let limits = vec![
        named("a", 1, 1_000),
        named("b", 3, 2_000),
        named("daily", 1_000, 86_400_000),
    ];
    let request = Request::usage("k3", limits, vec![1, 2, 0]).unwrap();
    assert!(
        limiter
            .decide_each(&request, Mode::Record)
            .await
            .unwrap()
            .decision
            .allowed
    );
    clock.advance(Duration::from_millis(300));
    let stored = limiter.decide_each(&request, Mode::Record).await.unwrap();
    assert!(!stored.decision.allowed);
    assert_eq!(stored.decision.limit, 3, "b waits longest");
    clock.advance(Duration::from_millis(200));
    let before = local_answers(&limiter);
    let local = limiter.decide_each(&request, Mode::Record).await.unwrap();
    assert_eq!(local_answers(&limiter), before + 1);
    let counts: Vec<_> = local.limits.iter().map(|s| s.counts.unwrap()).collect();
    let fields = |c: &slidelog::Counts| (c.count, c.remaining, c.retry_after_ms, c.reset_after_ms);
    assert_eq!(fields(&counts[0]), (1, 0, 500, 500));
    assert_eq!(fields(&counts[1]), (2, 1, 1_500, 1_500));
    assert_eq!(fields(&counts[2]), (0, 1_000, 0, 0));
    // Once a's own wait has ended its count may have moved: no counts.
    clock.advance(Duration::from_millis(500));
    let local = limiter.decide_each(&request, Mode::Record).await.unwrap();
    assert!(!local.decision.allowed);
    assert_eq!(local.limits[0].counts, None);
    assert!(local.limits[1].counts.is_some() && local.limits[2].counts.is_some());
}

#[tokio::test]
async fn one_instance_every_count_a_local_answer_reports_is_the_stores_own() {
    let (clock, store, limiter) = setup();
    let l = |m, w| Limit::new(m, w).unwrap();
    let keys: [(&str, Vec<Limit>, Vec<u64>); 3] = [
        ("two", vec![l(3, 500), l(8, 2_000)], vec![1, 1]),
        ("weighted", vec![l(10, 1_000), l(40, 3_000)], vec![2, 5]),
        (
            "same-window",
            vec![l(4, 1_000), l(12, 1_000), l(50, 4_000)],
            vec![1, 3, 0],
        ),
    ];
    let mut rng = Lcg(7);
    let (mut local, mut total, mut reported, mut unknown) = (0, 0, 0, 0);
    for step in 0..6_000 {
        clock.advance(Duration::from_millis(rng.below(40)));
        let (key, limits, costs) = &keys[rng.below(3) as usize];
        if rng.below(200) == 0 {
            limiter.reset(key).await.unwrap();
            continue;
        }
        let bump = u64::from(rng.below(4) == 0);
        let costs: Vec<u64> = costs.iter().map(|c| c + bump).collect();
        // Costs within every max (0 in some limits), as the layer makes them.
        let request = Request::usage(*key, limits.clone(), costs).unwrap();
        let truth = store
            .decide_each(&request, Mode::Peek, Now::Server)
            .await
            .unwrap();
        let before = local_answers(&limiter);
        let got = limiter.decide_each(&request, Mode::Record).await.unwrap();
        let was_local = local_answers(&limiter) > before;
        assert_eq!(got.decision.allowed, truth.decision.allowed, "step {step}");
        total += 1;
        if !was_local {
            assert_eq!(got, truth, "step {step} {request:?}");
            continue;
        }
        local += 1;
        for (i, (g, t)) in got.limits.iter().zip(&truth.limits).enumerate() {
            let Some(g) = g.counts else {
                unknown += 1;
                continue;
            };
            reported += 1;
            let t = t.counts.unwrap();
            let what = format!("step {step} limit {i} {request:?}: {g:?} vs {t:?}");
            if bump == 0 {
                assert_eq!(g, t, "{what}");
            } else {
                // Maybe a larger cost than the cached one: the same counts,
                // a wait never later than the store's.
                assert_eq!(
                    (g.count, g.remaining, g.reset_after_ms),
                    (t.count, t.remaining, t.reset_after_ms),
                    "{what}"
                );
                assert!(g.retry_after_ms <= t.retry_after_ms, "{what}");
            }
        }
    }
    eprintln!(
        "{local} of {total} answered locally; {reported} limits with counts, {unknown} without"
    );
    assert!(local > total / 5, "{local} of {total} answered locally");
    // The deciding limit of every local answer plus the provable others.
    assert!(
        reported > local,
        "{reported} counts reported, {unknown} unknown, {local} local"
    );
}

/// The layer's 429s (the symptom a user saw): repeated refusals answered from
/// the cache list every limit whose counts are known, not the deciding one
/// alone.
#[tokio::test]
async fn the_layers_repeated_429s_list_every_limit_the_cache_knows() {
    use slidelog::middleware::{Constant, RouteLimits};
    use tower::{Layer, ServiceExt, service_fn};
    let (clock, _store, limiter) = setup();
    let named = |name, max, window_ms| Limit::new(max, window_ms).unwrap().named(name).unwrap();
    // a: 1 a second; b: 3 in 2 s, each request costing 2 there.
    let routes = RouteLimits::new([named("a", 1, 1_000), named("b", 3, 2_000)]).unwrap();
    let hello = service_fn(|_: http::Request<String>| async {
        Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    });
    let service = slidelog::RateLimitLayer::new(limiter.clone(), Constant::new("all"), routes)
        .cost_by_position(|_| [1, 2])
        .unwrap()
        .layer(hello);
    let call = || service.clone().oneshot(http::Request::new(String::new()));
    assert_eq!(call().await.unwrap().status(), 200);
    clock.advance(Duration::from_millis(300));
    let from_store = call().await.unwrap();
    assert_eq!(from_store.status(), 429);
    let header = |r: &http::Response<_>| r.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert_eq!(header(&from_store), "\"b\";r=1;t=2, \"a\";r=0;t=1");
    clock.advance(Duration::from_millis(200));
    let before = local_answers(&limiter);
    let cached = call().await.unwrap();
    assert_eq!(local_answers(&limiter), before + 1, "answered by the cache");
    assert_eq!(cached.status(), 429);
    assert_eq!(header(&cached), "\"b\";r=1;t=2, \"a\";r=0;t=1");
}
