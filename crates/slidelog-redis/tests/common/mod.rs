//! Helpers shared by the Redis store's integration tests.
#![allow(dead_code)]

use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::Duration;

/// A per-call timeout for tests that check behaviour, not latency: generous,
/// because CI runs many test binaries and redis-servers on 2 cores at once.
pub const PATIENT: Duration = Duration::from_secs(5);

/// Default options with a key prefix unique to `test` and the [`PATIENT`] timeout.
pub fn options(test: &str) -> RedisOptions {
    options_with_timeout(test, PATIENT)
}

/// Default options with a key prefix unique to `test` and the per-call
/// `timeout` (tests about latency and outages).
pub fn options_with_timeout(test: &str, timeout: Duration) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(unique_prefix(test))
        .with_timeout(timeout)
}

/// A store on `server` with a key prefix unique to `test`.
pub async fn store(server: &RedisServer, test: &str) -> RedisStore {
    store_with(server, options(test)).await
}

/// A store on `server` with `options`.
pub async fn store_with(server: &RedisServer, options: RedisOptions) -> RedisStore {
    RedisStore::connect(&server.url(), options)
        .await
        .expect("connect to the test redis")
}
