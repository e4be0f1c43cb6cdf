//! slidelog: exact, distributed rate limiting by the sliding window log.
//!
//! Every admitted request is one record in a log (a Redis sorted set, or the
//! in-process memory store); one atomic step drops expired records, counts the
//! live ones and admits while `count + cost <= max`. No interleaving of callers
//! can admit more than `max` per window.
//!
//! This crate is the one dependency a Rust service adds. Its root holds what
//! a caller needs to decide:
//!
//! - [`Limiter`] and its [`LimiterBuilder`]: built from a store URL
//!   ([`Limiter::from_url`]: `memory://`, `redis://…`) or a store
//!   ([`Limiter::from_store`]); [`check`](Limiter::check),
//!   [`peek`](Limiter::peek), [`reset`](Limiter::reset); the store-error
//!   policy ([`FailurePolicy`]) and the clock ([`TimeMode`]); waiting for
//!   room ([`Limiter::until_ready`], [`Wait`]). Every decision
//!   is bounded in time, and reported to a [`metrics::MetricsHook`], there.
//! - [`Limit`], [`Request`], [`Cost`], [`Decision`]: what is asked and what
//!   is answered.
//! - the errors: [`LimiterError`], [`OpenError`], [`InputError`], [`StoreError`].
//! - `RateLimitLayer` (feature `tower`): a tower layer for axum, tonic and
//!   any `http::Request` service; extractors and per-route limits in
//!   `middleware` (links left out: they exist only with the feature).
//!
//! The rest lives in submodules: [`blocking`] (the same limiter for
//! programs without an async runtime), [`store`] (the `Store` trait, the memory
//! store, clocks), `redis` (the Redis stores, including the unsafe pipelined
//! variant kept for comparison), [`url`] (the store-URL model and
//! [`url::open_store`]), [`redact`] (passwords out of logs), [`headers`] (the
//! IETF RateLimit header fields) and [`metrics`] (the hook).
//!
//! Features: `redis` (default) adds the Redis stores; `tower` the layer;
//! `axum` and `tonic` the integrations with those frameworks (peer address,
//! matched route, body types, gRPC status answers).
//!
//! ```
//! use slidelog::{Limit, Limiter};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // In tests and single instances: the memory store. In production:
//! // Limiter::from_url("redis://127.0.0.1:6379").await?
//! let limiter = Limiter::from_url("memory://").await?;
//! let limits = [Limit::new(3, 60_000)?]; // 3 per minute
//!
//! for _ in 0..3 {
//!     assert!(limiter.check("user123", &limits, 1).await?.allowed);
//! }
//! let fourth = limiter.check("user123", &limits, 1).await?;
//! assert!(!fourth.allowed);
//! assert_eq!(fourth.remaining, 0);
//! assert!(fourth.retry_after_ms > 59_000); // the oldest record expires in ~60 s
//!
//! limiter.reset("user123").await?;
//! assert!(limiter.check("user123", &limits, 1).await?.allowed);
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod blocking;
mod cost;
pub mod episode;
pub mod headers;

mod limiter;
pub mod metrics;
#[cfg(feature = "tower")]
pub mod middleware;
pub mod policies;
pub mod redact;
pub mod rejection_cache;
pub mod url;

pub use cost::Cost;
pub use limiter::{
    BadShare, BuildError, DEFAULT_JOURNAL_CAP, FailurePolicy, Limiter, LimiterBuilder,
    LimiterError, StoreHealth, UnknownPolicy, Wait, WaitError, shared_receipt_key,
};
#[cfg(feature = "tower")]
pub use middleware::RateLimitLayer;
pub use slidelog_core::limit;
pub use slidelog_core::{
    Block, BoundError, Bounds, Checks, Counts, Decision, Detailed, FloorError, FullLimit,
    GranularityFloor, InputError, JointDecision, Limit, LimitParseError, LimitState,
    MAX_RECEIPT_TTL_MS, Mode, Now, Override, Receipt, ReceiptError, ReceiptKey, RecordRef,
    RefusedBy, Request, Rule, Settled, StoreError, TimeMode,
};
pub use url::OpenError;

/// Stores and clocks: the [`Store`](store::Store) trait every backend
/// implements, the in-process [`MemoryStore`](store::MemoryStore), and the
/// clocks a [`TimeMode::Client`] limiter can read.
pub mod store {
    pub use slidelog_core::control::{DEFAULT_MAX_CONTROLS, MAX_BLOCK_MS, MAX_REASON_BYTES};
    pub use slidelog_core::{
        Clock, DEFAULT_KEY_PREFIX, MAX_NOW_MS, ManualClock, OnceMark, Store, SystemClock,
    };
    pub use slidelog_memory::MemoryStore;
}

/// The Redis stores: one atomic Lua script per decision on one server
/// ([`RedisStore`](redis::RedisStore)), a Cluster or a Sentinel group; and
/// [`UnsafePipelinedStore`](redis::UnsafePipelinedStore), the original's
/// non-atomic variant, kept only to measure how far it overshoots.
#[cfg(feature = "redis")]
pub mod redis {
    pub use crate::url::redis_options;
    pub use slidelog_redis::caller_deadline;
    pub use slidelog_redis::{
        ClusterStore, ConnectError, RedisOptions, RedisStore, SentinelStore, UnsafePipelinedStore,
    };
}
