//! The shared behavioural suite (docs/design.md §1–§2) over the Redis store,
//! each case on its own server, once on Redis `TIME` (the default) and once
//! on the caller's clock; and the same twice over Valkey 8.

use slidelog_core::{
    Checks, Clock, Decision, JointDecision, Mode, Now, Request, Store, StoreError, SystemClock,
    TimeMode,
};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::sync::Arc;

/// The store on the caller's clock, as a `Limiter` in `TimeMode::Client`
/// drives it: `Now::Server` becomes a reading of the caller's clock.
#[derive(Debug)]
struct ClientTime(RedisStore, Arc<dyn Clock>);

impl ClientTime {
    /// `Now::Server` read on the caller's clock.
    fn now(&self, now: Now) -> Now {
        match now {
            Now::Server => Now::At(self.1.now_ms()),
            at => at,
        }
    }
}

#[async_trait::async_trait]
impl Store for ClientTime {
    async fn decide(&self, r: &Request, mode: Mode, now: Now) -> Result<Decision, StoreError> {
        self.0.decide(r, mode, self.now(now)).await
    }
    async fn decide_all(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        self.0.decide_all(checks, mode, self.now(now)).await
    }
    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        self.0.reset(key).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.0.ping().await
    }
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
}

async fn redis_store(time: TimeMode) -> (Arc<dyn Store>, RedisServer) {
    store_on(ServerKind::Redis, time).await
}

async fn valkey_store(time: TimeMode) -> (Arc<dyn Store>, RedisServer) {
    store_on(ServerKind::Valkey, time).await
}

async fn store_on(kind: ServerKind, time: TimeMode) -> (Arc<dyn Store>, RedisServer) {
    let server = RedisServer::start_kind(kind);
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("suite"))
        // Behaviour, not latency: generous for a busy CI machine.
        .with_timeout(std::time::Duration::from_secs(5));
    let store = RedisStore::connect(&server.url(), options)
        .await
        .expect("connect");
    let store: Arc<dyn Store> = match time {
        TimeMode::Store => Arc::new(store),
        TimeMode::Client(clock) => Arc::new(ClientTime(store, clock)),
    };
    (store, server)
}

mod server_time {
    use super::*;
    slidelog_testkit::store_suite!(|| redis_store(TimeMode::Store));
}

mod client_time {
    use super::*;
    slidelog_testkit::store_suite!(|| redis_store(TimeMode::Client(Arc::new(SystemClock))));
}

mod valkey_server_time {
    use super::*;
    slidelog_testkit::store_suite!(|| valkey_store(TimeMode::Store));
}

mod valkey_client_time {
    use super::*;
    slidelog_testkit::store_suite!(|| valkey_store(TimeMode::Client(Arc::new(SystemClock))));
}
