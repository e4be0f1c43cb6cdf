//! Members of the sorted set: unique across every process and machine that
//! shares the Redis, so two records never overwrite each other (the original
//! design's first troubleshooting row: duplicate members undercount).
//!
//! A member is a ULID (48-bit ms time + 80 random bits). A request of cost
//! `c <= INLINE_MEMBERS` sends `c` ULIDs (one random ULID and its successors,
//! distinct by construction); a larger cost sends one ULID that the script
//! suffixes with `:1` .. `:c`, so a cost of a million does not send a
//! million arguments.

use ulid::Ulid;

/// Costs up to this many send one ULID per unit; larger costs send a base id.
pub const INLINE_MEMBERS: u64 = 64;

/// The member arguments for a request of `cost` units.
pub fn members(cost: u64) -> Vec<String> {
    let first = Ulid::generate();
    if cost > INLINE_MEMBERS {
        return vec![first.to_string()];
    }
    let mut out = Vec::with_capacity(cost as usize);
    let mut id = first;
    for _ in 0..cost {
        out.push(id.to_string());
        // The random part wraps only after 2^80 ids; on that impossible edge
        // start from a fresh random id rather than repeat one.
        id = id.increment().unwrap_or_else(|_| Ulid::generate());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn small_costs_get_distinct_ulids_and_large_costs_one_base() {
        let m = members(INLINE_MEMBERS);
        assert_eq!(m.len() as u64, INLINE_MEMBERS);
        assert_eq!(m.iter().collect::<HashSet<_>>().len(), m.len());
        assert!(m.iter().all(|s| s.len() == 26));
        assert_eq!(members(INLINE_MEMBERS + 1).len(), 1);
        // Two calls never repeat a member.
        let a: HashSet<_> = (0..1000).flat_map(|_| members(1)).collect();
        assert_eq!(a.len(), 1000);
    }
}
