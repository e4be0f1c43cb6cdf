//! The shared behavioural suite (docs/design.md §1–§2) over the Redis store,
//! each case on its own server, once on Redis `TIME` (the default) and once
//! on the caller's clock; and the same twice over Valkey 8.

use slidelog_core::Store;
use slidelog_redis::{RedisOptions, RedisStore, TimeMode};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::sync::Arc;

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
        .with_time(time)
        // Behaviour, not latency: generous for a busy CI machine.
        .with_timeout(std::time::Duration::from_secs(5));
    let store = RedisStore::connect(&server.url(), options)
        .await
        .expect("connect");
    (Arc::new(store) as Arc<dyn Store>, server)
}

mod server_time {
    use super::*;
    slidelog_testkit::store_suite!(|| redis_store(TimeMode::Server));
}

mod client_time {
    use super::*;
    slidelog_testkit::store_suite!(|| redis_store(TimeMode::Client));
}

mod valkey_server_time {
    use super::*;
    slidelog_testkit::store_suite!(|| valkey_store(TimeMode::Server));
}

mod valkey_client_time {
    use super::*;
    slidelog_testkit::store_suite!(|| valkey_store(TimeMode::Client));
}
