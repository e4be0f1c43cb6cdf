//! What the key browser answers: a page of keys, one key's summary, and
//! why a page could not be read (docs/design.md §5.3).

use serde::Serialize;

/// One key as a page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeySummary {
    /// The key (without the store's key prefix).
    pub key: String,
    /// Records in its log (one per request, or per millisecond where
    /// requests of one millisecond merge).
    pub records: u64,
    /// Units held: the records' costs in the first limit; `null` for a
    /// weighted Redis log (its costs live in its members; reading them all
    /// is no bounded read).
    pub units: Option<u64>,
    /// The newest record's time (Unix ms).
    pub newest_ms: Option<u64>,
    /// Time until the log expires (ms); `null` when the store has none
    /// (a Redis key without TTL).
    pub ttl_ms: Option<u64>,
}

/// One page of keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyPage {
    /// The keys found. Fewer than asked (even none) with a `cursor` means
    /// the page's budget ran out first: ask again with the cursor.
    pub keys: Vec<KeySummary>,
    /// Where the next page starts; `null` once every key was visited.
    pub cursor: Option<String>,
}

/// Why a page or a key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BrowseError {
    /// The cursor is not one a page gave.
    #[error("cursor {0:?} is not a cursor a page of this store returned")]
    BadCursor(String),
    /// The store has no key listing.
    #[error("the {0} store has no key browser (memory, Redis and Redis Cluster have)")]
    Unsupported(&'static str),
    /// Redis failed.
    #[error("reading the key space failed: {0}")]
    Redis(#[from] slidelog_inspect::InspectError),
}
