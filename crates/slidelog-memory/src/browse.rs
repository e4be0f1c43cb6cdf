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

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::store::InProcess as _;
    use slidelog_core::{Limit, ManualClock, Mode, Now, Request};
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::Duration;

    fn touch(store: &MemoryStore, key: &str, window_ms: u64) {
        let request = Request::single(key, Limit::new(5, window_ms).unwrap()).unwrap();
        assert!(
            store
                .decide_now(&request, Mode::Record, Now::Server)
                .unwrap()
                .allowed
        );
    }

    /// Pages of every size and budget list every live key once at least,
    /// never more than `limit` a page, also when the tables grow between
    /// pages; expired logs are not listed.
    #[test]
    fn pages_list_every_live_key_within_their_bounds() {
        let clock = Arc::new(ManualClock::new(1_767_225_600_000));
        let store = MemoryStore::new().with_clock(clock.clone());
        let wanted: BTreeSet<String> = (0..3_000).map(|i| format!("u{i}")).collect();
        wanted.iter().for_each(|k| touch(&store, k, 60_000));
        touch(&store, "gone", 10);
        touch(&store, "x-other", 60_000);
        clock.advance(Duration::from_millis(20));
        for (limit, budget) in [(1, 1), (7, 50), (1000, 4096)] {
            let (mut seen, mut at, mut grown) = (BTreeSet::new(), Some(BrowseCursor::default()), 0);
            while let Some(cursor) = at {
                let page = store.browse("u", cursor, limit, budget);
                assert!(page.keys.len() <= limit);
                assert!(page.visited <= budget.max(1) + CHUNK, "{}", page.visited);
                for e in &page.keys {
                    assert_eq!((e.records, e.units), (1, 1));
                    assert!(e.ttl_ms <= 60_000 && e.newest_ms.is_some());
                    seen.insert(e.key.clone());
                }
                // New keys make tables grow mid-listing.
                if grown < 2_000 {
                    (0..100).for_each(|i| touch(&store, &format!("new{grown}-{i}"), 60_000));
                    grown += 100;
                }
                at = page.next;
            }
            assert!(
                wanted.is_subset(&seen),
                "limit {limit}: {} missing",
                wanted.difference(&seen).count()
            );
            assert!(seen.iter().all(|k| k.starts_with('u')));
        }
        assert_eq!(store.key_entry("u7").map(|e| e.key), Some("u7".to_owned()));
        assert_eq!(store.key_entry("gone"), None);
        assert_eq!(store.key_entry("never"), None);
    }
}
