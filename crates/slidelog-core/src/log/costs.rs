//! The costs of a weighted log's records (docs/design.md §4.1): one `u32`
//! per record for position 0, wider costs only in the blocks that hold a
//! record listing them, and a Fenwick tree of sums per position over blocks
//! of [`BLOCK`] records.
//!
//! A record's cost at a position at or past the log's width is its cost at
//! the last one; so is its cost at a position past its block's stored width.
//! Widening the log from 1 to 16 positions therefore stores nothing more
//! for old records: the new positions' trees start as copies of the last
//! one, and only a block that holds a wider record stores its positions.
//!
//! Costs are at most `u32`, and position 0's are kept in the narrowest
//! width that holds them (`u8`, `u16` or `u32`, [`Column`]): a hot key's
//! merged counts of ten a millisecond take one byte each. A merged record (docs/design.md §4.6: same-millisecond
//! requests, charges merged into the newest record) can sum past
//! `u32::MAX`: its cost then saturates at `u32::MAX` and stays there, also
//! when a settle later subtracts a share. Every limit's max is at most
//! 10,000,000, so such a record rejects every request while it is live, as
//! its true cost would; it may keep rejecting after settles that would have
//! brought its true cost back under a max (conservative, never over-admits).
//!
//! Records are addressed by *physical* index: `c0[front + j]` is record `j`.
//! Records dropped from the front stay in the trees (the trees' sums of
//! them cancel between two prefixes); `gone` is their sum. The dropped room
//! is given back by a rebuild once it is half of `c0`, O(1) amortised.

use super::column::Column;
use super::fenwick::Fenwick;
use crate::MAX_LIMITS;

/// Records per block of the trees: a prefix sum is O(log n) in the tree
/// plus a scan of at most this many costs.
pub(super) const BLOCK: usize = 32;

/// The cost a sum saturates at (and stays at).
pub(super) const SATURATED: u32 = u32::MAX;

/// One record's costs, `width` of them (a later position: the last).
pub(super) type Row = [u32; MAX_LIMITS];

/// The costs of every record of a weighted log.
#[derive(Debug, Clone)]
pub(super) struct Costs {
    /// Position 0's cost of every record (physical index), in the
    /// narrowest width that holds them.
    c0: Column,
    /// Entries of `c0` before the log's first record (dropped ones).
    front: usize,
    /// Positions kept apart (1..=16).
    width: usize,
    /// Per block, positions `1..` of its records when one of them lists
    /// more than one distinct cost (empty while the log is one cost wide).
    wide: Vec<Option<Box<Wide>>>,
    /// Per position `0..width`, the sums of costs per block.
    trees: Vec<Fenwick>,
    /// Per position, the sum over every physical record.
    all: Vec<u64>,
    /// Per position, the sum over the dropped records `c0[..front]`.
    gone: Vec<u64>,
    /// Records that cost 0 everywhere (refunded): they keep their
    /// timestamp and count nowhere.
    tombstones: usize,
    /// The receipts settled on this log (single use).
    pub(super) spent: super::spent::Spent,
    /// The granule of a dense log (record `j` is at the base plus `j`
    /// granules, docs/design.md §1.1); 0 while the log keeps timestamps.
    pub(super) granule: u64,
}

/// Positions `1..width` of a block's records, record-major.
#[derive(Debug, Clone)]
struct Wide {
    width: usize,
    costs: Vec<u32>,
}

impl Wide {
    fn get(&self, slot: usize, p: usize) -> u32 {
        self.costs[slot * (self.width - 1) + p - 1]
    }
}

/// `a + b` as stored: saturated, and a saturated cost stays so.
pub(super) fn add(a: u32, b: u32) -> u32 {
    if a == SATURATED || b == SATURATED {
        SATURATED
    } else {
        a.saturating_add(b)
    }
}

/// A cost as stored: saturated at [`SATURATED`].
#[inline]
pub(super) fn stored(cost: u64) -> u32 {
    u32::try_from(cost).unwrap_or(SATURATED)
}

/// The number of positions a row needs: trailing repeats of the last
/// distinct cost are implied.
pub(super) fn distinct_width(row: &[u32]) -> usize {
    let last = row[row.len() - 1];
    row.iter().rposition(|&c| c != last).map_or(1, |i| i + 2)
}

/// `costs` (one per position, or fewer: the last repeats) as a full row.
pub(super) fn row_of(costs: &[u64]) -> (Row, usize) {
    let mut row = [0u32; MAX_LIMITS];
    for (p, slot) in row.iter_mut().enumerate() {
        *slot = stored(costs[p.min(costs.len() - 1)]);
    }
    let width = distinct_width(&row[..costs.len().clamp(1, MAX_LIMITS)]);
    (row, width)
}

impl Costs {
    /// Costs for `rows` (each `width` positions apart, about `records` of
    /// them), built in one pass, O(records × width).
    pub(super) fn build(width: usize, records: usize, rows: impl Iterator<Item = Row>) -> Self {
        let mut costs = Self {
            c0: Column::with_capacity(records),
            front: 0,
            width,
            wide: Vec::new(),
            trees: Vec::new(),
            all: vec![0; width],
            gone: vec![0; width],
            tombstones: 0,
            spent: Default::default(),
            granule: 0,
        };
        // Block-major sums per position.
        let mut sums: Vec<u64> = Vec::new();
        for (i, row) in rows.enumerate() {
            let (b, slot) = (i / BLOCK, i % BLOCK);
            if slot == 0 {
                sums.resize(sums.len() + width, 0);
            }
            costs.c0.push(row[0]);
            let block = &mut sums[b * width..];
            for (sum, &c) in block.iter_mut().zip(&row[..width]) {
                *sum += u64::from(c);
            }
            costs.tombstones += usize::from(row[..width].iter().all(|&c| c == 0));
            let needed = distinct_width(&row[..width]);
            let wide = needed > 1 || costs.wide_of(i).is_some();
            if let Some(w) = costs.wide_block(b, needed).filter(|_| wide) {
                let n = w.width - 1;
                w.costs[slot * n..(slot + 1) * n].copy_from_slice(&row[1..w.width]);
            }
        }
        let blocks = sums.len() / width;
        for p in 0..width {
            let column: Vec<u64> = (0..blocks).map(|b| sums[b * width + p]).collect();
            costs.all[p] = column.iter().sum();
            costs.trees.push(Fenwick::from_sums(&column));
        }
        costs
    }

    /// Costs for `n` records of cost 1 (a plain log turning weighted).
    pub(super) fn plain(n: usize) -> Self {
        Self::build(1, n, std::iter::repeat_n([1; MAX_LIMITS], n))
    }

    /// Records held (tombstones included).
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.c0.len() - self.front
    }

    /// Positions kept apart.
    #[inline]
    pub(super) fn width(&self) -> usize {
        self.width
    }

    /// Refunded records still held.
    #[inline]
    pub(super) fn tombstones(&self) -> usize {
        self.tombstones
    }

    /// The cost of physical record `phys` at position `p`.
    #[inline]
    fn at(&self, phys: usize, p: usize) -> u32 {
        let p = p.min(self.width - 1);
        if p == 0 {
            return self.c0.get(phys);
        }
        match self.wide.get(phys / BLOCK).and_then(Option::as_deref) {
            Some(w) if w.width > 1 => {
                let q = p.min(w.width - 1);
                if q == 0 {
                    self.c0.get(phys)
                } else {
                    w.get(phys % BLOCK, q)
                }
            }
            _ => self.c0.get(phys),
        }
    }

    /// The cost of record `j` at position `p`.
    #[inline]
    pub(super) fn cost(&self, j: usize, p: usize) -> u64 {
        u64::from(self.at(self.front + j, p))
    }

    /// Record `j`'s costs at positions `0..width`.
    pub(super) fn row(&self, j: usize) -> Row {
        let phys = self.front + j;
        let mut row = [self.c0.get(phys); MAX_LIMITS];
        if let Some(w) = self.wide_of(phys) {
            let (slot, n) = (phys % BLOCK, w.width - 1);
            row[1..w.width].copy_from_slice(&w.costs[slot * n..(slot + 1) * n]);
            let last = row[w.width - 1];
            row[w.width..].fill(last);
        }
        row
    }

    /// The wide costs of physical record `phys`'s block, if it keeps any.
    #[inline]
    fn wide_of(&self, phys: usize) -> Option<&Wide> {
        self.wide.get(phys / BLOCK).and_then(Option::as_deref)
    }

    /// True when record `j` costs 0 everywhere (a tombstone).
    pub(super) fn is_zero(&self, j: usize) -> bool {
        let phys = self.front + j;
        self.c0.get(phys) == 0
            && self.wide_of(phys).is_none_or(|w| {
                let (slot, n) = (phys % BLOCK, w.width - 1);
                w.costs[slot * n..(slot + 1) * n].iter().all(|&c| c == 0)
            })
    }

    /// The sum at position `p` of physical records `0..phys`.
    fn prefix(&self, p: usize, phys: usize) -> u64 {
        let b = phys / BLOCK;
        let head = self.trees[p].prefix(b);
        if p == 0 {
            // Position 0 is one slice: summed without a lookup per record.
            return head + self.c0.sum(b * BLOCK..phys);
        }
        (b * BLOCK..phys).fold(head, |s, i| s + u64::from(self.at(i, p)))
    }

    /// The units at position `p` of records `start..`.
    #[inline]
    pub(super) fn units_from(&self, start: usize, p: usize) -> u64 {
        let p = p.min(self.width - 1);
        if start == 0 {
            return self.all[p] - self.gone[p];
        }
        if start >= self.len() {
            return 0;
        }
        self.all[p] - self.prefix(p, self.front + start)
    }

    /// The record holding the `k`-th unit (1-based) at position `p` among
    /// records `start..` (`k` at most their units).
    pub(super) fn kth(&self, start: usize, p: usize, k: u64) -> usize {
        let p = p.min(self.width - 1);
        // The sum before the first record is that of the dropped ones.
        let from = if start == 0 {
            self.gone[p]
        } else {
            self.prefix(p, self.front + start)
        };
        let target = from + k;
        let (b, before) = self.trees[p].search(target);
        // In the first record's block, scan from it (not from the dropped).
        let (mut phys, mut before) = if b == self.front / BLOCK {
            (self.front, self.gone[p])
        } else {
            (b * BLOCK, before)
        };
        if p == 0 {
            let (at, sum) = self.c0.scan(phys, before, target);
            if sum >= target {
                return at - self.front;
            }
            (phys, before) = (at, sum);
        }
        loop {
            before += u64::from(self.at(phys, p));
            if before >= target {
                return phys - self.front;
            }
            phys += 1;
        }
    }

    /// Widens to `width` positions: each new position starts as the last
    /// one (every record's cost there is its last cost), O(blocks) each.
    fn widen(&mut self, width: usize) {
        while self.width < width {
            let last = self.width - 1;
            self.trees.push(self.trees[last].clone());
            self.all.push(self.all[last]);
            self.gone.push(self.gone[last]);
            self.width += 1;
        }
    }

    /// Makes room for block `b` of the trees (appending blocks).
    fn ensure_block(&mut self, b: usize) {
        while self.trees[0].blocks() <= b {
            self.trees.iter_mut().for_each(Fenwick::push_block);
        }
    }

    /// Stores `row` as the costs of physical record `phys`, whose block
    /// keeps at least `width` positions apart.
    fn write(&mut self, phys: usize, row: &Row, width: usize) {
        self.widen(width);
        let b = phys / BLOCK;
        for (p, &new) in row.iter().enumerate().take(self.width) {
            let (old, new) = (u64::from(self.at(phys, p)), u64::from(new));
            if old != new {
                let delta = new.wrapping_sub(old);
                self.trees[p].add(b, delta);
                self.all[p] = self.all[p].wrapping_add(delta);
            }
        }
        self.c0.set(phys, row[0]);
        let wide = self.wide_block(b, width);
        if let Some(w) = wide {
            let (slot, n) = (phys % BLOCK, w.width - 1);
            w.costs[slot * n..(slot + 1) * n].copy_from_slice(&row[1..w.width]);
        }
    }

    /// Block `b`'s wide costs, made or widened to `width` positions when
    /// that is more than it keeps (its records' costs copied, O(BLOCK ×
    /// width)); `None` for a block of one cost per record that stays so.
    fn wide_block(&mut self, b: usize, width: usize) -> Option<&mut Wide> {
        let kept = self
            .wide
            .get(b)
            .and_then(Option::as_deref)
            .map_or(1, |w| w.width);
        if width > kept {
            let mut w = Wide {
                width,
                costs: vec![0; BLOCK * (width - 1)],
            };
            let end = ((b + 1) * BLOCK).min(self.c0.len());
            for phys in b * BLOCK..end {
                for p in 1..width {
                    w.costs[(phys % BLOCK) * (width - 1) + p - 1] = self.at(phys, p);
                }
            }
            if self.wide.len() <= b {
                self.wide.resize_with(b + 1, || None);
            }
            self.wide[b] = Some(Box::new(w));
        }
        self.wide.get_mut(b).and_then(Option::as_deref_mut)
    }

    /// Appends a record of `costs` after the newest.
    pub(super) fn push(&mut self, costs: &[u64]) {
        let phys = self.c0.len();
        self.ensure_block(phys / BLOCK);
        if self.width == 1 && costs.iter().all(|&c| c == costs[0]) {
            // One cost, one column: no row to build.
            self.c0.push(0);
            self.tombstones += 1;
            return self.set_narrow(phys, stored(costs[0]));
        }
        let (row, width) = row_of(costs);
        // Starts at 0 everywhere (a tombstone), then takes its costs.
        self.c0.push(0);
        self.tombstones += 1;
        self.set(phys - self.front, &row, width);
    }

    /// Sets record `j`'s costs to `row` (`width` distinct positions).
    pub(super) fn set(&mut self, j: usize, row: &Row, width: usize) {
        if self.width == 1 && width == 1 {
            return self.set_narrow(self.front + j, row[0]);
        }
        let was_zero = self.is_zero(j);
        self.write(self.front + j, row, width);
        let is_zero = self.is_zero(j);
        self.tombstones = self.tombstones + usize::from(is_zero) - usize::from(was_zero);
    }

    /// [`set`](Self::set) in a log of one cost per record (the common
    /// weighted log): one column, one tree.
    #[inline]
    fn set_narrow(&mut self, phys: usize, new: u32) {
        let old = self.c0.get(phys);
        if old != new {
            let delta = u64::from(new).wrapping_sub(u64::from(old));
            self.trees[0].add(phys / BLOCK, delta);
            self.all[0] = self.all[0].wrapping_add(delta);
            self.c0.set(phys, new);
            self.tombstones = self.tombstones + usize::from(new == 0) - usize::from(old == 0);
        }
    }

    /// Adds `cost` to record `j`'s, in a log of one cost per record; false
    /// (nothing done) in a wider one.
    #[inline]
    pub(super) fn add_narrow(&mut self, j: usize, cost: u32) -> bool {
        if self.width != 1 {
            return false;
        }
        let phys = self.front + j;
        self.set_narrow(phys, add(self.c0.get(phys), cost));
        true
    }

    /// Appends `n` records of cost 0 everywhere (the empty granules of a
    /// dense log: tombstones), O(n + blocks).
    pub(super) fn push_zeros(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let end = self.c0.len() + n;
        self.ensure_block((end - 1) / BLOCK);
        self.c0.push_zeros(n);
        self.tombstones += n;
    }

    /// Bytes a record takes in position 0's column (1, 2 or 4): what a
    /// dense layout pays per granule, empty or not. (The wider positions
    /// are kept per block of records that list them, in either layout.)
    pub(super) fn record_bytes(&self) -> usize {
        self.c0.bytes()
    }

    /// Drops the newest record, a tombstone (its zeros are in no sum).
    pub(super) fn pop_tombstone(&mut self) {
        debug_assert!(self.len() > 0 && self.is_zero(self.len() - 1));
        self.c0.pop();
        self.tombstones -= 1;
    }

    /// Drops the `n` oldest records (fewer than held).
    pub(super) fn drop_front(&mut self, n: usize) {
        if self.width == 1 {
            let dropped = self.front..self.front + n;
            self.gone[0] += self.c0.sum(dropped.clone());
            self.tombstones -= self.c0.zeros(dropped);
        }
        for phys in (self.front..self.front + n).filter(|_| self.width > 1) {
            for p in 0..self.width {
                self.gone[p] += u64::from(self.at(phys, p));
            }
            if (0..self.width).all(|p| self.at(phys, p) == 0) {
                self.tombstones -= 1;
            }
        }
        self.front += n;
        // A quarter of the column dropped: given back (a steady log keeps
        // room for at most a third more than it holds).
        if self.front >= BLOCK && self.front * 4 >= self.c0.len() {
            self.drop_front_blocks(self.front / BLOCK);
        }
    }

    /// Gives back the room of the first `k` blocks, all of dropped records:
    /// the costs move down, the trees are made again from their block sums,
    /// O(records + blocks × width) (so O(width) per record dropped).
    fn drop_front_blocks(&mut self, k: usize) {
        let records = k * BLOCK;
        debug_assert!(records <= self.front);
        for p in 0..self.width {
            let sums = self.trees[p].sums();
            let gone: u64 = sums[..k].iter().sum();
            self.trees[p] = Fenwick::from_sums(&sums[k..]);
            self.all[p] -= gone;
            self.gone[p] -= gone;
        }
        self.c0.drain_front(records);
        self.wide.drain(..k.min(self.wide.len()));
        self.front -= records;
    }

    /// The same records, packed: those `keep` says (by record index), with
    /// `insert` put at its index among them. O(records × width).
    pub(super) fn rebuilt(
        &self,
        keep: impl Fn(usize) -> bool,
        insert: Option<(usize, Row)>,
    ) -> Self {
        let width = insert
            .as_ref()
            .map_or(self.width, |(_, row)| self.width.max(distinct_width(row)));
        let len = self.len();
        let rows = (0..=len).flat_map(|j| {
            let new = insert.filter(|(at, _)| *at == j).map(|(_, row)| row);
            let old = (j < len && keep(j)).then(|| self.row(j));
            new.into_iter().chain(old)
        });
        let mut rebuilt = Self::build(width, len + usize::from(insert.is_some()), rows);
        rebuilt.spent = self.spent.clone();
        rebuilt.granule = self.granule;
        rebuilt
    }

    /// Heap bytes held, this structure included (it is boxed).
    pub(super) fn heap_bytes(&self) -> usize {
        let wide: usize = self
            .wide
            .iter()
            .flatten()
            .map(|w| std::mem::size_of::<Wide>() + w.costs.capacity() * 4)
            .sum();
        std::mem::size_of::<Self>()
            + self.spent.heap_bytes()
            + self.c0.heap_bytes()
            + self.wide.capacity() * 8
            + wide
            + self.trees.capacity() * std::mem::size_of::<Fenwick>()
            + self.trees.iter().map(Fenwick::heap_bytes).sum::<usize>()
            + (self.all.capacity() + self.gone.capacity()) * 8
    }

    /// True when half of `c0`'s room or more is unused.
    pub(super) fn is_sparse(&self) -> bool {
        super::room::is_sparse(self.c0.capacity(), self.len())
    }

    /// The same costs in exactly the room they need.
    pub(super) fn shrink(&mut self) {
        *self = self.rebuilt(|_| true, None);
        self.trees.iter_mut().for_each(Fenwick::shrink);
    }
}

/// Logs are equal by their records' costs, however stored.
impl PartialEq for Costs {
    fn eq(&self, other: &Self) -> bool {
        let width = self.width.max(other.width);
        self.len() == other.len()
            && (0..self.len()).all(|j| (0..width).all(|p| self.cost(j, p) == other.cost(j, p)))
    }
}
