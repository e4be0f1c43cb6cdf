//! A report as Prometheus gauges through the `metrics` facade. The caller picks
//! the recorder (the service wraps the call in `metrics::with_local_recorder`
//! with its own); nothing here installs a global one. Every problem kind and
//! every histogram bucket is set on every call, zero included, so a series
//! never lingers at a stale value.

use crate::histogram::{BUCKETS, bounds};
use crate::names::*;
use crate::report::Report;
use metrics::{Unit, counter, describe_counter, describe_gauge, gauge};

/// Registers the help text and units of the inspect metrics, and exports the
/// scan error counter at 0.
pub fn describe() {
    describe_gauge!(
        INSPECT_KEYS,
        "Sorted-set keys matched by the last inspect scan."
    );
    describe_gauge!(
        INSPECT_RECORDS,
        "Records (sum of ZCARD) found by the last inspect scan."
    );
    describe_gauge!(
        INSPECT_MEMORY_BYTES,
        Unit::Bytes,
        "Sum of MEMORY USAGE of the matched keys."
    );
    describe_gauge!(
        INSPECT_MEMORY_PER_KEY_BYTES,
        Unit::Bytes,
        "Mean MEMORY USAGE per key."
    );
    describe_gauge!(INSPECT_BYTES_PER_RECORD, Unit::Bytes, "Memory per record.");
    describe_gauge!(INSPECT_MAX_ZCARD, "Largest ZCARD of one key.");
    describe_gauge!(
        INSPECT_MAX_MEMORY_BYTES,
        Unit::Bytes,
        "Largest MEMORY USAGE of one key."
    );
    describe_gauge!(
        INSPECT_ZCARD_KEYS,
        "Keys with ZCARD <= le (cumulative, like histogram buckets)."
    );
    describe_gauge!(
        INSPECT_OTHER_TYPE_KEYS,
        "Matched keys that are not sorted sets."
    );
    describe_gauge!(INSPECT_PROBLEM_KEYS, "Keys with a problem, by kind.");
    describe_gauge!(
        INSPECT_LIMIT_MAX,
        "The configured max the oversize check compares with."
    );
    describe_gauge!(INSPECT_NODES, "Redis nodes scanned.");
    describe_gauge!(
        INSPECT_SCAN_DURATION_SECONDS,
        Unit::Seconds,
        "Duration of the last scan."
    );
    describe_gauge!(
        INSPECT_LAST_SCAN_TIMESTAMP_SECONDS,
        Unit::Seconds,
        "Unix time of the last successful scan."
    );
    describe_counter!(INSPECT_SCAN_ERRORS_TOTAL, "Inspect scans that failed.");
    // Exported at 0 from the start: a counter that appears only with its
    // first failure leaves the dashboard's increase() with no series ("No
    // data") instead of 0 while all is well.
    counter!(INSPECT_SCAN_ERRORS_TOTAL).absolute(0);
}

/// Sets every inspect gauge from `report`.
pub fn record(report: &Report) {
    let s = &report.summary;
    gauge!(INSPECT_KEYS).set(s.keys as f64);
    gauge!(INSPECT_RECORDS).set(s.records as f64);
    gauge!(INSPECT_MEMORY_BYTES).set(s.memory_bytes as f64);
    gauge!(INSPECT_MEMORY_PER_KEY_BYTES).set(s.memory_per_key_bytes);
    gauge!(INSPECT_BYTES_PER_RECORD).set(s.bytes_per_record);
    gauge!(INSPECT_MAX_ZCARD).set(s.max_zcard as f64);
    gauge!(INSPECT_MAX_MEMORY_BYTES).set(s.max_memory_bytes as f64);
    gauge!(INSPECT_OTHER_TYPE_KEYS).set(s.other_type_keys as f64);
    gauge!(INSPECT_NODES).set(report.nodes.len() as f64);
    let mut cumulative = 0u64;
    for i in 0..BUCKETS {
        cumulative += report.zcard_histogram.get(i).map_or(0, |b| b.keys);
        let le = match bounds(i).1 {
            Some(max) => max.to_string(),
            None => "+Inf".to_owned(),
        };
        gauge!(INSPECT_ZCARD_KEYS, "le" => le).set(cumulative as f64);
    }
    for p in &report.problems {
        gauge!(INSPECT_PROBLEM_KEYS, "kind" => p.kind.as_str()).set(p.count as f64);
    }
    if let Some(max) = report.limit.max {
        gauge!(INSPECT_LIMIT_MAX).set(max as f64);
    }
    gauge!(INSPECT_SCAN_DURATION_SECONDS).set(report.duration_ms as f64 / 1000.0);
    let finished_ms = report.started_at_ms + report.duration_ms;
    gauge!(INSPECT_LAST_SCAN_TIMESTAMP_SECONDS).set(finished_ms as f64 / 1000.0);
}

/// Counts one failed scan (the previous gauges stay; the timestamp ages).
pub fn record_failure() {
    counter!(INSPECT_SCAN_ERRORS_TOTAL).increment(1);
}
