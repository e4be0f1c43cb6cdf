//! `slidelog inspect`: the key space of the sliding window logs at a glance,
//! and the original design's troubleshooting table automated (docs/design.md §7).
//!
//! [`inspect`] SCANs a Redis server, or every master of a Redis Cluster, with
//! cheap pipelined reads per key, and folds what it sees into a [`Report`]:
//! totals, the ZCARD distribution, the top keys, and one entry per
//! [`ProblemKind`] (keys without TTL, second-valued scores, scores in the
//! future, sets above 2 × max, duplicate-prone members, sets too large for fast
//! decisions, keys of the wrong type). [`render::human`] prints it for a
//! person; the report serializes to the stable JSON schema of `SCHEMA.md`;
//! [`export::record`] turns it into Prometheus gauges named in [`names`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod analysis;
pub mod error;
pub mod export;
pub mod facts;
pub mod histogram;
pub mod names;
pub mod progress;
pub mod render;
pub mod report;
pub mod scan;
pub mod target;

pub use error::InspectError;
pub use progress::ScanProgress;
pub use report::{ProblemKind, Report, SCHEMA_VERSION, Thresholds};

use analysis::{Accumulator, Criteria};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How to inspect.
#[derive(Debug, Clone)]
pub struct InspectOptions {
    /// SCAN MATCH pattern. Default `rate:sliding:*`.
    pub pattern: String,
    /// SCAN COUNT hint, 1 ..= 100,000. Default 1,000.
    pub count: u32,
    /// Keys per top list, 0 ..= 10,000. Default 10.
    pub top: usize,
    /// Keys listed per problem, 0 ..= 100,000. Default 20.
    pub list: usize,
    /// The configured `max` (1 ..= 10,000,000) for the oversize check; None skips it.
    pub max: Option<u64>,
    /// Where `max` came from, for the report (`--max`, `config:<path>`).
    pub max_source: Option<String>,
    /// The `max` of individual keys (from a limits config); keys it does not
    /// know are compared with `max`.
    pub key_limits: Option<analysis::KeyLimits>,
    /// Members read from each set for the uniqueness check, 1 ..= 100. Default 3.
    pub sample: usize,
    /// Thresholds of the checks.
    pub thresholds: Thresholds,
    /// Bound on connecting and on each reply. Default 10 s.
    pub timeout: Duration,
}

impl Default for InspectOptions {
    fn default() -> Self {
        Self {
            pattern: prefix_pattern(slidelog_core::DEFAULT_KEY_PREFIX),
            count: 1_000,
            top: 10,
            list: 20,
            max: None,
            max_source: None,
            key_limits: None,
            sample: 3,
            thresholds: Thresholds::default(),
            timeout: Duration::from_secs(10),
        }
    }
}

impl InspectOptions {
    /// Checks every option against its bound.
    pub fn validate(&self) -> Result<(), InspectError> {
        fn check(
            ok: bool,
            field: &'static str,
            value: impl ToString,
            bound: &'static str,
        ) -> Result<(), InspectError> {
            if ok {
                Ok(())
            } else {
                Err(InspectError::InvalidOption {
                    field,
                    value: value.to_string(),
                    bound,
                })
            }
        }
        check(
            !self.pattern.is_empty(),
            "--pattern",
            "\"\"",
            "a non-empty glob",
        )?;
        check(
            (1..=100_000).contains(&self.count),
            "--count",
            self.count,
            "1 ..= 100000",
        )?;
        check(self.top <= 10_000, "--top", self.top, "0 ..= 10000")?;
        check(self.list <= 100_000, "--list", self.list, "0 ..= 100000")?;
        if let Some(max) = self.max {
            check(
                (1..=slidelog_core::MAX_MAX).contains(&max),
                "--max",
                max,
                "1 ..= 10000000",
            )?;
        }
        check(
            (1..=100).contains(&self.sample),
            "sample",
            self.sample,
            "1 ..= 100",
        )?;
        check(
            self.thresholds.huge_zcard >= 1,
            "--huge",
            self.thresholds.huge_zcard,
            ">= 1",
        )?;
        check(
            self.thresholds.oversize_factor >= 1,
            "oversize_factor",
            self.thresholds.oversize_factor,
            ">= 1",
        )?;
        check(
            !self.timeout.is_zero(),
            "--timeout",
            format!("{:?}", self.timeout),
            "above 0",
        )
    }
}

/// Scans the store at `url` (`redis://`, `rediss://`, `redis+cluster://`) and
/// reports. Masters of a cluster are scanned concurrently, each on its own
/// connection. `progress`, when given, is updated as the scan goes.
pub async fn inspect(
    url: &str,
    options: &InspectOptions,
    progress: Option<&ScanProgress>,
) -> Result<Report, InspectError> {
    options.validate()?;
    let started = Instant::now();
    let started_at_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let target = target::parse_target(url)?;
    let nodes = target::discover(&target, options.timeout).await?;
    if let Some(p) = progress {
        p.set_nodes(nodes.len());
    }
    let criteria = Criteria {
        max: options.max,
        key_limits: options.key_limits.clone(),
        thresholds: options.thresholds.clone(),
    };
    let acc = Mutex::new(Accumulator::new(criteria, options.top, options.list));
    let spec = scan::ScanSpec {
        pattern: &options.pattern,
        count: options.count,
        sample: options.sample,
    };
    let scans = nodes.iter().enumerate().map(|(i, node)| {
        let (acc, spec) = (&acc, &spec);
        async move {
            let mut conn = scan::connect(&node.url, &node.addr, options.timeout).await?;
            let now = scan::server_time_ms(&mut conn, &node.addr).await?;
            let index = lock(acc).add_node(node.addr.clone(), now);
            scan::scan_node(&mut conn, &node.addr, i, spec, progress, |batch| {
                let mut acc = lock(acc);
                for facts in &batch {
                    acc.add(index, facts);
                }
            })
            .await
        }
    });
    futures::future::try_join_all(scans).await?;
    let mut folded = acc.into_inner().unwrap_or_else(|e| e.into_inner()).finish();
    folded.nodes.sort_by(|a, b| a.addr.cmp(&b.addr));
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        store: target::mask_password(url),
        pattern: options.pattern.clone(),
        started_at_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        limit: report::LimitInfo {
            max: options.max,
            source: (options.max.is_some() || options.key_limits.is_some())
                .then(|| options.max_source.clone())
                .flatten(),
            per_key: options.key_limits.is_some(),
        },
        thresholds: options.thresholds.clone(),
        nodes: folded.nodes,
        summary: folded.summary,
        zcard_histogram: folded.zcard_histogram,
        top_by_records: folded.top_by_records,
        top_by_memory: folded.top_by_memory,
        problems: folded.problems,
        problem_keys: folded.problem_keys,
    })
}

/// The SCAN pattern matching every key that starts with `prefix`: the prefix
/// with Redis glob characters (`*?[]\\`) escaped, then `*`.
pub fn prefix_pattern(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    pattern
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_patterns_escape_glob_characters() {
        assert_eq!(super::prefix_pattern("rate:sliding:"), "rate:sliding:*");
        assert_eq!(super::prefix_pattern("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\*");
    }
}
