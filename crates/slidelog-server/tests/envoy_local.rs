//! Envoy's API under the local policy (docs/design.md §6, "Local
//! answers"), through the service's one limiter on a store switched down
//! and up (and on a real `redis-server`, killed and restarted empty, once
//! the Redis stores decide several keys jointly): a request of two limited descriptors (a
//! user's 10 a minute and the login path's 4) is decided locally as a
//! whole at the share (0.5: 2 logins), refused whole past it (the user's
//! key records nothing for a refused request); after the restart the
//! charge-back gives the store both keys' records, and the login path
//! admits exactly what is left of its 4.

use slidelog::redis::{RedisOptions, RedisStore};
use slidelog::store::{MemoryStore, OnceMark, Store};
use slidelog::{Checks, Decision, Detailed, JointDecision, Mode, Now, Request, StoreError};
use slidelog_envoy::proto::rate_limit_descriptor::Entry;
use slidelog_envoy::proto::{RateLimitDescriptor, RateLimitRequest, rate_limit_response::Code};
use slidelog_envoy::{ConfigHandle, RateLimitConfig, ServiceOptions};
use slidelog_server::app::{App, AppConfig};
use slidelog_server::policy::FailurePolicy;
use slidelog_testkit::{RedisServer, unique_prefix};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

const CONFIG: &str = "domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /login
    rate_limit: {unit: minute, requests_per_unit: 4}
";

fn descriptor(key: &str, value: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: key.into(),
            value: value.into(),
        }],
        ..Default::default()
    }
}

/// alice logging in: both descriptors, one request.
fn login() -> RateLimitRequest {
    RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor("user", "alice"), descriptor("path", "/login")],
        hits_addend: 0,
    }
}

/// alice elsewhere: her own limit only.
fn browse() -> RateLimitRequest {
    RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor("user", "alice")],
        hits_addend: 0,
    }
}

/// A store over a memory store that can be switched down (refusing every
/// call, as a killed Redis does) and up again; it decides several keys
/// jointly today, where the Redis stores are about to.
#[derive(Debug, Default)]
struct Switched {
    memory: MemoryStore,
    down: AtomicBool,
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
    async fn charge_once(&self, r: &Request, n: Now, o: &OnceMark) -> Result<bool, StoreError> {
        self.up()?;
        self.memory.charge_once(r, n, o).await
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

/// The scenario on `store`, switched down by `kill` and up by `restart`
/// (empty, or keeping its logs: the counts after are relative to what the
/// outage admitted).
async fn scenario(store: Arc<dyn Store>, kill: impl FnOnce(), restart: impl FnOnce()) {
    let app = App::new(
        store,
        AppConfig {
            policy: FailurePolicy::local(0.5).unwrap(),
            store_timeout: Duration::from_millis(100),
            ..AppConfig::default()
        },
    );
    let config = ConfigHandle::fixed(RateLimitConfig::from_yaml_str("t.yaml", CONFIG).unwrap());
    let envoy = slidelog_server::envoy::limiter(&app, config, ServiceOptions::default());
    let code = |r: &slidelog_envoy::proto::RateLimitResponse| r.overall_code;

    kill();
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(code(&envoy.should_rate_limit(&login()).await.unwrap()));
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    assert_eq!(answers, [ok, ok, over, over], "ceil(4 × 0.5) logins");
    // The refused logins recorded nothing for alice: 5 - 2 = 3 more locally.
    let mut browsing = 0;
    for _ in 0..6 {
        browsing += u32::from(code(&envoy.should_rate_limit(&browse()).await.unwrap()) == ok);
    }
    assert_eq!(browsing, 3, "alice's share is 5, 2 taken by the logins");

    restart();
    // Once charged back, the store decides: 4 - 2 logins left.
    let started = Instant::now();
    let limiter = app.limiter().clone();
    while limiter.store_health() != slidelog::StoreHealth::Up
        || !app
            .metrics()
            .render()
            .contains("slidelog_local_journal_records 0")
    {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never charged back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut after = Vec::new();
    for _ in 0..3 {
        after.push(code(&envoy.should_rate_limit(&login()).await.unwrap()));
    }
    assert_eq!(
        after,
        [ok, ok, over],
        "the store holds the outage's 2 logins"
    );
}

#[tokio::test]
async fn a_joint_request_is_decided_locally_as_a_whole_and_charged_back() {
    let store = Arc::new(Switched::default());
    let (down, up) = (store.clone(), store.clone());
    scenario(
        store,
        move || down.down.store(true, Ordering::SeqCst),
        move || up.down.store(false, Ordering::SeqCst),
    )
    .await;
}

#[tokio::test]
async fn the_same_on_redis_killed_and_restarted_empty() {
    let redis = Arc::new(parking_lot::Mutex::new(RedisServer::start()));
    let options = RedisOptions::default().with_prefix(unique_prefix("envoy-local"));
    let url = redis.lock().url();
    let store = RedisStore::connect(&url, options).await.unwrap();
    let (kill, restart) = (redis.clone(), redis.clone());
    scenario(
        Arc::new(store),
        move || kill.lock().kill(),
        move || restart.lock().restart(),
    )
    .await;
}
