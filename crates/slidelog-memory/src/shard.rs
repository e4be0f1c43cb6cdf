//! One shard of the memory store: a hash table of logs found by a hash computed
//! once per decision, and the sweeping of logs that have expired.

use compact_str::CompactString;
use hashbrown::HashTable;
use slidelog_core::{Decision, Mode, Request, engine};
use std::collections::VecDeque;
use std::hash::BuildHasher;

/// Sweep a shard after this many decisions at least (and never more often
/// than once per decision per key held, so sweeping costs O(1) amortized).
const MIN_OPS_BETWEEN_SWEEPS: usize = 1024;

/// The hasher of the whole store; shards need it to grow their tables.
pub(crate) type KeyHasher = foldhash::fast::RandomState;

/// One key's log. 64 bytes: a table slot is one cache line or less.
#[derive(Debug)]
struct Entry {
    /// Inline for keys up to 24 bytes: one cache miss less per decision.
    key: CompactString,
    log: VecDeque<u64>,
    /// When the newest record expires for the longest window of the last
    /// request on this key (the log has expired then). Kept here so that a
    /// sweep reads only the table, never the logs.
    expires_at: u64,
}

impl Entry {
    fn refresh_expiry(&mut self, longest_window_ms: u64) {
        self.expires_at = self.log.back().map_or(0, |&n| n + longest_window_ms);
    }
}

/// The logs of the keys that hash into one shard.
#[derive(Debug, Default)]
pub(crate) struct Shard {
    table: HashTable<Entry>,
    ops_since_sweep: usize,
}

impl Shard {
    /// Counts a decision and sweeps when enough have passed. Returns how many
    /// keys were dropped.
    pub(crate) fn tick(&mut self, now_ms: u64, hasher: &KeyHasher) -> usize {
        self.ops_since_sweep += 1;
        if self.ops_since_sweep >= self.table.len().max(MIN_OPS_BETWEEN_SWEEPS) {
            self.sweep(now_ms, hasher)
        } else {
            0
        }
    }

    /// Drops the logs that have expired. Returns how many.
    pub(crate) fn sweep(&mut self, now_ms: u64, hasher: &KeyHasher) -> usize {
        self.ops_since_sweep = 0;
        let before = self.table.len();
        self.table.retain(|e| e.expires_at > now_ms);
        let dropped = before - self.table.len();
        if dropped > 0 && self.table.capacity() > 4 * self.table.len().max(16) {
            self.table
                .shrink_to_fit(|e| hasher.hash_one(e.key.as_str()));
        }
        dropped
    }

    /// Decides on a key that already has a log; `None` when it has none.
    pub(crate) fn decide_existing(
        &mut self,
        hash: u64,
        request: &Request,
        mode: Mode,
        now_ms: u64,
    ) -> Option<Decision> {
        let entry = self.table.find_mut(hash, |e| e.key == request.key())?;
        Some(match mode {
            Mode::Record => {
                let decision = engine::decide_and_record(&mut entry.log, now_ms, request);
                entry.refresh_expiry(request.longest_window_ms());
                decision
            }
            Mode::Peek => engine::evaluate(&entry.log, now_ms, request),
        })
    }

    /// Creates the log of a new key and records the first decision on it.
    pub(crate) fn insert_new(
        &mut self,
        hash: u64,
        request: &Request,
        now_ms: u64,
        hasher: &KeyHasher,
    ) -> Decision {
        let mut entry = Entry {
            key: CompactString::from(request.key()),
            log: VecDeque::with_capacity(request.cost() as usize),
            expires_at: 0,
        };
        let decision = engine::decide_and_record(&mut entry.log, now_ms, request);
        entry.refresh_expiry(request.longest_window_ms());
        self.table
            .insert_unique(hash, entry, |e| hasher.hash_one(e.key.as_str()));
        decision
    }

    /// Removes a key's log. Returns whether it existed.
    pub(crate) fn remove(&mut self, hash: u64, key: &str) -> bool {
        match self.table.find_entry(hash, |e| e.key == key) {
            Ok(occupied) => {
                occupied.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Records held in this shard.
    pub(crate) fn record_count(&self) -> usize {
        self.table.iter().map(|e| e.log.len()).sum()
    }
}
