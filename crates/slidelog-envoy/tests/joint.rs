//! The limited descriptors of one request decided together, all or nothing
//! (docs/design.md §5.1): a refused request records nothing in any
//! descriptor's log; shadow-mode, unlimited, unmatched, blocked, look and
//! charge descriptors take part as documented; two descriptors on one key
//! are one check with their costs added; `--envoy-independent-descriptors`
//! keeps the old per-descriptor answers; more distinct keys than a joint
//! decision takes are refused naming the flags.
//!
//! Every scenario runs on the memory store, and on Redis and Valkey in
//! [`joint_decisions_on_redis_and_valkey`].

mod common;

use common::{descriptor, request};
use futures::future::BoxFuture;
use slidelog::{Bounds, Limiter};
use slidelog_core::Store;
use slidelog_envoy::proto::rate_limit_response::Code;
use slidelog_envoy::proto::{RateLimitDescriptor, RateLimitResponse};
use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceError, ServiceOptions};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::sync::Arc;

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

const CONFIG: &str = r#"
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /login
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: plan
    value: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: client
    value: internal
    rate_limit: {unlimited: true}
  - key: bot
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: model
    rate_limit: {unit: minute, requests_per_unit: 100, charge: true}
  - key: file
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 4}
"#;

/// Makes a fresh store for each scenario (a new prefix on a shared server).
type Stores<'a> = &'a dyn Fn() -> BoxFuture<'static, Arc<dyn Store>>;

fn service(store: Arc<dyn Store>, options: ServiceOptions, bounds: Bounds) -> RateLimiter {
    let config = RateLimitConfig::from_yaml_str("joint.yaml", CONFIG).unwrap();
    let limiter = Limiter::from_store(store).with_bounds(bounds);
    RateLimiter::new(limiter, ConfigHandle::fixed(config), options)
}

fn joint(store: Arc<dyn Store>) -> RateLimiter {
    service(store, ServiceOptions::default(), Bounds::SERVICE)
}

fn d(key: &str, value: &str) -> RateLimitDescriptor {
    descriptor(&[(key, value)])
}

fn with_cost(mut descriptor: RateLimitDescriptor, hits: u64) -> RateLimitDescriptor {
    descriptor.hits_addend = Some(hits);
    descriptor
}

async fn ask(l: &RateLimiter, descriptors: Vec<RateLimitDescriptor>) -> RateLimitResponse {
    l.should_rate_limit(&request("api", descriptors))
        .await
        .unwrap()
}

fn codes(r: &RateLimitResponse) -> Vec<i32> {
    r.statuses.iter().map(|s| s.code).collect()
}

/// How many requests of `descriptors` in a row are OK (at most `up_to`).
async fn admitted(l: &RateLimiter, descriptors: &[RateLimitDescriptor], up_to: usize) -> usize {
    let mut n = 0;
    for _ in 0..up_to {
        if ask(l, descriptors.to_vec()).await.overall_code != OK {
            break;
        }
        n += 1;
    }
    n
}

/// The scenario the rule is for: `user` 10/minute and `path=/login`
/// 3/minute, six requests with both: OK×3, OVER×3, and the three refused
/// ones recorded nowhere, so the user alone gets 7 more, not 4.
async fn login_scenario(stores: Stores<'_>) {
    let l = joint(stores().await);
    let both = vec![d("user", "alice"), d("path", "/login")];
    let mut overall = Vec::new();
    for _ in 0..6 {
        let r = ask(&l, both.clone()).await;
        overall.push(r.overall_code);
        if r.overall_code == OVER {
            // Each descriptor reports its own check: the user would admit.
            assert_eq!(codes(&r), [OK, OVER]);
            assert_eq!(r.statuses[1].limit_remaining, 0);
            let wait = r.statuses[1].duration_until_reset.unwrap().seconds;
            assert!((55..=60).contains(&wait), "{wait}");
        }
    }
    assert_eq!(overall, [OK, OK, OK, OVER, OVER, OVER]);
    assert_eq!(admitted(&l, &[d("user", "alice")], 20).await, 7);
}

/// Shadow mode: never refuses the request, never records for a refused one.
async fn shadow_rules(stores: Stores<'_>) {
    let l = joint(stores().await);
    assert_eq!(admitted(&l, &[d("path", "/login")], 3).await, 3);
    // Refused by the login rule: the shadow rule's log is not touched.
    let r = ask(&l, vec![d("path", "/login"), d("plan", "trial")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![OVER, OK]));
    // So the shadow rule still has its 2: admitted twice, recorded each time.
    for remaining in [1, 0] {
        let r = ask(&l, vec![d("user", "s"), d("plan", "trial")]).await;
        assert_eq!(r.overall_code, OK);
        assert_eq!(r.statuses[1].limit_remaining, remaining);
    }
    // Over in shadow mode: OK, and the enforced descriptor is recorded.
    let r = ask(&l, vec![d("user", "s"), d("plan", "trial")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![OK, OK]));
    assert_eq!(r.statuses[0].limit_remaining, 7);
}

/// Unlimited and unmatched descriptors are OK and do not take part; a
/// blocked rule (`requests_per_unit: 0`) refuses the whole request.
async fn unlimited_unmatched_and_blocked(stores: Stores<'_>) {
    let l = joint(stores().await);
    let r = ask(
        &l,
        vec![d("user", "u"), d("client", "internal"), d("nothing", "x")],
    )
    .await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![OK, OK, OK]));
    assert_eq!(r.statuses[0].limit_remaining, 9);
    assert_eq!(r.statuses[1].limit_remaining, u32::MAX);
    assert!(r.statuses[2].current_limit.is_none());
    let r = ask(&l, vec![d("user", "u"), d("bot", "b")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![OK, OVER]));
    // Not recorded: 9 left before, 9 left now (8 after this one).
    let r = ask(&l, vec![d("user", "u"), d("client", "internal")]).await;
    assert_eq!(r.statuses[0].limit_remaining, 8);
}

/// A charge is usage already spent: recorded even in a refused request. A
/// look over the limit refuses the request like any descriptor.
async fn looks_and_charges(stores: Stores<'_>) {
    let l = joint(stores().await);
    assert_eq!(admitted(&l, &[d("path", "/login")], 3).await, 3);
    let r = ask(
        &l,
        vec![d("path", "/login"), with_cost(d("model", "m"), 60)],
    )
    .await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![OVER, OK]));
    // Charged anyway: 60 of 100 used; 60 more takes it over.
    let r = ask(&l, vec![with_cost(d("model", "m"), 60)]).await;
    assert_eq!(r.overall_code, OVER);
    // A look at the over log refuses the request: the user records nothing.
    let r = ask(&l, vec![d("user", "v"), with_cost(d("model", "m"), 0)]).await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![OK, OVER]));
    let r = ask(&l, vec![d("user", "v")]).await;
    assert_eq!(r.statuses[0].limit_remaining, 9);
}

/// Two descriptors on one store key (a `share_threshold` pattern) are one
/// check with their costs added.
async fn one_key_twice(stores: Stores<'_>) {
    let l = joint(stores().await);
    let pair = vec![d("file", "files/a"), d("file", "files/b")];
    for remaining in [2, 0] {
        let r = ask(&l, pair.clone()).await;
        assert_eq!(r.overall_code, OK);
        let left: Vec<u32> = r.statuses.iter().map(|s| s.limit_remaining).collect();
        assert_eq!(left, [remaining, remaining]);
    }
    let r = ask(&l, pair).await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![OVER, OVER]));
}

/// `--envoy-independent-descriptors`: the old answers, where a refused
/// request was still recorded in the user's log.
async fn independent_descriptors(stores: Stores<'_>) {
    let options = ServiceOptions {
        independent_descriptors: true,
        ..ServiceOptions::default()
    };
    let l = service(stores().await, options, Bounds::SERVICE);
    let both = vec![d("user", "alice"), d("path", "/login")];
    let mut overall = Vec::new();
    for _ in 0..6 {
        overall.push(ask(&l, both.clone()).await.overall_code);
    }
    assert_eq!(overall, [OK, OK, OK, OVER, OVER, OVER]);
    assert_eq!(admitted(&l, &[d("user", "alice")], 20).await, 4);
}

/// More descriptors than `--max-descriptors`, and more distinct limited
/// keys than one joint decision takes: refused, naming the flags.
async fn too_many_descriptors(stores: Stores<'_>) {
    let users = |n: usize| (0..n).map(|i| d("user", &format!("u{i}"))).collect();
    let l = joint(stores().await);
    let err = l
        .should_rate_limit(&request("api", users(65)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ServiceError::InvalidArgument(m) if m.contains("--max-descriptors")),
        "{err}"
    );
    let raised = Bounds {
        max_descriptors: 100,
        ..Bounds::SERVICE
    };
    let l = service(stores().await, ServiceOptions::default(), raised);
    let err = l
        .should_rate_limit(&request("api", users(65)))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ServiceError::InvalidArgument(m)
            if m.contains("--max-descriptors") && m.contains("--envoy-independent-descriptors")),
        "{err}"
    );
    // 64 distinct keys are one decision; recorded in every one.
    let r = l
        .should_rate_limit(&request("api", users(64)))
        .await
        .unwrap();
    assert_eq!(r.overall_code, OK);
    assert!(r.statuses.iter().all(|s| s.limit_remaining == 9));
}

/// A store that decides jointly (the memory store's decisions) but cannot
/// take charges: `Store::charge`'s default refuses with `Unsupported`.
#[derive(Debug, Default)]
struct ChargelessStore(slidelog_memory::MemoryStore);

#[async_trait::async_trait]
impl Store for ChargelessStore {
    async fn decide(
        &self,
        request: &slidelog_core::Request,
        mode: slidelog_core::Mode,
        now: slidelog_core::Now,
    ) -> Result<slidelog_core::Decision, slidelog_core::StoreError> {
        self.0.decide(request, mode, now).await
    }
    async fn decide_all(
        &self,
        checks: &slidelog_core::Checks,
        mode: slidelog_core::Mode,
        now: slidelog_core::Now,
    ) -> Result<slidelog_core::JointDecision, slidelog_core::StoreError> {
        self.0.decide_all(checks, mode, now).await
    }
    async fn reset(&self, key: &str) -> Result<bool, slidelog_core::StoreError> {
        self.0.reset(key).await
    }
    async fn ping(&self) -> Result<(), slidelog_core::StoreError> {
        Ok(())
    }
    fn kind(&self) -> &'static str {
        "chargeless"
    }
}

/// A failed charge answers the whole request with the error before the
/// checks are asked: nothing is recorded for a request answered UNAVAILABLE.
#[tokio::test]
async fn a_failed_charge_records_no_check() {
    let l = joint(Arc::new(ChargelessStore::default()));
    let err = l
        .should_rate_limit(&request(
            "api",
            vec![d("user", "w"), with_cost(d("model", "m"), 5)],
        ))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Unavailable(_)), "{err}");
    let r = ask(&l, vec![d("user", "w")]).await;
    assert_eq!(
        r.statuses[0].limit_remaining, 9,
        "the failed request recorded nothing"
    );
}

async fn every_scenario(stores: Stores<'_>) {
    login_scenario(stores).await;
    shadow_rules(stores).await;
    unlimited_unmatched_and_blocked(stores).await;
    looks_and_charges(stores).await;
    one_key_twice(stores).await;
    independent_descriptors(stores).await;
    too_many_descriptors(stores).await;
}

#[tokio::test]
async fn joint_decisions_on_the_memory_store() {
    let stores = || -> BoxFuture<'static, Arc<dyn Store>> {
        Box::pin(async { Arc::new(slidelog_memory::MemoryStore::new()) as Arc<dyn Store> })
    };
    every_scenario(&stores).await;
}

/// The same scenarios on `redis-server` and `valkey-server`, each with
/// fresh keys (a new prefix).
#[tokio::test]
async fn joint_decisions_on_redis_and_valkey() {
    for kind in ServerKind::ALL {
        let server = RedisServer::start_kind(kind);
        let url = server.url();
        let stores = || -> BoxFuture<'static, Arc<dyn Store>> {
            let url = url.clone();
            Box::pin(async move {
                let options = RedisOptions::default().with_prefix(unique_prefix("joint"));
                let store = RedisStore::connect(&url, options).await.unwrap();
                Arc::new(store) as Arc<dyn Store>
            })
        };
        every_scenario(&stores).await;
    }
}
