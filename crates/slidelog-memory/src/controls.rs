//! The memory store's blocks and overrides (docs/design.md §5.4): one table
//! beside the logs, each entry with its expiry on the store's clock,
//! bounded by a cap on entries. Decisions read it first; while no block is
//! held they pay one atomic load and no lock.

use parking_lot::Mutex;
use slidelog_core::{Block, FullLimit, Override, StoreError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One key's control: its block and its override, each until a time.
#[derive(Debug, Default)]
struct Entry {
    block: Option<(u64, String)>,
    rule: Option<(u64, slidelog_core::Rule)>,
}

impl Entry {
    /// Drops what expired at `now_ms`; true when nothing is left.
    fn expire(&mut self, now_ms: u64) -> bool {
        if self
            .block
            .as_ref()
            .is_some_and(|(until, _)| *until <= now_ms)
        {
            self.block = None;
        }
        if self
            .rule
            .as_ref()
            .is_some_and(|(until, _)| *until <= now_ms)
        {
            self.rule = None;
        }
        self.block.is_none() && self.rule.is_none()
    }
}

/// The table of controls.
#[derive(Debug)]
pub(crate) struct Controls {
    table: Mutex<HashMap<String, Entry>>,
    /// Entries holding a block (maybe expired): 0 lets decisions skip the lock.
    blocks: AtomicUsize,
    /// Entries holding an override (maybe expired): the same for overrides.
    rules: AtomicUsize,
    cap: usize,
}

impl Controls {
    /// An empty table holding at most `cap` keys.
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            table: Mutex::new(HashMap::new()),
            blocks: AtomicUsize::new(0),
            rules: AtomicUsize::new(0),
            cap: cap.max(1),
        }
    }

    /// Whether any block may be held (the one check decisions pay while none is).
    pub(crate) fn any_blocks(&self) -> bool {
        self.blocks.load(Ordering::Acquire) > 0
    }

    /// Whether any override may be held.
    pub(crate) fn any_rules(&self) -> bool {
        self.rules.load(Ordering::Acquire) > 0
    }

    /// The block in force on `key` at `now_ms`, as its remaining ms and reason.
    pub(crate) fn blocked(&self, key: &str, now_ms: u64) -> Option<(u64, String)> {
        if self.blocks.load(Ordering::Acquire) == 0 {
            return None;
        }
        let table = self.table.lock();
        let (until, reason) = table.get(key)?.block.as_ref()?;
        (*until > now_ms).then(|| (until - now_ms, reason.clone()))
    }

    /// Runs `change` on `key`'s entry (made when `create`), after expiring
    /// it and, for a new entry, the whole table at the cap.
    fn with_entry<R>(
        &self,
        key: &str,
        now_ms: u64,
        create: bool,
        change: impl FnOnce(&mut Entry) -> R,
    ) -> Result<Option<R>, StoreError> {
        let mut table = self.table.lock();
        if create && !table.contains_key(key) && table.len() >= self.cap {
            let (mut blocks, mut rules) = (0, 0);
            table.retain(|_, e| {
                let had = (e.block.is_some(), e.rule.is_some());
                e.expire(now_ms);
                blocks += usize::from(had.0 && e.block.is_none());
                rules += usize::from(had.1 && e.rule.is_none());
                e.block.is_some() || e.rule.is_some()
            });
            self.blocks.fetch_sub(blocks, Ordering::AcqRel);
            self.rules.fetch_sub(rules, Ordering::AcqRel);
            if table.len() >= self.cap {
                return Err(StoreError::Full {
                    limit: FullLimit::Controls(self.cap),
                    retry_after_ms: None,
                });
            }
        }
        let entry = match (table.get_mut(key), create) {
            (Some(entry), _) => entry,
            (None, true) => table.entry(key.to_owned()).or_default(),
            (None, false) => return Ok(None),
        };
        let had = (entry.block.is_some(), entry.rule.is_some());
        entry.expire(now_ms);
        let out = change(entry);
        count(&self.blocks, had.0, entry.block.is_some());
        count(&self.rules, had.1, entry.rule.is_some());
        if entry.block.is_none() && entry.rule.is_none() {
            table.remove(key);
        }
        Ok(Some(out))
    }

    /// Puts a block; `only_new` keeps one in force. Whether this set it.
    pub(crate) fn put_block(
        &self,
        key: &str,
        block: &Block,
        only_new: bool,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        let until = now_ms.saturating_add(block.remaining_ms);
        let set = self.with_entry(key, now_ms, true, |e| {
            if only_new && e.block.is_some() {
                return false;
            }
            e.block = Some((until, block.reason.clone()));
            true
        })?;
        Ok(set.unwrap_or(false))
    }

    /// Deletes a block; whether one was in force.
    pub(crate) fn delete_block(&self, key: &str, now_ms: u64) -> bool {
        let removed = self.with_entry(key, now_ms, false, |e| e.block.take().is_some());
        matches!(removed, Ok(Some(true)))
    }

    /// The block in force on `key`.
    pub(crate) fn get_block(&self, key: &str, now_ms: u64) -> Option<Block> {
        let (remaining_ms, reason) = self.blocked(key, now_ms)?;
        Some(Block {
            remaining_ms,
            reason,
        })
    }

    /// Puts (replaces) an override.
    pub(crate) fn put_override(
        &self,
        key: &str,
        rule: &Override,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let until = now_ms.saturating_add(rule.remaining_ms);
        self.with_entry(key, now_ms, true, |e| {
            e.rule = Some((until, rule.rule.clone()));
        })?;
        Ok(())
    }

    /// Deletes an override; whether one was in force.
    pub(crate) fn delete_override(&self, key: &str, now_ms: u64) -> bool {
        let removed = self.with_entry(key, now_ms, false, |e| e.rule.take().is_some());
        matches!(removed, Ok(Some(true)))
    }

    /// The override in force on `key`.
    pub(crate) fn get_override(&self, key: &str, now_ms: u64) -> Option<Override> {
        if self.rules.load(Ordering::Acquire) == 0 {
            return None;
        }
        let table = self.table.lock();
        let (until, rule) = table.get(key)?.rule.as_ref()?;
        (*until > now_ms).then(|| Override {
            rule: rule.clone(),
            remaining_ms: until - now_ms,
        })
    }

    /// Keys holding a block or an override (expired ones not yet dropped
    /// count until the next put at the cap drops them).
    pub(crate) fn len(&self) -> usize {
        self.table.lock().len()
    }

    /// Blocks and overrides in force at `now_ms` (one pass over the table,
    /// which the cap bounds).
    pub(crate) fn counts(&self, now_ms: u64) -> (usize, usize) {
        let table = self.table.lock();
        let live = |until: Option<u64>| until.is_some_and(|u| u > now_ms);
        table.values().fold((0, 0), |(b, o), e| {
            (
                b + usize::from(live(e.block.as_ref().map(|x| x.0))),
                o + usize::from(live(e.rule.as_ref().map(|x| x.0))),
            )
        })
    }
}

/// Moves `counter` by an entry that had (`before`) and has (`after`) a block
/// or an override.
fn count(counter: &AtomicUsize, before: bool, after: bool) {
    match (before, after) {
        (false, true) => counter.fetch_add(1, Ordering::AcqRel),
        (true, false) => counter.fetch_sub(1, Ordering::AcqRel),
        _ => 0,
    };
}
