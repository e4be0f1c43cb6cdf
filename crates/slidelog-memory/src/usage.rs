//! Settle and charge on the memory store (docs/design.md §4.6): each under
//! its key's shard lock, so it is one atomic step with every decision on
//! the key, exactly as a check is.

use crate::MemoryStore;
use crate::outcome::Outcome;
use slidelog_core::{Detailed, Log, Mode, Receipt, Request, Settled, StoreError, engine};
use std::hash::BuildHasher;

/// A charge, run by the store's one decision path (new keys, bounds and
/// byte accounting included): it always records.
pub(crate) struct Charged(Detailed);

impl Outcome for Charged {
    fn record(log: &mut Log, now: u64, request: &Request) -> Self {
        Self(engine::charge(log, now, request))
    }

    fn evaluate(log: &Log, now: u64, request: &Request) -> Self {
        Self(engine::standing_each(log, now, request.limits()))
    }

    fn allowed(&self) -> bool {
        // Never shrink a log a charge just grew.
        true
    }

    fn blocked(_: &Request, _: u64) -> Option<Self> {
        None
    }
}

impl MemoryStore {
    /// Settles the record `receipt` names to `request`'s costs at an
    /// explicit time, synchronously ([`slidelog_core::Store::settle`]). A
    /// key without a log answers `settled: false`, and no key is created.
    pub fn settle_at(&self, request: &Request, receipt: &Receipt, now_ms: u64) -> Settled {
        let hash = self.hasher.hash_one(request.key());
        let mut shard = self.shards[self.shard_index(hash)].lock();
        let settled = shard.update_existing(hash, request, |log| {
            engine::settle(log, now_ms, request, receipt)
        });
        drop(shard);
        match settled {
            Some((settled, delta)) => {
                self.account(delta);
                settled
            }
            None => {
                let each = engine::standing_each(&Log::new(), now_ms, request.limits());
                Settled {
                    settled: false,
                    decision: each.decision,
                    limits: each.limits,
                    refused: None,
                }
            }
        }
    }

    /// Charges `request`'s costs at an explicit time, synchronously
    /// ([`slidelog_core::Store::charge`]), with every limit's state. A new key is bounded as a check's
    /// is ([`StoreError::Full`]); costs of 0 everywhere create no key.
    pub fn charge_at(&self, request: &Request, now_ms: u64) -> Result<Detailed, StoreError> {
        if request.costs().iter().any(|&c| c > 0) {
            return self
                .decide_as::<Charged>(request, Mode::Record, now_ms)
                .map(|c| c.0);
        }
        // Nothing to record, but an existing log expires as the engine's
        // charge (and the module's) expires it: a clock that steps back
        // after must not find the records again.
        let hash = self.hasher.hash_one(request.key());
        let mut shard = self.shards[self.shard_index(hash)].lock();
        let charged =
            shard.update_existing(hash, request, |log| engine::charge(log, now_ms, request));
        drop(shard);
        Ok(match charged {
            Some((charged, delta)) => {
                self.account(delta);
                charged
            }
            None => engine::standing_each(&Log::new(), now_ms, request.limits()),
        })
    }
}
