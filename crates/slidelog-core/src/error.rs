//! Typed errors: [`InputError`] for a request that breaks a bound of docs/design.md §1
//! (the message names the field and the bound), and [`StoreError`] for a store
//! that could not decide (it says whether the failure is transient, which
//! drives fail-open / fail-closed, retries and readiness).

use std::time::Duration;

/// A request outside the bounds of docs/design.md §1. Never clamped: always reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The key is the empty string.
    #[error("key must not be empty (1 to 512 bytes)")]
    EmptyKey,
    /// The key is longer than 512 bytes.
    #[error("key is {got} bytes; it must be 1 to 512 bytes")]
    KeyTooLong {
        /// Length in bytes.
        got: usize,
    },
    /// `max` outside 1 ..= 10,000,000.
    #[error("max must be between 1 and 10000000, got {got}")]
    Max {
        /// The value given.
        got: u64,
    },
    /// `window` outside 1 ms ..= 366 days.
    #[error("window_ms must be between 1 and 31622400000 (366 days), got {got_ms}")]
    Window {
        /// The value given, in ms.
        got_ms: u64,
    },
    /// A window that is not a whole number of milliseconds.
    #[error("window must be a whole number of milliseconds (1 ms to 366 days), got {got:?}")]
    WindowResolution {
        /// The value given.
        got: Duration,
    },
    /// `cost` of 0, or above the smallest `max` of the request's limits.
    #[error("cost must be between 1 and {max} (the smallest max of the limits), got {got}")]
    Cost {
        /// The value given.
        got: u64,
        /// The smallest `max` among the limits.
        max: u64,
    },
    /// No limit, or more than 16.
    #[error("limits must hold between 1 and 16 limits, got {got}")]
    LimitCount {
        /// How many were given.
        got: usize,
    },
}

impl InputError {
    /// The request field at fault, as named in the HTTP API.
    pub fn field(&self) -> &'static str {
        match self {
            Self::EmptyKey | Self::KeyTooLong { .. } => "key",
            Self::Max { .. } => "max",
            Self::Window { .. } | Self::WindowResolution { .. } => "window_ms",
            Self::Cost { .. } => "cost",
            Self::LimitCount { .. } => "limits",
        }
    }
}

/// A store could not make a decision.
///
/// [`StoreError::is_transient`] tells a passing failure (timeout, refused
/// connection, failover in progress) from one that retrying will not fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store did not answer within the per-call timeout.
    #[error("store timed out after {0:?}")]
    Timeout(Duration),
    /// The store cannot be reached right now (refused, reset, loading,
    /// failover, cluster down). Transient.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The in-memory store holds as many keys as its cap and none has expired.
    #[error("store full: {cap} keys held, none expired; raise the key cap or wait")]
    Full {
        /// The configured key cap.
        cap: usize,
    },
    /// The store answered with an error that retrying will not fix
    /// (wrong key type, script error, bad configuration).
    #[error("store error: {0}")]
    Backend(String),
}

impl StoreError {
    /// True for failures that can pass by themselves: timeouts and
    /// unavailability. Drives fail-open/fail-closed, retries and readiness.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Timeout(_) | Self::Unavailable(_))
    }
}
