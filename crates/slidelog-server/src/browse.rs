//! The key browser (docs/design.md §5, "Operators' API"): the keys a store
//! holds, one bounded page at a time, and one key's summary. The memory
//! store lists its own table ([`slidelog::store::MemoryStore::browse`]); a
//! Redis store (standalone or Cluster) is read with `slidelog inspect`'s
//! scan, one `SCAN … COUNT` per node step ([`key_space`]).
//!
//! A cursor is opaque to clients: `m.<shard>.<bucket>.<layout>` for the
//! memory store, `r.<node>.<scan cursor>.<skip>` for Redis.

pub mod key_space;
pub mod page;

pub use key_space::KeySpace;
pub use page::{BrowseError, KeyPage, KeySummary};

use crate::app::App;
use slidelog::store::MemoryStore;

/// The most keys one page may ask for.
pub const MAX_LIMIT: usize = 1000;
/// The keys of a page when the request names no `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// Memory store: table buckets visited per key asked (and at least
/// [`MIN_BUDGET`]): the bound of one page's work.
pub const BUCKETS_PER_KEY: usize = 16;
/// Memory store: the fewest buckets a page may visit.
pub const MIN_BUDGET: usize = 4096;

/// Lists one page of `app`'s keys starting with `prefix`.
pub async fn list(
    app: &App,
    prefix: &str,
    cursor: Option<&str>,
    limit: usize,
) -> Result<KeyPage, BrowseError> {
    if let Some(memory) = app.memory_store() {
        return list_memory(&memory, prefix, cursor, limit);
    }
    match &app.config().key_space {
        Some(space) => space.list(prefix, cursor, limit).await,
        None => Err(BrowseError::Unsupported(app.store_kind())),
    }
}

/// One key's summary; `None` when it holds no log.
pub async fn one(app: &App, key: &str) -> Result<Option<KeySummary>, BrowseError> {
    if let Some(memory) = app.memory_store() {
        return Ok(memory.key_entry(key).map(summary_of));
    }
    match &app.config().key_space {
        Some(space) => space.one(key).await,
        None => Err(BrowseError::Unsupported(app.store_kind())),
    }
}

fn list_memory(
    store: &MemoryStore,
    prefix: &str,
    cursor: Option<&str>,
    limit: usize,
) -> Result<KeyPage, BrowseError> {
    let at = match cursor {
        None => slidelog_memory::BrowseCursor::default(),
        Some(text) => {
            parse_memory_cursor(text).ok_or_else(|| BrowseError::BadCursor(text.to_owned()))?
        }
    };
    let budget = (limit * BUCKETS_PER_KEY).max(MIN_BUDGET);
    let page = store.browse(prefix, at, limit, budget);
    Ok(KeyPage {
        keys: page.keys.into_iter().map(summary_of).collect(),
        cursor: page
            .next
            .map(|c| format!("m.{}.{}.{}", c.shard, c.bucket, c.layout)),
    })
}

fn parse_memory_cursor(text: &str) -> Option<slidelog_memory::BrowseCursor> {
    let mut parts = text.strip_prefix("m.")?.split('.');
    let mut next = || parts.next()?.parse().ok();
    let cursor = slidelog_memory::BrowseCursor {
        shard: next()?,
        bucket: next()?,
        layout: next()?.try_into().ok()?,
    };
    parts.next().is_none().then_some(cursor)
}

fn summary_of(e: slidelog_memory::KeyEntry) -> KeySummary {
    KeySummary {
        key: e.key,
        records: e.records,
        units: Some(e.units),
        newest_ms: e.newest_ms,
        ttl_ms: Some(e.ttl_ms),
    }
}
