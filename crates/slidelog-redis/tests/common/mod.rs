//! Helpers shared by the Redis store's integration tests.
#![allow(dead_code)]

use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, unique_prefix};

/// A store on `server` with a key prefix unique to `test`.
pub async fn store(server: &RedisServer, test: &str) -> RedisStore {
    store_with(
        server,
        RedisOptions::default().with_prefix(unique_prefix(test)),
    )
    .await
}

/// A store on `server` with `options`.
pub async fn store_with(server: &RedisServer, options: RedisOptions) -> RedisStore {
    RedisStore::connect(&server.url(), options)
        .await
        .expect("connect to the test redis")
}
