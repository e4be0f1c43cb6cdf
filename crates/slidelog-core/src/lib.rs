//! The heart of slidelog: the sliding window log decision rule (docs/design.md §1–§2) as
//! pure functions over a sorted log of millisecond timestamps, the validated
//! request types, clocks, and the [`Store`] trait that every backend implements.
//!
//! This crate depends on no async runtime, no Redis client and no web
//! framework, so the rule can be read and tested on its own.
//!
//! ```
//! use slidelog_core::{engine, Limit, Request};
//!
//! let request = Request::new("user123", vec![Limit::new(2, 1_000)?], 1)?;
//! let mut log = slidelog_core::Log::new();
//! let first = engine::decide_and_record(&mut log, 10_000, &request);
//! let second = engine::decide_and_record(&mut log, 10_001, &request);
//! let third = engine::decide_and_record(&mut log, 10_002, &request);
//! assert!(first.allowed && second.allowed && !third.allowed);
//! // The oldest record (10_000) expires at 11_000: 998 ms from 10_002.
//! assert_eq!(third.retry_after_ms, 998);
//! # Ok::<(), slidelog_core::InputError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bounds;
pub mod checks;
pub mod clock;
pub mod codec;
pub mod control;
pub mod decision;
pub mod engine;
pub mod error;
pub mod floor;
pub mod limit;
pub mod log;
pub mod name;
pub mod receipt;
pub mod redact;
pub mod seal;
pub mod slot;
pub mod store;
pub mod url;

pub use bounds::{BoundError, Bounds};
pub use checks::{Checks, JointDecision, MAX_CHECKS, RefusedBy};
pub use clock::{Clock, ManualClock, MonotonicClock, SystemClock, TimeMode};
pub use control::{Block, Override, Rule};
pub use decision::{Counts, Decision, Detailed, LimitState};
pub use error::{FullLimit, InputError, StoreError};
pub use floor::{FloorError, GranularityFloor};
pub use limit::{
    Limit, LimitParseError, MAX_COST, MAX_KEY_BYTES, MAX_LIMITS, MAX_MAX, MAX_WINDOW_MS, Request,
};
pub use log::Log;
pub use receipt::{MAX_SPENT, Receipt, ReceiptError, RecordRef, Spend};
pub use seal::{
    DEFAULT_RECEIPT_TTL_MS, MAX_RECEIPT_TTL_MS, MIN_SECRET_BYTES, ReceiptKey, SEALED_VERSION,
    SecretTooShort,
};
pub use store::{
    BadOnceMark, DEFAULT_KEY_PREFIX, MAX_NOW_MS, Mode, Now, OnceMark, Settled, Store, StoreStats,
};
