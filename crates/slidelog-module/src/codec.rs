//! A [`Log`]'s bytes, for RDB save/load and DUMP/RESTORE: every record's
//! timestamp and costs, and nothing of how the log happens to be stored, so
//! two logs holding the same records encode to the same bytes (a replica's
//! `DUMP` equals its primary's).
//!
//! This is a private stand-in until `slidelog_core::codec` lands (the team
//! brief: one encoding shared with the memory store's snapshots); the RDB
//! encoding version ([`crate::ffi`]'s type version) names this format.
//!
//! Layout (all integers LEB128 varints): a flags byte (bit 0: weighted),
//! the record count, the first timestamp, then each next timestamp as the
//! difference from the one before (records are ascending). A weighted log
//! then lists, per record, how many costs it carries (1 ..= 16) and the
//! costs; a later position repeats the last listed cost, as in the log.

use slidelog_core::{Log, MAX_COST, MAX_LIMITS};

/// Why bytes are not a log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The bytes end inside a value.
    #[error("the encoded log ends early")]
    Truncated,
    /// A varint longer than 64 bits, or a timestamp past `u64::MAX`.
    #[error("the encoded log holds a number out of range")]
    Overflow,
    /// Flags this version does not know.
    #[error("the encoded log has unknown flags {0:#x}")]
    Flags(u8),
    /// A cost of 0 or above the largest cost, or too many costs.
    #[error("the encoded log holds a record with invalid costs")]
    Costs,
    /// Bytes left after the last record.
    #[error("the encoded log has trailing bytes")]
    Trailing,
}

const WEIGHTED: u8 = 1;

/// The costs of record `j` (one per position, trailing repeats dropped).
pub fn record_costs(log: &Log, j: usize) -> Vec<u64> {
    let mut costs: Vec<u64> = (0..MAX_LIMITS)
        .map(|p| log.units_from(j, p) - log.units_from(j + 1, p))
        .collect();
    while costs.len() > 1 && costs[costs.len() - 1] == costs[costs.len() - 2] {
        costs.pop();
    }
    costs
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The bytes of `log`.
pub fn encode(log: &Log) -> Vec<u8> {
    let n = log.len();
    let mut out = Vec::with_capacity(2 + n * 2);
    out.push(if log.is_weighted() { WEIGHTED } else { 0 });
    put(&mut out, n as u64);
    let mut previous = 0;
    for j in 0..n {
        let ts = log.ts(j);
        put(&mut out, ts - previous);
        previous = ts;
    }
    if log.is_weighted() {
        for j in 0..n {
            let costs = record_costs(log, j);
            put(&mut out, costs.len() as u64);
            for c in costs {
                put(&mut out, c);
            }
        }
    }
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.bytes.get(self.at).ok_or(DecodeError::Truncated)?;
            self.at += 1;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::Overflow);
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::Overflow)
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }
}

/// The log of `bytes`; never panics on garbage.
pub fn decode(bytes: &[u8]) -> Result<Log, DecodeError> {
    let flags = *bytes.first().ok_or(DecodeError::Truncated)?;
    if flags & !WEIGHTED != 0 {
        return Err(DecodeError::Flags(flags));
    }
    let mut r = Reader { bytes, at: 1 };
    let n = r.varint()?;
    // Each record takes at least one byte: a count above that is garbage,
    // and must not become an allocation.
    if n > r.left() as u64 {
        return Err(DecodeError::Truncated);
    }
    let mut stamps = Vec::with_capacity(n as usize);
    let mut ts = 0u64;
    for _ in 0..n {
        ts = ts.checked_add(r.varint()?).ok_or(DecodeError::Overflow)?;
        stamps.push(ts);
    }
    let mut log = Log::new();
    let mut costs = Vec::with_capacity(MAX_LIMITS);
    for ts in stamps {
        costs.clear();
        if flags & WEIGHTED != 0 {
            let k = r.varint()?;
            if !(1..=MAX_LIMITS as u64).contains(&k) {
                return Err(DecodeError::Costs);
            }
            for _ in 0..k {
                let c = r.varint()?;
                if !(1..=MAX_COST).contains(&c) {
                    return Err(DecodeError::Costs);
                }
                costs.push(c);
            }
        } else {
            costs.push(1);
        }
        log.append(ts, &costs);
    }
    if r.left() != 0 {
        return Err(DecodeError::Trailing);
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(log: &Log) -> Vec<(u64, Vec<u64>)> {
        (0..log.len())
            .map(|j| (log.ts(j), record_costs(log, j)))
            .collect()
    }

    #[test]
    fn logs_round_trip_with_their_costs() {
        let mut log = Log::new();
        for (t, c) in [
            (5, vec![1]),
            (5, vec![3]),
            (9, vec![1, 400]),
            (1 << 40, vec![2]),
        ] {
            log.append(t, &c);
        }
        let back = decode(&encode(&log)).unwrap();
        assert_eq!(records(&back), records(&log));
        assert_eq!(encode(&back), encode(&log));
        let plain = Log::from_timestamps([1, 2, 3, 1_000_000]);
        assert_eq!(decode(&encode(&plain)).unwrap(), plain);
        assert_eq!(decode(&encode(&Log::new())).unwrap().len(), 0);
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        assert_eq!(decode(&[]), Err(DecodeError::Truncated));
        assert_eq!(decode(&[4, 0]), Err(DecodeError::Flags(4)));
        assert_eq!(
            decode(&[0, 0xff, 0xff, 0xff, 0xff, 0x0f]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(decode(&[1, 1, 5, 0]), Err(DecodeError::Costs));
        assert_eq!(decode(&[0, 1, 5, 7]), Err(DecodeError::Trailing));
        let mut seed = 7u64;
        for len in 0..2_000 {
            let bytes: Vec<u8> = (0..len % 40)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 56) as u8
                })
                .collect();
            let _ = decode(&bytes);
        }
    }
}
