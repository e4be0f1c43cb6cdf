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
//! sum). Timestamps are 32-bit offsets from a base per log: a log's records
//! span at most its longest window plus any step back of the clock, and only
//! windows over 49.7 days (docs/design.md §1 allows 366 days) can span more
//! than `u32::MAX` ms; such a log keeps each timestamp whole, in two slots.
//! So a plain log costs 4 bytes per record.
//!
//! (Records held inline in the log for small logs were tried, with a
//! `SmallVec`: the test of where the slots are cost more, on every decision,
//! than the allocation it saves — BENCHMARKS.md, "Memory store vs governor".)

use smallvec::SmallVec;
use std::collections::VecDeque;

/// The admitted requests of one key, oldest first.
///
/// The records' timestamps are `slots[head..]`, a queue that drops from the
/// front by moving `head` and is compacted when it must grow (so each record
/// is moved O(1) times): each slot is `ts - base`, or, in a `wide` log, two
/// slots hold the high and low halves of `ts`.
#[derive(Debug, Clone, Default)]
pub struct Log {
    base: u64,
    slots: Vec<u32>,
    head: u32,
    wide: bool,
    /// `None` while every record costs 1 for every position.
    sums: Option<Box<Sums>>,
}

/// Two logs are equal when they hold the same records, however stored.
impl PartialEq for Log {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && (0..self.len()).all(|j| self.ts(j) == other.ts(j))
            && self.sums == other.sums
    }
}

impl Eq for Log {}

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

/// The storage of the timestamps (private: callers see only `u64` timestamps).
impl Log {
    /// Slots per record.
    #[inline]
    fn width(&self) -> usize {
        1 + usize::from(self.wide)
    }

    /// The live slots.
    #[inline]
    fn live(&self) -> &[u32] {
        &self.slots[self.head as usize..]
    }

    #[inline]
    fn stamp(&self, j: usize) -> u64 {
        let at = self.head as usize + (j << usize::from(self.wide));
        if self.wide {
            (u64::from(self.slots[at]) << 32) | u64::from(self.slots[at + 1])
        } else {
            self.base + u64::from(self.slots[at])
        }
    }

    #[inline]
    fn oldest(&self) -> Option<u64> {
        (!self.is_empty()).then(|| self.stamp(0))
    }

    /// How many records have `ts <= cut` (they come first).
    #[inline]
    fn count_through(&self, cut: u64) -> usize {
        if !self.wide {
            return cut
                .checked_sub(self.base)
                .map_or(0, |d| self.live().partition_point(|&o| u64::from(o) <= d));
        }
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.stamp(mid) <= cut {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Slots for `ts`: its offset, or its two halves in a wide log; `None`
    /// when the offset does not fit.
    #[inline]
    fn encode(&self, ts: u64) -> Option<[u32; 2]> {
        if self.wide {
            Some([(ts >> 32) as u32, ts as u32])
        } else {
            ts.checked_sub(self.base)
                .and_then(|d| u32::try_from(d).ok())
                .map(|o| [o, 0])
        }
    }

    /// Drops the `n` oldest records (`n <= len`).
    fn drop_front(&mut self, n: usize) {
        if n == self.len() {
            // Empty: the next record sets the base. The room stays, as a
            // key busy again soon needs it; an idle key's log is swept whole.
            self.slots.clear();
            self.head = 0;
            self.wide = false;
            return;
        }
        self.head += (n * self.width()) as u32;
        if self.wide {
            // Back to offsets once the records span half the range (not all
            // of it, so that a log on the edge does not switch back and forth
            // at O(n) a time).
            let (oldest, newest) = (self.stamp(0), self.stamp(self.len() - 1));
            if newest - oldest <= u64::from(u32::MAX / 2) {
                self.restore(oldest);
            }
        }
    }

    /// Rewrites every record: as offsets from `base`, or whole (`base` = `None`).
    fn restore_with(&mut self, base: Option<u64>) {
        let all: Vec<u64> = (0..self.len()).map(|j| self.stamp(j)).collect();
        let capacity = self.slots.capacity();
        let mut slots = Vec::new();
        match base {
            Some(base) => slots.extend(all.iter().map(|&t| (t - base) as u32)),
            None => slots.extend(all.iter().flat_map(|&t| [(t >> 32) as u32, t as u32])),
        }
        // Keep the room the log had.
        slots.reserve(capacity.saturating_sub(slots.len()));
        self.slots = slots;
        self.head = 0;
        self.wide = base.is_none();
        self.base = base.unwrap_or(0);
    }

    fn restore(&mut self, base: u64) {
        self.restore_with(Some(base));
    }

    /// Inserts `ts` as record `at`, which keeps the records ascending.
    fn insert_stamp(&mut self, at: usize, ts: u64) {
        if self.is_empty() {
            self.base = ts;
        }
        let Some(pair) = self.encode(ts) else {
            // Earlier than the base (a clock that stepped back) or u32::MAX
            // ms after it: move the base to the oldest of the records and
            // `ts`, or keep whole timestamps when they span more than that.
            let lo = self.stamp(0).min(ts);
            let hi = self.stamp(self.len() - 1).max(ts);
            self.restore_with((hi - lo <= u64::from(u32::MAX)).then_some(lo));
            return self.insert_stamp(at, ts);
        };
        let w = self.width();
        if at == self.len() {
            if self.slots.len() == self.slots.capacity()
                && self.head as usize * 4 >= self.slots.len()
            {
                // Full, and a quarter or more is dropped records: reuse their
                // room instead of growing. Moves at most 3 slots per slot dropped.
                self.slots.drain(..self.head as usize);
                self.head = 0;
            }
            self.slots.push(pair[0]);
            if self.wide {
                self.slots.push(pair[1]);
            }
        } else {
            let i = self.head as usize + w * at;
            self.slots.splice(i..i, pair[..w].iter().copied());
        }
    }

    /// Records the slots have room for.
    fn capacity(&self) -> usize {
        self.slots.capacity() >> usize::from(self.wide)
    }
}

impl Log {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// A log of cost-1 records at the given timestamps (sorted here).
    pub fn from_timestamps(ts: impl IntoIterator<Item = u64>) -> Self {
        let mut all: Vec<u64> = ts.into_iter().collect();
        all.sort_unstable();
        let mut log = Self::default();
        for (at, t) in all.into_iter().enumerate() {
            log.insert_stamp(at, t);
        }
        log
    }

    /// Number of records (admitted requests, whatever their costs).
    #[inline]
    pub fn len(&self) -> usize {
        // A shift, not a division by the width: this is on every path.
        (self.slots.len() - self.head as usize) >> usize::from(self.wide)
    }

    /// True when the log holds no record.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.slots.len() == self.head as usize
    }

    /// The timestamp of record `j` (0 = oldest).
    #[inline]
    pub fn ts(&self, j: usize) -> u64 {
        self.stamp(j)
    }

    /// The newest timestamp, if any.
    #[inline]
    pub fn newest(&self) -> Option<u64> {
        self.len().checked_sub(1).map(|j| self.stamp(j))
    }

    /// True when some record costs more than 1.
    #[inline]
    pub fn is_weighted(&self) -> bool {
        self.sums.is_some()
    }

    /// How many cost positions the records list (1 when every record has one
    /// cost for every limit, plain logs included): a record's cost at a later
    /// position is its cost at the last one.
    pub fn cost_width(&self) -> usize {
        self.sums.as_deref().map_or(1, |s| s.width)
    }

    /// The cost of record `j` at cost position `position` (1 in a plain log).
    pub fn cost(&self, j: usize, position: usize) -> u64 {
        self.sums
            .as_deref()
            .map_or(1, |s| s.through(j, position) - s.before(j, position))
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
        let len = self.len();
        match &self.sums {
            None => (len - start) as u64,
            Some(_) if start == len => 0,
            Some(s) => s.through(len - 1, position) - s.before(start, position),
        }
    }

    /// The timestamp of the `k`-th oldest unit (1-based) at `position` among
    /// records `start..`. `k` must be at most [`Log::units_from`].
    #[inline]
    pub fn kth_unit_ts(&self, start: usize, position: usize, k: u64) -> u64 {
        debug_assert!(k >= 1 && k <= self.units_from(start, position));
        match &self.sums {
            None => self.stamp(start + k as usize - 1),
            Some(s) => {
                // The first record whose running sum reaches before(start) + k.
                let target = s.before(start, position) + k;
                let (mut lo, mut hi) = (start, self.len() - 1);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if s.through(mid, position) >= target {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                self.stamp(lo)
            }
        }
    }

    /// Drops the records that have expired for `longest_window_ms`
    /// (`ts + window <= now`), oldest first. Returns how many.
    pub fn expire(&mut self, now: u64, longest_window_ms: u64) -> usize {
        let Some(cut) = now.checked_sub(longest_window_ms) else {
            return 0;
        };
        // The newest record first: when it has expired every record has,
        // and the log empties without a scan. Read before the oldest, its
        // cache line (the one the decision's counts and append use) is
        // requested while the scan waits for the oldest's: in a store of
        // many logs both are misses, and they overlap instead of following
        // each other.
        let dropped = if self.wide {
            let len = self.len();
            if len == 0 {
                return 0;
            }
            if self.stamp(len - 1) <= cut {
                len
            } else {
                // Oldest first, one by one: a decision usually expires 0
                // or 1 record, where a binary search would cost more.
                (0..len).take_while(|&j| self.stamp(j) <= cut).count()
            }
        } else {
            let live = self.live();
            let Some(&newest) = live.last() else {
                return 0;
            };
            // Offsets: `base + o <= cut` is `o <= cut - base` (nothing has
            // expired when the cut is below the base).
            let Some(d) = cut.checked_sub(self.base) else {
                return 0;
            };
            if u64::from(newest) <= d {
                live.len()
            } else {
                live.iter().take_while(|&&o| u64::from(o) <= d).count()
            }
        };
        if dropped == 0 {
            return 0;
        }
        self.drop_front(dropped);
        if self.is_empty() {
            // An empty log starts plain again: no memory for sums it no longer needs.
            self.sums = None;
        } else if let Some(s) = self.sums.as_deref_mut() {
            let w = s.width;
            for p in 0..w {
                s.base[p] = s.cum[(dropped - 1) * w + p];
            }
            s.cum.drain(..dropped * w);
        }
        dropped
    }

    /// Appends one record at `now` with `costs` (one per position, or one
    /// for all), keeping the log ascending even when `now` is earlier than
    /// the newest record (a clock that stepped back).
    pub fn append(&mut self, now: u64, costs: &[u64]) {
        debug_assert!(!costs.is_empty());
        if self.push_plain(now, costs) {
            return;
        }
        let at = match self.newest() {
            Some(newest) if newest > now => self.count_through(now),
            _ => self.len(),
        };
        let plain = costs.iter().all(|&c| c == 1);
        if plain && self.sums.is_none() {
            self.insert_stamp(at, now);
            return;
        }
        let records = self.len();
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
        self.insert_stamp(at, now);
    }

    /// [`append`](Self::append)'s common case in one pass: a record of cost 1
    /// on a plain log of offsets, at or after the newest record, its offset
    /// in range and the queue with room at its end (what `insert_stamp`
    /// then does is a push). False, having changed nothing, otherwise.
    #[inline]
    fn push_plain(&mut self, now: u64, costs: &[u64]) -> bool {
        if self.wide || self.sums.is_some() || self.slots.len() == self.slots.capacity() {
            return false;
        }
        let Some(&newest) = self.live().last() else {
            return false;
        };
        let fits = now
            .checked_sub(self.base)
            .and_then(|d| u32::try_from(d).ok())
            .filter(|&offset| offset >= newest);
        match fits {
            Some(offset) if costs.iter().all(|&c| c == 1) => {
                self.slots.push(offset);
                true
            }
            _ => false,
        }
    }

    /// The index of a record at `ts` whose cost at each position
    /// `0..positions` is `cost_at(position)`, if one is held (records with
    /// the same timestamp and costs are interchangeable: the first is given).
    pub fn find(&self, ts: u64, positions: usize, cost_at: impl Fn(usize) -> u64) -> Option<usize> {
        let end = self.count_through(ts);
        let start = ts.checked_sub(1).map_or(0, |t| self.count_through(t));
        (start..end).find(|&j| (0..positions).all(|p| self.cost(j, p) == cost_at(p)))
    }

    /// The timestamp of the newest record `start..` whose cost at `position`
    /// is not 0 (a record of cost 0 in a limit counts nowhere in it).
    #[inline]
    pub fn newest_unit(&self, start: usize, position: usize) -> Option<u64> {
        let last = self.len().checked_sub(1).filter(|&last| last >= start)?;
        // A plain log's records all cost 1: the newest record is the unit.
        if self.sums.is_none() || self.cost(last, position) > 0 {
            return Some(self.stamp(last));
        }
        let units = self.units_from(start, position);
        (units > 0).then(|| self.kth_unit_ts(start, position, units))
    }

    /// Sets the costs of record `j` (one per position, or one for all; 0
    /// allowed): its timestamp and place do not change.
    pub fn set_costs(&mut self, j: usize, costs: &[u64]) {
        debug_assert!(j < self.len() && !costs.is_empty());
        let records = self.len();
        let sums = self.weighted_sums();
        let width = if costs.iter().all(|&c| c == costs[0]) {
            1
        } else {
            costs.len()
        };
        sums.widen(records, width);
        let w = sums.width;
        for p in 0..w {
            let old = sums.through(j, p) - sums.before(j, p);
            let new = costs[p.min(costs.len() - 1)];
            for k in j..records {
                let at = k * w + p;
                sums.cum[at] = sums.cum[at] - old + new;
            }
        }
    }

    /// Removes record `j`; later records keep their order.
    pub fn remove(&mut self, j: usize) {
        debug_assert!(j < self.len());
        let records = self.len();
        if records == 1 {
            self.drop_front(1);
            self.sums = None;
            return;
        }
        if let Some(s) = self.sums.as_deref_mut() {
            let w = s.width;
            for p in 0..w {
                let cost = s.through(j, p) - s.before(j, p);
                for k in j + 1..records {
                    s.cum[k * w + p] -= cost;
                }
            }
            s.cum.drain(j * w..(j + 1) * w);
        }
        let w = self.width();
        let at = self.head as usize + j * w;
        self.slots.drain(at..at + w);
    }

    /// The running sums, made for a plain log (every record so far costs 1:
    /// the running sum is its rank).
    fn weighted_sums(&mut self) -> &mut Sums {
        let records = self.len();
        self.sums.get_or_insert_with(|| {
            Box::new(Sums {
                width: 1,
                cum: (1..=records as u64).collect(),
                base: SmallVec::from_elem(0, 1),
            })
        })
    }

    /// Heap bytes this log holds (capacity, not length), for memory budgets.
    #[inline]
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 4
            + self.sums.as_deref().map_or(0, |s| {
                std::mem::size_of::<Sums>() + s.cum.capacity() * 8 + s.base.capacity() * 8
            })
    }

    /// True when [`Log::shrink_if_sparse`] would release memory.
    #[inline]
    pub fn is_sparse(&self) -> bool {
        let capacity = self.capacity();
        capacity > 64 && capacity > 4 * self.len()
    }

    /// Releases spare capacity when the log holds far fewer records than it
    /// has room for (after a burst expired): room for twice the records is
    /// kept.
    pub fn shrink_if_sparse(&mut self) {
        if self.is_sparse() {
            let keep = self.len() * 2 * self.width();
            let mut slots: Vec<u32> = Vec::with_capacity(keep);
            slots.extend_from_slice(self.live());
            self.slots = slots;
            self.head = 0;
            let records = self.len();
            if let Some(s) = self.sums.as_deref_mut() {
                s.cum.shrink_to(records * 2 * s.width);
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

    fn stamps(log: &Log) -> Vec<u64> {
        (0..log.len()).map(|j| log.ts(j)).collect()
    }

    #[test]
    fn an_emptied_log_keeps_its_room_and_a_sparse_one_shrinks() {
        let mut log = Log::new();
        for t in 0..5 {
            log.append(100 + t, &[1]);
        }
        assert_eq!(stamps(&log), [100, 101, 102, 103, 104]);
        let room = log.heap_bytes();
        assert!(room >= 5 * 4);
        // Everything expires: the next record sets the base, in the same room.
        assert_eq!(log.expire(10_000, 1_000), 5);
        assert_eq!((log.len(), log.heap_bytes()), (0, room));
        log.append(50, &[1]);
        assert_eq!(stamps(&log), [50]);
        // A burst that expired leaves a sparse log: shrinking keeps room
        // for twice the records left.
        for t in 0..200 {
            log.append(20_000 + t, &[1]);
        }
        log.expire(21_197, 1_000);
        assert_eq!(stamps(&log), [20_198, 20_199]);
        assert!(log.is_sparse());
        log.shrink_if_sparse();
        assert!(log.heap_bytes() <= 4 * 4, "{}", log.heap_bytes());
        assert_eq!(stamps(&log), [20_198, 20_199]);
    }

    #[test]
    fn a_log_whose_newest_record_expired_empties_whole() {
        // Weighted and whole timestamps (60 days apart): the newest record
        // has expired, so every record goes, and the log is plain offsets again.
        let day = 86_400_000;
        let mut log = Log::new();
        log.append(1_000, &[3]);
        log.append(1_000 + 60 * day, &[1, 2]);
        assert!(log.wide && log.is_weighted());
        let room = log.heap_bytes();
        assert_eq!(log.expire(1_000 + 61 * day, day), 2);
        assert!(log.is_empty() && !log.wide && !log.is_weighted());
        assert_eq!(log.newest(), None);
        assert!(log.heap_bytes() <= room);
        // Only the oldest expired: counted from the front, the newest kept.
        log.append(5_000, &[1]);
        log.append(6_000, &[1]);
        assert_eq!(log.expire(6_500, 1_000), 1);
        assert_eq!(stamps(&log), [6_000]);
        // Nothing expired, and an empty log: nothing to drop.
        assert_eq!(log.expire(6_500, 1_000), 0);
        assert_eq!(Log::new().expire(10_000, 1_000), 0);
    }

    #[test]
    fn dropped_records_make_room_before_the_queue_grows() {
        let mut log = Log::new();
        // A steady 24 live records: the queue stops growing.
        for t in 0..24 {
            log.append(t, &[1]);
        }
        let settled = (0..1_000).fold(0, |_, t| {
            log.expire(24 + t, 24);
            log.append(24 + t, &[1]);
            log.heap_bytes()
        });
        assert_eq!(log.len(), 24);
        assert!(settled <= 32 * 4, "{settled} bytes for 24 records");
        assert_eq!(log.ts(0), 1_000);
    }

    #[test]
    fn offsets_rebase_when_a_record_falls_outside_them() {
        let span = u64::from(u32::MAX);
        let mut log = Log::new();
        log.append(1_000, &[1]);
        log.append(2_000, &[1]);
        // A clock that stepped back: below the base.
        log.append(500, &[1]);
        assert_eq!(stamps(&log), [500, 1_000, 2_000]);
        // u32::MAX ms after the base, and the oldest gone: the base moves up.
        log.expire(1_001, 1);
        assert_eq!(stamps(&log), [2_000]);
        log.append(600 + span, &[1]);
        log.append(2_000 + span, &[1]);
        assert_eq!(stamps(&log), [2_000, 600 + span, 2_000 + span]);
        assert_eq!(log.first_live(2_000 + span, span), 1);
        assert_eq!(log.kth_unit_ts(0, 0, 3), 2_000 + span);
    }

    #[test]
    fn a_log_spanning_more_than_the_offsets_keeps_whole_timestamps() {
        let day = 86_400_000;
        let mut log = Log::new();
        log.append(1_000, &[1]);
        log.append(1_000 + 30 * day, &[2]);
        // 60 days: more than u32::MAX ms (49.7 days).
        log.append(1_000 + 60 * day, &[1]);
        log.append(1_000 + 60 * day + 1, &[1]);
        assert_eq!(
            stamps(&log),
            [
                1_000,
                1_000 + 30 * day,
                1_000 + 60 * day,
                1_000 + 60 * day + 1
            ]
        );
        assert_eq!(log.units_from(0, 0), 5);
        assert_eq!(log.first_live(1_000 + 60 * day, 40 * day), 1);
        assert_eq!(log.first_live(1_000 + 60 * day, 30 * day), 2);
        assert_eq!(log.kth_unit_ts(0, 0, 3), 1_000 + 30 * day);
        // A step back below all of them, still wide.
        log.append(10, &[1]);
        assert_eq!(log.ts(0), 10);
        // The oldest expire: 1 day apart, the log is offsets again.
        assert_eq!(log.expire(1_000 + 60 * day + 1, 20 * day), 3);
        assert_eq!(stamps(&log), [1_000 + 60 * day, 1_000 + 60 * day + 1]);
        assert!(!log.wide);
        assert_eq!(log.units_from(0, 0), 2);
    }

    #[test]
    fn a_log_is_48_bytes() {
        // The memory store's table entry holds one: keep it small.
        assert_eq!(std::mem::size_of::<Log>(), 48);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Append at `now + delta` with these costs.
        Append(i64, Vec<u64>),
        /// Expire for this window at `now + delta`.
        Expire(i64, u64),
        /// Set the costs of the record at this index (modulo the length).
        SetCosts(usize, Vec<u64>),
        /// Remove the record at this index (modulo the length).
        Remove(usize),
    }

    /// Deltas that cross the offset range both ways, and windows up to 366 days.
    fn ops() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
        use proptest::prelude::*;
        let delta = prop_oneof![
            4 => 0i64..1_000,
            1 => -1_000i64..0,
            1 => -(1i64 << 33)..(1i64 << 33),
        ];
        let costs = prop_oneof![
            3 => Just(vec![1u64]),
            1 => (1u64..5).prop_map(|c| vec![c]),
            1 => proptest::collection::vec(1u64..5, 2),
        ];
        let window = prop_oneof![1u64..2_000, 1u64..31_622_400_000];
        let settled = prop_oneof![
            (0u64..5).prop_map(|c| vec![c]),
            proptest::collection::vec(0u64..5, 2),
        ];
        proptest::collection::vec(
            prop_oneof![
                4 => (delta.clone(), costs).prop_map(|(d, c)| Op::Append(d, c)),
                1 => (delta, window).prop_map(|(d, w)| Op::Expire(d, w)),
                1 => (0usize..200, settled).prop_map(|(j, c)| Op::SetCosts(j, c)),
                1 => (0usize..200).prop_map(Op::Remove),
            ],
            1..120,
        )
    }

    proptest::proptest! {
        /// The log against a sorted `Vec` of (timestamp, costs): every
        /// question a decision asks, after every step.
        #[test]
        fn the_log_matches_a_plain_list(ops in ops()) {
            let mut log = Log::new();
            let mut model: Vec<(u64, Vec<u64>)> = Vec::new();
            let mut now: u64 = 1 << 40;
            for op in ops {
                match op {
                    Op::Append(d, costs) => {
                        now = now.saturating_add_signed(d);
                        log.append(now, &costs);
                        let at = model.partition_point(|(t, _)| *t <= now);
                        model.insert(at, (now, costs));
                    }
                    Op::Expire(d, window) => {
                        now = now.saturating_add_signed(d);
                        let dropped = log.expire(now, window);
                        let keep = model.iter().position(|(t, _)| t + window > now).unwrap_or(model.len());
                        model.drain(..keep);
                        proptest::prop_assert_eq!(dropped, keep);
                    }
                    Op::SetCosts(j, costs) if !model.is_empty() => {
                        let j = j % model.len();
                        log.set_costs(j, &costs);
                        model[j].1 = costs;
                    }
                    Op::Remove(j) if !model.is_empty() => {
                        let j = j % model.len();
                        log.remove(j);
                        model.remove(j);
                    }
                    Op::SetCosts(..) | Op::Remove(_) => {}
                }
                let want: Vec<u64> = model.iter().map(|(t, _)| *t).collect();
                proptest::prop_assert_eq!(stamps(&log), want);
                proptest::prop_assert_eq!(log.newest(), model.last().map(|(t, _)| *t));
                for window in [1, 500, 1 << 32, 1 << 34] {
                    let start = log.first_live(now, window);
                    proptest::prop_assert_eq!(start, model.iter().filter(|(t, _)| t + window <= now).count());
                    for p in 0..3 {
                        let cost = |c: &Vec<u64>| c[p.min(c.len() - 1)];
                        let units: u64 = model[start..].iter().map(|(_, c)| cost(c)).sum();
                        proptest::prop_assert_eq!(log.units_from(start, p), units);
                        let newest = model[start..].iter().rev().find(|(_, c)| cost(c) > 0).map(|(t, _)| *t);
                        proptest::prop_assert_eq!(log.newest_unit(start, p), newest);
                        if units > 0 {
                            for k in [1, units.div_ceil(2), units] {
                                let mut seen = 0;
                                let kth = model[start..].iter().find(|(_, c)| { seen += cost(c); seen >= k }).unwrap().0;
                                proptest::prop_assert_eq!(log.kth_unit_ts(start, p, k), kth);
                            }
                        }
                    }
                }
            }
        }
    }
}
