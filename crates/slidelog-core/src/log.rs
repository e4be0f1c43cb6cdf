//! A key's log as the stores hold it in memory: one weighted record per
//! millisecond in which requests were admitted (docs/design.md §4.1).
//!
//! A record has a timestamp and a cost per *cost position* (a request with
//! several limits may carry its own cost for each, matched by position; a
//! record's cost for a position past those it lists is its last listed
//! cost, so a single cost applies to every limit). Records at the same
//! millisecond are one record whose costs are the sum of theirs, position by
//! position: no decision can tell them apart (§1 counts units by timestamp).
//!
//! While every record costs 1 the log keeps only timestamps (the rank is the
//! sum). Once one costs more, `costs` keeps a cost per record and a
//! Fenwick tree of sums per position over blocks of records, so every
//! question a decision asks and every change a settle makes is O(log n)
//! plus a scan of one block:
//!
//! - how many units are live for a window: the total less a prefix sum;
//! - when the k-th oldest live unit was recorded (the wait of a rejection):
//!   a descent of the tree, then a scan of one block;
//! - a settle or refund: a point update per position. A refunded record
//!   (0 everywhere) stays as a *tombstone* that counts nowhere; the log is
//!   compacted when tombstones are more than half of its records.
//!
//! Timestamps are 32-bit offsets from a base per log: a log's records span
//! at most its horizon plus any step back of the clock, and only windows
//! over 49.7 days (docs/design.md §1 allows 366 days) can span more than
//! `u32::MAX` ms; such a log keeps each timestamp whole, in two slots. So a
//! plain log costs 4 bytes per record.
//!
//! The *horizon* is the longest window of any request that recorded on the
//! log (an admitted check or a charge) since it was last empty:
//! [`Log::expire`] never drops a record younger than it, so a request with
//! shorter windows cannot shorten the log for the others (docs/design.md §1).
//!
//! (Records held inline in the log for small logs were tried, with a
//! `SmallVec`: the test of where the slots are cost more, on every decision,
//! than the allocation it saves — BENCHMARKS.md, "Memory store vs governor".)

mod column;
mod costs;
mod dense;
mod fenwick;
mod granule;
mod room;
#[cfg(test)]
mod tests;

use costs::Costs;

/// The bits of `Log::packed` that hold the base of the offsets.
const BASE_MASK: u64 = (1 << 59) - 1;
/// The bit of `Log::packed` set while the log is dense: no timestamps are
/// kept, record `j` is at the base plus `j` granules (`log/dense.rs`).
const DENSE_BIT: u64 = 1 << 59;
/// The bit of `Log::packed` set when timestamps are whole (two slots each).
const WIDE_BIT: u64 = 1 << 63;
/// Where `Log::packed` keeps the horizon's bits above the low 32.
const HORIZON_SHIFT: u32 = 60;
/// The longest horizon the log can hold: 2^35 - 1 ms (397 days, more than
/// `MAX_WINDOW_MS`).
const MAX_HORIZON: u64 = (1 << 35) - 1;

/// The admitted requests of one key, oldest first.
///
/// The records' timestamps are `slots[head..]`, a queue that drops from the
/// front by moving `head` and is compacted when it must grow (so each record
/// is moved O(1) times): each slot is `ts - base`, or, in a wide log, two
/// slots hold the high and low halves of `ts`. A dense log keeps no slots:
/// its times are implicit (`log/dense.rs`).
#[derive(Debug, Clone, Default)]
pub struct Log {
    /// The base of the offsets (bits 0..59), the dense flag (bit 59), the
    /// horizon's bits 32..35 (bits 60..63) and the wide flag (bit 63): packed so that a log
    /// stays 48 bytes, the memory store's table entry 80.
    packed: u64,
    slots: Vec<u32>,
    head: u32,
    /// The horizon's low 32 bits.
    horizon_lo: u32,
    /// `None` while every record costs 1 for every position.
    costs: Option<Box<Costs>>,
}

/// Two logs are equal when they hold the same records (tombstones left
/// out) and the same horizon, however stored.
impl PartialEq for Log {
    fn eq(&self, other: &Self) -> bool {
        let width = self.cost_width().max(other.cost_width());
        let counted = |log: &Self| -> Vec<(u64, Vec<u64>)> {
            (0..log.len())
                .filter(|&j| !log.is_tombstone(j))
                .map(|j| (log.ts(j), (0..width).map(|p| log.cost(j, p)).collect()))
                .collect()
        };
        self.horizon() == other.horizon() && counted(self) == counted(other)
    }
}

impl Eq for Log {}

/// The storage of the timestamps (private: callers see only `u64` timestamps).
impl Log {
    #[inline]
    fn base(&self) -> u64 {
        self.packed & BASE_MASK
    }

    #[inline]
    fn wide(&self) -> bool {
        self.packed & WIDE_BIT != 0
    }

    fn set_base(&mut self, base: u64) {
        debug_assert!(base <= BASE_MASK);
        self.packed = (self.packed & !BASE_MASK) | base;
    }

    fn set_wide(&mut self, wide: bool) {
        if wide {
            self.packed |= WIDE_BIT;
        } else {
            self.packed &= !WIDE_BIT;
        }
    }

    fn set_horizon(&mut self, horizon: u64) {
        let horizon = horizon.min(MAX_HORIZON);
        let high = 0b111 << HORIZON_SHIFT;
        self.packed = (self.packed & !high) | ((horizon >> 32) << HORIZON_SHIFT);
        self.horizon_lo = horizon as u32;
    }

    /// Slots per record.
    #[inline]
    fn width(&self) -> usize {
        1 + usize::from(self.wide())
    }

    /// The live slots.
    #[inline]
    fn live(&self) -> &[u32] {
        &self.slots[self.head as usize..]
    }

    #[inline]
    fn stamp(&self, j: usize) -> u64 {
        if self.dense() {
            return self.base() + j as u64 * self.granule();
        }
        let wide = self.wide();
        let at = self.head as usize + (j << usize::from(wide));
        if wide {
            (u64::from(self.slots[at]) << 32) | u64::from(self.slots[at + 1])
        } else {
            self.base() + u64::from(self.slots[at])
        }
    }

    #[inline]
    fn oldest(&self) -> Option<u64> {
        (!self.is_empty()).then(|| self.stamp(0))
    }

    /// How many records have `ts <= cut` (they come first).
    #[inline]
    fn count_through(&self, cut: u64) -> usize {
        if self.dense() {
            return self.dense_through(cut);
        }
        if !self.wide() {
            return cut
                .checked_sub(self.base())
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
        if self.wide() {
            Some([(ts >> 32) as u32, ts as u32])
        } else {
            ts.checked_sub(self.base())
                .and_then(|d| u32::try_from(d).ok())
                .map(|o| [o, 0])
        }
    }

    /// Drops the `n` oldest timestamps (`n <= len`).
    #[inline]
    fn drop_front_stamps(&mut self, n: usize) {
        if n == self.len() {
            // Empty: the next record sets the base. The room stays, as a
            // key busy again soon needs it; an idle key's log is swept whole.
            self.slots.clear();
            self.head = 0;
            self.set_wide(false);
            self.set_dense(false);
            return;
        }
        if self.dense() {
            let base = self.base() + n as u64 * self.granule();
            self.set_base(base);
            return;
        }
        self.head += (n * self.width()) as u32;
        if self.wide() {
            // Back to offsets once the records span half the range (not all
            // of it, so that a log on the edge does not switch back and forth
            // at O(n) a time).
            let (oldest, newest) = (self.stamp(0), self.stamp(self.len() - 1));
            if newest - oldest <= u64::from(u32::MAX / 2) && oldest <= BASE_MASK {
                self.restore(oldest);
            }
        }
    }

    /// Rewrites every timestamp `keep` says (by index): as offsets from
    /// `base`, or whole (`base` = `None`).
    fn restore_with(&mut self, base: Option<u64>, keep: impl Fn(usize) -> bool) {
        let all: Vec<u64> = (0..self.len())
            .filter(|&j| keep(j))
            .map(|j| self.stamp(j))
            .collect();
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
        self.set_dense(false);
        self.set_wide(base.is_none());
        self.set_base(base.unwrap_or(0));
    }

    fn restore(&mut self, base: u64) {
        self.restore_with(Some(base), |_| true);
    }

    /// Inserts `ts` as record `at`, which keeps the records ascending.
    fn insert_stamp(&mut self, at: usize, ts: u64) {
        debug_assert!(!self.dense());
        if self.is_empty() {
            if ts > BASE_MASK {
                self.set_wide(true);
            } else {
                self.set_wide(false);
                self.set_base(ts);
            }
        }
        let Some(pair) = self.encode(ts) else {
            // Earlier than the base (a clock that stepped back) or u32::MAX
            // ms after it: move the base to the oldest of the records and
            // `ts`, or keep whole timestamps when they span more than that.
            let lo = self.stamp(0).min(ts);
            let hi = self.stamp(self.len() - 1).max(ts);
            let fits = hi - lo <= u64::from(u32::MAX) && lo <= BASE_MASK;
            self.restore_with(fits.then_some(lo), |_| true);
            return self.insert_stamp(at, ts);
        };
        let w = self.width();
        if self.slots.len() + w > self.slots.capacity() {
            self.make_room();
        }
        if at == self.len() {
            self.slots.push(pair[0]);
            if self.wide() {
                self.slots.push(pair[1]);
            }
        } else {
            let i = self.head as usize + w * at;
            self.slots.splice(i..i, pair[..w].iter().copied());
        }
    }

    /// Makes room for a record in a full queue: the dropped records' room
    /// when they are a quarter of the live ones or more (at most 4 moves per
    /// slot dropped), else a new queue of the live records and a quarter
    /// more (`log/room.rs`: at most 4 moves per slot appended since the
    /// last growth).
    fn make_room(&mut self) {
        let head = self.head as usize;
        let live = self.slots.len() - head;
        if head > 0 && head * 4 >= live {
            self.slots.drain(..head);
        } else {
            let mut slots = Vec::with_capacity(live + room::growth(live).max(2));
            slots.extend_from_slice(&self.slots[head..]);
            self.slots = slots;
        }
        self.head = 0;
    }

    /// True when the next record needs [`make_room`](Self::make_room).
    #[inline]
    fn is_full(&self) -> bool {
        self.slots.len() + self.width() > self.slots.capacity()
    }

    /// Moves the newest record to `ts` (not earlier than it).
    fn move_newest(&mut self, ts: u64) {
        debug_assert!(!self.dense());
        let last = self.len() - 1;
        debug_assert!(ts >= self.stamp(last));
        if let (Some(pair), false) = (self.encode(ts), self.wide()) {
            let at = self.head as usize + last;
            self.slots[at] = pair[0];
            return;
        }
        // Whole timestamps, or past the offsets' range: out and in again.
        let w = self.width();
        self.slots.truncate(self.slots.len() - w);
        if self.is_empty() {
            // The only record: the base moves with it.
            self.slots.clear();
            self.head = 0;
        }
        self.insert_stamp(last, ts);
    }

    /// Records the slots have room for.
    fn capacity(&self) -> usize {
        self.slots.capacity() >> usize::from(self.wide())
    }

    /// The costs, made for a plain log (every record so far costs 1):
    /// O(records) once in the log's life.
    fn weighted(&mut self) -> &mut Costs {
        let records = self.len();
        self.costs
            .get_or_insert_with(|| Box::new(Costs::plain(records)))
    }
}

mod query;
mod spent;
mod update;

pub use spent::{SPENT_MARGIN_MS, SpentFull};

/// Single use of receipts (docs/design.md §4.6): the nonces of the
/// receipts settled on this log, kept with its costs (a settle makes a log
/// weighted) until their validity ends.
impl Log {
    /// Whether a receipt with `nonce` has settled on this log.
    pub fn is_spent(&self, nonce: u64) -> bool {
        self.costs
            .as_deref()
            .is_some_and(|c| c.spent.contains(nonce))
    }

    /// Whether one more settled receipt can be kept at `now` (expired ones
    /// are forgotten first when the key holds its most).
    pub fn can_spend(&mut self, now: u64) -> bool {
        self.costs
            .as_deref_mut()
            .is_none_or(|c| c.spent.has_room(now))
    }

    /// Keeps `nonce` as settled until `until_ms` (and a margin for clocks).
    /// Nothing is kept on an empty log: no receipt can settle on it.
    pub fn spend(&mut self, nonce: u64, until_ms: u64, now: u64) -> Result<(), SpentFull> {
        if self.is_empty() {
            return Ok(());
        }
        self.weighted().spent.insert(nonce, until_ms, now)
    }

    /// The settled receipts kept: `(nonce, forget_after_ms)`, by nonce.
    pub fn spent(&self) -> &[(u64, u64)] {
        self.costs.as_deref().map_or(&[], |c| c.spent.entries())
    }

    /// Restores settled receipts read from an encoding: each kept until its
    /// `forget_after_ms` as written.
    pub fn restore_spent(&mut self, entries: &[(u64, u64)]) -> Result<(), SpentFull> {
        for &(nonce, forget) in entries {
            let until = forget.saturating_sub(SPENT_MARGIN_MS);
            self.spend(nonce, until, 0)?;
        }
        Ok(())
    }
}
