//! slidelog: exact, distributed rate limiting by the sliding window log.
//!
//! Every admitted request is one record in a log (a Redis sorted set, or the
//! in-process memory store); one atomic step drops expired records, counts the
//! live ones and admits while `count + cost <= max`. No interleaving of callers
//! can admit more than `max` per window.
//!
//! This crate is the one dependency a Rust service adds:
//!
//! - [`Limiter`]: built from a store URL ([`Limiter::from_url`]: `memory://`,
//!   `redis://…`) or a store ([`Limiter::from_store`]), with options through
//!   [`Limiter::builder`]; [`check`](Limiter::check), [`peek`](Limiter::peek),
//!   [`reset`](Limiter::reset); the store-error policy ([`FailurePolicy`]).
//! - `middleware` (feature `tower`): a tower `Layer` for axum, tonic and any
//!   `http::Request` service, with key extractors and per-route limits.
//! - [`headers`]: the IETF RateLimit header fields.
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

pub mod episode;
pub mod headers;
mod limiter;
pub mod rejection_cache;
#[cfg(feature = "tower")]
pub mod middleware;
mod url;

pub use limiter::{BuildError, FailurePolicy, Limiter, LimiterBuilder, LimiterError, TimeMode};
pub use slidelog_core::{
    Clock, Decision, InputError, Limit, ManualClock, Mode, Now, Request, Store, StoreError,
    SystemClock,
};
pub use slidelog_memory::MemoryStore;
/// The Redis store's own clock choice (as [`RedisOptions::time`]); a
/// [`Limiter`] takes [`TimeMode`] instead, which works with every store.
#[cfg(feature = "redis")]
pub use slidelog_redis::TimeMode as RedisTimeMode;
#[cfg(feature = "redis")]
pub use slidelog_redis::{RedisOptions, RedisStore, UnsafePipelinedStore};
#[cfg(feature = "redis")]
pub use url::redis_options;
pub use url::{OpenError, StoreOptions, mask_password, open_store};
