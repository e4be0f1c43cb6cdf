//! How a log's vectors grow and shrink (docs/design.md §4.1, "Room"): by a
//! quarter of what they hold, not by doubling, so a key's room is at most
//! about 1.25 times its records after a growth (a doubling `Vec` holds up
//! to twice); and back to that when they hold half of their room or less.
//!
//! A growth by a quarter moves each element O(1) times, amortised: after
//! one, `len / 4` pushes come before the next.

/// The least room a growth adds: small logs do not grow one by one (and
/// a one-record log takes no more than a `Vec`'s own first room).
const LEAST: usize = 4;

/// Below this room a vector is not worth shrinking.
const TINY: usize = 32;

/// The room to add to a full vector of `len` elements.
#[inline]
pub(super) fn growth(len: usize) -> usize {
    (len / 4).max(LEAST)
}

/// Makes room for one more push on `v`: a quarter more when it is full.
#[inline]
pub(super) fn reserve_one<T>(v: &mut Vec<T>) {
    if v.len() == v.capacity() {
        v.reserve_exact(growth(v.len()));
    }
}

/// The room to keep for `len` elements after a shrink.
#[inline]
pub(super) fn kept(len: usize) -> usize {
    len + len / 4
}

/// True when a vector of room `capacity` holding `len` elements is worth
/// shrinking: half of its room or more is unused (and it is not tiny).
#[inline]
pub(super) fn is_sparse(capacity: usize, len: usize) -> bool {
    capacity > TINY && capacity >= 2 * len
}
