//! The memory store's joint decision (docs/design.md §1, "One request,
//! several keys"): every key's shard locked in ascending shard order (so two
//! joint decisions can never wait on each other in a circle), every check
//! evaluated, and only when all admit, each recorded; one atomic step, as
//! one Redis script is.

use crate::{MemoryStore, shard::Shard};
use parking_lot::MutexGuard;
use slidelog_core::{Checks, Detailed, JointDecision, Log, Mode, Request, StoreError};
use std::hash::BuildHasher;
use std::sync::atomic::Ordering;

impl MemoryStore {
    /// [`Store::decide_all`](slidelog_core::Store::decide_all) at an
    /// explicit time, synchronously.
    pub fn decide_all_at(
        &self,
        checks: &Checks,
        mode: Mode,
        now_ms: u64,
    ) -> Result<JointDecision, StoreError> {
        let requests = checks.as_slice();
        // A blocked key refuses the whole request before any lock is taken.
        let clock_ms = self.clock.now_ms();
        if self.controls.any_blocks()
            && requests
                .iter()
                .any(|r| self.controls.blocked(r.key(), clock_ms).is_some())
        {
            let each = requests
                .iter()
                .map(|r| match self.controls.blocked(r.key(), clock_ms) {
                    Some((remaining_ms, _)) => Detailed::blocked(r, remaining_ms),
                    None => Detailed::unevaluated(r),
                });
            return Ok(JointDecision::of(each.collect()));
        }
        let hashes: Vec<u64> = requests
            .iter()
            .map(|r| self.hasher.hash_one(r.key()))
            .collect();
        let mut order: Vec<usize> = hashes.iter().map(|&h| self.shard_index(h)).collect();
        order.sort_unstable();
        order.dedup();
        // Ascending shard order: the one lock order every joint decision
        // takes, so none waits on another in a circle.
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> =
            order.iter().map(|&i| (i, self.shards[i].lock())).collect();
        let evaluated: Vec<Detailed> = requests
            .iter()
            .zip(&hashes)
            .map(|(r, &h)| locked(&mut guards, self.shard_index(h)).evaluate_existing(h, r, now_ms))
            .collect();
        let joint = JointDecision::of(evaluated);
        if !joint.allowed || mode == Mode::Peek {
            return Ok(joint);
        }
        let new_keys = requests
            .iter()
            .zip(&hashes)
            .filter(|&(r, &h)| !locked(&mut guards, self.shard_index(h)).contains(h, r.key()))
            .count();
        self.reserve_keys(new_keys, now_ms)?;
        let recorded = requests
            .iter()
            .zip(&hashes)
            .map(|(r, &h)| self.record_one(locked(&mut guards, self.shard_index(h)), h, r, now_ms))
            .collect();
        self.full.room();
        Ok(JointDecision::of(recorded))
    }

    /// Records one admitted check of a joint decision (on its key's log, or
    /// a new one for which room was reserved).
    fn record_one(&self, shard: &mut Shard, hash: u64, request: &Request, now_ms: u64) -> Detailed {
        let key = (hash, request.key());
        if let Some(d) = shard.decide_existing(key, request, Mode::Record, now_ms, |delta| {
            self.account(delta)
        }) {
            return d;
        }
        let (decision, bytes) = shard.insert_new(hash, request, now_ms, &self.hasher);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        decision
    }

    /// Takes room for `count` new keys at once, or none: a joint decision
    /// that cannot create every key it needs records in none. (No sweep of
    /// other shards here: their locks may be held by this very call.)
    fn reserve_keys(&self, count: usize, now_ms: u64) -> Result<(), StoreError> {
        for taken in 0..count {
            if let Err(limit) = self.try_reserve_key() {
                self.keys.fetch_sub(taken, Ordering::Relaxed);
                return Err(self.refuse(limit, u64::MAX, now_ms));
            }
        }
        Ok(())
    }
}

/// The locked shard of index `index` among `guards` (locked above).
fn locked<'a>(guards: &'a mut [(usize, MutexGuard<'_, Shard>)], index: usize) -> &'a mut Shard {
    let at = guards
        .iter()
        .position(|(i, _)| *i == index)
        .expect("every check's shard is locked");
    &mut guards[at].1
}

impl Shard {
    /// A check's answer on its key's log without recording (an empty log
    /// when the key has none).
    fn evaluate_existing(&mut self, hash: u64, request: &Request, now_ms: u64) -> Detailed {
        match self.decide_existing::<Detailed>(
            (hash, request.key()),
            request,
            Mode::Peek,
            now_ms,
            |_| {},
        ) {
            Some(d) => d,
            None => slidelog_core::engine::evaluate_each(&Log::new(), now_ms, request),
        }
    }
}
