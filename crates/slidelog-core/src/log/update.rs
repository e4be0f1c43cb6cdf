//! How a [`Log`] changes (docs/design.md §4.1, §4.6): expiry up to the
//! horizon, appends that merge a millisecond's records, a charge merged
//! into the newest record, settles of one request's share, refunds as
//! tombstones. Each is O(log n) plus a block, but for an insertion before
//! the newest record (a clock that stepped back), which is O(n).

use super::Log;
use super::costs::{Row, SATURATED, add, distinct_width, row_of};
use crate::MAX_LIMITS;

impl Log {
    /// Raises the horizon to `window_ms` when that is longer: a request of
    /// that longest window recorded on the log.
    pub fn raise_horizon(&mut self, window_ms: u64) {
        if window_ms > self.horizon() {
            self.set_horizon(window_ms);
        }
    }

    /// Drops the records that have expired for the longer of the horizon
    /// and `longest_window_ms` (`ts + window <= now`), oldest first. Returns
    /// how many (refunded ones included). An emptied log forgets its horizon.
    #[inline]
    pub fn expire(&mut self, now: u64, longest_window_ms: u64) -> usize {
        let Some(cut) = now.checked_sub(self.keep_for(longest_window_ms)) else {
            return 0;
        };
        let len = self.len();
        if len == 0 {
            return 0;
        }
        if self.dense() {
            // Times are arithmetic: the count is one division.
            let dropped = self.count_through(cut);
            if dropped > 0 {
                self.drop_records(dropped);
            }
            return dropped;
        }
        // The newest record first: when it has expired every record has,
        // and the log empties without a scan. Then oldest first, one by
        // one: a decision usually expires 0 or 1 record, where a binary
        // search would cost more.
        let dropped = if self.wide() {
            if self.stamp(len - 1) <= cut {
                len
            } else {
                (0..len).take_while(|&j| self.stamp(j) <= cut).count()
            }
        } else {
            // Offsets: `base + o <= cut` is `o <= cut - base` (nothing has
            // expired when the cut is below the base).
            let Some(d) = cut.checked_sub(self.base()) else {
                return 0;
            };
            let live = self.live();
            if u64::from(live[live.len() - 1]) <= d {
                live.len()
            } else {
                live.iter().take_while(|&&o| u64::from(o) <= d).count()
            }
        };
        if dropped > 0 {
            self.drop_records(dropped);
        }
        dropped
    }

    /// Drops the `n` oldest records (`0 < n <= len`).
    fn drop_records(&mut self, n: usize) {
        if n == self.len() {
            self.clear();
            return;
        }
        self.drop_front_stamps(n);
        if let Some(c) = self.costs.as_deref_mut() {
            c.drop_front(n);
            self.compact_if_refunded();
        }
        self.shrink_if_sparse();
    }

    /// Empties the log: plain again, no horizon; the room stays.
    pub(super) fn clear(&mut self) {
        self.drop_front_stamps(self.len());
        self.costs = None;
        self.set_horizon(0);
    }

    /// Appends `costs` (one per position, or one for all) at `now`, keeping
    /// the log ascending even when `now` is earlier than the newest record
    /// (a clock that stepped back). A record already at `now` takes the
    /// costs, position by position, instead.
    #[inline]
    pub fn append(&mut self, now: u64, costs: &[u64]) {
        debug_assert!(!costs.is_empty());
        if self.push_plain(now, costs) {
            return;
        }
        if self.append_to_dense(now, costs) {
            return;
        }
        let len = self.len();
        let at = match self.newest() {
            // The common merge: the newest record's millisecond.
            Some(newest) if newest == now => return self.add_costs(len - 1, costs),
            Some(newest) if newest > now => self.count_through(now),
            _ => len,
        };
        if at > 0 && self.stamp(at - 1) == now {
            self.add_costs(at - 1, costs);
            return;
        }
        if self.costs.is_none() && costs.iter().all(|&c| c == 1) {
            self.insert_stamp(at, now);
            return;
        }
        let c = self.weighted();
        if at == len {
            c.push(costs);
        } else {
            let (row, _) = row_of(costs);
            *c = c.rebuilt(|_| true, Some((at, row)));
        }
        self.insert_stamp(at, now);
    }

    /// [`append`](Self::append) on a dense log, or on a weighted log of
    /// timestamps whose full queue makes it try dense (`log/dense.rs`):
    /// true when done. A dense log that cannot take the record (off its
    /// grid, before its base, or far on) goes back to timestamps first.
    fn append_to_dense(&mut self, now: u64, costs: &[u64]) -> bool {
        if !self.dense() {
            let later = self.newest().is_some_and(|newest| now > newest);
            if !(later && self.costs.is_some() && self.is_full() && self.try_dense(now)) {
                return false;
            }
        }
        if self.append_dense(now, costs) {
            self.fit_layout();
            return true;
        }
        self.make_sparse();
        false
    }

    /// [`append`](Self::append)'s common case in one pass: a record of cost 1
    /// on a plain log of offsets, after the newest record, its offset in
    /// range and the queue with room at its end (what `insert_stamp` then
    /// does is a push). False, having changed nothing, otherwise.
    #[inline]
    fn push_plain(&mut self, now: u64, costs: &[u64]) -> bool {
        if self.wide() || self.costs.is_some() || self.slots.len() == self.slots.capacity() {
            return false;
        }
        let Some(&newest) = self.live().last() else {
            return false;
        };
        let fits = now
            .checked_sub(self.base())
            .and_then(|d| u32::try_from(d).ok())
            .filter(|&offset| offset > newest);
        match fits {
            Some(offset) if costs.iter().all(|&c| c == 1) => {
                self.slots.push(offset);
                true
            }
            _ => false,
        }
    }

    /// Adds `costs` to record `j`'s, position by position.
    pub(super) fn add_costs(&mut self, j: usize, costs: &[u64]) {
        let one = costs.iter().all(|&c| c == costs[0]);
        let c = self.weighted();
        if one && c.add_narrow(j, super::costs::stored(costs[0])) {
            return;
        }
        let (extra, _) = row_of(costs);
        let old = c.row(j);
        let mut row: Row = [0; MAX_LIMITS];
        for p in 0..MAX_LIMITS {
            row[p] = add(old[p], extra[p]);
        }
        c.set(j, &row, distinct_width(&row));
    }

    /// A charge into a log that is full (docs/design.md §4.6): `costs` are
    /// added to the newest record, which moves to `now` (or stays where it
    /// is when that is later: a clock that stepped back). Returns the
    /// record's timestamp. An empty log gets a record at `now`.
    pub fn merge_into_newest(&mut self, now: u64, costs: &[u64]) -> u64 {
        let Some(newest) = self.newest() else {
            self.append(now, costs);
            return now;
        };
        let ts = newest.max(now);
        if ts != newest && !(self.dense() && self.move_newest_dense(ts)) {
            self.make_sparse();
            self.move_newest(ts);
        }
        self.add_costs(self.len() - 1, costs);
        self.fit_layout();
        ts
    }

    /// Sets the costs of record `j` (one per position, or one for all; 0
    /// allowed): its timestamp and place do not change. Costs of 0
    /// everywhere make it a tombstone.
    pub fn set_costs(&mut self, j: usize, costs: &[u64]) {
        debug_assert!(j < self.len() && !costs.is_empty());
        let (row, width) = row_of(costs);
        if self.costs.is_none() && row.iter().all(|&c| c == 1) {
            return;
        }
        self.weighted().set(j, &row, width);
        self.compact_if_refunded();
    }

    /// Refunds record `j`: it counts nowhere from now on.
    pub fn remove(&mut self, j: usize) {
        self.set_costs(j, &[0]);
    }

    /// Settles one request's share of the record at `ts` (docs/design.md
    /// §4.6): when the record's cost at every position is at least the
    /// share's, its costs become `cost - share + new` (a saturated cost
    /// stays saturated; 0 everywhere refunds it). Positions past those
    /// `share` or `new` list take their last. False, with nothing changed,
    /// when no record at `ts` holds the share.
    pub fn settle_share(&mut self, ts: u64, share: &[u64], new: &[u64]) -> bool {
        let Some(j) = self.find_ts(ts) else {
            return false;
        };
        let (share, _) = row_of(share);
        let (new, _) = row_of(new);
        let mut row: Row = [0; MAX_LIMITS];
        for p in 0..MAX_LIMITS {
            let had = super::costs::stored(self.cost(j, p));
            if had < share[p] {
                return false;
            }
            row[p] = if had == SATURATED {
                SATURATED
            } else {
                add(had - share[p], new[p])
            };
        }
        let unchanged = (0..MAX_LIMITS).all(|p| u64::from(row[p]) == self.cost(j, p));
        if !unchanged {
            self.weighted().set(j, &row, distinct_width(&row));
            self.compact_if_refunded();
        }
        true
    }

    /// Compacts the log when refunded records are more than half of it
    /// (O(records × width), so O(1) amortised per refund); empties it when
    /// every record is refunded.
    fn compact_if_refunded(&mut self) {
        self.pop_tombstones();
        if self.dense() {
            // Empty granules are its records: the layout's size decides.
            return self.fit_layout();
        }
        let Some(c) = self.costs.as_deref() else {
            return;
        };
        let (dead, len) = (c.tombstones(), self.len());
        if dead * 2 <= len {
            return;
        }
        if dead == len {
            self.clear();
            return;
        }
        let keep: Vec<bool> = (0..len).map(|j| !c.is_zero(j)).collect();
        let costs = c.rebuilt(|j| keep[j], None);
        let base = (!self.wide()).then(|| self.base());
        self.restore_with(base, |j| keep[j]);
        self.costs = Some(Box::new(costs));
    }

    /// Drops refunded records at the end, so that the newest record always
    /// counts somewhere (each is dropped once: O(1) amortised).
    fn pop_tombstones(&mut self) {
        let w = if self.dense() { 0 } else { self.width() };
        while self.len() > 1 && self.is_tombstone(self.len() - 1) {
            self.slots.truncate(self.slots.len() - w);
            if let Some(c) = self.costs.as_deref_mut() {
                c.pop_tombstone();
            }
        }
    }

    /// Releases spare capacity when the log holds half of the records it
    /// has room for or fewer (after a burst expired): room for a quarter
    /// more than the records is kept (`log/room.rs`). Expiry calls it, so
    /// it is O(1) amortised: after a shrink the log must lose over a third
    /// of its records before the next.
    pub fn shrink_if_sparse(&mut self) {
        let capacity = self.capacity();
        if super::room::is_sparse(capacity, self.len()) {
            let keep = super::room::kept(self.len()) * self.width();
            let mut slots: Vec<u32> = Vec::with_capacity(keep);
            slots.extend_from_slice(self.live());
            self.slots = slots;
            self.head = 0;
        }
        if let Some(c) = self.costs.as_deref_mut().filter(|c| c.is_sparse()) {
            c.shrink();
        }
    }
}
