//! One shard of the memory store: a hash table of logs found by a hash computed
//! once per decision, and the sweeping of logs that have expired.

use hashbrown::HashTable;
use slidelog_core::{Decision, Mode, Request, engine};
use std::collections::VecDeque;

/// Sweep a shard after this many decisions at least (and never more often
/// than once per decision per key held, so sweeping costs O(1) amortized).
const MIN_OPS_BETWEEN_SWEEPS: usize = 1024;

#[derive(Debug)]
struct Entry {
    hash: u64,
    key: Box<str>,
    log: VecDeque<u64>,
    /// The longest window of the last request on this key: records are kept
    /// that long, and the log has expired once its newest record is that old.
    keep_ms: u64,
}

impl Entry {
    fn expired(&self, now_ms: u64) -> bool {
        self.log
            .back()
            .is_none_or(|&newest| newest + self.keep_ms <= now_ms)
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
    pub(crate) fn tick(&mut self, now_ms: u64) -> usize {
        self.ops_since_sweep += 1;
        if self.ops_since_sweep >= self.table.len().max(MIN_OPS_BETWEEN_SWEEPS) {
            self.sweep(now_ms)
        } else {
            0
        }
    }

    /// Drops the logs that have expired. Returns how many.
    pub(crate) fn sweep(&mut self, now_ms: u64) -> usize {
        self.ops_since_sweep = 0;
        let before = self.table.len();
        self.table.retain(|e| !e.expired(now_ms));
        let dropped = before - self.table.len();
        if dropped > 0 && self.table.capacity() > 4 * self.table.len().max(16) {
            self.table.shrink_to_fit(|e| e.hash);
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
        let entry = self
            .table
            .find_mut(hash, |e| e.hash == hash && &*e.key == request.key())?;
        Some(match mode {
            Mode::Record => {
                entry.keep_ms = request.longest_window_ms();
                engine::decide_and_record(&mut entry.log, now_ms, request)
            }
            Mode::Peek => engine::evaluate(&entry.log, now_ms, request),
        })
    }

    /// Creates the log of a new key and records the first decision on it.
    pub(crate) fn insert_new(&mut self, hash: u64, request: &Request, now_ms: u64) -> Decision {
        let mut log = VecDeque::with_capacity(request.cost() as usize);
        let decision = engine::decide_and_record(&mut log, now_ms, request);
        self.table.insert_unique(
            hash,
            Entry {
                hash,
                key: request.key().into(),
                log,
                keep_ms: request.longest_window_ms(),
            },
            |e| e.hash,
        );
        decision
    }

    /// Removes a key's log. Returns whether it existed.
    pub(crate) fn remove(&mut self, hash: u64, key: &str) -> bool {
        match self
            .table
            .find_entry(hash, |e| e.hash == hash && &*e.key == key)
        {
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
