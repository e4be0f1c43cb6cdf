//! The Redis store of slidelog: every decision is one atomic Lua script on
//! one sorted set, `rate:sliding:<key>`, laid out as the original design's
//! script lays it out (score = ms timestamp, member = a ULID), so both can
//! decide on the same keys side by side. A check of one limit at cost 1 runs
//! `single_limit.lua`; every other decision (and a weighted log that script
//! hands back) runs `sliding_log.lua` (docs/design.md §4.2).
//!
//! The scripts drop the expired records, count the live units for every
//! limit, admit iff `live + cost <= max` for all of them, append one record
//! per request, set `PEXPIRE` to the longest window and compute
//! `retry_after_ms` / `reset_after_ms` exactly as
//! [`slidelog_core::engine::evaluate`] does. Time is Redis `TIME` read inside
//! the script by default (every instance shares one clock), or the caller's.
//!
//! Usage-based limits (docs/design.md §4.5): [`Store::settle`](slidelog_core::Store::settle)
//! changes an admitted record's costs (renaming it, so a receipt settles
//! once) and [`Store::charge`](slidelog_core::Store::charge) records costs
//! without deciding (appended, or merged into a full log's newest record),
//! each one atomic run of `usage.lua` ([`usage`]); a check's receipt names
//! its member's ULID.
//!
//! Where the server loads slidelog's native module, the same decision is one
//! `SLIDELOG.CHECK` instead ([`module`]): the store URL's
//! `engine=auto|module|script` chooses ([`engine`], docs/design.md §4.4;
//! `auto`, the default, uses the module where every node has it), and both
//! engines decide on the same keys without ever admitting beyond a limit.
//!
//! - [`RedisStore`]: one Redis (`redis://`, `rediss://`), reconnecting by itself.
//! - [`ScriptStore`]: the same store over any redis-rs async connection
//!   (`ConnectionLike + Clone`), reusing the script, its NOSCRIPT reload,
//!   the timeout and the error mapping.
//! - [`ClusterStore`]: Redis Cluster (`redis+cluster://host:port,host:port`).
//! - [`SentinelStore`]: the master of a Sentinel group, following failovers
//!   (`redis+sentinel://host:port,host:port/master-name`).
//! - [`UnsafePipelinedStore`]: the original's non-atomic pipelined variant,
//!   **for comparison only**: it admits more than `max` under concurrency.
//!
//! ```no_run
//! use slidelog_core::{Limit, Request, Store};
//! use slidelog_redis::{RedisOptions, RedisStore};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379", RedisOptions::default()).await?;
//! let request = Request::single("user123", Limit::new(100, 60_000)?)?;
//! let decision = store.check(&request).await?;
//! println!("allowed: {}, remaining: {}", decision.allowed, decision.remaining);
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod caller_deadline;
mod catalogue;
pub mod cluster;
mod cluster_store;
mod connect;
pub mod engine;
pub mod errors;
pub mod heal;
pub mod joint;
pub mod keys;
pub mod members;
pub mod module;
mod multi_url;
mod options;
mod pipelined;
pub mod script;
pub mod sentinel;
pub mod skew;
mod store;
pub mod usage;
mod watched;

pub use cluster::ClusterConnection;
pub use cluster_store::ClusterStore;
pub use connect::{ConnectError, client, install_crypto_provider, mask_password};
pub use engine::{Engine, RedisEngine};
pub use multi_url::MultiHostUrl;
pub use options::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_PREFIX, DEFAULT_PROBE_TIMEOUT, DEFAULT_SKEW_MARGIN,
    DEFAULT_TIMEOUT, RedisOptions,
};
pub use pipelined::UnsafePipelinedStore;
pub use script::Outcome;
pub use sentinel::{SentinelConnection, SentinelStore};
pub use store::{LATE_WINDOW, RedisStore, ScriptStore, StandaloneConnection};
