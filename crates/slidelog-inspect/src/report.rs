//! The report model: what `slidelog inspect --json` prints. Its shape is the
//! stable schema documented in `SCHEMA.md`; a change that removes or renames a
//! field bumps [`SCHEMA_VERSION`], additions do not.

use serde::{Deserialize, Serialize};

/// Version of the JSON schema of [`Report`]. Bumped only on breaking changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything one scan found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA_VERSION`] for reports this version writes.
    pub schema_version: u32,
    /// The store URL that was scanned, password masked.
    pub store: String,
    /// The SCAN MATCH pattern.
    pub pattern: String,
    /// Client wall clock at the start of the scan, Unix ms.
    pub started_at_ms: u64,
    /// How long the scan took, ms.
    pub duration_ms: u64,
    /// The configured limit the oversize check used, if any.
    pub limit: LimitInfo,
    /// The thresholds the checks used.
    pub thresholds: Thresholds,
    /// One entry per scanned Redis node (one for standalone, each master of a cluster).
    pub nodes: Vec<NodeSummary>,
    /// Totals over every node.
    pub summary: Summary,
    /// Keys per ZCARD bucket; always the same buckets, in ascending order.
    pub zcard_histogram: Vec<Bucket>,
    /// The largest keys by ZCARD, largest first.
    pub top_by_records: Vec<KeyEntry>,
    /// The largest keys by MEMORY USAGE, largest first.
    pub top_by_memory: Vec<KeyEntry>,
    /// One entry per problem kind, every kind always present (count 0 when clean),
    /// in the order of [`ProblemKind::ALL`].
    pub problems: Vec<Problem>,
    /// Distinct keys with at least one problem.
    pub problem_keys: u64,
}

impl Report {
    /// Returns true when any problem was found (the CLI then exits 1).
    pub fn has_problems(&self) -> bool {
        self.problems.iter().any(|p| p.count > 0)
    }

    /// Returns the entry of one problem kind.
    pub fn problem(&self, kind: ProblemKind) -> Option<&Problem> {
        self.problems.iter().find(|p| p.kind == kind)
    }
}

/// The limit (`max`) that keys are compared with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct LimitInfo {
    /// The `max` used by the oversize check; null when unknown (the check is skipped).
    pub max: Option<u64>,
    /// Where it came from: `"--max"`, `"config:<path>"`, or null.
    pub source: Option<String>,
    /// True when keys that name a configured rule (Envoy descriptor keys)
    /// were compared with their own rule's max rather than `max`.
    #[serde(default)]
    pub per_key: bool,
}

/// The thresholds of the checks (echoed so a report explains itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// A key is oversized when ZCARD (a module log: its units) >
    /// `oversize_factor` × max.
    pub oversize_factor: u64,
    /// A set is too large for fast decisions when ZCARD > this.
    pub huge_zcard: u64,
    /// A score below this looks like seconds (ms timestamps are ~1.7e12 today).
    pub seconds_below: f64,
    /// A newest score more than this ahead of the node's clock is "in the future".
    pub future_tolerance_ms: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            oversize_factor: 2,
            huge_zcard: 100_000,
            seconds_below: 1e11,
            future_tolerance_ms: 5_000,
        }
    }
}

/// What one node held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct NodeSummary {
    /// `host:port` of the node.
    pub addr: String,
    /// The node's own clock (Redis `TIME`) when its scan began, Unix ms.
    pub server_time_ms: u64,
    /// Sorted-set keys matched on this node.
    pub keys: u64,
    /// Records (sum of ZCARD) on this node.
    pub records: u64,
    /// Sum of MEMORY USAGE on this node, bytes.
    pub memory_bytes: u64,
    /// Matched keys of another type on this node.
    pub other_type_keys: u64,
}

/// Totals over every node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Summary {
    /// Sorted-set keys matched.
    pub keys: u64,
    /// Records: the sum of ZCARD.
    pub records: u64,
    /// Sum of MEMORY USAGE of the sorted sets, bytes (Redis samples large sets).
    pub memory_bytes: u64,
    /// memory_bytes / records (0 when there are no records).
    pub bytes_per_record: f64,
    /// memory_bytes / keys (0 when there are no keys).
    pub memory_per_key_bytes: f64,
    /// The largest ZCARD (0 when there are no keys).
    pub max_zcard: u64,
    /// The largest MEMORY USAGE of one key, bytes.
    pub max_memory_bytes: u64,
    /// Matched keys that are not sorted sets.
    pub other_type_keys: u64,
    /// Keys SCAN returned that were gone (expired or deleted) when read.
    pub vanished_keys: u64,
    /// Module logs whose records sit on a granule coarser than 1 ms
    /// (`SLIDELOG.INFO` `granule_ms` > 1: granular limits, docs/design.md §1.1).
    #[serde(default)]
    pub granular_keys: u64,
}

/// One bucket of the ZCARD histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Smallest ZCARD in the bucket.
    pub min: u64,
    /// Largest ZCARD in the bucket; null for the last, open bucket.
    pub max: Option<u64>,
    /// Keys whose ZCARD falls in the bucket.
    pub keys: u64,
    /// Records held by those keys.
    pub records: u64,
}

/// One key of a top list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyEntry {
    /// The key (invalid UTF-8 replaced by U+FFFD).
    pub key: String,
    /// The node holding it.
    pub node: String,
    /// ZCARD.
    pub records: u64,
    /// MEMORY USAGE, bytes (0 when Redis did not say).
    pub memory_bytes: u64,
    /// PTTL in ms; -1 when the key has no TTL.
    pub pttl_ms: i64,
    /// Smallest score (oldest record).
    pub oldest_score: Option<f64>,
    /// Largest score (newest record).
    pub newest_score: Option<f64>,
    /// A module log's finest granule (`SLIDELOG.INFO` `granule_ms`: 1 exact
    /// ms, 0 not known); absent for a sorted set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granule_ms: Option<u64>,
    /// A module log's granule tiers, oldest (coarsest) first; absent when
    /// none are known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<Tier>,
}

/// One granule tier of a module log (docs/design.md §1.1): its records sit
/// on multiples of `granule_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tier {
    /// The tier's granule.
    pub granule_ms: u64,
    /// Its records.
    pub records: u64,
}

/// The kinds of problem `inspect` flags (docs/design.md §7 and the original design's
/// troubleshooting table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// PTTL -1: the key never expires, memory grows.
    NoTtl,
    /// Scores that look like seconds, not ms: counts too high.
    SecondsScores,
    /// Newest score ahead of the node's clock: clock skew.
    FutureScores,
    /// ZCARD above the oversize factor × max.
    Oversized,
    /// Members that are bare numbers or equal their score: duplicates overwrite.
    DuplicateProneMembers,
    /// Sets so large that each decision is slow.
    HugeSets,
    /// Keys matching the pattern that are not sorted sets.
    WrongType,
}

impl ProblemKind {
    /// Every kind, in report order.
    pub const ALL: [ProblemKind; 7] = [
        ProblemKind::NoTtl,
        ProblemKind::SecondsScores,
        ProblemKind::FutureScores,
        ProblemKind::Oversized,
        ProblemKind::DuplicateProneMembers,
        ProblemKind::HugeSets,
        ProblemKind::WrongType,
    ];

    /// Returns the stable snake_case name (JSON value and metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::NoTtl => "no_ttl",
            ProblemKind::SecondsScores => "seconds_scores",
            ProblemKind::FutureScores => "future_scores",
            ProblemKind::Oversized => "oversized",
            ProblemKind::DuplicateProneMembers => "duplicate_prone_members",
            ProblemKind::HugeSets => "huge_sets",
            ProblemKind::WrongType => "wrong_type",
        }
    }

    /// Returns one line saying what is wrong and what it causes.
    pub fn title(self) -> &'static str {
        match self {
            ProblemKind::NoTtl => "Keys without TTL (PTTL -1): memory keeps growing",
            ProblemKind::SecondsScores => {
                "Scores that look like seconds, not milliseconds: counts too high"
            }
            ProblemKind::FutureScores => "Scores in the future: clock skew between writers",
            ProblemKind::Oversized => {
                "Logs above 2 x max (a module log: its units): records are not being trimmed"
            }
            ProblemKind::DuplicateProneMembers => {
                "Members that are not unique-looking: duplicates overwrite, admits beyond the limit"
            }
            ProblemKind::HugeSets => "Sorted sets so large that each decision is slow",
            ProblemKind::WrongType => "Keys matching the pattern that are not sorted sets",
        }
    }

    /// Returns what to do about it.
    pub fn fix(self) -> &'static str {
        match self {
            ProblemKind::NoTtl => {
                "Every decision must set a TTL of the longest window: PEXPIRE key <window ms> \
                 after ZADD (slidelog's script does). Fix the writer, then PEXPIRE or DEL the \
                 listed keys."
            }
            ProblemKind::SecondsScores => {
                "Use one unit end to end: scores and `now` in Unix milliseconds \
                 (time.Now().UnixMilli()), the window in ms (window_s * 1000). Records scored in \
                 seconds never expire under a ms script and inflate every count; DEL the keys \
                 after fixing the writer."
            }
            ProblemKind::FutureScores => {
                "A writer's clock is ahead: its records stay live too long. Use server time \
                 (slidelog's default reads Redis TIME inside the script) or fix NTP on the \
                 application hosts."
            }
            ProblemKind::Oversized => {
                "Each decision should drop records older than the window \
                 (ZREMRANGEBYSCORE key -inf now-window) before counting. Check that the window \
                 is in ms, that every writer uses the same limits for a key, and that nothing \
                 ZADDs without the script."
            }
            ProblemKind::DuplicateProneMembers => {
                "Make every member unique across all instances (a ULID, as slidelog does, or a \
                 UUID): two requests in the same ms with the same member collapse into one \
                 record."
            }
            ProblemKind::HugeSets => {
                "Lower the limit or shorten the window for these keys, or use an algorithm whose \
                 cost does not grow with the limit (a sliding window counter or GCRA) for \
                 high-volume limits."
            }
            ProblemKind::WrongType => {
                "Another application writes under the limiter's prefix: give slidelog its own \
                 prefix (--key-prefix) or database, or narrow --pattern."
            }
        }
    }
}

/// All keys of one problem kind: a capped list and the full count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// Which problem.
    pub kind: ProblemKind,
    /// [`ProblemKind::title`].
    pub title: String,
    /// [`ProblemKind::fix`].
    pub fix: String,
    /// How many keys have it.
    pub count: u64,
    /// The first keys found (at most the `--list` cap).
    pub keys: Vec<ProblemKey>,
    /// True when `count` > `keys.len()`.
    pub truncated: bool,
}

/// One key with a problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemKey {
    /// The key (invalid UTF-8 replaced by U+FFFD).
    pub key: String,
    /// The node holding it.
    pub node: String,
    /// What was seen, e.g. `"PTTL -1, 12 records"`.
    pub detail: String,
}
