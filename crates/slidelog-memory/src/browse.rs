//! Listing the store's keys a page at a time (the operators' key browser,
//! docs/design.md §5, "Operators' API"): each page visits a bounded number
//! of table buckets under one shard lock at a time, and a cursor continues
//! where it stopped, as Redis `SCAN` does.

use crate::MemoryStore;

/// One key as the browser shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    /// The key.
    pub key: String,
    /// Records held (one per millisecond that admitted a request).
    pub records: u64,
    /// Units held: the records' costs in the first limit.
    pub units: u64,
    /// The newest record's time (Unix ms).
    pub newest_ms: Option<u64>,
    /// Time until the log expires (ms).
    pub ttl_ms: u64,
}

/// Where a listing continues: a shard, a bucket of its table, and the
/// table's layout generation when the bucket was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BrowseCursor {
    /// The shard.
    pub shard: usize,
    /// The next bucket of its table.
    pub bucket: usize,
    /// The shard table's layout when `bucket` was computed; a table that
    /// grew or shrank since is read again from its first bucket (a key may
    /// then be listed twice, never skipped).
    pub layout: u64,
}

/// One page of keys.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrowsePage {
    /// The keys found, in table order.
    pub keys: Vec<KeyEntry>,
    /// Where the next page starts; `None` when every shard was read.
    pub next: Option<BrowseCursor>,
    /// Buckets visited for this page (at most the page's budget).
    pub visited: usize,
}

/// Buckets read per lock hold: a decision on the shard waits at most that long.
const CHUNK: usize = 256;

impl MemoryStore {
    /// Lists up to `limit` live keys starting with `prefix` from `cursor`,
    /// visiting at most `budget` table buckets (at least one chunk). A page
    /// may hold fewer keys than `limit` (even none) and still have a next
    /// cursor: the budget ran out first.
    pub fn browse(
        &self,
        prefix: &str,
        cursor: BrowseCursor,
        limit: usize,
        budget: usize,
    ) -> BrowsePage {
        let now = self.now_ms();
        let mut page = BrowsePage::default();
        let mut at = cursor;
        while at.shard < self.shards.len() {
            if page.keys.len() >= limit || page.visited >= budget {
                page.next = Some(at);
                return page;
            }
            let guard = self.shards[at.shard].lock();
            if guard.layout() != at.layout {
                (at.bucket, at.layout) = (0, guard.layout());
            }
            let room = limit - page.keys.len();
            let span = CHUNK.min(budget.saturating_sub(page.visited).max(1));
            let (next, visited) =
                guard.browse(at.bucket, span, (prefix, now, room), &mut page.keys);
            page.visited += visited;
            if next >= guard.buckets() {
                at = BrowseCursor {
                    shard: at.shard + 1,
                    ..BrowseCursor::default()
                };
            } else {
                at.bucket = next;
            }
        }
        page
    }

    /// One key's entry; `None` when it holds no live log.
    pub fn key_entry(&self, key: &str) -> Option<KeyEntry> {
        use std::hash::BuildHasher as _;
        let now = self.now_ms();
        let hash = self.hasher.hash_one(key);
        self.shards[self.shard_index(hash)]
            .lock()
            .entry_of(hash, key, now)
    }
}
