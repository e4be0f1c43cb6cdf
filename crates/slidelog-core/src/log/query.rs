//! What a decision reads from a [`Log`] (docs/design.md §4.1): live units,
//! the k-th oldest unit, the newest unit, the records, the memory held.
//! Every question is O(log n) plus a scan of one block of costs.

use super::Log;
use smallvec::SmallVec;

impl Log {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log of cost-1 records at the given timestamps (sorted here; the
    /// same timestamp twice is one record of cost 2).
    pub fn from_timestamps(ts: impl IntoIterator<Item = u64>) -> Self {
        let mut log = Self::default();
        for t in ts {
            log.append(t, &[1]);
        }
        log
    }

    /// Number of records, refunded ones not yet compacted included (the
    /// index space of [`Log::ts`], [`Log::first_live`] and the rest).
    #[inline]
    pub fn len(&self) -> usize {
        if self.dense() {
            return self.dense_len();
        }
        // A shift, not a division by the width: this is on every path.
        (self.slots.len() - self.head as usize) >> usize::from(self.wide())
    }

    /// Records that count somewhere (refunded ones left out).
    pub fn record_count(&self) -> usize {
        self.len() - self.costs.as_deref().map_or(0, |c| c.tombstones())
    }

    /// True when the log holds no record.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // A dense log always holds a record: emptied, it keeps timestamps.
        self.slots.len() == self.head as usize && !self.dense()
    }

    /// The timestamp of record `j` (0 = oldest).
    #[inline]
    pub fn ts(&self, j: usize) -> u64 {
        self.stamp(j)
    }

    /// The newest timestamp, if any (a refunded record's included: the log
    /// is kept until it too has expired).
    #[inline]
    pub fn newest(&self) -> Option<u64> {
        self.len().checked_sub(1).map(|j| self.stamp(j))
    }

    /// The longest window of any request that recorded on this log since it
    /// was last empty (0: none known, as for a log read from an encoding of
    /// version 1): records younger than it are never expired.
    #[inline]
    pub fn horizon(&self) -> u64 {
        (((self.packed >> super::HORIZON_SHIFT) & 0b111) << 32) | u64::from(self.horizon_lo)
    }

    /// The window records are kept for after a request of
    /// `longest_window_ms`: the horizon, or that window when longer.
    #[inline]
    pub fn keep_for(&self, longest_window_ms: u64) -> u64 {
        self.horizon().max(longest_window_ms)
    }

    /// True when some record costs other than 1.
    #[inline]
    pub fn is_weighted(&self) -> bool {
        self.costs.is_some()
    }

    /// How many cost positions the records list (1 when every record has one
    /// cost for every limit, plain logs included): a record's cost at a later
    /// position is its cost at the last one.
    pub fn cost_width(&self) -> usize {
        self.costs.as_deref().map_or(1, |c| c.width())
    }

    /// The cost of record `j` at cost position `position` (1 in a plain log).
    #[inline]
    pub fn cost(&self, j: usize, position: usize) -> u64 {
        self.costs.as_deref().map_or(1, |c| c.cost(j, position))
    }

    /// True when record `j` counts nowhere (a refund not yet compacted).
    pub fn is_tombstone(&self, j: usize) -> bool {
        self.costs.as_deref().is_some_and(|c| c.is_zero(j))
    }

    /// Every record that counts somewhere, oldest first, as its timestamp
    /// and its costs at positions `0..cost_width()`.
    pub fn records(&self) -> impl Iterator<Item = (u64, SmallVec<[u64; 2]>)> + '_ {
        (0..self.len())
            .filter(|&j| !self.is_tombstone(j))
            .map(move |j| {
                let costs = (0..self.cost_width()).map(|p| self.cost(j, p)).collect();
                (self.stamp(j), costs)
            })
    }

    /// Index of the first record live for `window_ms` at `now`
    /// (every record before it has `ts + window <= now`).
    #[inline]
    pub fn first_live(&self, now: u64, window_ms: u64) -> usize {
        // `ts + window <= now` is `ts <= now - window`; before `window` has
        // passed since 0 nothing has expired.
        let Some(cut) = now.checked_sub(window_ms) else {
            return 0;
        };
        // Common case first: after expiry the oldest record is live for the
        // longest window, and the whole log counts.
        match self.oldest() {
            Some(oldest) if oldest <= cut => self.count_through(cut),
            _ => 0,
        }
    }

    /// The units at cost position `position` of records `start..`.
    #[inline]
    pub fn units_from(&self, start: usize, position: usize) -> u64 {
        match &self.costs {
            None => (self.len() - start) as u64,
            Some(c) => c.units_from(start, position),
        }
    }

    /// The timestamp of the `k`-th oldest unit (1-based) at `position` among
    /// records `start..`. `k` must be at most [`Log::units_from`].
    #[inline]
    pub fn kth_unit_ts(&self, start: usize, position: usize, k: u64) -> u64 {
        debug_assert!(k >= 1 && k <= self.units_from(start, position));
        match &self.costs {
            None => self.stamp(start + k as usize - 1),
            Some(c) => self.stamp(c.kth(start, position, k)),
        }
    }

    /// The timestamp of the newest record `start..` whose cost at `position`
    /// is not 0 (a record of cost 0 in a limit counts nowhere in it).
    #[inline]
    pub fn newest_unit(&self, start: usize, position: usize) -> Option<u64> {
        let last = self.len().checked_sub(1).filter(|&last| last >= start)?;
        // A plain log's records all cost 1: the newest record is the unit.
        if self.costs.is_none() || self.cost(last, position) > 0 {
            return Some(self.stamp(last));
        }
        let units = self.units_from(start, position);
        (units > 0).then(|| self.kth_unit_ts(start, position, units))
    }

    /// The index of the record at `ts`, if one is held (there is at most
    /// one: records of the same millisecond are merged).
    pub fn find_ts(&self, ts: u64) -> Option<usize> {
        let end = self.count_through(ts);
        end.checked_sub(1).filter(|&j| self.stamp(j) == ts)
    }

    /// True when the log keeps no timestamps: one count per granule, its
    /// times implicit (docs/design.md §1.1, `log/dense.rs`).
    pub fn is_dense(&self) -> bool {
        self.dense()
    }

    /// Heap bytes this log holds (capacity, not length), for memory budgets.
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 4 + self.costs.as_deref().map_or(0, |c| c.heap_bytes())
    }

    /// True when [`Log::shrink_if_sparse`] would release memory.
    #[inline]
    pub fn is_sparse(&self) -> bool {
        super::room::is_sparse(self.capacity(), self.len())
            || self.costs.as_deref().is_some_and(|c| c.is_sparse())
    }
}
