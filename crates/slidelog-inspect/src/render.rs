//! The report for a person: totals, the ZCARD histogram drawn in the
//! terminal, the top keys, then one section per problem found, with its keys
//! and its fix.

use crate::analysis::fmt_score;
use crate::report::{Bucket, KeyEntry, Report};
use std::fmt::Write;

/// Width of the longest histogram bar, in characters.
const BAR_WIDTH: usize = 40;

/// Returns the whole human report as text.
pub fn human(r: &Report) -> String {
    let mut out = String::new();
    summary(&mut out, r);
    per_master(&mut out, r);
    let _ = writeln!(out);
    let _ = writeln!(out, "ZCARD distribution (keys per size)");
    histogram(&mut out, &r.zcard_histogram);
    top(&mut out, "Top keys by records", &r.top_by_records);
    top(&mut out, "Top keys by memory", &r.top_by_memory);
    let _ = writeln!(out);
    problems(&mut out, r);
    out
}

/// Returns the header and the totals: keys, records, memory, largest set, limit.
fn summary(out: &mut String, r: &Report) {
    let s = &r.summary;
    let nodes = match r.nodes.len() {
        1 => format!("1 node ({})", r.nodes[0].addr),
        n => format!("{n} masters"),
    };
    let _ = writeln!(out, "slidelog inspect: {} (pattern {})", r.store, r.pattern);
    let _ = writeln!(out, "scanned {nodes} in {}", human_ms(r.duration_ms));
    let _ = writeln!(out);
    let _ = writeln!(out, "  keys            {}", group(s.keys));
    let _ = writeln!(out, "  records         {}", group(s.records));
    let _ = writeln!(
        out,
        "  memory          {} ({} per record, {} per key)",
        bytes(s.memory_bytes as f64),
        bytes(s.bytes_per_record),
        bytes(s.memory_per_key_bytes)
    );
    let _ = writeln!(out, "  largest set     {} records", group(s.max_zcard));
    if s.granular_keys > 0 {
        let _ = writeln!(
            out,
            "  granular        {} module logs on granules above 1 ms",
            group(s.granular_keys)
        );
    }
    let limit = match (r.limit.max, &r.limit.source) {
        (Some(max), Some(src)) => format!("max {} (from {src})", group(max)),
        (Some(max), None) => format!("max {}", group(max)),
        _ => "unknown (pass --max or --config to check sizes against it)".to_owned(),
    };
    let _ = writeln!(out, "  limit           {limit}");
    if s.other_type_keys > 0 {
        let _ = writeln!(out, "  other types     {} keys", group(s.other_type_keys));
    }
    if s.vanished_keys > 0 {
        let _ = writeln!(
            out,
            "  vanished        {} keys expired or deleted during the scan",
            group(s.vanished_keys)
        );
    }
}

/// Renders one line per master of a cluster (nothing for a single node).
fn per_master(out: &mut String, r: &Report) {
    if r.nodes.len() <= 1 {
        return;
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Per master");
    for n in &r.nodes {
        let _ = writeln!(
            out,
            "  {:<22} {:>12} keys {:>14} records {:>10}",
            n.addr,
            group(n.keys),
            group(n.records),
            bytes(n.memory_bytes as f64)
        );
    }
}

/// Renders each problem found, its keys (up to `--list`) and its fix; or that none was.
fn problems(out: &mut String, r: &Report) {
    if !r.has_problems() {
        let _ = writeln!(out, "No problems found.");
        return;
    }
    let kinds = r.problems.iter().filter(|p| p.count > 0).count();
    let _ = writeln!(
        out,
        "Problems: {kinds} kind(s), {} key(s) affected",
        group(r.problem_keys)
    );
    for p in r.problems.iter().filter(|p| p.count > 0) {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "[{}] {}: {} key(s)",
            p.kind.as_str(),
            p.title,
            group(p.count)
        );
        for k in &p.keys {
            let _ = writeln!(out, "    {}  ({}; {})", k.key, k.detail, k.node);
        }
        if p.truncated {
            let _ = writeln!(
                out,
                "    … and {} more (--list N shows more, --json all counts)",
                group(p.count - p.keys.len() as u64)
            );
        }
        let _ = writeln!(out, "  fix: {}", p.fix);
    }
}

fn histogram(out: &mut String, buckets: &[Bucket]) {
    let most = buckets.iter().map(|b| b.keys).max().unwrap_or(0);
    // Trim empty buckets above the largest non-empty one, keep the rest.
    let last = buckets.iter().rposition(|b| b.keys > 0).unwrap_or(0);
    for b in &buckets[..=last.min(buckets.len().saturating_sub(1))] {
        let label = match b.max {
            Some(max) if max == b.min => group(max),
            Some(max) => format!("{}-{}", group(b.min), group(max)),
            None => format!("> {}", group(b.min - 1)),
        };
        let width = if most == 0 {
            0
        } else {
            // A non-empty bucket always gets at least one cell.
            ((b.keys as f64 / most as f64) * BAR_WIDTH as f64).ceil() as usize
        };
        let _ = writeln!(
            out,
            "  {label:>21} │{:<BAR_WIDTH$} {} keys, {} records",
            "█".repeat(width),
            group(b.keys),
            group(b.records)
        );
    }
}

fn top(out: &mut String, title: &str, entries: &[KeyEntry]) {
    if entries.is_empty() {
        return;
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "{title}");
    let _ = writeln!(
        out,
        "  {:>12} {:>10} {:>12} {:>15}  key",
        "records", "memory", "ttl", "newest score"
    );
    for e in entries {
        let ttl = match e.pttl_ms {
            -1 => "none".to_owned(),
            ms if ms < 0 => "-".to_owned(),
            ms => human_ms(ms as u64),
        };
        let newest = e.newest_score.map(fmt_score).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:>12} {:>10} {:>12} {:>15}  {}{}",
            group(e.records),
            bytes(e.memory_bytes as f64),
            ttl,
            newest,
            e.key,
            granules(e)
        );
    }
}

/// A module log's granules after its key: `  (granules 1.0 min x 1,380,
/// 10 ms x 10)`; nothing for an exact log (one tier of 1 ms) or a sorted set.
fn granules(e: &KeyEntry) -> String {
    if e.granule_ms.is_none_or(|g| g <= 1) {
        return String::new();
    }
    let tiers: Vec<String> = e
        .tiers
        .iter()
        .map(|t| format!("{} x {}", human_ms(t.granule_ms), group(t.records)))
        .collect();
    format!("  (granules {})", tiers.join(", "))
}

/// Groups the digits by thousands: 1234567 → "1,234,567".
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in B, KiB, MiB, GiB.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn human_ms(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms < 7_200_000 {
        format!("{:.1} min", ms as f64 / 60_000.0)
    } else {
        format!("{:.1} h", ms as f64 / 3_600_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(bytes(40.0), "40 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(human_ms(1500), "1.5 s");
    }
}
