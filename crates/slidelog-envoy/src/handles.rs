//! Metric handles resolved once: the `metrics` macros with labels
//! build a key and look it up in the recorder's registry on every call; the
//! Envoy API instead keeps the [`metrics::Counter`] handles of a rule (one
//! per result) and of a domain's unmatched count beside the config it
//! counts, and increments them.
//!
//! A [`Slot`] holds a value made with one recorder, with that recorder: a
//! service with another recorder (two services over one config) does not
//! take it and registers by name, as before. The slots live in the config
//! (a rule, a domain), so they are bounded by it and replaced with it on
//! reload; a rule renamed for metrics (`detailed_metric`, `value_to_metric`)
//! is kept per name within the rule's budget of names (`config::rule`), and
//! a client's limit override, a rule made per request, counts in the slot
//! its domain keeps for its metric name (at most 1,000 names per domain,
//! then one overflow name: `config::rule::OverrideNames`, which a reload
//! hands on to the new config's same domain).

use std::fmt;
use std::sync::{Arc, OnceLock};

/// The recorder a service counts in.
pub(crate) type SharedRecorder = Arc<dyn metrics::Recorder + Send + Sync>;

/// A value made once with a recorder, and that recorder. Cloning gives an
/// empty slot (a clone may be counted under other labels); two slots are
/// always equal (bookkeeping only).
pub(crate) struct Slot<T>(OnceLock<(SharedRecorder, T)>);

impl<T> Slot<T> {
    /// Returns the value made with `recorder`: made now by `make` if the slot
    /// is empty; `None` when it holds one made with another recorder.
    pub(crate) fn get_or_make(
        &self,
        recorder: &SharedRecorder,
        make: impl FnOnce() -> T,
    ) -> Option<&T> {
        let (owner, value) = self.0.get_or_init(|| (Arc::clone(recorder), make()));
        Arc::ptr_eq(owner, recorder).then_some(value)
    }
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Self(OnceLock::new())
    }
}

impl<T> Clone for Slot<T> {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl<T> PartialEq for Slot<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Slot<T> {}

impl<T> fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Slot(filled)"
        } else {
            "Slot(empty)"
        })
    }
}

/// The results a limited descriptor's answer is counted under, in the
/// order of [`RuleCounters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Within the limit.
    Ok,
    /// Over the limit.
    OverLimit,
    /// Over the limit, answered OK in shadow mode.
    ShadowOverLimit,
    /// The store failed and fail-open answered.
    Degraded,
}

impl Outcome {
    /// The `result` label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::OverLimit => "over_limit",
            Self::ShadowOverLimit => "shadow_over_limit",
            Self::Degraded => "degraded",
        }
    }
}

/// One rule's decision counters, one per [`Outcome`] in that order, each
/// registered when first counted (a result never seen exports no series,
/// as when every count registered by name).
pub(crate) type RuleCounters = [OnceLock<metrics::Counter>; 4];
