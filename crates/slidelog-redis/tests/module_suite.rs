//! The shared behavioural suite (docs/design.md §1–§2) over the module
//! engine (`engine=module`, docs/design.md §4.3): every case on its own
//! server with the module loaded, on Redis and on Valkey 8. The suite
//! decides at explicit times and on the server's clock, so both `now_ms`
//! forms of `SLIDELOG.CHECK` are covered.

use slidelog_core::Store;
use slidelog_redis::{Engine, RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::sync::Arc;

async fn module_store(kind: ServerKind) -> (Arc<dyn Store>, RedisServer) {
    let server = RedisServer::start_with_module(kind, &[]);
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("module-suite"))
        // Behaviour, not latency: generous for a busy CI machine.
        .with_timeout(std::time::Duration::from_secs(5));
    let url = format!("{}?engine=module", server.url());
    let store = RedisStore::connect(&url, options).await.expect("connect");
    assert_eq!(store.engine_in_use(), Some(Engine::Module));
    (Arc::new(store) as Arc<dyn Store>, server)
}

mod redis_module {
    use super::*;
    slidelog_testkit::store_suite!(|| module_store(ServerKind::Redis));
}

mod valkey_module {
    use super::*;
    slidelog_testkit::store_suite!(|| module_store(ServerKind::Valkey));
}
