//! The service's Prometheus metrics (docs/design.md §7), owned by one [`Metrics`] value
//! per server rather than a process-global recorder: several servers can run
//! in one process (tests do) and each renders only its own numbers.
//!
//! Every label value comes from a small fixed set, never from the request's
//! key. The `rule` label (`max/window`) is chosen by clients of the HTTP API,
//! so at most [`MAX_RULE_LABELS`] distinct rules get their own series; the
//! rest share `rule="other"`.

use metrics::{SharedString, counter, gauge, histogram};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use parking_lot::RwLock;
use slidelog::metrics::{MetricsHook, Op};
use slidelog::store::MemoryStore;
use slidelog::{Decision, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Distinct `rule` label values kept before new rules count as `other`.
pub const MAX_RULE_LABELS: usize = 64;

/// Decision latency histogram buckets, in seconds (50 µs to 1 s): the memory
/// store answers in microseconds, Redis in a fraction of a millisecond, and
/// the store timeout caps the rest.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];

// The names are defined once, in slidelog_inspect::names, which the
// dashboard and alert tests check against what is really exported.
use slidelog_inspect::names::{
    BAD_REQUESTS_TOTAL as BAD_REQUESTS, DECISION_DURATION_SECONDS as LATENCY,
    DECISIONS_TOTAL as DECISIONS, DEGRADED_DECISIONS_TOTAL as DEGRADED, MEMORY_KEY_CAP,
    MEMORY_KEYS, REJECTION_CACHE_ENTRIES as CACHE_ENTRIES,
    REJECTION_CACHE_LOCAL_ANSWERS_TOTAL as CACHE_LOCAL, RULE_DECISIONS_TOTAL as RULE_DECISIONS,
    STORE_DOWN_SECONDS as STORE_DOWN, STORE_ERRORS_TOTAL as STORE_ERRORS,
    STORE_LATE_RECORDS_TOTAL as LATE_RECORDS, STORE_UNKNOWN_OUTCOMES_TOTAL as UNKNOWN_OUTCOMES,
    STORE_UP,
};

/// One server's metrics: its own recorder, and the handle that renders it.
pub struct Metrics {
    recorder: Arc<PrometheusRecorder>,
    handle: PrometheusHandle,
    rules: RwLock<HashMap<(u64, u64), SharedString>>,
    memory: Option<Arc<MemoryStore>>,
    /// The limiter's rejection cache, when on: its counters are exported.
    rejections: std::sync::OnceLock<Arc<slidelog::rejection_cache::RejectionCache>>,
    /// The limiter's store: its own counters (`Store::stats`) are exported.
    store: std::sync::OnceLock<Arc<dyn slidelog_core::Store>>,
    /// Since when the store is known down (the limiter's outage mode).
    down_since: parking_lot::Mutex<Option<std::time::Instant>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A fresh set of metrics. `memory` is the in-memory store, when that is
    /// the store, so that its key count is reported.
    pub fn new(memory: Option<Arc<MemoryStore>>) -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(LATENCY.to_owned()), LATENCY_BUCKETS)
            .expect("the bucket list is a non-empty constant")
            .build_recorder();
        let handle = recorder.handle();
        let metrics = Self {
            recorder: Arc::new(recorder),
            handle,
            rules: RwLock::new(HashMap::new()),
            memory,
            rejections: std::sync::OnceLock::new(),
            store: std::sync::OnceLock::new(),
            down_since: parking_lot::Mutex::new(None),
        };
        metrics.describe();
        metrics
    }

    fn describe(&self) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
            describe_counter!(
                DECISIONS,
                "Decisions by operation (check/peek) and result (allowed/rejected)."
            );
            describe_counter!(
                RULE_DECISIONS,
                "Decisions by deciding rule (max/window; at most 64 rules, then \"other\") and result."
            );
            describe_counter!(
                DEGRADED,
                "Decisions answered by the fail-open policy because the store failed."
            );
            describe_counter!(
                STORE_ERRORS,
                "Store calls that failed, by kind and whether the failure is transient."
            );
            describe_histogram!(
                LATENCY,
                Unit::Seconds,
                "Time to decide, store call included."
            );
            describe_counter!(
                BAD_REQUESTS,
                "Requests refused as bad input, by the field at fault."
            );
            describe_counter!(
                LATE_RECORDS,
                "Redis checks recorded after their caller had timed out (a clock skew beyond the margin, or a reply that came too late)."
            );
            describe_counter!(
                UNKNOWN_OUTCOMES,
                "Redis checks whose caller timed out and whose reply never came: recorded or not, unknown."
            );
            describe_gauge!(MEMORY_KEYS, "Keys held by the in-memory store.");
            describe_gauge!(MEMORY_KEY_CAP, "Key cap of the in-memory store.");
            describe_gauge!(
                STORE_UP,
                "1 when the last store call or readiness probe succeeded, else 0."
            );
            describe_gauge!(
                STORE_DOWN,
                Unit::Seconds,
                "Seconds the store has been known down (decisions answer by policy without it), 0 while it answers."
            );
            gauge!(STORE_DOWN).set(0.0);
            // Series that alerts watch exist from the start, at 0, so that a
            // rate() over them works before the first incident.
            for op in [Op::Check, Op::Peek] {
                for result in ["allowed", "rejected"] {
                    counter!(DECISIONS, "op" => op.as_str(), "result" => result).increment(0);
                }
                counter!(DEGRADED, "op" => op.as_str()).increment(0);
            }
        });
    }

    /// Counts one decision the store made.
    pub fn decision(&self, op: Op, decision: &Decision, elapsed: Duration) {
        let result = if decision.allowed {
            "allowed"
        } else {
            "rejected"
        };
        let rule = self.rule_label(decision.limit, decision.window_ms);
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(DECISIONS, "op" => op.as_str(), "result" => result).increment(1);
            counter!(RULE_DECISIONS, "rule" => rule, "result" => result).increment(1);
            histogram!(LATENCY, "op" => op.as_str()).record(elapsed.as_secs_f64());
            gauge!(STORE_UP).set(1.0);
        });
    }

    /// Counts a failed store call, and whether fail-open answered for it.
    pub fn store_error(&self, op: Op, error: &StoreError, degraded: bool, elapsed: Duration) {
        let kind = match error {
            StoreError::Timeout(_) => "timeout",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Full { .. } => "full",
            StoreError::Backend(_) => "backend",
            StoreError::Misconfigured(_) => "misconfigured",
            StoreError::Unsupported { .. } => "unsupported",
        };
        let transient = if error.is_transient() {
            "true"
        } else {
            "false"
        };
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(STORE_ERRORS, "op" => op.as_str(), "kind" => kind, "transient" => transient)
                .increment(1);
            if degraded {
                counter!(DEGRADED, "op" => op.as_str()).increment(1);
            }
            if op.decides() {
                histogram!(LATENCY, "op" => op.as_str()).record(elapsed.as_secs_f64());
            }
            gauge!(STORE_UP).set(0.0);
        });
    }

    /// Records the outcome of a readiness probe.
    pub fn store_up(&self, up: bool) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            gauge!(STORE_UP).set(if up { 1.0 } else { 0.0 });
        });
    }

    /// Counts a request refused as bad input; `field` is a fixed name.
    pub fn bad_request(&self, field: &'static str) {
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            counter!(BAD_REQUESTS, "field" => field).increment(1);
        });
    }

    /// Runs `f` with this server's recorder current, for figures recorded
    /// by other crates (the `slidelog inspect` gauges of `--inspect-every`).
    pub fn with_recorder<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(self.recorder.as_ref(), f)
    }

    /// This server's recorder, for crates that record from async code (the
    /// Envoy API's `slidelog_envoy_*` counters).
    pub fn recorder(&self) -> Arc<dyn metrics::Recorder + Send + Sync> {
        self.recorder.clone()
    }

    /// Exports the store's own counters (late records, unknown outcomes).
    pub fn watch_store(&self, store: Arc<dyn slidelog_core::Store>) {
        let _ = self.store.set(store);
    }

    /// Exports the counters of the limiter's rejection cache.
    pub fn watch_rejection_cache(&self, cache: Arc<slidelog::rejection_cache::RejectionCache>) {
        let _ = self.rejections.set(cache);
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            use metrics::{describe_counter, describe_gauge};
            describe_counter!(
                CACHE_LOCAL,
                "Decisions answered by the local rejection cache, without the store."
            );
            describe_gauge!(
                CACHE_ENTRIES,
                "Rejections held by the local rejection cache."
            );
        });
    }

    /// The Prometheus text exposition of everything recorded so far.
    pub fn render(&self) -> String {
        if let Some(cache) = self.rejections.get() {
            let stats = cache.stats();
            metrics::with_local_recorder(self.recorder.as_ref(), || {
                counter!(CACHE_LOCAL).absolute(stats.local_answers);
                gauge!(CACHE_ENTRIES).set(stats.entries as f64);
            });
        }
        if let Some(memory) = &self.memory {
            let (keys, cap) = (memory.key_count(), memory.key_cap());
            metrics::with_local_recorder(self.recorder.as_ref(), || {
                gauge!(MEMORY_KEYS).set(keys as f64);
                gauge!(MEMORY_KEY_CAP).set(cap as f64);
            });
        }
        // Checks of the store recorded after their caller timed out, and
        // those whose outcome never came back (the store's own counters).
        let stats = self.store.get().map(|s| s.stats()).unwrap_or_default();
        let down = (*self.down_since.lock()).map_or(0.0, |since| since.elapsed().as_secs_f64());
        metrics::with_local_recorder(self.recorder.as_ref(), || {
            gauge!(STORE_DOWN).set(down);
            counter!(LATE_RECORDS).absolute(stats.late_records);
            counter!(UNKNOWN_OUTCOMES).absolute(stats.unknown_outcomes);
        });
        self.handle.render()
    }

    /// Folds histogram samples into their buckets; call it now and then so
    /// that memory stays bounded when nobody scrapes `/metrics`.
    pub fn run_upkeep(&self) {
        self.handle.run_upkeep();
    }

    fn rule_label(&self, max: u64, window_ms: u64) -> SharedString {
        // Read-locked on the hot path: a rule is inserted once, then only read.
        if let Some(label) = self.rules.read().get(&(max, window_ms)) {
            return label.clone();
        }
        let mut rules = self.rules.write();
        if let Some(label) = rules.get(&(max, window_ms)) {
            return label.clone();
        }
        if rules.len() >= MAX_RULE_LABELS {
            return SharedString::const_str("other");
        }
        let label = SharedString::from(format!("{max}/{window_ms}ms"));
        rules.insert((max, window_ms), label.clone());
        label
    }
}

/// The limiter reports here: every transport's decisions are counted by
/// the one hook.
impl MetricsHook for Metrics {
    fn decided(&self, op: Op, decision: &Decision, elapsed: Duration) {
        self.decision(op, decision, elapsed);
    }

    fn store_failed(&self, op: Op, error: &StoreError, degraded: bool, elapsed: Duration) {
        self.store_error(op, error, degraded, elapsed);
    }

    fn store_up(&self) {
        Metrics::store_up(self, true);
    }

    fn store_down(&self, _cause: &StoreError) {
        self.down_since
            .lock()
            .get_or_insert_with(std::time::Instant::now);
        Metrics::store_up(self, false);
    }

    fn store_recovered(&self, _down_for: Duration) {
        *self.down_since.lock() = None;
        Metrics::store_up(self, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(limit: u64, window_ms: u64) -> Decision {
        Decision {
            allowed: true,
            limit,
            window_ms,
            count: 1,
            remaining: limit - 1,
            retry_after_ms: 0,
            reset_after_ms: window_ms,
            degraded: false,
            record: None,
        }
    }

    #[test]
    fn two_instances_keep_their_own_numbers() {
        let a = Metrics::new(None);
        let b = Metrics::new(None);
        a.decision(Op::Check, &allowed(5, 1000), Duration::from_micros(80));
        let text = a.render();
        assert!(
            text.contains(r#"slidelog_decisions_total{op="check",result="allowed"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"rule="5/1000ms""#), "{text}");
        assert!(
            text.contains("slidelog_decision_duration_seconds_bucket"),
            "{text}"
        );
        let rendered = b.render();
        assert!(
            rendered.contains(r#"slidelog_decisions_total{op="check",result="allowed"} 0"#),
            "{rendered}"
        );
    }

    #[test]
    fn rule_labels_are_capped() {
        let m = Metrics::new(None);
        for max in 1..=(MAX_RULE_LABELS as u64 + 10) {
            m.decision(Op::Check, &allowed(max, 1000), Duration::ZERO);
        }
        let text = m.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("slidelog_rule_decisions_total{"))
            .count();
        assert_eq!(series, MAX_RULE_LABELS + 1, "{text}");
        assert!(text.contains(r#"rule="other""#));
    }
}
