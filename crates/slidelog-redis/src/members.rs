//! Members of the sorted set: unique across every process and machine that
//! shares the Redis, so two records never overwrite each other (the original
//! design's first troubleshooting row: duplicate members undercount), and
//! carrying the record's cost (docs/design.md §4, "Weighted records").
//!
//! A request is one member whatever its cost:
//! - cost 1 for every limit: a bare ULID (48-bit ms time + 80 random bits),
//!   exactly what the original script writes, so both scripts share keys;
//! - one cost `c` for every limit: `<ULID>#<c>`;
//! - one cost per limit: `<ULID>#<c1>,<c2>,…` (matched by position; a later
//!   position takes the last listed cost).

use slidelog_core::Request;
use std::fmt::Write;
use ulid::Ulid;

/// The member that records `request` when it is admitted.
pub fn member(request: &Request) -> String {
    member_with_id(request).0
}

/// The member that records `request`, and its ULID as a number (the record
/// id a receipt carries, docs/design.md §4.5).
pub fn member_with_id(request: &Request) -> (String, u128) {
    let id = Ulid::generate();
    (named(id.to_string(), request.costs()), id.0)
}

/// A fresh record id: the ULID a settled record is renamed to, so that
/// the receipt used names nothing any more (docs/design.md §4.5).
pub fn fresh_id() -> u128 {
    Ulid::generate().0
}

/// The member of the record `id` carrying `costs`: the bare id when every
/// cost is 1, else `<id>#<cost list>`.
pub fn named(mut id: String, costs: &[u64]) -> String {
    let list = cost_list(costs);
    if !list.is_empty() {
        id.push('#');
        id.push_str(&list);
    }
    id
}

/// The text after a member's `#` for `costs`: empty when every cost is 1
/// (a plain member), else the costs joined by `,`.
pub fn cost_list(costs: &[u64]) -> String {
    let mut out = String::new();
    if costs.iter().all(|&c| c == 1) {
        return out;
    }
    for (i, c) in costs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{c}");
    }
    out
}

/// The text form of a record id (a receipt's number back to its ULID).
pub fn id_text(id: u128) -> String {
    Ulid(id).to_string()
}

/// The costs a member carries (`[1]` for a bare id), as the script reads them.
pub fn costs_of(member: &str) -> Vec<u64> {
    match member.split_once('#') {
        None => vec![1],
        Some((_, list)) => {
            let costs: Vec<u64> = list.split(',').filter_map(|c| c.parse().ok()).collect();
            if costs.is_empty() { vec![1] } else { costs }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::Limit;
    use std::collections::HashSet;

    #[test]
    fn members_are_unique_and_carry_their_costs() {
        let one = Request::single("k", Limit::new(10, 1_000).unwrap()).unwrap();
        let m = member(&one);
        assert_eq!(m.len(), 26);
        assert_eq!(costs_of(&m), vec![1]);
        let big = Request::new("k", vec![Limit::new(10_000_000, 1).unwrap()], 10_000_000).unwrap();
        assert!(member(&big).ends_with("#10000000"));
        let per = Request::with_costs(
            "k",
            vec![
                Limit::new(3_000, 60_000).unwrap(),
                Limit::new(1_000_000, 60_000).unwrap(),
            ],
            vec![1, 4_000],
        )
        .unwrap();
        assert_eq!(costs_of(&member(&per)), vec![1, 4_000]);
        let a: HashSet<_> = (0..1000).map(|_| member(&one)).collect();
        assert_eq!(a.len(), 1000);
    }
}
