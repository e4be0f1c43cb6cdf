//! What the scan learns about one key, before any judgement.

/// One matched key as read from Redis.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyFacts {
    /// The key's bytes (Redis keys are binary-safe).
    pub key: Vec<u8>,
    /// What kind of key it turned out to be.
    pub kind: KeyKind,
}

/// The type-dependent part of [`KeyFacts`].
#[derive(Debug, Clone, PartialEq)]
pub enum KeyKind {
    /// A sorted set: a sliding window log.
    ZSet(ZSetFacts),
    /// Another Redis type (`string`, `hash`, …).
    Other(String),
    /// Gone between SCAN and the read (expired or deleted).
    Vanished,
}

/// The figures of one sorted set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZSetFacts {
    /// ZCARD.
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
}

impl ZSetFacts {
    /// The smallest score.
    pub fn oldest_score(&self) -> Option<f64> {
        self.first.first().map(|(_, s)| *s)
    }

    /// The largest score.
    pub fn newest_score(&self) -> Option<f64> {
        self.newest.as_ref().map(|(_, s)| *s)
    }
}

/// The key as text for reports (invalid UTF-8 replaced).
pub fn display_key(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}
