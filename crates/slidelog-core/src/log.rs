//! A key's log as the stores hold it in memory: one weighted record per
//! admitted request (docs/design.md §4, "Weighted records").
//!
//! A record has a timestamp and a cost per *cost position* (a request with
//! several limits may carry its own cost for each, matched by position; a
//! record lists as many costs as its width, and its cost for a later
//! position is its last listed cost, so a single cost applies to every
//! limit). The log keeps the timestamps ascending and, once any record costs
//! more than 1, a running sum of costs per position. With those sums every
//! question a decision asks is a binary search, whatever the costs are:
//!
//! - how many units are live for a window: a subtraction of two sums;
//! - when the k-th oldest live unit was recorded (the wait of a rejection):
//!   a binary search over the sums.
//!
//! While every record costs 1 the sums are not kept at all (the rank is the
//! sum), so the common case costs 8 bytes per record, as a plain log of
//! timestamps.

use smallvec::SmallVec;
use std::collections::VecDeque;

/// The admitted requests of one key, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Log {
    ts: VecDeque<u64>,
    /// `None` while every record costs 1 for every position.
    sums: Option<Box<Sums>>,
}

/// Running sums of costs, `width` per record (record-major).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sums {
    width: usize,
    /// `cum[j * width + p]`: the sum of the costs at position `p` of every
    /// record from the first one ever held up to and including record `j`.
    cum: VecDeque<u64>,
    /// The sum per position of the records dropped from the front: the sum
    /// "before" record 0.
    base: SmallVec<[u64; 2]>,
}

impl Sums {
    fn col(&self, position: usize) -> usize {
        position.min(self.width - 1)
    }

    /// The running sum at position `p` before record `j`.
    fn before(&self, j: usize, p: usize) -> u64 {
        let c = self.col(p);
        if j == 0 {
            self.base[c]
        } else {
            self.cum[(j - 1) * self.width + c]
        }
    }

    fn through(&self, j: usize, p: usize) -> u64 {
        self.cum[j * self.width + self.col(p)]
    }

    /// Widens every record to `width` positions, repeating its last cost.
    fn widen(&mut self, records: usize, width: usize) {
        if width <= self.width {
            return;
        }
        let old = self.width;
        let mut cum = VecDeque::with_capacity(records * width);
        for j in 0..records {
            for p in 0..width {
                cum.push_back(self.cum[j * old + p.min(old - 1)]);
            }
        }
        let last = self.base[old - 1];
        self.base.resize(width, last);
        self.cum = cum;
        self.width = width;
    }
}

impl Log {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log of cost-1 records at the given ascending timestamps.
    pub fn from_timestamps(ts: impl IntoIterator<Item = u64>) -> Self {
        let mut ts: VecDeque<u64> = ts.into_iter().collect();
        ts.make_contiguous().sort_unstable();
        Self { ts, sums: None }
    }

    /// Number of records (admitted requests, whatever their costs).
    pub fn len(&self) -> usize {
        self.ts.len()
    }

    /// True when the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The timestamp of record `j` (0 = oldest).
    pub fn ts(&self, j: usize) -> u64 {
        self.ts[j]
    }

    /// The newest timestamp, if any.
    pub fn newest(&self) -> Option<u64> {
        self.ts.back().copied()
    }

    /// True when some record costs more than 1.
    pub fn is_weighted(&self) -> bool {
        self.sums.is_some()
    }

    /// Index of the first record live for `window_ms` at `now`
    /// (every record before it has `ts + window <= now`).
    pub fn first_live(&self, now: u64, window_ms: u64) -> usize {
        // Common case first: after expiry the oldest record is live for the
        // longest window, and the whole log counts.
        match self.ts.front() {
            None => 0,
            Some(&oldest) if oldest + window_ms > now => 0,
            Some(_) => self.ts.partition_point(|&t| t + window_ms <= now),
        }
    }

    /// The units at cost position `position` of records `start..`.
    pub fn units_from(&self, start: usize, position: usize) -> u64 {
        match &self.sums {
            None => (self.ts.len() - start) as u64,
            Some(_) if start == self.ts.len() => 0,
            Some(s) => s.through(self.ts.len() - 1, position) - s.before(start, position),
        }
    }

    /// The timestamp of the `k`-th oldest unit (1-based) at `position` among
    /// records `start..`. `k` must be at most [`Log::units_from`].
    pub fn kth_unit_ts(&self, start: usize, position: usize, k: u64) -> u64 {
        debug_assert!(k >= 1 && k <= self.units_from(start, position));
        match &self.sums {
            None => self.ts[start + k as usize - 1],
            Some(s) => {
                // The first record whose running sum reaches before(start) + k.
                let target = s.before(start, position) + k;
                let (mut lo, mut hi) = (start, self.ts.len() - 1);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if s.through(mid, position) >= target {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                self.ts[lo]
            }
        }
    }

    /// Drops the records that have expired for `longest_window_ms`
    /// (`ts + window <= now`), oldest first. Returns how many.
    pub fn expire(&mut self, now: u64, longest_window_ms: u64) -> usize {
        let mut dropped = 0;
        while self
            .ts
            .front()
            .is_some_and(|&t| t + longest_window_ms <= now)
        {
            self.ts.pop_front();
            if let Some(s) = self.sums.as_deref_mut() {
                for p in 0..s.width {
                    s.base[p] = s.cum.pop_front().expect("one sum per position");
                }
            }
            dropped += 1;
        }
        if self.ts.is_empty() {
            // An empty log starts plain again: no memory for sums it no longer needs.
            self.sums = None;
        }
        dropped
    }

    /// Appends one record at `now` with `costs` (one per position, or one
    /// for all), keeping the log ascending even when `now` is earlier than
    /// the newest record (a clock that stepped back).
    pub fn append(&mut self, now: u64, costs: &[u64]) {
        debug_assert!(!costs.is_empty());
        let at = if self.ts.back().is_none_or(|&n| n <= now) {
            self.ts.len()
        } else {
            self.ts.partition_point(|&t| t <= now)
        };
        let plain = costs.iter().all(|&c| c == 1);
        if plain && self.sums.is_none() {
            self.ts.insert(at, now);
            return;
        }
        let records = self.ts.len();
        let sums = self.sums.get_or_insert_with(|| {
            // Every record so far costs 1: the running sum is its rank.
            Box::new(Sums {
                width: 1,
                cum: (1..=records as u64).collect(),
                base: SmallVec::from_elem(0, 1),
            })
        });
        let width = if costs.iter().all(|&c| c == costs[0]) {
            1
        } else {
            costs.len()
        };
        sums.widen(records, width);
        let w = sums.width;
        let cost_at = |p: usize| costs[p.min(costs.len() - 1)];
        // The new record's sums, then every later record's grow by its cost.
        for p in 0..w {
            let value = sums.before(at, p) + cost_at(p);
            sums.cum.insert(at * w + p, value);
        }
        for j in at + 1..=records {
            for p in 0..w {
                sums.cum[j * w + p] += cost_at(p);
            }
        }
        self.ts.insert(at, now);
    }

    /// Heap bytes this log holds (capacity, not length), for memory budgets.
    pub fn heap_bytes(&self) -> usize {
        let ts = self.ts.capacity() * 8;
        ts + self.sums.as_deref().map_or(0, |s| {
            std::mem::size_of::<Sums>() + s.cum.capacity() * 8 + s.base.capacity() * 8
        })
    }

    /// True when [`Log::shrink_if_sparse`] would release memory.
    pub fn is_sparse(&self) -> bool {
        self.ts.capacity() > 64 && self.ts.capacity() > 4 * self.ts.len()
    }

    /// Releases spare capacity when the log holds far fewer records than it
    /// has room for (after a burst expired).
    pub fn shrink_if_sparse(&mut self) {
        if self.is_sparse() {
            self.ts.shrink_to(self.ts.len() * 2);
            if let Some(s) = self.sums.as_deref_mut() {
                s.cum.shrink_to(self.ts.len() * 2 * s.width);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_logs_count_by_rank_and_keep_no_sums() {
        let mut log = Log::new();
        for t in [10, 20, 30] {
            log.append(t, &[1]);
        }
        assert!(!log.is_weighted());
        assert_eq!(log.units_from(1, 0), 2);
        assert_eq!(log.kth_unit_ts(1, 0, 2), 30);
    }

    #[test]
    fn weighted_records_count_their_costs() {
        let mut log = Log::new();
        log.append(10, &[1]);
        log.append(20, &[5]);
        log.append(30, &[2]);
        assert_eq!(log.len(), 3);
        assert_eq!(log.units_from(0, 0), 8);
        assert_eq!(log.units_from(1, 0), 7);
        // Units by age: 10 | 20 x5 | 30 x2.
        assert_eq!(log.kth_unit_ts(0, 0, 1), 10);
        assert_eq!(log.kth_unit_ts(0, 0, 2), 20);
        assert_eq!(log.kth_unit_ts(0, 0, 6), 20);
        assert_eq!(log.kth_unit_ts(0, 0, 7), 30);
        log.expire(1_015, 1_000);
        assert_eq!((log.len(), log.units_from(0, 0)), (2, 7));
        assert_eq!(log.kth_unit_ts(0, 0, 5), 20);
    }

    #[test]
    fn per_position_costs_and_widening() {
        let mut log = Log::new();
        log.append(10, &[3]); // 3 for every position
        log.append(20, &[1, 400]);
        assert_eq!(log.units_from(0, 0), 4);
        assert_eq!(log.units_from(0, 1), 403);
        // A later position repeats the last listed cost.
        assert_eq!(log.units_from(0, 5), 403);
        assert_eq!(log.kth_unit_ts(0, 1, 4), 20);
        assert_eq!(log.kth_unit_ts(0, 0, 3), 10);
    }

    #[test]
    fn an_earlier_record_goes_in_order_and_later_sums_grow() {
        let mut log = Log::new();
        log.append(10, &[2]);
        log.append(30, &[2]);
        log.append(20, &[5]);
        assert_eq!((log.ts(0), log.ts(1), log.ts(2)), (10, 20, 30));
        assert_eq!(log.units_from(2, 0), 2);
        assert_eq!(log.units_from(1, 0), 7);
        assert_eq!(log.kth_unit_ts(0, 0, 3), 20);
    }
}
