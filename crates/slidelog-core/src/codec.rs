//! A [`Log`]'s bytes: a compact, versioned binary encoding of one key's
//! records, for the memory store's snapshots and the Redis module's RDB
//! (docs/design.md §4.1).
//!
//! Version 2, all integers little-endian, "varint" = unsigned LEB128 (at most
//! 10 bytes):
//!
//! ```text
//! version: u8 = 2
//! flags:   u8   bit 0: whole timestamps (else a base and 32-bit offsets)
//!               bit 1: weighted (costs follow)
//!               bit 2: settled receipts follow (version 2, weighted only);
//!               other bits must be 0
//! horizon: varint   the log's horizon, ms (0..=MAX_WINDOW_MS; 0: unknown)
//! count:   varint   records
//! if count > 0:
//!   offsets: base varint, then count x u32 offset from base (ascending)
//!   whole:   count x u64 timestamp (ascending)
//!   weighted: width varint (1..=16), then count x width cost varints
//!             (0..=u32::MAX, not all 0 in one record)
//!   spent:    n varint (at most MAX_SPENT), then n x (nonce u64,
//!             forget_after_ms varint), nonces ascending: the receipts
//!             settled on the log, kept until then (docs/design.md §4.6)
//! ```
//!
//! Version 1 is the same without `horizon`, and its costs are at most
//! MAX_COST; it is still read, with a horizon of 0 (the next request that
//! records sets it). Refunded records (tombstones) are not written. A cost
//! can exceed MAX_COST in version 2: records of one millisecond, and charges
//! merged into the newest record, add their costs (saturated at
//! `u32::MAX`, docs/design.md §4.1). Timestamps of version 1 may repeat;
//! such records are read as one.
//!
//! As in the log itself a plain record costs 4 bytes, and a record's cost at a
//! position past `width` is its cost at the last one. A cost of 0 is read (a
//! record settled to nothing in one limit counts nowhere in it, docs/design.md §4.6); a
//! record that costs 0 everywhere is not. Decoding never panics
//! and never allocates more than the input's length justifies: every record
//! takes at least 4 bytes, so a hostile `count` is refused before anything
//! is reserved.

use crate::{Log, MAX_COST, MAX_LIMITS, MAX_NOW_MS, MAX_WINDOW_MS};

/// The encoding version [`encode`] writes; [`decode`] reads it and
/// [`VERSION_1`].
pub const VERSION: u8 = 2;

/// The version before the horizon was written.
pub const VERSION_1: u8 = 1;

const WHOLE: u8 = 1;
const WEIGHTED: u8 = 2;
const SPENT: u8 = 4;

/// Why bytes are not a log this version can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The input ends inside the log.
    #[error("log encoding truncated: needs {needed} more bytes at offset {at}")]
    Truncated {
        /// Where the missing bytes start.
        at: usize,
        /// How many more bytes the next field needs (at least).
        needed: usize,
    },
    /// A version this build does not read.
    #[error(
        "log encoding version {got} is not supported (this build reads versions {VERSION_1} and {VERSION})"
    )]
    UnknownVersion {
        /// The version byte found.
        got: u8,
    },
    /// A field holds a value no encoder writes.
    #[error("log encoding invalid at offset {at}: {what}")]
    Invalid {
        /// Where the field starts.
        at: usize,
        /// Which field and why.
        what: &'static str,
    },
}

/// Appends `log`'s encoding to `out` (its records that count: refunded
/// ones are left out).
pub fn encode(log: &Log, out: &mut Vec<u8>) {
    let kept: Vec<usize> = (0..log.len()).filter(|&j| !log.is_tombstone(j)).collect();
    let count = kept.len();
    let (first, last) = match (kept.first(), kept.last()) {
        (Some(&f), Some(&l)) => (log.ts(f), log.ts(l)),
        _ => (0, 0),
    };
    let whole = last - first > u64::from(u32::MAX);
    let weighted = log.is_weighted() && count > 0;
    let spent = weighted && !log.spent().is_empty();
    out.push(VERSION);
    out.push(
        (u8::from(whole) * WHOLE) | (u8::from(weighted) * WEIGHTED) | (u8::from(spent) * SPENT),
    );
    put_varint(out, log.horizon());
    put_varint(out, count as u64);
    if count == 0 {
        return;
    }
    let width = if weighted { log.cost_width() } else { 1 };
    out.reserve(count * (if whole { 8 } else { 4 }) + usize::from(weighted) * count * width);
    if whole {
        kept.iter()
            .for_each(|&j| out.extend_from_slice(&log.ts(j).to_le_bytes()));
    } else {
        put_varint(out, first);
        kept.iter()
            .for_each(|&j| out.extend_from_slice(&((log.ts(j) - first) as u32).to_le_bytes()));
    }
    if weighted {
        put_varint(out, width as u64);
        for &j in &kept {
            (0..width).for_each(|p| put_varint(out, log.cost(j, p)));
        }
    }
    if spent {
        put_varint(out, log.spent().len() as u64);
        for &(nonce, forget) in log.spent() {
            out.extend_from_slice(&nonce.to_le_bytes());
            put_varint(out, forget);
        }
    }
}

/// Reads one log from the start of `bytes`; returns it and the bytes read
/// (the input may go on with other data).
pub fn decode(bytes: &[u8]) -> Result<(Log, usize), CodecError> {
    decode_counted(bytes).map(|(log, read, _)| (log, read))
}

/// Like [`decode`], also returning how many records the encoding lists:
/// more than the log holds where version 1 repeated a millisecond (read as
/// one record), which is what a container that counted the records it
/// wrote (a memory snapshot's end marker) must compare.
pub fn decode_counted(bytes: &[u8]) -> Result<(Log, usize, u64), CodecError> {
    let mut r = Reader { bytes, at: 0 };
    let head = read_header(&mut r)?;
    let count_at = r.at;
    let count = r.varint()?;
    if count == 0 {
        return if head.weighted {
            Err(r.invalid(count_at, "an empty log marked weighted"))
        } else {
            Ok((Log::new(), r.at, 0))
        };
    }
    // Every record takes 4 bytes at least: refuse a count the input cannot hold.
    let per = if head.whole { 8 } else { 4 };
    let stamps_len = usize::try_from(count)
        .ok()
        .and_then(|c| c.checked_mul(per))
        .filter(|&n| n <= r.left())
        .ok_or(CodecError::Truncated {
            at: r.at,
            needed: usize::try_from(count)
                .unwrap_or(usize::MAX)
                .saturating_mul(per),
        })?;
    let stamps = read_stamps(&mut r, head.whole, stamps_len / per)?;
    let mut log = if head.weighted {
        let most = if head.version == VERSION {
            u64::from(u32::MAX)
        } else {
            MAX_COST
        };
        read_weighted(&mut r, stamps, most)?
    } else {
        let mut log = Log::new();
        stamps.into_iter().for_each(|t| log.append(t, &[1]));
        log
    };
    log.raise_horizon(head.horizon);
    if head.spent {
        read_spent(&mut r, &mut log)?;
    }
    Ok((log, r.at, count))
}

/// What a log's encoding says before its records.
struct Header {
    version: u8,
    whole: bool,
    weighted: bool,
    spent: bool,
    horizon: u64,
}

/// Reads and checks the version, the flags and (version 2) the horizon.
fn read_header(r: &mut Reader<'_>) -> Result<Header, CodecError> {
    let version = r.u8()?;
    if version != VERSION && version != VERSION_1 {
        return Err(CodecError::UnknownVersion { got: version });
    }
    let flags_at = r.at;
    let flags = r.u8()?;
    if flags & !(WHOLE | WEIGHTED | SPENT) != 0 {
        return Err(r.invalid(flags_at, "unknown flag bits"));
    }
    let spent = flags & SPENT != 0;
    if spent && (version == VERSION_1 || flags & WEIGHTED == 0) {
        return Err(r.invalid(flags_at, "settled receipts on a plain or version 1 log"));
    }
    let horizon_at = r.at;
    let horizon = if version == VERSION { r.varint()? } else { 0 };
    if horizon > MAX_WINDOW_MS {
        return Err(r.invalid(horizon_at, "horizon above 366 days"));
    }
    Ok(Header {
        version,
        whole: flags & WHOLE != 0,
        weighted: flags & WEIGHTED != 0,
        spent,
        horizon,
    })
}

/// Reads the settled receipts of a weighted log: a count (each entry takes
/// 9 bytes at least: a hostile count is refused unread), then the entries,
/// nonces ascending.
fn read_spent(r: &mut Reader<'_>, log: &mut Log) -> Result<(), CodecError> {
    let count_at = r.at;
    let count = r.varint()?;
    if count == 0 || count > crate::MAX_SPENT as u64 || count.saturating_mul(9) > r.left() as u64 {
        return Err(r.invalid(
            count_at,
            "settled receipts: count 0, above MAX_SPENT or past the end",
        ));
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let at = r.at;
        let raw = r.take(8)?;
        let nonce = u64::from_le_bytes(raw.try_into().unwrap_or([0; 8]));
        let forget = r.varint()?;
        if entries.last().is_some_and(|&(last, _)| last >= nonce) {
            return Err(r.invalid(at, "settled receipts not ascending"));
        }
        entries.push((nonce, forget));
    }
    log.restore_spent(&entries)
        .map_err(|_| r.invalid(count_at, "settled receipts above MAX_SPENT"))
}

/// Reads the cost width and every record's costs (each at most `most`) of
/// a weighted log whose timestamps are `stamps`.
fn read_weighted(r: &mut Reader<'_>, stamps: Vec<u64>, most: u64) -> Result<Log, CodecError> {
    let mut log = Log::new();
    let width_at = r.at;
    let width = r.varint()?;
    if width == 0 || width > MAX_LIMITS as u64 {
        return Err(r.invalid(width_at, "cost width outside 1..=16"));
    }
    let mut costs = [0u64; MAX_LIMITS];
    for t in stamps {
        for cost in &mut costs[..width as usize] {
            let at = r.at;
            *cost = r.varint()?;
            if *cost > most {
                return Err(r.invalid(
                    at,
                    "cost above its bound (MAX_COST in version 1, u32::MAX in 2)",
                ));
            }
        }
        if costs[..width as usize].iter().all(|&c| c == 0) {
            return Err(r.invalid(r.at, "a record that costs 0 in every limit"));
        }
        log.append(t, &costs[..width as usize]);
    }
    Ok(log)
}

/// Reads and checks `count` timestamps (ascending, at most [`MAX_NOW_MS`]);
/// the caller has checked that the input holds them.
fn read_stamps(r: &mut Reader<'_>, whole: bool, count: usize) -> Result<Vec<u64>, CodecError> {
    let base_at = r.at;
    let base = if whole { 0 } else { r.varint()? };
    if base > MAX_NOW_MS {
        return Err(r.invalid(base_at, "base above 2^53 - 1"));
    }
    let at = r.at;
    let stamps: Vec<u64> = if whole {
        let raw = r.take(count * 8)?;
        raw.chunks_exact(8)
            .map(|c| {
                let mut w = [0; 8];
                w.copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect()
    } else {
        let raw = r.take(count * 4)?;
        raw.chunks_exact(4)
            .map(|c| base + u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect()
    };
    if stamps.windows(2).any(|w| w[0] > w[1]) {
        return Err(r.invalid(at, "timestamps not ascending"));
    }
    if stamps.last().is_some_and(|&t| t > MAX_NOW_MS) {
        return Err(r.invalid(at, "timestamp above 2^53 - 1"));
    }
    Ok(stamps)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over the input that reports where it ran out.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn invalid(&self, at: usize, what: &'static str) -> CodecError {
        CodecError::Invalid { at, what }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], CodecError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(CodecError::Truncated {
            at: self.at,
            needed: n - self.left().min(n),
        })?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    fn varint(&mut self) -> Result<u64, CodecError> {
        let start = self.at;
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(self.invalid(start, "varint above u64::MAX"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.invalid(start, "varint longer than 10 bytes"))
    }
}
