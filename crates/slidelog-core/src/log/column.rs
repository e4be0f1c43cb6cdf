//! Position 0's cost of every record, in the narrowest width that holds
//! them (docs/design.md §4.1): `u8` while every cost is at most 255, `u16`
//! up to 65,535, else `u32` (a saturated cost is `u32::MAX`). A cost that
//! no longer fits widens the whole column once (O(records)); a rebuild of
//! the costs starts narrow again, so a column is never wider than the
//! values it held since its last rebuild need, and never narrower than
//! they need.

use super::room;

/// Costs of position 0, one per physical record.
#[derive(Debug, Clone)]
pub(super) enum Column {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
}

/// Runs `$e` with `$v` bound to the column's vector, whatever its width.
macro_rules! each {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            Column::U8($v) => $e,
            Column::U16($v) => $e,
            Column::U32($v) => $e,
        }
    };
}

/// The first index `i` in `from..` of `v` where `before` plus the sum of
/// `v[from..=i]` reaches `target`, and that sum; `None` if none does.
#[inline]
fn scan<T: Copy + Into<u64>>(v: &[T], from: usize, mut before: u64, target: u64) -> (usize, u64) {
    for (i, &c) in v[from..].iter().enumerate() {
        before += c.into();
        if before >= target {
            return (from + i, before);
        }
    }
    (v.len(), before)
}

impl Column {
    /// An empty column of `u8` with room for `n` costs.
    pub(super) fn with_capacity(n: usize) -> Self {
        Column::U8(Vec::with_capacity(n))
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        each!(self, v => v.len())
    }

    /// Bytes per cost: 1, 2 or 4.
    #[inline]
    pub(super) fn bytes(&self) -> usize {
        match self {
            Column::U8(_) => 1,
            Column::U16(_) => 2,
            Column::U32(_) => 4,
        }
    }

    #[inline]
    // The macro's `u32` arm converts `u32` to itself; the other arms need it.
    #[allow(clippy::useless_conversion)]
    pub(super) fn get(&self, i: usize) -> u32 {
        each!(self, v => u32::from(v[i]))
    }

    /// Widens the column until `cost` fits (O(records) per widening).
    fn fit(&mut self, cost: u32) {
        let widened = match self {
            Column::U8(v) if cost > u32::from(u8::MAX) => {
                let mut w = Vec::with_capacity(v.capacity());
                w.extend(v.iter().map(|&c| u16::from(c)));
                Column::U16(w)
            }
            Column::U16(v) if cost > u32::from(u16::MAX) => {
                let mut w = Vec::with_capacity(v.capacity());
                w.extend(v.iter().map(|&c| u32::from(c)));
                Column::U32(w)
            }
            _ => return,
        };
        *self = widened;
        self.fit(cost);
    }

    #[inline]
    pub(super) fn set(&mut self, i: usize, cost: u32) {
        self.fit(cost);
        // `fit` made the width hold `cost`: the casts are exact.
        match self {
            Column::U8(v) => v[i] = cost as u8,
            Column::U16(v) => v[i] = cost as u16,
            Column::U32(v) => v[i] = cost,
        }
    }

    /// Appends `cost`, growing the room by a quarter when full.
    #[inline]
    pub(super) fn push(&mut self, cost: u32) {
        self.fit(cost);
        match self {
            Column::U8(v) => {
                room::reserve_one(v);
                v.push(cost as u8)
            }
            Column::U16(v) => {
                room::reserve_one(v);
                v.push(cost as u16)
            }
            Column::U32(v) => {
                room::reserve_one(v);
                v.push(cost)
            }
        }
    }

    /// Appends `n` costs of 0 (empty granules of a dense log).
    pub(super) fn push_zeros(&mut self, n: usize) {
        each!(self, v => {
            let need = v.len() + n;
            if need > v.capacity() {
                v.reserve_exact(need.max(v.len() + room::growth(v.len())) - v.len());
            }
            v.resize(need, 0);
        })
    }

    pub(super) fn pop(&mut self) {
        each!(self, v => { v.pop(); })
    }

    /// Drops the first `n` costs.
    pub(super) fn drain_front(&mut self, n: usize) {
        each!(self, v => { v.drain(..n); })
    }

    /// The sum of the costs in `range`.
    #[inline]
    pub(super) fn sum(&self, range: std::ops::Range<usize>) -> u64 {
        each!(self, v => v[range].iter().map(|&c| u64::from(c)).sum())
    }

    /// How many costs in `range` are 0.
    pub(super) fn zeros(&self, range: std::ops::Range<usize>) -> usize {
        each!(self, v => v[range].iter().filter(|&&c| c == 0).count())
    }

    /// The first index `i >= from` where `before` plus the costs
    /// `from..=i` reach `target` (the length when none does), and that sum.
    #[inline]
    pub(super) fn scan(&self, from: usize, before: u64, target: u64) -> (usize, u64) {
        each!(self, v => scan(v, from, before, target))
    }

    pub(super) fn capacity(&self) -> usize {
        each!(self, v => v.capacity())
    }

    /// Heap bytes held (the room, not only the costs).
    pub(super) fn heap_bytes(&self) -> usize {
        self.capacity() * self.bytes()
    }
}
