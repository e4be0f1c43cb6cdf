//! One shard of the memory store: a hash table of logs found by a hash computed
//! once per decision, and the sweeping of logs that have expired.

use crate::outcome::Outcome;
use crate::snapshot::format;
use compact_str::CompactString;
use hashbrown::HashTable;
use slidelog_core::{Log, Mode, Request};
use std::hash::BuildHasher;

/// Sweep a shard after this many decisions at least (and never more often
/// than once per decision per key held, so sweeping costs O(1) amortized).
const MIN_OPS_BETWEEN_SWEEPS: usize = 1024;

/// The hasher of the whole store; shards need it to grow their tables.
pub(crate) type KeyHasher = foldhash::fast::RandomState;

/// One key's log: 80 bytes in the table, the records on the heap (4 bytes
/// each: `slidelog_core::Log`).
#[derive(Debug)]
struct Entry {
    /// Inline for keys up to 24 bytes: one cache miss less per decision.
    key: CompactString,
    log: Log,
    /// When the newest record expires for the log's horizon, or the longest
    /// window of the last request on this key when that is longer (the log
    /// has expired then: no request that recorded on it counts a record
    /// any more, docs/design.md §1). Kept here so that a sweep reads only
    /// the table, never the logs.
    expires_at: u64,
}

impl Entry {
    fn refresh_expiry(&mut self, longest_window_ms: u64) {
        let keep = self.log.keep_for(longest_window_ms);
        self.expires_at = self.log.newest().map_or(0, |n| n + keep);
    }

    /// This key as the browser shows it; `None` once its log expired.
    fn browsed(&self, now_ms: u64) -> Option<crate::browse::KeyEntry> {
        let newest = self.log.newest().filter(|_| self.expires_at > now_ms)?;
        Some(crate::browse::KeyEntry {
            key: self.key.to_string(),
            records: self.log.record_count() as u64,
            units: self.log.units_from(0, 0),
            newest_ms: Some(newest),
            ttl_ms: self.expires_at - now_ms,
        })
    }

    /// Bytes this key holds: its table slot (and control byte), a key too
    /// long to be inline, and its records.
    fn footprint(&self) -> usize {
        let key_heap = if self.key.is_heap_allocated() {
            self.key.capacity()
        } else {
            0
        };
        std::mem::size_of::<Entry>() + 1 + key_heap + self.log.heap_bytes()
    }
}

/// What a sweep did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Swept {
    /// Keys dropped.
    pub keys: usize,
    /// Bytes they held.
    pub bytes: usize,
    /// The earliest time a key still held expires (`u64::MAX` when none).
    pub next_expiry: u64,
}

/// The logs of the keys that hash into one shard.
#[derive(Debug, Default)]
pub(crate) struct Shard {
    table: HashTable<Entry>,
    ops_since_sweep: usize,
    /// Bumped whenever the table may move entries between buckets (it grows,
    /// rehashes or shrinks): a snapshot copying the table a range of buckets
    /// at a time starts the shard again when it changes.
    layout: u64,
}

impl Shard {
    /// Counts a decision and sweeps when enough have passed.
    pub(crate) fn tick(&mut self, now_ms: u64, hasher: &KeyHasher) -> Swept {
        self.ops_since_sweep += 1;
        if self.ops_since_sweep >= self.table.len().max(MIN_OPS_BETWEEN_SWEEPS) {
            self.sweep(now_ms, hasher)
        } else {
            Swept::default()
        }
    }

    /// Drops the logs that have expired.
    pub(crate) fn sweep(&mut self, now_ms: u64, hasher: &KeyHasher) -> Swept {
        self.ops_since_sweep = 0;
        let mut swept = Swept {
            next_expiry: u64::MAX,
            ..Swept::default()
        };
        self.table.retain(|e| {
            if e.expires_at > now_ms {
                swept.next_expiry = swept.next_expiry.min(e.expires_at);
                true
            } else {
                swept.keys += 1;
                swept.bytes += e.footprint();
                false
            }
        });
        if swept.keys > 0 && self.table.capacity() > 4 * self.table.len().max(16) {
            self.layout += 1;
            self.table
                .shrink_to_fit(|e| hasher.hash_one(e.key.as_str()));
        }
        swept
    }

    /// Decides on a key that already has a log; `None` when it has none.
    /// `key` is `request.key()`, read once by the caller for the hash too.
    /// `account` is told the change in bytes the key holds. (The answer is
    /// returned alone, not beside the change: a `Detailed` is large, and
    /// each wrapping of it is one more copy on every decision.)
    #[inline]
    pub(crate) fn decide_existing<T: Outcome>(
        &mut self,
        (hash, key): (u64, &str),
        request: &Request,
        mode: Mode,
        now_ms: u64,
        account: impl FnOnce(isize),
    ) -> Option<T> {
        let entry = self.table.find_mut(hash, |e| e.key == key)?;
        Some(match mode {
            Mode::Record => {
                let before = entry.log.heap_bytes();
                let decision = T::record(&mut entry.log, now_ms, request);
                if !decision.allowed() {
                    entry.log.shrink_if_sparse();
                }
                entry.refresh_expiry(request.longest_window_ms());
                account(entry.log.heap_bytes() as isize - before as isize);
                decision
            }
            Mode::Peek => T::evaluate(&entry.log, now_ms, request),
        })
    }

    /// Runs `f` on an existing key's log (a settle) and refreshes its
    /// expiry; `None` when the key has no log. Returns `f`'s answer and the
    /// change in bytes the key holds.
    pub(crate) fn update_existing<R>(
        &mut self,
        hash: u64,
        request: &Request,
        f: impl FnOnce(&mut Log) -> R,
    ) -> Option<(R, isize)> {
        let entry = self.table.find_mut(hash, |e| e.key == request.key())?;
        let before = entry.log.heap_bytes();
        let answer = f(&mut entry.log);
        entry.refresh_expiry(request.longest_window_ms());
        Some((answer, entry.log.heap_bytes() as isize - before as isize))
    }

    /// Creates the log of a new key and records the first decision on it.
    /// Returns the decision and the bytes the key holds.
    pub(crate) fn insert_new<T: Outcome>(
        &mut self,
        hash: u64,
        request: &Request,
        now_ms: u64,
        hasher: &KeyHasher,
    ) -> (T, usize) {
        let mut entry = Entry {
            key: CompactString::from(request.key()),
            log: Log::new(),
            expires_at: 0,
        };
        let decision = T::record(&mut entry.log, now_ms, request);
        entry.refresh_expiry(request.longest_window_ms());
        let bytes = entry.footprint();
        self.insert(hash, entry, hasher);
        (decision, bytes)
    }

    /// Inserts a new key's entry. A full table grows or rehashes in place
    /// on insert, which moves entries: that changes the layout.
    fn insert(&mut self, hash: u64, entry: Entry, hasher: &KeyHasher) {
        if self.table.len() == self.table.capacity() {
            self.layout += 1;
        }
        self.table
            .insert_unique(hash, entry, |e| hasher.hash_one(e.key.as_str()));
    }

    /// Removes a key's log. Returns the bytes it held, or `None` when it had none.
    pub(crate) fn remove(&mut self, hash: u64, key: &str) -> Option<usize> {
        match self.table.find_entry(hash, |e| e.key == key) {
            Ok(occupied) => {
                let bytes = occupied.get().footprint();
                occupied.remove();
                Some(bytes)
            }
            Err(_) => None,
        }
    }

    /// Records held in this shard.
    pub(crate) fn record_count(&self) -> usize {
        self.table.iter().map(|e| e.log.record_count()).sum()
    }

    /// The table's layout generation (see `layout`).
    pub(crate) fn layout(&self) -> u64 {
        self.layout
    }

    /// Buckets of the table (the range a snapshot copies).
    pub(crate) fn buckets(&self) -> usize {
        self.table.num_buckets()
    }

    /// Appends the live logs in buckets `range` to a snapshot (the copy taken
    /// under the shard's lock: bytes, no allocation per key). Returns the
    /// keys and records written.
    pub(crate) fn encode_live(
        &self,
        range: std::ops::Range<usize>,
        now_ms: u64,
        out: &mut Vec<u8>,
    ) -> (u64, u64) {
        let (mut keys, mut records) = (0, 0);
        for e in range.filter_map(|i| self.table.get_bucket(i)) {
            let Some(newest) = e.log.newest().filter(|_| e.expires_at > now_ms) else {
                continue;
            };
            // `expires_at` is the newest record plus the window kept for.
            format::put_entry(out, &e.key, e.expires_at - newest, &e.log);
            keys += 1;
            records += e.log.record_count() as u64;
        }
        (keys, records)
    }

    /// Reads buckets from `start`, at most `span` of them, adding the live
    /// keys that start with `prefix` to `out` until `room` were added.
    /// Returns the next bucket to read and the buckets read.
    pub(crate) fn browse(
        &self,
        start: usize,
        span: usize,
        (prefix, now_ms, room): (&str, u64, usize),
        out: &mut Vec<crate::browse::KeyEntry>,
    ) -> (usize, usize) {
        let end = start.saturating_add(span).min(self.buckets());
        let mut added = 0;
        for i in start..end {
            let Some(e) = self.table.get_bucket(i) else {
                continue;
            };
            if e.key.starts_with(prefix)
                && let Some(entry) = e.browsed(now_ms)
            {
                out.push(entry);
                added += 1;
                if added == room {
                    return (i + 1, i + 1 - start);
                }
            }
        }
        (end, end - start)
    }

    /// `key`'s entry as the browser shows it, if it holds a live log.
    pub(crate) fn entry_of(
        &self,
        hash: u64,
        key: &str,
        now_ms: u64,
    ) -> Option<crate::browse::KeyEntry> {
        self.table.find(hash, |e| e.key == key)?.browsed(now_ms)
    }

    /// True when the shard holds `key`.
    pub(crate) fn contains(&self, hash: u64, key: &str) -> bool {
        self.table.find(hash, |e| e.key == key).is_some()
    }

    /// Adds a loaded key's log (the caller has checked that the key is new
    /// and reserved room for it). Returns the bytes it holds.
    pub(crate) fn adopt(&mut self, hash: u64, loaded: format::Entry, hasher: &KeyHasher) -> usize {
        let mut entry = Entry {
            key: CompactString::from(loaded.key),
            log: loaded.log,
            expires_at: 0,
        };
        entry.refresh_expiry(loaded.longest_window_ms);
        let bytes = entry.footprint();
        self.insert(hash, entry, hasher);
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_80_bytes() {
        // What `Entry::footprint` counts per key besides its heap: keep it small.
        assert_eq!(std::mem::size_of::<Entry>(), 80);
    }
}
