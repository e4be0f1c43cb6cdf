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
mod options;
pub mod progress;
pub mod render;
pub mod report;
pub mod scan;
pub mod target;

pub use error::InspectError;
pub use options::{InspectOptions, prefix_pattern};
pub use progress::ScanProgress;
pub use report::{ProblemKind, Report, SCHEMA_VERSION, Thresholds};

use analysis::{Accumulator, Criteria};
use parking_lot::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

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
    let mut folded = scan_nodes(&nodes, options, progress).await?;
    folded.nodes.sort_by(|a, b| a.addr.cmp(&b.addr));
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        store: target::mask_password(url),
        pattern: options.pattern.clone(),
        started_at_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        limit: limit_info(options),
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

/// Scans every node concurrently, each on its own connection, folding what
/// they see into one accumulator.
async fn scan_nodes(
    nodes: &[target::Node],
    options: &InspectOptions,
    progress: Option<&ScanProgress>,
) -> Result<analysis::Folded, InspectError> {
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
            let index = acc.lock().add_node(node.addr.clone(), now);
            scan::scan_node(&mut conn, &node.addr, i, spec, progress, |batch| {
                let mut acc = acc.lock();
                for facts in &batch {
                    acc.add(index, facts);
                }
            })
            .await
        }
    });
    futures::future::try_join_all(scans).await?;
    Ok(acc.into_inner().finish())
}

/// Describes the limit that set sizes were compared with, and where it
/// came from.
fn limit_info(options: &InspectOptions) -> report::LimitInfo {
    report::LimitInfo {
        max: options.max,
        source: (options.max.is_some() || options.key_limits.is_some())
            .then(|| options.max_source.clone())
            .flatten(),
        per_key: options.key_limits.is_some(),
    }
}
