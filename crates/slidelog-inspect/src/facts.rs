//! What the scan learns about one key, before any judgement.

/// One matched key as read from Redis.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyFacts {
    /// The key's bytes (Redis keys are binary-safe).
    pub key: Vec<u8>,
    /// What kind of key it turned out to be.
    pub kind: KeyKind,
}

/// The `TYPE` of a log kept by slidelog's native module (docs/design.md §4.3).
pub const MODULE_TYPE: &str = "slide-log";

/// The type-dependent part of [`KeyFacts`].
#[derive(Debug, Clone, PartialEq)]
pub enum KeyKind {
    /// A sliding window log: a sorted set, or a log of the module
    /// ([`ZSetFacts::module_log`]).
    ZSet(ZSetFacts),
    /// Another Redis type (`string`, `hash`, …).
    Other(String),
    /// Gone between SCAN and the read (expired or deleted).
    Vanished,
}

/// The figures of one log: a sorted set, or a log of the module read with
/// `SLIDELOG.INFO` (its records, oldest and newest timestamps; it has no
/// members).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZSetFacts {
    /// ZCARD (a module log: its records, one per millisecond that admitted
    /// a request; [`units`](Self::units) counts the requests).
    pub zcard: u64,
    /// MEMORY USAGE in bytes (None when Redis answered nil).
    pub memory_bytes: Option<u64>,
    /// PTTL in ms (-1: no TTL).
    pub pttl_ms: i64,
    /// The first members by score, lowest first (ZRANGE 0 n-1 WITHSCORES):
    /// the oldest record and the uniqueness sample.
    pub first: Vec<(Vec<u8>, f64)>,
    /// The newest record (ZRANGE -1 -1 WITHSCORES).
    pub newest: Option<(Vec<u8>, f64)>,
    /// A log of the module ([`MODULE_TYPE`]): `first` and `newest` hold its
    /// oldest and newest timestamps with empty members.
    pub module_log: bool,
    /// A module log's units (`SLIDELOG.INFO` `units`: its records' costs
    /// in the first limit). The module merges the requests of one
    /// millisecond into one record (docs/design.md §4.1), so its units,
    /// not its records, are what a sorted set's members count. `None` for
    /// a sorted set.
    pub units: Option<u64>,
    /// A module log's granules (`SLIDELOG.INFO` `granule_ms` and its
    /// tiers, docs/design.md §1.1); `None` for a sorted set, or a module
    /// that does not report them.
    pub granules: Option<Granules>,
}

/// The granules of a module log as `SLIDELOG.INFO` reports them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Granules {
    /// The finest granule every record sits on (1: exact ms; 0: not known,
    /// fewer than two records).
    pub granule_ms: u64,
    /// `(granule_ms, records)` per tier, oldest (coarsest) first.
    pub tiers: Vec<(u64, u64)>,
}

impl ZSetFacts {
    /// Returns the smallest score.
    pub fn oldest_score(&self) -> Option<f64> {
        self.first.first().map(|(_, s)| *s)
    }

    /// Returns the largest score.
    pub fn newest_score(&self) -> Option<f64> {
        self.newest.as_ref().map(|(_, s)| *s)
    }
}

/// Returns the key as text for reports (invalid UTF-8 replaced).
pub fn display_key(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}
