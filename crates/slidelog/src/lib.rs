//! slidelog: exact, distributed rate limiting by the sliding window log.
//!
//! This crate is the one dependency a Rust user adds: it re-exports the
//! decision types and opens a store from a URL (`memory://`, `redis://…`).
//! (The facade grows in the library issue: limiter, tower layer.)
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod url;

pub use slidelog_core::{
    Clock, Decision, InputError, Limit, ManualClock, Mode, Now, Request, Store, StoreError,
    SystemClock,
};
pub use slidelog_memory::MemoryStore;
#[cfg(feature = "redis")]
pub use slidelog_redis::{RedisOptions, RedisStore, TimeMode, UnsafePipelinedStore};
#[cfg(feature = "redis")]
pub use url::redis_options;
pub use url::{OpenError, StoreOptions, mask_password, open_store};
