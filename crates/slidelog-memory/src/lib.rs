//! The embedded in-memory store: slidelog with no Redis.
//!
//! Logs live in a sharded hash table (one mutex per shard, shard chosen by the
//! key's hash) so that threads on different keys rarely wait on each other,
//! and each decision runs under its shard's lock: deciding and recording are
//! one atomic step, exactly as the Lua script is in Redis.
//!
//! Memory is bounded three ways: a log never holds more live records than its
//! limits admit (rejected requests append nothing and expired records are
//! dropped on every decision); logs that have expired are swept as the shard is
//! used; and the number of keys has a cap (default 1,000,000). At the cap the
//! store first sweeps expired logs and otherwise answers
//! [`StoreError::Full`]: it never admits silently and never drops a live log.
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

mod shard;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use shard::{KeyHasher, Shard};
use slidelog_core::{Clock, Decision, Mode, MonotonicClock, Now, Request, Store, StoreError};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Default cap on the number of keys.
pub const DEFAULT_KEY_CAP: usize = 1_000_000;

/// The in-memory store. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct MemoryStore {
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    hasher: KeyHasher,
    keys: AtomicUsize,
    key_cap: usize,
    clock: Arc<dyn Clock>,
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
            clock: Arc::new(MonotonicClock::new()),
        }
    }

    /// Sets the cap on the number of keys (at least 1).
    pub fn with_key_cap(mut self, key_cap: usize) -> Self {
        self.key_cap = key_cap.max(1);
        self
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
        self.sweep_at(self.clock.now_ms())
    }

    fn sweep_at(&self, now_ms: u64) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let dropped = s.lock().sweep(now_ms, &self.hasher);
                self.keys.fetch_sub(dropped, Ordering::Relaxed);
                dropped
            })
            .sum()
    }

    /// The decision at an explicit time, synchronously: the fast path that the
    /// async [`Store`] methods wrap.
    pub fn decide_at(
        &self,
        request: &Request,
        mode: Mode,
        now_ms: u64,
    ) -> Result<Decision, StoreError> {
        let hash = self.hasher.hash_one(request.key());
        let shard = &self.shards[self.shard_index(hash)];
        let mut guard = shard.lock();
        let swept = guard.tick(now_ms, &self.hasher);
        if swept > 0 {
            self.keys.fetch_sub(swept, Ordering::Relaxed);
        }
        if let Some(decision) = guard.decide_existing(hash, request, mode, now_ms) {
            return Ok(decision);
        }
        if mode == Mode::Peek {
            return Ok(slidelog_core::engine::evaluate(&[][..], now_ms, request));
        }
        if !self.try_reserve_key() {
            // At the cap: reclaim expired logs, this shard first (we hold it),
            // then the others with our lock released so no two sweeps deadlock.
            let dropped = guard.sweep(now_ms, &self.hasher);
            self.keys.fetch_sub(dropped, Ordering::Relaxed);
            if !self.try_reserve_key() {
                drop(guard);
                self.sweep_at(now_ms);
                guard = shard.lock();
                // Another caller may have created the key meanwhile.
                if let Some(decision) = guard.decide_existing(hash, request, mode, now_ms) {
                    return Ok(decision);
                }
                if !self.try_reserve_key() {
                    return Err(StoreError::Full { cap: self.key_cap });
                }
            }
        }
        Ok(guard.insert_new(hash, request, now_ms, &self.hasher))
    }

    /// Deletes a key's log synchronously. Returns whether it existed.
    pub fn reset_sync(&self, key: &str) -> bool {
        let hash = self.hasher.hash_one(key);
        let removed = self.shards[self.shard_index(hash)].lock().remove(hash, key);
        if removed {
            self.keys.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    fn shard_index(&self, hash: u64) -> usize {
        // High bits pick the shard; the table inside uses the low bits.
        ((hash >> 40) as usize) & (self.shards.len() - 1)
    }

    fn try_reserve_key(&self) -> bool {
        self.keys
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.key_cap).then_some(n + 1)
            })
            .is_ok()
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
        self.decide_at(request, mode, now.or_clock(&*self.clock))
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.reset_sync(key))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "memory"
    }
}
