//! A report as Prometheus gauges through the `metrics` facade. The caller picks
//! the recorder (the service wraps the call in `metrics::with_local_recorder`
//! with its own); nothing here installs a global one. Every problem kind and
//! every histogram bucket is set on every call, zero included, so a series
//! never lingers at a stale value.

use crate::histogram::{BUCKETS, bounds};
use crate::names::*;
use crate::report::Report;
use metrics::{Unit, counter, describe_counter, describe_gauge, gauge};

/// Every inspect gauge: its name, its unit (none for a count) and its help.
const GAUGES: [(&str, Option<Unit>, &str); 14] = [
    (
        INSPECT_KEYS,
        None,
        "Sorted-set keys matched by the last inspect scan.",
    ),
    (
        INSPECT_RECORDS,
        None,
        "Records (sum of ZCARD) found by the last inspect scan.",
    ),
    (
        INSPECT_MEMORY_BYTES,
        Some(Unit::Bytes),
        "Sum of MEMORY USAGE of the matched keys.",
    ),
    (
        INSPECT_MEMORY_PER_KEY_BYTES,
        Some(Unit::Bytes),
        "Mean MEMORY USAGE per key.",
    ),
    (
        INSPECT_BYTES_PER_RECORD,
        Some(Unit::Bytes),
        "Memory per record.",
    ),
    (INSPECT_MAX_ZCARD, None, "Largest ZCARD of one key."),
    (
        INSPECT_MAX_MEMORY_BYTES,
        Some(Unit::Bytes),
        "Largest MEMORY USAGE of one key.",
    ),
    (
        INSPECT_ZCARD_KEYS,
        None,
        "Keys with ZCARD <= le (cumulative, like histogram buckets).",
    ),
    (
        INSPECT_OTHER_TYPE_KEYS,
        None,
        "Matched keys that are not sorted sets.",
    ),
    (INSPECT_PROBLEM_KEYS, None, "Keys with a problem, by kind."),
    (
        INSPECT_LIMIT_MAX,
        None,
        "The configured max the oversize check compares with.",
    ),
    (INSPECT_NODES, None, "Redis nodes scanned."),
    (
        INSPECT_SCAN_DURATION_SECONDS,
        Some(Unit::Seconds),
        "Duration of the last scan.",
    ),
    (
        INSPECT_LAST_SCAN_TIMESTAMP_SECONDS,
        Some(Unit::Seconds),
        "Unix time of the last successful scan.",
    ),
];

/// Registers the help text and units of the inspect metrics, and exports the
/// scan error counter at 0.
pub fn describe() {
    for (name, unit, help) in GAUGES {
        match unit {
            Some(unit) => describe_gauge!(name, unit, help),
            None => describe_gauge!(name, help),
        }
    }
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
