//! Judging keys: which problems one key has ([`problems_of`]), and the
//! streaming [`Accumulator`] that folds every key into totals, the histogram,
//! the top lists and the capped problem lists without keeping all keys in memory.

use crate::facts::{KeyFacts, KeyKind, ZSetFacts, display_key};
use crate::histogram::Histogram;
use crate::report::{
    KeyEntry, NodeSummary, Problem, ProblemKey, ProblemKind, Summary, Thresholds, Tier,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

/// What the checks compare keys with.
#[derive(Debug, Clone, Default)]
pub struct Criteria {
    /// The configured `max`, when known.
    pub max: Option<u64>,
    /// The `max` of individual keys, when the configuration names them.
    pub key_limits: Option<KeyLimits>,
    /// The thresholds.
    pub thresholds: Thresholds,
}

impl Criteria {
    /// Returns the `max` that `key` is compared with: its own, else the global one.
    pub fn max_of(&self, key: &[u8]) -> Option<u64> {
        self.key_limits
            .as_ref()
            .and_then(|limits| (limits.0)(key))
            .or(self.max)
    }
}

/// The `max` of one key from the configuration (e.g. the rule of the
/// descriptor an Envoy-style key names); `None` when it names no rule.
#[derive(Clone)]
pub struct KeyLimits(pub Arc<MaxOfKey>);

/// The function behind [`KeyLimits`]: a key's bytes to its `max`.
pub type MaxOfKey = dyn Fn(&[u8]) -> Option<u64> + Send + Sync;

impl std::fmt::Debug for KeyLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyLimits(..)")
    }
}

/// Returns the problems of one sorted set, each with a detail line, given the node's
/// clock `now_ms` and the key's `max` (None: unknown, no oversize check).
pub fn problems_of(
    z: &ZSetFacts,
    now_ms: u64,
    max: Option<u64>,
    t: &Thresholds,
) -> Vec<(ProblemKind, String)> {
    let mut found = Vec::new();
    if z.pttl_ms == -1 {
        found.push((ProblemKind::NoTtl, format!("PTTL -1, {} records", z.zcard)));
    }
    found.extend(score_problems(z, now_ms, t));
    // A module log merges the requests of one ms into one record: its
    // units are what a sorted set's members count.
    let (size, what) = match z.units {
        Some(units) => (units, "units"),
        None => (z.zcard, "ZCARD"),
    };
    if let Some(max) = max.filter(|m| size > t.oversize_factor.saturating_mul(*m)) {
        found.push((
            ProblemKind::Oversized,
            format!("{what} {size} > {} x max {max}", t.oversize_factor),
        ));
    }
    found.extend(member_problem(z));
    if z.zcard > t.huge_zcard {
        found.push((
            ProblemKind::HugeSets,
            format!("ZCARD {} > {}", z.zcard, t.huge_zcard),
        ));
    }
    found
}

/// Scores in seconds instead of ms, and scores ahead of the node's clock.
fn score_problems(z: &ZSetFacts, now_ms: u64, t: &Thresholds) -> Vec<(ProblemKind, String)> {
    let mut found = Vec::new();
    // No let chains: the workspace's MSRV is 1.85.
    if let Some(oldest) = z.oldest_score().filter(|s| *s < t.seconds_below) {
        found.push((
            ProblemKind::SecondsScores,
            format!(
                "oldest score {} is below {:e}: seconds, not ms (ms now is ~{now_ms})",
                fmt_score(oldest),
                t.seconds_below
            ),
        ));
    }
    let horizon = now_ms as f64 + t.future_tolerance_ms as f64;
    if let Some(newest) = z.newest_score().filter(|s| *s > horizon) {
        found.push((
            ProblemKind::FutureScores,
            format!(
                "newest score {} is {} ms ahead of the node's clock",
                fmt_score(newest),
                fmt_score(newest - now_ms as f64)
            ),
        ));
    }
    found
}

/// A sampled member two requests can easily share (a bare number).
fn member_problem(z: &ZSetFacts) -> Option<(ProblemKind, String)> {
    // A module log has no members to sample.
    let sample = z
        .first
        .iter()
        .chain(z.newest.iter())
        .filter(|_| !z.module_log);
    let (member, score) = sample.into_iter().find(|(m, s)| duplicate_prone(m, *s))?;
    Some((
        ProblemKind::DuplicateProneMembers,
        format!(
            "member {:?} with score {} is a bare number",
            display_key(member),
            fmt_score(*score)
        ),
    ))
}

/// Returns true for a member that two requests can easily share: a bare integer or
/// decimal number (a timestamp, a counter) or the score itself. Longer strings
/// (a 26-char ULID, a UUID) are not judged even when all digits.
pub fn duplicate_prone(member: &[u8], score: f64) -> bool {
    let Ok(text) = std::str::from_utf8(member) else {
        return false;
    };
    if text.is_empty() {
        return true;
    }
    if text.parse::<f64>().is_ok_and(|m| m == score) {
        return true;
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    !int.is_empty()
        && int.len() + frac.len() <= 20
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// Formats a score for display: integers without a fraction.
pub fn fmt_score(score: f64) -> String {
    if score.fract() == 0.0 && score.abs() < 1e18 {
        format!("{}", score as i64)
    } else {
        format!("{score}")
    }
}

/// Folds keys one at a time into everything a [`crate::Report`] needs.
#[derive(Debug)]
pub struct Accumulator {
    criteria: Criteria,
    top_n: usize,
    list_cap: usize,
    summary: Summary,
    histogram: Histogram,
    nodes: Vec<NodeSummary>,
    top_records: BinaryHeap<Reverse<Ranked>>,
    top_memory: BinaryHeap<Reverse<Ranked>>,
    problems: BTreeMap<usize, (u64, Vec<ProblemKey>)>,
    problem_keys: u64,
    seq: u64,
}

/// A top-list candidate ordered by its figure, then by arrival (earlier wins ties).
#[derive(Debug, Clone)]
struct Ranked {
    figure: u64,
    seq: Reverse<u64>,
    entry: KeyEntry,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.figure == other.figure && self.seq == other.seq
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.figure, self.seq).cmp(&(other.figure, other.seq))
    }
}

impl Accumulator {
    /// Creates an accumulator keeping `top_n` keys per top list and `list_cap` keys per problem.
    pub fn new(criteria: Criteria, top_n: usize, list_cap: usize) -> Self {
        Self {
            criteria,
            top_n,
            list_cap,
            summary: Summary::default(),
            histogram: Histogram::default(),
            nodes: Vec::new(),
            top_records: BinaryHeap::new(),
            top_memory: BinaryHeap::new(),
            problems: BTreeMap::new(),
            problem_keys: 0,
            seq: 0,
        }
    }

    /// Registers a node; returns its index for [`add`](Self::add).
    pub fn add_node(&mut self, addr: String, server_time_ms: u64) -> usize {
        self.nodes.push(NodeSummary {
            addr,
            server_time_ms,
            ..NodeSummary::default()
        });
        self.nodes.len() - 1
    }

    /// Folds in one key read from node `node`.
    pub fn add(&mut self, node: usize, facts: &KeyFacts) {
        let node_addr = self.nodes[node].addr.clone();
        let now_ms = self.nodes[node].server_time_ms;
        match &facts.kind {
            KeyKind::Vanished => self.summary.vanished_keys += 1,
            KeyKind::Other(kind) => {
                self.summary.other_type_keys += 1;
                self.nodes[node].other_type_keys += 1;
                self.problem_keys += 1;
                self.flag(
                    ProblemKind::WrongType,
                    &facts.key,
                    &node_addr,
                    format!("type {kind}"),
                );
            }
            KeyKind::ZSet(z) => {
                let memory = z.memory_bytes.unwrap_or(0);
                let s = &mut self.summary;
                s.keys += 1;
                s.records += z.zcard;
                s.memory_bytes += memory;
                s.max_zcard = s.max_zcard.max(z.zcard);
                s.max_memory_bytes = s.max_memory_bytes.max(memory);
                if z.granules.as_ref().is_some_and(|g| g.granule_ms > 1) {
                    s.granular_keys += 1;
                }
                let n = &mut self.nodes[node];
                n.keys += 1;
                n.records += z.zcard;
                n.memory_bytes += memory;
                self.histogram.add(z.zcard);
                self.rank(&facts.key, &node_addr, z);
                let max = self.criteria.max_of(&facts.key);
                let found = problems_of(z, now_ms, max, &self.criteria.thresholds);
                if !found.is_empty() {
                    self.problem_keys += 1;
                }
                for (kind, detail) in found {
                    self.flag(kind, &facts.key, &node_addr, detail);
                }
            }
        }
    }

    fn rank(&mut self, key: &[u8], node: &str, z: &ZSetFacts) {
        let top_n = self.top_n;
        if top_n == 0 {
            return;
        }
        self.seq += 1;
        let memory = z.memory_bytes.unwrap_or(0);
        let entry = || KeyEntry {
            key: display_key(key),
            node: node.to_owned(),
            records: z.zcard,
            memory_bytes: memory,
            pttl_ms: z.pttl_ms,
            oldest_score: z.oldest_score(),
            newest_score: z.newest_score(),
            granule_ms: z.granules.as_ref().map(|g| g.granule_ms),
            tiers: z.granules.as_ref().map_or_else(Vec::new, |g| {
                g.tiers
                    .iter()
                    .map(|&(granule_ms, records)| Tier {
                        granule_ms,
                        records,
                    })
                    .collect()
            }),
        };
        let seq = Reverse(self.seq);
        for (heap, figure) in [
            (&mut self.top_records, z.zcard),
            (&mut self.top_memory, memory),
        ] {
            // Only build the entry when it makes the list.
            let admits = heap.len() < top_n
                || heap
                    .peek()
                    .is_some_and(|Reverse(min)| (figure, seq) > (min.figure, min.seq));
            if admits {
                heap.push(Reverse(Ranked {
                    figure,
                    seq,
                    entry: entry(),
                }));
                if heap.len() > top_n {
                    heap.pop();
                }
            }
        }
    }

    fn flag(&mut self, kind: ProblemKind, key: &[u8], node: &str, detail: String) {
        let index = ProblemKind::ALL
            .iter()
            .position(|k| *k == kind)
            .unwrap_or_default();
        let (count, keys) = self.problems.entry(index).or_default();
        *count += 1;
        if keys.len() < self.list_cap {
            keys.push(ProblemKey {
                key: display_key(key),
                node: node.to_owned(),
                detail,
            });
        }
    }

    /// Returns the folded figures: (summary, nodes, histogram buckets, top by records,
    /// top by memory, problems, distinct problem keys).
    pub fn finish(self) -> Folded {
        let mut summary = self.summary;
        summary.bytes_per_record = ratio(summary.memory_bytes, summary.records);
        summary.memory_per_key_bytes = ratio(summary.memory_bytes, summary.keys);
        let problems = ProblemKind::ALL
            .iter()
            .enumerate()
            .map(|(i, kind)| {
                let (count, keys) = self.problems.get(&i).cloned().unwrap_or_default();
                Problem {
                    kind: *kind,
                    title: kind.title().to_owned(),
                    fix: kind.fix().to_owned(),
                    count,
                    truncated: count > keys.len() as u64,
                    keys,
                }
            })
            .collect();
        Folded {
            summary,
            nodes: self.nodes,
            zcard_histogram: self.histogram.buckets(),
            top_by_records: sorted(self.top_records),
            top_by_memory: sorted(self.top_memory),
            problems,
            problem_keys: self.problem_keys,
        }
    }
}

/// The output of [`Accumulator::finish`].
#[derive(Debug, Clone)]
pub struct Folded {
    /// Totals.
    pub summary: Summary,
    /// Per node.
    pub nodes: Vec<NodeSummary>,
    /// The histogram.
    pub zcard_histogram: Vec<crate::report::Bucket>,
    /// Largest by ZCARD first.
    pub top_by_records: Vec<KeyEntry>,
    /// Largest by memory first.
    pub top_by_memory: Vec<KeyEntry>,
    /// Every kind, in [`ProblemKind::ALL`] order.
    pub problems: Vec<Problem>,
    /// Distinct keys with a problem.
    pub problem_keys: u64,
}

fn sorted(heap: BinaryHeap<Reverse<Ranked>>) -> Vec<KeyEntry> {
    // into_sorted_vec of Reverse is descending by figure, earlier first on ties.
    heap.into_sorted_vec()
        .into_iter()
        .map(|Reverse(r)| r.entry)
        .collect()
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_764_400_000_000;

    fn clean(zcard: u64) -> ZSetFacts {
        ZSetFacts {
            zcard,
            memory_bytes: Some(100 + 40 * zcard),
            pttl_ms: 60_000,
            first: vec![(b"01JD0000000000000000000000".to_vec(), (NOW - 1000) as f64)],
            newest: Some((b"01JD0000000000000000000001".to_vec(), NOW as f64)),
            module_log: false,
            units: None,
            granules: None,
        }
    }

    fn kinds(z: &ZSetFacts, max: Option<u64>) -> Vec<ProblemKind> {
        problems_of(z, NOW, max, &Thresholds::default())
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    #[test]
    fn a_key_of_its_own_limit_is_judged_by_it() {
        let c = Criteria {
            max: Some(100),
            key_limits: Some(KeyLimits(Arc::new(|k: &[u8]| (k == b"small").then_some(5)))),
            ..Criteria::default()
        };
        assert_eq!(c.max_of(b"small"), Some(5));
        assert_eq!(c.max_of(b"other"), Some(100));
        assert_eq!(Criteria::default().max_of(b"small"), None);
    }

    #[test]
    fn a_clean_key_has_no_problem() {
        assert!(kinds(&clean(10), Some(10)).is_empty());
        assert!(kinds(&clean(20), Some(10)).is_empty());
    }

    #[test]
    fn each_problem_is_found_alone() {
        let mut z = clean(5);
        z.pttl_ms = -1;
        assert_eq!(kinds(&z, None), [ProblemKind::NoTtl]);

        let mut z = clean(5);
        z.first[0].1 = 1_764_400_000.0;
        z.newest.as_mut().unwrap().1 = 1_764_400_001.0;
        assert_eq!(kinds(&z, None), [ProblemKind::SecondsScores]);

        let mut z = clean(5);
        z.newest.as_mut().unwrap().1 = (NOW + 60_000) as f64;
        assert_eq!(kinds(&z, None), [ProblemKind::FutureScores]);

        assert_eq!(kinds(&clean(21), Some(10)), [ProblemKind::Oversized]);
        // A module log is judged by its units: 21 requests merged into 3
        // records are oversized, 21 records of 20 units are not.
        let mut merged = clean(3);
        (merged.module_log, merged.units) = (true, Some(21));
        assert_eq!(kinds(&merged, Some(10)), [ProblemKind::Oversized]);
        let detail = &problems_of(&merged, NOW, Some(10), &Thresholds::default())[0].1;
        assert_eq!(detail, "units 21 > 2 x max 10");
        let mut refunded = clean(21);
        (refunded.module_log, refunded.units) = (true, Some(20));
        assert!(kinds(&refunded, Some(10)).is_empty());

        let mut z = clean(5);
        z.first[0].0 = b"1764399999000".to_vec();
        assert_eq!(kinds(&z, None), [ProblemKind::DuplicateProneMembers]);

        assert_eq!(kinds(&clean(100_001), None), [ProblemKind::HugeSets]);
    }

    #[test]
    fn duplicate_prone_members() {
        assert!(duplicate_prone(b"1764400000000", 1.0));
        assert!(duplicate_prone(b"42", 1.0));
        assert!(duplicate_prone(b"1764400000.123", 1.0));
        assert!(!duplicate_prone(b"x", 1.0));
        assert!(duplicate_prone(b"1e3", 1000.0));
        assert!(!duplicate_prone(b"01JD0000000000000000000000", 1.0));
        assert!(!duplicate_prone(b"17644000000000000000000000", 1.0));
        assert!(!duplicate_prone(b"1764400000000_0042", 1.0));
        assert!(!duplicate_prone(
            b"550e8400-e29b-41d4-a716-446655440000",
            1.0
        ));
        assert!(!duplicate_prone(&[0xff, 0x01], 1.0));
    }

    #[test]
    fn top_lists_keep_the_largest_and_problem_lists_are_capped() {
        let mut acc = Accumulator::new(Criteria::default(), 3, 2);
        let node = acc.add_node("n1".into(), NOW);
        for i in 1..=10u64 {
            let mut z = clean(i);
            z.memory_bytes = Some(1000 - i);
            z.pttl_ms = -1;
            acc.add(
                node,
                &KeyFacts {
                    key: format!("k{i}").into_bytes(),
                    kind: KeyKind::ZSet(z),
                },
            );
        }
        let f = acc.finish();
        let recs: Vec<_> = f.top_by_records.iter().map(|e| e.records).collect();
        assert_eq!(recs, [10, 9, 8]);
        let mem: Vec<_> = f.top_by_memory.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(mem, ["k1", "k2", "k3"]);
        let no_ttl = &f.problems[0];
        assert_eq!(
            (no_ttl.count, no_ttl.keys.len(), no_ttl.truncated),
            (10, 2, true)
        );
        assert_eq!(f.summary.keys, 10);
        assert_eq!(f.summary.records, 55);
        assert_eq!(f.problem_keys, 10);
    }
}
