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
    /// A granularity outside 1 ..= `window_ms`, or not dividing `window_ms`.
    #[error(
        "granularity_ms must be between 1 and window_ms ({window_ms}) and divide window_ms, got {got}"
    )]
    Granularity {
        /// The value given.
        got: u64,
        /// The limit's window.
        window_ms: u64,
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
    /// No check, or more keys than a joint decision takes
    /// ([`crate::checks::MAX_CHECKS`], or an operator's lower bound).
    #[error("checks must hold between 1 and {max} keys, got {got}")]
    CheckCount {
        /// How many were given.
        got: usize,
        /// The bound.
        max: usize,
    },
    /// A per-limit cost of 0, or above its own limit's `max`.
    #[error("limits[{index}].cost must be between 1 and {max} (that limit's max), got {got}")]
    LimitCost {
        /// Position of the limit in the request.
        index: usize,
        /// The value given.
        got: u64,
        /// That limit's `max`.
        max: u64,
    },
    /// A value above a bound the operator set ([`crate::Bounds`]).
    #[error(transparent)]
    Bound(#[from] crate::BoundError),
    /// A limit name outside the charset or length bound
    /// ([`crate::limit::LimitName::new`]).
    #[error(
        "name must be 1 to 32 bytes of ASCII letters, digits, '_', '-' and '.', starting with a letter, got {got:?}"
    )]
    Name {
        /// The name given (at most 33 characters of it).
        got: String,
    },
    /// Two limits of one request carry the same name.
    #[error("limits[].name must be unique within a request, got {name:?} twice")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// A cost given by a name that no limit of the request carries.
    #[error("cost names the limit {name:?}, which the request has no limit named so")]
    UnknownName {
        /// The name given.
        name: String,
    },
    /// A receipt that cannot settle the request: malformed, of another key,
    /// or of other limits.
    #[error(transparent)]
    Receipt(#[from] crate::ReceiptError),
    /// A settle or charge cost above the absolute bound (10,000,000).
    #[error(
        "limits[{index}].cost must be between 0 and 10000000 for a settle or a charge, got {got}"
    )]
    UsageCost {
        /// Position of the limit in the request.
        index: usize,
        /// The value given.
        got: u64,
    },
    /// A limit's `block_ms` above the bound.
    #[error("block_ms must be between 0 and 31622400000 (366 days), got {got}")]
    BlockMs {
        /// The value given.
        got: u64,
    },
    /// A block's `duration_ms` out of range.
    #[error("duration_ms must be between 1 and 31622400000 (366 days), got {got}")]
    BlockDuration {
        /// The value given.
        got: u64,
    },
    /// An override's `ttl_ms` out of range.
    #[error("ttl_ms must be between 1 and 31622400000 (366 days), got {got}")]
    OverrideTtl {
        /// The value given.
        got: u64,
    },
    /// A block's reason too long or not printable.
    #[error("reason must be at most 256 bytes of printable text, got {got} bytes")]
    Reason {
        /// Its length in bytes.
        got: usize,
    },
    /// An override that names no limits, or both allow and deny.
    #[error("{0}")]
    Override(String),
    /// Per-limit costs whose number is not the number of limits.
    #[error("costs must hold one cost per limit ({limits}), got {got}")]
    CostCount {
        /// How many costs were given.
        got: usize,
        /// How many limits the request has.
        limits: usize,
    },
}

impl InputError {
    /// The request field at fault, as named in the HTTP API.
    pub fn field(&self) -> &'static str {
        match self {
            Self::EmptyKey | Self::KeyTooLong { .. } => "key",
            Self::Max { .. } => "max",
            Self::Granularity { .. } => "granularity_ms",
            Self::Window { .. } | Self::WindowResolution { .. } => "window_ms",
            Self::Cost { .. } | Self::CostCount { .. } => "cost",
            Self::LimitCount { .. } => "limits",
            Self::CheckCount { .. } => "checks",
            Self::LimitCost { .. } => "limits[].cost",
            Self::Name { .. } | Self::DuplicateName { .. } => "limits[].name",
            Self::UnknownName { .. } => "cost",
            Self::Receipt(_) => "receipt",
            Self::UsageCost { .. } => "cost",
            Self::Bound(bound) => bound.field(),
            Self::BlockMs { .. } => "limits[].block_ms",
            Self::BlockDuration { .. } => "duration_ms",
            Self::OverrideTtl { .. } => "ttl_ms",
            Self::Reason { .. } => "reason",
            Self::Override(_) => "limits",
        }
    }
}

/// The bound of the in-memory store that a [`StoreError::Full`] reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullLimit {
    /// The key cap (`--memory-key-cap`).
    Keys(usize),
    /// The memory budget in bytes (`--memory-limit`).
    Bytes(usize),
    /// The cap on blocks and overrides held (`--max-blocks`), docs/design.md §5.4.
    Controls(usize),
}

impl std::fmt::Display for FullLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Keys(cap) => write!(f, "{cap} keys held (the key cap, --memory-key-cap)"),
            Self::Controls(cap) => {
                write!(f, "{cap} blocks and overrides held (the cap, --max-blocks)")
            }
            Self::Bytes(limit) => {
                write!(f, "{limit} bytes held (the memory budget, --memory-limit)")
            }
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
    /// The in-memory store is at its key cap or memory budget and no log
    /// has expired: new keys are refused until one does. Not an outage: the
    /// fail-open policy never applies to it (docs/design.md §6).
    #[error("store full: {limit}; new keys are refused until a log expires{}",
        retry_after_ms.map(|ms| format!(" (the first in {ms} ms)")).unwrap_or_default())]
    Full {
        /// The bound that is reached.
        limit: FullLimit,
        /// Time until the first held log expires, when known.
        retry_after_ms: Option<u64>,
    },
    /// The store answered with an error that retrying will not fix
    /// (wrong key type, script error, bad configuration).
    #[error("store error: {0}")]
    Backend(String),
    /// The store refuses this client as configured: wrong password, unknown
    /// ACL user, a command the user may not run (NOPERM), a database index
    /// the server does not have, a failed TLS handshake. Not transient:
    /// it lasts until someone fixes the configuration.
    #[error("store misconfigured: {0}")]
    Misconfigured(String),
    /// The store does not implement this operation (yet): a settle or a
    /// charge on a store without them. Not transient.
    #[error("the {store} store does not support {operation}")]
    Unsupported {
        /// The store's kind ([`crate::Store::kind`]).
        store: &'static str,
        /// The operation: "settle" or "charge".
        operation: &'static str,
    },
}

impl StoreError {
    /// True for failures that can pass by themselves: timeouts and
    /// unavailability. Drives fail-open/fail-closed, retries and readiness.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Timeout(_) | Self::Unavailable(_))
    }

    /// True when the store refuses this client's configuration
    /// ([`StoreError::Misconfigured`]): an operator must act.
    pub fn is_misconfiguration(&self) -> bool {
        matches!(self, Self::Misconfigured(_))
    }

    /// True when the store is full ([`StoreError::Full`]): not an outage, so
    /// no failure policy admits the request.
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full { .. })
    }

    /// The `Retry-After` of a full store's answer, in whole seconds: the
    /// time until the first held log expires, rounded up, at most
    /// [`FULL_RETRY_AFTER_MAX_SECS`] (and that when unknown). `None` for
    /// any other error.
    pub fn full_retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::Full { retry_after_ms, .. } => Some(
                retry_after_ms
                    .map_or(FULL_RETRY_AFTER_MAX_SECS, |ms| ms.div_ceil(1_000))
                    .clamp(1, FULL_RETRY_AFTER_MAX_SECS),
            ),
            _ => None,
        }
    }
}

/// The longest `Retry-After` a full store's answer carries (docs/design.md
/// §6): the first held log may expire in up to 366 days, but room comes
/// sooner in ways the store cannot foresee (records expiring inside held
/// logs free bytes of the budget, a reset frees a key, an operator raises
/// the bound), and a client told a year would not come back for one.
pub const FULL_RETRY_AFTER_MAX_SECS: u64 = 60;

/// An error and every cause in its source chain on one line, each said once
/// (`what failed: why: why deeper`), for a log field or a message that
/// shows one string. The crates' errors leave their cause to `source()`
/// rather than quote it, so a chain printer (anyhow's `{:#}`) and this say
/// each cause once.
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod chain_tests {
    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn with_causes_says_each_cause_once() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(super::with_causes(&e), "outer: inner");
    }
}
