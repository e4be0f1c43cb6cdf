//! Re-bucketing a [`Log`]'s oldest records to a coarser granule
//! (docs/design.md §1.1, the coarse tier): their timestamps are rounded up
//! to a multiple of the granule and records that meet merge, costs added
//! position by position. Moving a record later is exact for every limit
//! whose granularity is a multiple of the granule; the engine moves only
//! records no finer limit can count any more.

use super::Log;
use crate::limit::round_up;
use smallvec::SmallVec;

impl Log {
    /// Rounds the timestamps of records `0..end` up to multiples of
    /// `granule_ms`, merging records that meet (refunded ones are dropped).
    /// The horizon and the settled receipts stay. Returns how many records
    /// fewer the log holds. O(records × width): the engine calls it only
    /// when it gives back at least a quarter of the log (O(1) amortised).
    pub fn round_front(&mut self, end: usize, granule_ms: u64) -> usize {
        let end = end.min(self.len());
        if end == 0 || granule_ms <= 1 {
            return 0;
        }
        let before = self.len();
        let width = self.cost_width();
        let spent = self.costs.as_deref().map(|c| c.spent.clone());
        let mut rebuilt = Log::new();
        for j in 0..before {
            if self.is_tombstone(j) {
                continue;
            }
            let ts = if j < end {
                round_up(self.stamp(j), granule_ms)
            } else {
                self.stamp(j)
            };
            let costs: SmallVec<[u64; 4]> = (0..width).map(|p| self.cost(j, p)).collect();
            // Rounding up keeps the order (records `end..` are later than
            // every rounded one: the engine's cut is a granule boundary),
            // so each append is at the end or merges into the newest.
            rebuilt.append(ts, &costs);
        }
        rebuilt.set_horizon(self.horizon());
        if let Some(spent) = spent.filter(|s| !s.entries().is_empty()) {
            rebuilt.weighted().spent = spent;
        }
        *self = rebuilt;
        before - self.len()
    }

    /// [`round_front`](Self::round_front) of every record at or before
    /// `through_ms`: a re-bucketing replayed from its record.
    pub fn round_through(&mut self, through_ms: u64, granule_ms: u64) -> usize {
        let end = self.count_through(through_ms);
        self.round_front(end, granule_ms)
    }
}
