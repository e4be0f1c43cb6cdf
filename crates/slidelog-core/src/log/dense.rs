//! The dense layout of a weighted log (docs/design.md §1.1, "Dense logs"):
//! no timestamps, one cost per granule `Q`, record `j` at `base + j * Q`.
//! A granule without a record is a record of cost 0 everywhere, the
//! *tombstone* the costs already know (it counts nowhere, and the newest
//! record is never one). Every question of the log (prefix counts, the
//! k-th unit, expiry, settles) is the costs' own, unchanged; only the
//! timestamps are arithmetic.
//!
//! A log switches by size: a weighted log whose records all sit on a grid
//! of `Q` goes dense when its granules, one cost each, take at most 3/4 of
//! what its records take with a 4-byte offset each; a dense log goes back
//! to timestamps when its granules take more than 3/2 of that (a key gone
//! quiet, or refunded: a mostly empty ring), and for any record off its
//! grid or before its base. The two bounds are twice apart, so a switch
//! back needs the log to change by about half of it: each O(records)
//! switch is paid by as many records' changes, O(1) amortised. The switch
//! to dense is tried only when the timestamps' queue is full (at most
//! once per quarter of the records appended, `log/room.rs`).

use super::costs::{Costs, Row};
use super::{BASE_MASK, DENSE_BIT, Log};
use crate::MAX_LIMITS;
use smallvec::SmallVec;

/// The fewest counted records a log needs to go dense: below it the
/// costs' fixed size dominates whatever the layout.
const LEAST_RECORDS: usize = 16;

/// A layout's bytes against the sparse one's, as a fraction: go dense at
/// or below the first, back to timestamps above the second.
const GO_DENSE: (usize, usize) = (3, 4);
const GO_SPARSE: (usize, usize) = (3, 2);

/// True when `granules` costs of `per` bytes take at most `num / den` of
/// what `live` records take with a 4-byte offset each.
fn worth(granules: usize, live: usize, per: usize, (num, den): (usize, usize)) -> bool {
    granules.saturating_mul(per).saturating_mul(den) <= live * (4 + per) * num
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Log {
    #[inline]
    pub(super) fn dense(&self) -> bool {
        self.packed & DENSE_BIT != 0
    }

    pub(super) fn set_dense(&mut self, dense: bool) {
        if dense {
            self.packed |= DENSE_BIT;
        } else {
            self.packed &= !DENSE_BIT;
        }
    }

    /// The granule of a dense log.
    #[inline]
    pub(super) fn granule(&self) -> u64 {
        self.costs.as_deref().map_or(1, |c| c.granule)
    }

    /// Records of a dense log (its granules from the base to the newest).
    #[inline]
    pub(super) fn dense_len(&self) -> usize {
        self.costs.as_deref().map_or(0, Costs::len)
    }

    /// How many granules of a dense log are at or before `cut`.
    #[inline]
    pub(super) fn dense_through(&self, cut: u64) -> usize {
        let Some(d) = cut.checked_sub(self.base()) else {
            return 0;
        };
        let len = self.len();
        usize::try_from(d / self.granule()).map_or(len, |k| k.saturating_add(1).min(len))
    }

    /// The granule index of `ts` in a dense log, when `ts` is on its grid.
    fn granule_of(&self, ts: u64) -> Option<u64> {
        let d = ts.checked_sub(self.base()).filter(|_| ts <= BASE_MASK)?;
        let q = self.granule();
        (d % q == 0).then_some(d / q)
    }

    /// Appends `costs` at `now` to a dense log: into its granule's record,
    /// or after the newest with the empty granules between. False, having
    /// changed nothing, when `now` is off the grid, before the base, or so
    /// far on that the ring would be mostly empty.
    pub(super) fn append_dense(&mut self, now: u64, costs: &[u64]) -> bool {
        let len = self.len();
        if self.stamp(len - 1) == now {
            // The common case of a hot key: its current granule, no division.
            self.add_costs(len - 1, costs);
            return true;
        }
        let Some(i) = self.granule_of(now) else {
            return false;
        };
        if let Some(j) = usize::try_from(i).ok().filter(|&j| j < len) {
            self.add_costs(j, costs);
            return true;
        }
        if !self.room_for(i, 1) {
            return false;
        }
        let c = self.costs.as_deref_mut().expect("a dense log is weighted");
        c.push_zeros(i as usize - len);
        c.push(costs);
        true
    }

    /// True when a dense log may reach granule `i` with `more` counted
    /// records added and stay dense.
    fn room_for(&self, i: u64, more: usize) -> bool {
        let c = self.costs.as_deref().expect("a dense log is weighted");
        let live = c.len() - c.tombstones() + more;
        let granules = usize::try_from(i.saturating_add(1)).unwrap_or(usize::MAX);
        granules < u32::MAX as usize && worth(granules, live, c.record_bytes(), GO_SPARSE)
    }

    /// Moves a dense log's newest record to `ts`, later than it: false,
    /// having changed nothing, when `ts` is off the grid or too far on.
    pub(super) fn move_newest_dense(&mut self, ts: u64) -> bool {
        let Some(i) = self.granule_of(ts).filter(|&i| self.room_for(i, 0)) else {
            return false;
        };
        let last = self.len() - 1;
        let c = self.costs.as_deref_mut().expect("a dense log is weighted");
        let row = c.row(last);
        let costs: SmallVec<[u64; 4]> = row[..c.width()].iter().map(|&x| u64::from(x)).collect();
        c.set(last, &[0; MAX_LIMITS], 1);
        c.push_zeros(i as usize - last - 1);
        c.push(&costs);
        true
    }

    /// A dense log that would take more than timestamps would goes back
    /// to them; one emptied by refunds is cleared.
    pub(super) fn fit_layout(&mut self) {
        let Some(c) = self.costs.as_deref().filter(|_| self.dense()) else {
            return;
        };
        let live = c.len() - c.tombstones();
        if live == 0 {
            self.clear();
        } else if !worth(c.len(), live, c.record_bytes(), GO_SPARSE) {
            self.make_sparse();
        }
    }

    /// Back to timestamps: the counted records only, O(records).
    pub(super) fn make_sparse(&mut self) {
        let Some(c) = self.costs.as_deref().filter(|_| self.dense()) else {
            return;
        };
        let len = self.len();
        let keep: Vec<bool> = (0..len).map(|j| !c.is_zero(j)).collect();
        let Some(first) = keep.iter().position(|&k| k) else {
            return self.clear();
        };
        let mut costs = c.rebuilt(|j| keep[j], None);
        costs.granule = 0;
        // Records span at most `u32::MAX` ms from the first: offsets.
        let span = self.stamp(len - 1) - self.stamp(first);
        let fits = span <= u64::from(u32::MAX);
        let base = fits.then(|| self.stamp(first));
        self.restore_with(base, |j| keep[j]);
        self.costs = Some(Box::new(costs));
    }

    /// Switches a weighted log of timestamps to dense when that is
    /// smaller (see the module's doc). O(records); called when its queue
    /// of timestamps is full, before a record at `next` (later than the
    /// newest) is appended, which counts in the choice.
    pub(super) fn try_dense(&mut self, next: u64) -> bool {
        let Some(c) = self.costs.as_deref() else {
            return false;
        };
        let len = self.len();
        let live = len - c.tombstones() + 1;
        if self.dense() || self.wide() || live < LEAST_RECORDS || next > BASE_MASK {
            return false;
        }
        let Some(first) = (0..len).find(|&j| !c.is_zero(j)).map(|j| self.stamp(j)) else {
            return false;
        };
        let mut q = next - first;
        for j in (0..len).filter(|&j| !c.is_zero(j)) {
            if q == 1 {
                break;
            }
            q = gcd(q, self.stamp(j) - first);
        }
        let q = q.max(1);
        let granules = (next - first) / q + 1;
        let fits = usize::try_from(granules)
            .is_ok_and(|g| g < u32::MAX as usize && worth(g, live, c.record_bytes(), GO_DENSE));
        if !fits {
            return false;
        }
        // The last granule (`next`'s) is appended by the caller.
        let costs = self.dense_costs(first, q, granules as usize - 1);
        self.slots = Vec::new();
        self.head = 0;
        self.set_base(first);
        self.set_dense(true);
        self.costs = Some(Box::new(costs));
        true
    }

    /// The costs of `granules` granules of `q` from `first`: each counted
    /// record's row in its granule, zeros in the others.
    fn dense_costs(&self, first: u64, q: u64, granules: usize) -> Costs {
        let c = self.costs.as_deref().expect("a weighted log");
        let len = self.len();
        let mut j = 0;
        let rows = (0..granules as u64).map(|g| {
            let t = first + g * q;
            while j < len && (self.stamp(j) < t || c.is_zero(j)) {
                j += 1;
            }
            if j < len && self.stamp(j) == t {
                c.row(j)
            } else {
                Row::default()
            }
        });
        // Room for a quarter more granules than held (`log/room.rs`).
        let room = granules + granules / 4 + 4;
        let mut costs = Costs::build(c.width(), room, rows);
        costs.spent = c.spent.clone();
        costs.granule = q;
        costs
    }
}
