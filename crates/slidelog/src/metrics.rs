//! The metrics hook of a [`Limiter`](crate::Limiter): the one place where a
//! decision is timed, the failure policy applied and the outcome reported
//! (docs/design.md §6, §7). The library records nothing by itself; a service
//! fills the hook with its recorder (the `slidelog` server with its
//! Prometheus registry), so that every transport that decides through the
//! limiter is counted the same way.

use slidelog_core::{Decision, StoreError};
use std::time::Duration;

/// Which limiter call a report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Decide and record.
    Check,
    /// Decide, record nothing.
    Peek,
    /// Delete a key's log.
    Reset,
    /// Readiness probe.
    Ping,
    /// Settle a record to its actual costs (docs/design.md §4.6).
    Settle,
    /// Record usage without deciding (docs/design.md §4.6).
    Charge,
}

impl Op {
    /// Returns the label value: `check`, `peek`, `reset`, `ping`, `settle` or `charge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Check => "check",
            Self::Peek => "peek",
            Self::Reset => "reset",
            Self::Ping => "ping",
            Self::Settle => "settle",
            Self::Charge => "charge",
        }
    }

    /// Returns the op of a decision in `mode`: a check or a peek.
    pub fn deciding(mode: slidelog_core::Mode) -> Self {
        match mode {
            slidelog_core::Mode::Record => Self::Check,
            slidelog_core::Mode::Peek => Self::Peek,
        }
    }

    /// Tells whether the call decides (a check or a peek), as opposed to a reset or
    /// a ping.
    pub fn decides(self) -> bool {
        matches!(self, Self::Check | Self::Peek)
    }
}

/// What a [`Limiter`](crate::Limiter) reports. Every method has an empty
/// default, so an implementation picks what it records.
///
/// ```
/// use slidelog::metrics::{MetricsHook, Op};
/// use slidelog::{Decision, Limit, Limiter};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// #[derive(Debug, Default)]
/// struct Rejections(AtomicU64);
///
/// impl MetricsHook for Rejections {
///     fn decided(&self, _op: Op, decision: &Decision, _elapsed: std::time::Duration) {
///         if !decision.allowed {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let hook = Arc::new(Rejections::default());
/// let limiter = Limiter::builder()
///     .metrics(hook.clone())
///     .build(Arc::new(slidelog::store::MemoryStore::new()));
/// let limits = [Limit::new(1, 60_000)?];
/// limiter.check("k", &limits, 1).await?;
/// limiter.check("k", &limits, 1).await?;
/// assert_eq!(hook.0.load(Ordering::Relaxed), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
/// ```
pub trait MetricsHook: Send + Sync + std::fmt::Debug {
    /// Called when the store decided (`op` is [`Op::Check`] or [`Op::Peek`]) in `elapsed`.
    fn decided(&self, op: Op, decision: &Decision, elapsed: Duration) {
        let _ = (op, decision, elapsed);
    }

    /// Called when a store call failed (or exceeded the timeout) after `elapsed`;
    /// `degraded` when the fail-open policy answered for it.
    fn store_failed(&self, op: Op, error: &StoreError, degraded: bool, elapsed: Duration) {
        let _ = (op, error, degraded, elapsed);
    }

    /// An operator's control changed (docs/design.md §5.4): `what` is
    /// `block` or `override`, `op` `put`, `delete` or (a limit's
    /// `block_ms`) `penalty`.
    fn control(&self, what: &'static str, op: &'static str) {
        let _ = (what, op);
    }

    /// Called when the store answered a readiness ping, and after a call
    /// that failed only because one node of the store is down while the
    /// others answer (a Redis Cluster master, reported by
    /// [`StoreStats::nodes_down`](slidelog_core::StoreStats::nodes_down)):
    /// that call's [`store_failed`](Self::store_failed) comes first, so a
    /// recorder that marks the store down on a failure marks it up again.
    fn store_up(&self) {}

    /// Called when the store is found down (a call and its probe failed):
    /// decisions answer by policy without it until it answers again
    /// (docs/design.md §6).
    fn store_down(&self, cause: &StoreError) {
        let _ = cause;
    }

    /// Called when a probe found the store answering again after `down_for`.
    fn store_recovered(&self, down_for: Duration) {
        let _ = down_for;
    }

    /// Called by a rate limit layer with tiers
    /// (`RateLimitLayer::tiers`) for each request it decided, with the
    /// tier its key was in (`"free"`, `"paid"`, or `"default"` for a key no
    /// tier holds): a recorder labels its counters with it. Also told of
    /// the decision [`decided`](Self::decided) already saw.
    fn tier_decided(&self, tier: &str, decision: &Decision) {
        let _ = (tier, decision);
    }

    /// Called for every answer of the local policy
    /// ([`FailurePolicy::Local`](crate::FailurePolicy::Local)): decided in
    /// this instance's memory at its share, `degraded`.
    fn local_decided(&self, op: Op, decision: &Decision) {
        let _ = (op, decision);
    }

    /// Called when the local policy's charge-back answered one record.
    fn local_charged_back(&self, outcome: ChargeBack) {
        let _ = outcome;
    }

    /// Called when the number of local records awaiting charge-back changed.
    fn local_pending(&self, records: usize) {
        let _ = records;
    }

    /// Called when a local admission was refused because the journal is at
    /// its cap.
    fn local_journal_full(&self) {}
}

/// What the charge-back of one local record came to (docs/design.md §6,
/// "Local answers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChargeBack {
    /// The store counted it now.
    Charged,
    /// The store had counted it already (a reply lost before): nothing
    /// changed.
    Duplicate,
    /// It had expired before the store returned: nothing to charge.
    Expired,
    /// The store refused it (not an outage): dropped, logged.
    Failed,
}

impl ChargeBack {
    /// The metric label: `charged`, `duplicate`, `expired` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Charged => "charged",
            Self::Duplicate => "duplicate",
            Self::Expired => "expired",
            Self::Failed => "failed",
        }
    }
}

/// The hook that records nothing (the default of a limiter).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMetrics;

impl MetricsHook for NoMetrics {}
