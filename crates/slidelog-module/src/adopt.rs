//! Adoption: a key that still holds a sorted set written by the Lua scripts
//! (or by the original design's script) becomes a module log on first touch,
//! every record and cost kept (docs/design.md §4.3). Members are read as the
//! scripts read them (crates/slidelog-redis/src/sliding_log.lua, `cost_of`):
//! a member without `#` costs 1; `<id>#c` or `<id>#c1,c2,...` lists costs by
//! position, a later position taking the last one. Scores are the records'
//! ms timestamps. The companion *weights* hash only caches sums of those
//! costs, so it is deleted, never read; its name is computed here exactly as
//! `slidelog_redis::keys::weights_key` does (both are
//! `slidelog_core::slot::weights_key`).

use slidelog_core::slot::slot;
use slidelog_core::{Log, MAX_COST, MAX_LIMITS};

/// The costs a member carries: digit runs after its first `#`, each at
/// most the largest cost (a Lua `tonumber` of a run has no bound; a log
/// holds none above it), at most 16; `[1]` for a plain member. A cost of 0
/// stays 0: a record settled to 0 in a limit counts nowhere in it, as the
/// scripts count it (`cost_of` - 1 extra units beside its ZCARD 1).
pub fn member_costs(member: &[u8]) -> Vec<u64> {
    let Some(hash) = member.iter().position(|&b| b == b'#') else {
        return vec![1];
    };
    let costs: Vec<u64> = member[hash + 1..]
        .split(|b| !b.is_ascii_digit())
        .filter(|run| !run.is_empty())
        .take(MAX_LIMITS)
        .map(|run| {
            run.iter()
                .try_fold(0u64, |v, &d| {
                    v.checked_mul(10)?.checked_add(u64::from(d - b'0'))
                })
                .unwrap_or(MAX_COST)
                .min(MAX_COST)
        })
        .collect();
    if costs.is_empty() { vec![1] } else { costs }
}

/// A score as a ms timestamp (scores the project writes are whole ms;
/// anything else is floored, and a negative or NaN one is 0).
pub fn score_ms(score: f64) -> u64 {
    if score.is_nan() || score <= 0.0 {
        0
    } else {
        score.min(slidelog_core::MAX_NOW_MS as f64) as u64
    }
}

/// The log of a sorted set's `(member, score)` entries, in score order. A
/// member of cost 0 in every limit counts nowhere (the scripts never write
/// one: a settle to 0 everywhere removes it) and is left out.
pub fn log_of(entries: impl IntoIterator<Item = (Vec<u8>, f64)>) -> Log {
    let mut log = Log::new();
    for (member, score) in entries {
        let costs = member_costs(&member);
        if costs.iter().any(|&c| c > 0) {
            log.append(score_ms(score), &costs);
        }
    }
    log
}

/// The first decimal string (0, 1, 2, ...) whose slot is `target`: the
/// entry of `slidelog_redis::keys`' table for that slot, found on demand
/// (adoption of such a key is rare; the search is a few thousand CRCs).
fn slot_tag(target: u16) -> String {
    (0u64..)
        .map(|c| c.to_string())
        .find(|text| slot(text.as_bytes()) == target)
        .unwrap_or_default()
}

/// The weights hash of the log at `log_key` (same Cluster slot).
pub fn weights_key(log_key: &[u8]) -> Vec<u8> {
    slidelog_core::slot::weights_key(log_key, slot_tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_carry_costs_as_the_scripts_read_them() {
        assert_eq!(member_costs(b"01HZX3J8K9M2N4P6Q8R0S2T4V6"), vec![1]);
        assert_eq!(member_costs(b"01HZX#7"), vec![7]);
        assert_eq!(member_costs(b"01HZX#1,4000"), vec![1, 4000]);
        assert_eq!(member_costs(b"01HZX#"), vec![1]);
        assert_eq!(member_costs(b"x#99999999999999999999999"), vec![MAX_COST]);
        assert_eq!(member_costs(b"x#0"), vec![0]);
        assert_eq!(member_costs(b"x#1,0"), vec![1, 0]);
    }

    #[test]
    fn weights_keys_share_the_log_slot() {
        assert_eq!(weights_key(b"rate:sliding:u"), b"{rate:sliding:u}#w");
        assert_eq!(
            weights_key(b"rate:sliding:{t}:u"),
            b"{t}#w:rate:sliding:{t}:u"
        );
        for key in [&b"rate:sliding:a}b"[..], b"rate:sliding:{}x}"] {
            assert_eq!(slot(&weights_key(key)), slot(key));
        }
    }

    #[test]
    fn a_sorted_set_becomes_the_same_log() {
        let log = log_of([
            (b"a".to_vec(), 10.0),
            (b"b#3".to_vec(), 20.0),
            (b"c#1,5".to_vec(), 20.0),
        ]);
        // Two members of the same millisecond are one record.
        assert_eq!(log.len(), 2);
        assert_eq!((log.cost(1, 0), log.cost(1, 1)), (4, 8));
        assert_eq!(log.units_from(0, 0), 5);
        assert_eq!(log.units_from(0, 1), 9);
    }

    #[test]
    fn a_cost_of_0_counts_nowhere_in_its_limit() {
        // Settled by usage.lua to 0 tokens: a request, no token.
        let log = log_of([
            (b"a#1,0".to_vec(), 10.0),
            (b"b#1,40".to_vec(), 20.0),
            (b"c#0".to_vec(), 30.0),
        ]);
        assert_eq!(log.len(), 2, "0 everywhere counts nowhere: left out");
        assert_eq!((log.units_from(0, 0), log.units_from(0, 1)), (2, 40));
        assert_eq!(log.newest_unit(0, 1), Some(20));
    }
}
