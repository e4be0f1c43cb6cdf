//! The embedded in-memory store: slidelog with no Redis.
//!
//! Logs live in a sharded hash table (one mutex per shard, shard chosen by the
//! key's hash) so that threads on different keys rarely wait on each other,
//! and each decision runs under its shard's lock: deciding and recording are
//! one atomic step, exactly as the Lua script is in Redis.
//!
//! Memory is bounded four ways: a request is one record whatever its cost
//! (docs/design.md §4), so a log never holds more records than the requests
//! its limits admitted (rejected requests append nothing and expired records
//! are dropped on every decision); logs that have expired are swept as the
//! shard is used; the number of keys has a cap (default 1,000,000); and the
//! bytes held (records, keys and their table slots) have a budget (default
//! 1 GiB). At the cap or the budget the store first sweeps expired logs and
//! otherwise answers [`StoreError::Full`] for new keys, with the time until
//! the first held log expires. It never admits silently, never drops a live
//! log, and keeps deciding existing keys exactly. A full store logs one
//! warning per episode, not per refused key ([`MemoryStore::is_full`]).
//!
//! Its logs can outlive the process: [`MemoryStore::save`] and
//! [`MemoryStore::load`] to a writer and from a reader, [`MemoryStore::save_path`]
//! and [`MemoryStore::load_path`] to a file written crash-safe (docs/design.md
//! §4, "Snapshots").
//!
//! ```
//! use slidelog_core::{Limit, Request, Store};
//! use slidelog_memory::MemoryStore;
//!
//! # tokio_test();
//! # fn tokio_test() { let rt = tokio::runtime::Builder::new_current_thread().build().unwrap(); rt.block_on(async {
//! let store = MemoryStore::new();
//! let request = Request::single("user123", Limit::new(1, 60_000)?)?;
//! assert!(store.check(&request).await?.allowed);
//! assert!(!store.check(&request).await?.allowed);
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap(); }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod all;
mod browse;
mod controls;
mod full;
mod once;
mod outcome;
mod shard;
mod snapshot;
mod usage;

pub use browse::{BrowseCursor, BrowsePage, KeyEntry};
pub use snapshot::{
    DEFAULT_MAX_FUTURE_MS, EntryError, FORMAT_VERSION, LoadBounds, LoadReport, SaveReport,
    SnapshotError, SnapshotFileError,
};

use crossbeam_utils::CachePadded;
use outcome::Outcome;
use parking_lot::Mutex;
use shard::{KeyHasher, Shard, Swept};
use slidelog_core::{
    Clock, Decision, Detailed, FullLimit, Log, Mode, MonotonicClock, Now, Request, Store,
    StoreError,
};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Default cap on the number of keys.
pub const DEFAULT_KEY_CAP: usize = 1_000_000;
/// Default budget of bytes held by logs, keys and their table slots: 1 GiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 1 << 30;

/// The in-memory store. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    hasher: KeyHasher,
    keys: AtomicUsize,
    key_cap: usize,
    /// Bytes held, as [`MemoryStore::bytes_held`] reports.
    bytes: AtomicUsize,
    memory_limit: usize,
    clock: Arc<dyn Clock>,
    /// New keys refused at a bound, logged once per episode.
    full: full::FullEpisodes,
    /// The ids [`Store::charge_once`] has charged, until they expire.
    onces: once::Onces,
    /// Blocks and overrides (docs/design.md §5.4).
    controls: controls::Controls,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// A store on the process clock ([`MonotonicClock`]) with the default key cap.
    pub fn new() -> Self {
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
        // Many more shards than cores so two busy keys rarely share a lock.
        let shards = (cores * 16).next_power_of_two().clamp(16, 1024);
        Self {
            shards: (0..shards)
                .map(|_| CachePadded::new(Mutex::new(Shard::default())))
                .collect(),
            hasher: KeyHasher::default(),
            keys: AtomicUsize::new(0),
            key_cap: DEFAULT_KEY_CAP,
            bytes: AtomicUsize::new(0),
            memory_limit: DEFAULT_MEMORY_LIMIT,
            clock: Arc::new(MonotonicClock::new()),
            full: full::FullEpisodes::default(),
            onces: once::Onces::default(),
            controls: controls::Controls::new(slidelog_core::control::DEFAULT_MAX_CONTROLS),
        }
    }

    /// Sets the cap on blocks and overrides held (at least 1; default
    /// [`slidelog_core::control::DEFAULT_MAX_CONTROLS`]).
    pub fn with_max_controls(mut self, cap: usize) -> Self {
        self.controls = controls::Controls::new(cap);
        self
    }

    /// Keys holding a block or an override.
    pub fn control_count(&self) -> usize {
        self.controls.len()
    }

    /// Sets the cap on the number of keys (at least 1).
    pub fn with_key_cap(mut self, key_cap: usize) -> Self {
        self.key_cap = key_cap.max(1);
        self
    }

    /// Sets the budget of bytes held by logs, keys and their table slots (at
    /// least 1). New keys are refused with [`StoreError::Full`] above it.
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit = bytes.max(1);
        self
    }

    /// The budget of bytes held.
    pub fn memory_limit(&self) -> usize {
        self.memory_limit
    }

    /// Bytes held by logs, keys and their table slots (the figure the
    /// budget is checked against; the allocator's own overhead is not in it).
    pub fn bytes_held(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// True while the store refuses new keys at its key cap or memory
    /// budget: from the first refused key until it has room again and has
    /// refused none for 10 s (one episode, logged once).
    pub fn is_full(&self) -> bool {
        self.full.is_open()
    }

    /// New keys refused at the key cap or the memory budget, in all.
    pub fn full_refusals(&self) -> u64 {
        self.full.refusals()
    }

    /// Uses `clock` for [`Now::Server`] decisions (a manual clock in tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The cap on the number of keys.
    pub fn key_cap(&self) -> usize {
        self.key_cap
    }

    /// Number of keys held (live or not yet swept).
    pub fn key_count(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }

    /// Number of records held over all keys (walks every shard).
    pub fn record_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().record_count()).sum()
    }

    /// The store's clock, in Unix ms.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Drops every log that has expired at the store's current time. Returns
    /// how many keys were dropped. Runs by itself as the store is used; call it
    /// from a timer to reclaim memory of keys that are never touched again.
    pub fn sweep(&self) -> usize {
        let swept = self.sweep_at(self.clock.now_ms());
        if self.key_count() < self.key_cap && self.bytes_held() < self.memory_limit {
            self.full.room();
        }
        swept
    }

    fn sweep_at(&self, now_ms: u64) -> usize {
        self.sweep_all(now_ms).keys
    }

    /// Sweeps every shard; `next_expiry` is the earliest held log's expiry.
    fn sweep_all(&self, now_ms: u64) -> Swept {
        let mut all = Swept {
            next_expiry: u64::MAX,
            ..Swept::default()
        };
        for shard in self.shards.iter() {
            let swept = shard.lock().sweep(now_ms, &self.hasher);
            self.forget(swept);
            all.keys += swept.keys;
            all.bytes += swept.bytes;
            all.next_expiry = all.next_expiry.min(swept.next_expiry);
        }
        all
    }

    fn forget(&self, swept: Swept) {
        if swept.keys > 0 {
            self.keys.fetch_sub(swept.keys, Ordering::Relaxed);
            self.bytes.fetch_sub(swept.bytes, Ordering::Relaxed);
        }
    }

    fn account(&self, delta: isize) {
        if delta > 0 {
            self.bytes.fetch_add(delta as usize, Ordering::Relaxed);
        } else if delta < 0 {
            self.bytes
                .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// The decision at an explicit time, synchronously: the fast path that the
    /// async [`Store`] methods wrap.
    pub fn decide_at(
        &self,
        request: &Request,
        mode: Mode,
        now_ms: u64,
    ) -> Result<Decision, StoreError> {
        self.decide_as(request, mode, now_ms)
    }

    /// [`decide_at`](Self::decide_at) with every limit's state beside the
    /// decision, under the same lock.
    pub fn decide_each_at(
        &self,
        request: &Request,
        mode: Mode,
        now_ms: u64,
    ) -> Result<Detailed, StoreError> {
        self.decide_as(request, mode, now_ms)
    }

    /// The decision as `T` reports it: one code path for both answers.
    fn decide_as<T: Outcome>(
        &self,
        request: &Request,
        mode: Mode,
        now_ms: u64,
    ) -> Result<T, StoreError> {
        let key = request.key();
        if self.controls.any_blocks()
            && let Some((remaining_ms, _)) = self.controls.blocked(key, self.clock.now_ms())
            && let Some(refusal) = T::blocked(request, remaining_ms)
        {
            return Ok(refusal);
        }
        let hash = self.hasher.hash_one(key);
        let shard = &self.shards[self.shard_index(hash)];
        let mut guard = shard.lock();
        let swept = guard.tick(now_ms, &self.hasher);
        self.forget(swept);
        if let Some(decision) = guard.decide_existing((hash, key), request, mode, now_ms, |delta| {
            self.account(delta)
        }) {
            return Ok(decision);
        }
        if mode == Mode::Peek {
            return Ok(T::evaluate(&Log::new(), now_ms, request));
        }
        if self.try_reserve_key().is_err() {
            // Full: reclaim expired logs, this shard first (we hold it),
            // then the others with our lock released so no two sweeps deadlock.
            let swept = guard.sweep(now_ms, &self.hasher);
            self.forget(swept);
            if self.try_reserve_key().is_err() {
                drop(guard);
                let swept = self.sweep_all(now_ms);
                guard = shard.lock();
                // Another caller may have created the key meanwhile.
                if let Some(decision) =
                    guard.decide_existing((hash, key), request, mode, now_ms, |delta| {
                        self.account(delta)
                    })
                {
                    return Ok(decision);
                }
                if let Err(limit) = self.try_reserve_key() {
                    return Err(self.refuse(limit, swept.next_expiry, now_ms));
                }
            }
        }
        let (decision, bytes) = guard.insert_new(hash, request, now_ms, &self.hasher);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.full.room();
        Ok(decision)
    }

    /// The answer to a new key at `limit`, counted (and logged once per episode).
    fn refuse(&self, limit: FullLimit, next_expiry: u64, now_ms: u64) -> StoreError {
        let error = StoreError::Full {
            limit,
            retry_after_ms: (next_expiry != u64::MAX)
                .then(|| next_expiry.saturating_sub(now_ms).max(1)),
        };
        self.full
            .refused(&error, (self.key_count(), self.bytes_held()));
        error
    }

    /// Deletes a key's log synchronously. Returns whether it existed.
    pub fn reset_sync(&self, key: &str) -> bool {
        let hash = self.hasher.hash_one(key);
        let removed = self.shards[self.shard_index(hash)].lock().remove(hash, key);
        if let Some(bytes) = removed {
            self.keys.fetch_sub(1, Ordering::Relaxed);
            self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
        removed.is_some()
    }

    fn shard_index(&self, hash: u64) -> usize {
        // High bits pick the shard; the table inside uses the low bits.
        ((hash >> 40) as usize) & (self.shards.len() - 1)
    }

    /// Takes room for one more key, or says which bound is reached.
    fn try_reserve_key(&self) -> Result<(), FullLimit> {
        if self.bytes.load(Ordering::Relaxed) >= self.memory_limit {
            return Err(FullLimit::Bytes(self.memory_limit));
        }
        self.keys
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.key_cap).then_some(n + 1)
            })
            .map(|_| ())
            .map_err(|_| FullLimit::Keys(self.key_cap))
    }
}

#[async_trait::async_trait]
impl Store for MemoryStore {
    async fn decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, StoreError> {
        // Straight to the one step: no wrapper between a call and its lock.
        self.decide_as(request, mode, now.or_clock(&*self.clock))
    }

    async fn decide_each(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, StoreError> {
        self.decide_as(request, mode, now.or_clock(&*self.clock))
    }

    async fn decide_all(
        &self,
        checks: &slidelog_core::Checks,
        mode: Mode,
        now: Now,
    ) -> Result<slidelog_core::JointDecision, StoreError> {
        slidelog_core::store::InProcess::decide_all_now(self, checks, mode, now)
    }

    async fn settle(
        &self,
        request: &Request,
        receipt: &slidelog_core::Receipt,
        now: Now,
    ) -> Result<slidelog_core::Settled, StoreError> {
        Ok(self.settle_at(request, receipt, now.or_clock(&*self.clock)))
    }

    async fn charge(&self, request: &Request, now: Now) -> Result<Detailed, StoreError> {
        self.charge_at(request, now.or_clock(&*self.clock))
    }

    async fn charge_once(
        &self,
        request: &Request,
        now: Now,
        once: &slidelog_core::OnceMark,
    ) -> Result<bool, StoreError> {
        self.charge_once_at(request, now.or_clock(&*self.clock), once)
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.reset_sync(key))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn put_block(
        &self,
        key: &str,
        block: &slidelog_core::Block,
        only_new: bool,
    ) -> Result<bool, StoreError> {
        let now_ms = self.clock.now_ms();
        self.controls.put_block(key, block, only_new, now_ms)
    }

    async fn delete_block(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.controls.delete_block(key, self.clock.now_ms()))
    }

    async fn get_block(&self, key: &str) -> Result<Option<slidelog_core::Block>, StoreError> {
        Ok(self.controls.get_block(key, self.clock.now_ms()))
    }

    async fn put_override(
        &self,
        key: &str,
        rule: &slidelog_core::Override,
    ) -> Result<(), StoreError> {
        self.controls.put_override(key, rule, self.clock.now_ms())
    }

    async fn delete_override(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.controls.delete_override(key, self.clock.now_ms()))
    }

    async fn get_override(&self, key: &str) -> Result<Option<slidelog_core::Override>, StoreError> {
        Ok(self.controls.get_override(key, self.clock.now_ms()))
    }

    async fn control_count(&self) -> Result<Option<(usize, usize)>, StoreError> {
        Ok(Some(self.controls.counts(self.clock.now_ms())))
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    fn in_process(&self) -> Option<&dyn slidelog_core::store::InProcess> {
        Some(self)
    }
}

impl slidelog_core::store::InProcess for MemoryStore {
    fn sweep(&self) -> usize {
        MemoryStore::sweep(self)
    }

    fn decide_now(&self, request: &Request, mode: Mode, now: Now) -> Result<Decision, StoreError> {
        self.decide_as(request, mode, now.or_clock(&*self.clock))
    }

    fn decide_each_now(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, StoreError> {
        self.decide_as(request, mode, now.or_clock(&*self.clock))
    }

    fn decide_all_now(
        &self,
        checks: &slidelog_core::Checks,
        mode: Mode,
        now: Now,
    ) -> Result<slidelog_core::JointDecision, StoreError> {
        self.decide_all_at(checks, mode, now.or_clock(&*self.clock))
    }

    fn override_now(&self, key: &str) -> Option<slidelog_core::Override> {
        // One atomic load while no override is held: no clock, no lock.
        if !self.controls.any_rules() {
            return None;
        }
        self.controls.get_override(key, self.clock.now_ms())
    }

    fn usage(&self) -> slidelog_core::store::Usage {
        slidelog_core::store::Usage {
            keys: self.key_count(),
            key_cap: self.key_cap,
            bytes: self.bytes_held(),
            byte_limit: self.memory_limit,
        }
    }
}
