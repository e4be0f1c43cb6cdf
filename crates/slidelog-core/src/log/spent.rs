//! The receipts a log has settled: their nonces, each kept until its
//! receipt's validity ends, so that a receipt settles once
//! (docs/design.md §4.6, "Single use").
//!
//! A sorted `Vec` of `(nonce, until)`: a look-up is a binary search; the
//! expired entries go when the set has doubled since it was last swept, so
//! a sweep costs O(1) per settle, amortised. At most [`MAX_SPENT`] entries:
//! what a key keeps does not grow with the window (a day-long budget keeps
//! only the receipts of the last validity), and a flood of settles on one
//! key is refused past it.

use crate::MAX_SPENT;

/// How long past a receipt's `until` its nonce is kept: the instance that
/// checked `until` and the store may read clocks this far apart.
pub const SPENT_MARGIN_MS: u64 = 300_000;

/// Settled receipts' nonces with the time each may be forgotten.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Spent {
    /// `(nonce, forget_after_ms)`, sorted by nonce.
    entries: Vec<(u64, u64)>,
    /// The length at which the next sweep runs.
    sweep_at: usize,
}

/// The key holds [`MAX_SPENT`] settled receipts still in their validity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpentFull;

impl Spent {
    pub(super) fn contains(&self, nonce: u64) -> bool {
        self.entries.binary_search_by_key(&nonce, |e| e.0).is_ok()
    }

    /// Keeps `nonce` until `until_ms` (plus the margin); `now` sweeps the
    /// expired first when due, or when the set is full.
    pub(super) fn insert(&mut self, nonce: u64, until_ms: u64, now: u64) -> Result<(), SpentFull> {
        if self.entries.len() >= self.sweep_at.max(64) || self.entries.len() >= MAX_SPENT {
            self.sweep(now);
        }
        if self.entries.len() >= MAX_SPENT {
            return Err(SpentFull);
        }
        let forget = until_ms.saturating_add(SPENT_MARGIN_MS);
        match self.entries.binary_search_by_key(&nonce, |e| e.0) {
            Ok(at) => self.entries[at].1 = self.entries[at].1.max(forget),
            Err(at) => self.entries.insert(at, (nonce, forget)),
        }
        Ok(())
    }

    /// Whether `insert` would succeed now (after a sweep when full).
    pub(super) fn has_room(&mut self, now: u64) -> bool {
        if self.entries.len() >= MAX_SPENT {
            self.sweep(now);
        }
        self.entries.len() < MAX_SPENT
    }

    fn sweep(&mut self, now: u64) {
        self.entries.retain(|&(_, forget)| forget >= now);
        self.sweep_at = self.entries.len() * 2;
    }

    /// Every entry, `(nonce, forget_after_ms)` by nonce (for the codec).
    pub(super) fn entries(&self) -> &[(u64, u64)] {
        &self.entries
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.entries.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_kept_until_its_validity_and_the_margin() {
        let mut s = Spent::default();
        s.insert(7, 1_000, 0).unwrap();
        assert!(s.contains(7) && !s.contains(8));
        for n in 100..200 {
            s.insert(n, 1_000_000, 0).unwrap();
        }
        // A sweep after the validity and the margin forgets 7 only.
        for n in 200..400 {
            s.insert(n, 1_000_000, 1_000 + SPENT_MARGIN_MS + 1).unwrap();
        }
        assert!(!s.contains(7) && s.contains(150) && s.contains(399));
    }

    #[test]
    fn a_full_set_refuses_until_entries_expire() {
        let mut s = Spent::default();
        for n in 0..MAX_SPENT as u64 {
            s.insert(n, 10, 0).unwrap();
        }
        assert_eq!(s.insert(u64::MAX, 10, 0), Err(SpentFull));
        assert!(!s.has_room(0));
        assert!(s.has_room(10 + SPENT_MARGIN_MS + 1));
        s.insert(u64::MAX, 10, 10 + SPENT_MARGIN_MS + 1).unwrap();
        assert_eq!(s.entries().len(), 1);
    }
}
