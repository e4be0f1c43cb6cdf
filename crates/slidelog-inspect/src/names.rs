//! Every Prometheus metric name the project exports, in one place: the
//! inspect gauges that [`crate::export`] sets, and the service's own metrics
//! (mirrored from `slidelog-server`'s metrics module). The Grafana dashboard
//! and the alert rules under `deploy/` may only use names listed in [`all()`];
//! a test checks it, and the server's test checks that a running service
//! really exports them.

/// Sorted-set keys matched by the last scan.
pub const INSPECT_KEYS: &str = "slidelog_inspect_keys";
/// Records (sum of ZCARD) of the last scan.
pub const INSPECT_RECORDS: &str = "slidelog_inspect_records";
/// Sum of MEMORY USAGE of the matched keys, bytes.
pub const INSPECT_MEMORY_BYTES: &str = "slidelog_inspect_memory_bytes";
/// Mean MEMORY USAGE per key, bytes.
pub const INSPECT_MEMORY_PER_KEY_BYTES: &str = "slidelog_inspect_memory_per_key_bytes";
/// Memory per record, bytes.
pub const INSPECT_BYTES_PER_RECORD: &str = "slidelog_inspect_bytes_per_record";
/// The largest ZCARD.
pub const INSPECT_MAX_ZCARD: &str = "slidelog_inspect_max_zcard";
/// The largest MEMORY USAGE of one key, bytes.
pub const INSPECT_MAX_MEMORY_BYTES: &str = "slidelog_inspect_max_memory_bytes";
/// Keys with ZCARD <= `le`, cumulative like a Prometheus histogram's buckets
/// (so `histogram_quantile` works on it); `le` = 1, 10, 100, …, 1e7, +Inf.
pub const INSPECT_ZCARD_KEYS: &str = "slidelog_inspect_zcard_keys";
/// Matched keys that are not sorted sets.
pub const INSPECT_OTHER_TYPE_KEYS: &str = "slidelog_inspect_other_type_keys";
/// Keys with a problem, by `kind` (the snake_case [`crate::ProblemKind`] names).
pub const INSPECT_PROBLEM_KEYS: &str = "slidelog_inspect_problem_keys";
/// The configured `max` the oversize check uses (absent when unknown).
pub const INSPECT_LIMIT_MAX: &str = "slidelog_inspect_limit_max";
/// Redis nodes scanned.
pub const INSPECT_NODES: &str = "slidelog_inspect_nodes";
/// Duration of the last scan, seconds.
pub const INSPECT_SCAN_DURATION_SECONDS: &str = "slidelog_inspect_scan_duration_seconds";
/// Unix time of the last successful scan, seconds.
pub const INSPECT_LAST_SCAN_TIMESTAMP_SECONDS: &str =
    "slidelog_inspect_last_scan_timestamp_seconds";
/// Scans that failed.
pub const INSPECT_SCAN_ERRORS_TOTAL: &str = "slidelog_inspect_scan_errors_total";

/// The gauges and counters of `inspect`.
pub const INSPECT: &[&str] = &[
    INSPECT_KEYS,
    INSPECT_RECORDS,
    INSPECT_MEMORY_BYTES,
    INSPECT_MEMORY_PER_KEY_BYTES,
    INSPECT_BYTES_PER_RECORD,
    INSPECT_MAX_ZCARD,
    INSPECT_MAX_MEMORY_BYTES,
    INSPECT_ZCARD_KEYS,
    INSPECT_OTHER_TYPE_KEYS,
    INSPECT_PROBLEM_KEYS,
    INSPECT_LIMIT_MAX,
    INSPECT_NODES,
    INSPECT_SCAN_DURATION_SECONDS,
    INSPECT_LAST_SCAN_TIMESTAMP_SECONDS,
    INSPECT_SCAN_ERRORS_TOTAL,
];

/// Decisions by `op` and `result` (service).
pub const DECISIONS_TOTAL: &str = "slidelog_decisions_total";
/// Decisions by deciding `rule` and `result` (service).
pub const RULE_DECISIONS_TOTAL: &str = "slidelog_rule_decisions_total";
/// Decisions answered by fail-open because the store failed (service).
pub const DEGRADED_DECISIONS_TOTAL: &str = "slidelog_degraded_decisions_total";
/// Store calls that failed (service).
pub const STORE_ERRORS_TOTAL: &str = "slidelog_store_errors_total";
/// Decision latency histogram, seconds (service; `_bucket`, `_sum`, `_count`).
pub const DECISION_DURATION_SECONDS: &str = "slidelog_decision_duration_seconds";
/// Requests refused as bad input (service).
pub const BAD_REQUESTS_TOTAL: &str = "slidelog_bad_requests_total";
/// Keys held by the in-memory store (service).
pub const MEMORY_KEYS: &str = "slidelog_memory_keys";
/// Key cap of the in-memory store (service).
pub const MEMORY_KEY_CAP: &str = "slidelog_memory_key_cap";
/// Bytes the in-memory store holds, as counted against its memory budget
/// (service).
pub const MEMORY_BYTES: &str = "slidelog_memory_bytes";
/// The in-memory store's memory budget, `--memory-limit` (service).
pub const MEMORY_LIMIT_BYTES: &str = "slidelog_memory_limit_bytes";
/// 1 while the in-memory store refuses new keys at its key cap or memory
/// budget (service; one episode, logged once).
pub const MEMORY_FULL: &str = "slidelog_memory_full";
/// New keys the in-memory store refused at its key cap or memory budget
/// (service).
pub const MEMORY_FULL_REFUSALS_TOTAL: &str = "slidelog_memory_full_refusals_total";
/// 1 while the store answers (service).
pub const STORE_UP: &str = "slidelog_store_up";
/// Seconds the store has been known down, 0 while it answers (service;
/// decisions answer by policy without it meanwhile: docs/design.md §6).
pub const STORE_DOWN_SECONDS: &str = "slidelog_store_down_seconds";
/// Masters of a Redis Cluster store (in its slot map; service, cluster
/// stores only).
pub const STORE_NODES: &str = "slidelog_store_nodes";
/// Cluster masters known down now: their keys are answered by policy while
/// the others decide (service, cluster stores only; docs/design.md §6).
pub const STORE_NODES_DOWN: &str = "slidelog_store_nodes_down";
/// Seconds the cluster master down longest has been known down, 0 when
/// none is (service, cluster stores only).
pub const STORE_NODES_DOWN_SECONDS: &str = "slidelog_store_nodes_down_seconds";
/// Redis checks recorded after their caller had timed out (service).
pub const STORE_LATE_RECORDS_TOTAL: &str = "slidelog_store_late_records_total";
/// Redis checks whose caller timed out and whose reply never came (service).
pub const STORE_UNKNOWN_OUTCOMES_TOTAL: &str = "slidelog_store_unknown_outcomes_total";
/// Decisions answered by the local rejection cache (service, when it is on).
pub const REJECTION_CACHE_LOCAL_ANSWERS_TOTAL: &str =
    "slidelog_rejection_cache_local_answers_total";
/// Rejections held by the local rejection cache (service, when it is on).
pub const REJECTION_CACHE_ENTRIES: &str = "slidelog_rejection_cache_entries";
/// Decisions answered by the local policy in the instance's own memory, by
/// op and result (service, `--on-store-error local`).
pub const LOCAL_DECISIONS_TOTAL: &str = "slidelog_local_decisions_total";
/// Local records the charge-back answered, by outcome: charged, duplicate
/// (the store had it already), expired, failed (service, `--on-store-error local`).
pub const LOCAL_CHARGE_BACK_TOTAL: &str = "slidelog_local_charge_back_total";
/// Local records awaiting charge-back (service, `--on-store-error local`).
pub const LOCAL_JOURNAL_RECORDS: &str = "slidelog_local_journal_records";
/// Local admissions refused because the journal was at its cap (service,
/// `--on-store-error local`).
pub const LOCAL_JOURNAL_FULL_TOTAL: &str = "slidelog_local_journal_full_total";
/// Unix time of the last memory snapshot written (service, `--memory-snapshot`).
pub const MEMORY_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS: &str =
    "slidelog_memory_snapshot_last_success_timestamp_seconds";
/// Seconds since the last memory snapshot written, as of the last attempt
/// (service, `--memory-snapshot`).
pub const MEMORY_SNAPSHOT_AGE_SECONDS: &str = "slidelog_memory_snapshot_age_seconds";
/// Duration of the last memory snapshot, seconds (service, `--memory-snapshot`).
pub const MEMORY_SNAPSHOT_DURATION_SECONDS: &str = "slidelog_memory_snapshot_duration_seconds";
/// Size of the last memory snapshot, bytes (service, `--memory-snapshot`).
pub const MEMORY_SNAPSHOT_BYTES: &str = "slidelog_memory_snapshot_bytes";
/// Longest shard lock hold of the last memory snapshot, seconds (service,
/// `--memory-snapshot`).
pub const MEMORY_SNAPSHOT_LOCK_HOLD_SECONDS: &str = "slidelog_memory_snapshot_lock_hold_seconds";
/// Memory snapshots that could not be written (service, `--memory-snapshot`).
pub const MEMORY_SNAPSHOT_FAILURES_TOTAL: &str = "slidelog_memory_snapshot_failures_total";

/// Envoy decisions by result (service, `--config`).
pub const ENVOY_DECISIONS_TOTAL: &str = "slidelog_envoy_decisions_total";
/// Envoy descriptors no rule matched (service, `--config`).
pub const ENVOY_UNMATCHED_TOTAL: &str = "slidelog_envoy_unmatched_total";
/// Blocks put, deleted, or set by a limit's `block_ms`, by op (service).
pub const BLOCKS_TOTAL: &str = "slidelog_blocks_total";
/// Overrides put or deleted, by op (service).
pub const OVERRIDES_TOTAL: &str = "slidelog_overrides_total";
/// Decisions refused because the key is blocked, by op (service).
pub const BLOCKED_REFUSALS_TOTAL: &str = "slidelog_blocked_refusals_total";
/// Blocks the store holds (service).
pub const BLOCKS_ACTIVE: &str = "slidelog_blocks_active";
/// Overrides the store holds (service).
pub const OVERRIDES_ACTIVE: &str = "slidelog_overrides_active";

/// The service's own metrics.
pub const SERVICE: &[&str] = &[
    DECISIONS_TOTAL,
    RULE_DECISIONS_TOTAL,
    DEGRADED_DECISIONS_TOTAL,
    STORE_ERRORS_TOTAL,
    DECISION_DURATION_SECONDS,
    BAD_REQUESTS_TOTAL,
    MEMORY_KEYS,
    MEMORY_KEY_CAP,
    MEMORY_BYTES,
    MEMORY_LIMIT_BYTES,
    MEMORY_FULL,
    MEMORY_FULL_REFUSALS_TOTAL,
    STORE_UP,
    STORE_DOWN_SECONDS,
    STORE_NODES,
    STORE_NODES_DOWN,
    STORE_NODES_DOWN_SECONDS,
    STORE_LATE_RECORDS_TOTAL,
    STORE_UNKNOWN_OUTCOMES_TOTAL,
    REJECTION_CACHE_LOCAL_ANSWERS_TOTAL,
    REJECTION_CACHE_ENTRIES,
    LOCAL_DECISIONS_TOTAL,
    LOCAL_CHARGE_BACK_TOTAL,
    LOCAL_JOURNAL_RECORDS,
    LOCAL_JOURNAL_FULL_TOTAL,
    MEMORY_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS,
    MEMORY_SNAPSHOT_AGE_SECONDS,
    MEMORY_SNAPSHOT_DURATION_SECONDS,
    MEMORY_SNAPSHOT_BYTES,
    MEMORY_SNAPSHOT_LOCK_HOLD_SECONDS,
    MEMORY_SNAPSHOT_FAILURES_TOTAL,
    ENVOY_DECISIONS_TOTAL,
    ENVOY_UNMATCHED_TOTAL,
    BLOCKS_TOTAL,
    OVERRIDES_TOTAL,
    BLOCKED_REFUSALS_TOTAL,
    BLOCKS_ACTIVE,
    OVERRIDES_ACTIVE,
];

/// Histograms: their series carry the `_bucket`, `_sum` and `_count` suffixes.
pub const HISTOGRAMS: &[&str] = &[DECISION_DURATION_SECONDS];

/// Returns every metric name, inspect's and the service's.
pub fn all() -> Vec<&'static str> {
    INSPECT.iter().chain(SERVICE).copied().collect()
}

/// Returns the metric a series name belongs to: strips a histogram's suffix.
pub fn base_name(series: &str) -> &str {
    for h in HISTOGRAMS {
        for suffix in ["_bucket", "_sum", "_count"] {
            if series.strip_suffix(suffix) == Some(h) {
                return h;
            }
        }
    }
    series
}

/// Returns every `slidelog_…` identifier in a text (a PromQL expression, a dashboard).
pub fn mentioned(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    let mut i = 0;
    while let Some(pos) = text[i..].find("slidelog_") {
        let start = i + pos;
        let boundary = start == 0 || !ident(bytes[start - 1]);
        let mut end = start;
        while end < bytes.len() && ident(bytes[end]) {
            end += 1;
        }
        if boundary {
            found.push(text[start..end].to_owned());
        }
        i = end.max(start + 1);
    }
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found_in_text() {
        let mut all = all();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        assert_eq!(
            mentioned(
                "rate(slidelog_store_errors_total[5m]) > 2 * x_slidelog_no + slidelog_decision_duration_seconds_bucket"
            ),
            [
                "slidelog_decision_duration_seconds_bucket",
                "slidelog_store_errors_total"
            ]
        );
        assert_eq!(
            base_name("slidelog_decision_duration_seconds_bucket"),
            DECISION_DURATION_SECONDS
        );
        assert_eq!(base_name("slidelog_inspect_keys"), INSPECT_KEYS);
    }
}
