//! Test helpers for slidelog: real `redis-server` processes started on free
//! loopback ports and stopped when dropped, and the behavioural suite of
//! docs/design.md §1–§2 that every store runs ([`store_suite!`]), so stores cannot drift.
//! [`RedisCluster`] starts a local Redis Cluster (3 masters with 1 replica
//! each) and [`SentinelGroup`] a Sentinel group (1 master, 1 replica, 3
//! sentinels), with helpers to fail them over.
//! Tests never use a Redis they did not start (a machine may run its own on
//! 6379 for other uses).
//!
//! Every harness starts Redis or, for the same tests over Valkey 8, Valkey
//! ([`ServerKind`]).
//!
//! When `redis-server` (or `valkey-server`) is missing, starting one fails
//! loudly with the command that installs it: a test never skips silently.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod admin;
pub mod cluster;
mod fleet;
pub mod module;
pub mod proxy;
mod redis_server;
pub mod runner;
pub mod seed;
pub mod sentinel;
mod server_kind;
pub mod suite;
pub mod tls;
pub mod tools;

pub use cluster::RedisCluster;
pub use module::module_path;
pub use proxy::FreezingProxy;
pub use redis_server::{RedisServer, free_port, redis_server_binary};
pub use sentinel::SentinelGroup;
pub use server_kind::ServerKind;

/// A key prefix unique to one test, so tests share a server without FLUSHDB.
pub fn unique_prefix(test: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "t:{test}:{}:{}:",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}
