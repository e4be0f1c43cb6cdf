//! The snapshot file's layout (version 1). Integers are little-endian;
//! "varint" is unsigned LEB128.
//!
//! ```text
//! magic:    8 bytes "SLDLGMEM"
//! version:  u32 = 1
//! written:  u64  the store's clock when the snapshot began (Unix ms)
//! entries:  per key: 0x01, key length varint (1..=512), key bytes (UTF-8),
//!           longest window varint (ms), the log (slidelog_core::codec)
//! end:      0x00, entries u64, records u64
//! checksum: u32  CRC-32 (IEEE) of every byte before it
//! ```
//!
//! A key's longest window is the one of the last request that decided on it
//! (what the store keeps to know when the log has expired): it is what lets
//! a load drop the records that expired while the process was down.

use slidelog_core::{Log, MAX_KEY_BYTES, MAX_WINDOW_MS, codec};
use std::collections::HashMap;

/// The first bytes of every snapshot.
pub(crate) const MAGIC: &[u8; 8] = b"SLDLGMEM";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes before the first entry.
pub(crate) const HEADER_LEN: usize = 8 + 4 + 8;
/// Bytes of the end marker and the checksum.
pub(crate) const TRAILER_LEN: usize = 1 + 8 + 8 + 4;

const ENTRY: u8 = 1;
const END: u8 = 0;

/// One key as a snapshot holds it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub key: String,
    pub longest_window_ms: u64,
    pub log: Log,
}

/// Why the bytes after a valid header and checksum are not entries (a
/// writer's bug, not a torn file: the checksum has already matched).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// A key's log does not decode; why is the source.
    #[error("entry {index}")]
    Log {
        /// Position of the entry in the file.
        index: u64,
        /// What the log decoder found.
        source: codec::CodecError,
    },
    /// A field other than the log is invalid.
    #[error("entry {index} at byte {at}: {what}")]
    Field {
        /// Position of the entry in the file.
        index: u64,
        /// Byte offset of the field.
        at: usize,
        /// Which field and why.
        what: &'static str,
    },
    /// Two entries hold the same key: a writer never repeats one, and
    /// keeping either would drop the other's records silently. The key is
    /// named by the entries' positions (it may be a user's identity).
    #[error("entry {index} repeats the key of entry {first} ({key_bytes} bytes)")]
    DuplicateKey {
        /// Position of the repeating entry in the file.
        index: u64,
        /// Position of the entry that held the key first.
        first: u64,
        /// The key's length, to tell keys apart without showing one.
        key_bytes: usize,
    },
    /// A record lies further past the loading store's clock than a load
    /// accepts: a forged file, or a host clock that stepped back more than
    /// the bound while the process was down. Kept, such a record would
    /// block its key until its time came (years, for 2^53 - 1 ms).
    #[error(
        "entry {index} holds a record at {record_ms} ms (Unix), {ahead_ms} ms past the \
         clock; a load accepts records at most {bound_ms} ms ahead"
    )]
    Future {
        /// Position of the entry in the file.
        index: u64,
        /// The entry's newest record.
        record_ms: u64,
        /// How far past the store's clock it lies.
        ahead_ms: u64,
        /// The bound ([`LoadBounds::max_future_ms`](super::LoadBounds::max_future_ms)).
        bound_ms: u64,
    },
}

pub(crate) fn put_header(out: &mut Vec<u8>, written_ms: u64) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&written_ms.to_le_bytes());
}

pub(crate) fn put_entry(out: &mut Vec<u8>, key: &str, longest_window_ms: u64, log: &Log) {
    out.push(ENTRY);
    put_varint(out, key.len() as u64);
    out.extend_from_slice(key.as_bytes());
    put_varint(out, longest_window_ms);
    codec::encode(log, out);
}

/// The end marker and counts; the checksum follows, written by the caller.
pub(crate) fn put_end(out: &mut Vec<u8>, entries: u64, records: u64) {
    out.push(END);
    out.extend_from_slice(&entries.to_le_bytes());
    out.extend_from_slice(&records.to_le_bytes());
}

/// Reads the entries of `body` (the bytes after the header, before the
/// checksum): every entry, then checks the counts of the end marker.
pub(crate) fn read_entries(body: &[u8]) -> Result<Vec<Entry>, EntryError> {
    let mut entries = Vec::new();
    // Each key's first entry, borrowed from `body`: a repeated key is refused.
    let mut seen: HashMap<&str, u64> = HashMap::new();
    let mut records = 0u64;
    let mut at = 0;
    loop {
        let index = entries.len() as u64;
        let field = |at: usize, what| EntryError::Field { index, at, what };
        match body.get(at) {
            Some(&ENTRY) => at += 1,
            Some(&END) => return check_end(&body[at + 1..], index, records).map(|()| entries),
            _ => return Err(field(at, "neither an entry nor the end marker")),
        }
        let (len, n) = varint(&body[at..]).ok_or(field(at, "key length"))?;
        at += n;
        let key = usize::try_from(len)
            .ok()
            .filter(|&l| (1..=MAX_KEY_BYTES).contains(&l))
            .and_then(|l| body.get(at..at + l))
            .and_then(|k| std::str::from_utf8(k).ok())
            .ok_or(field(at, "key not 1 to 512 bytes of UTF-8"))?;
        if let Some(&first) = seen.get(key) {
            return Err(EntryError::DuplicateKey {
                index,
                first,
                key_bytes: key.len(),
            });
        }
        seen.insert(key, index);
        at += key.len();
        let (window, n) = varint(&body[at..])
            .filter(|&(w, _)| (1..=MAX_WINDOW_MS).contains(&w))
            .ok_or(field(at, "longest window not 1 ms to 366 days"))?;
        at += n;
        // The end marker counts the records as written: a version 1 log's
        // records of one millisecond are read as one.
        let (log, n, written) = codec::decode_counted(&body[at..])
            .map_err(|source| EntryError::Log { index, source })?;
        at += n;
        records += written;
        entries.push(Entry {
            key: key.to_owned(),
            longest_window_ms: window,
            log,
        });
    }
}

fn check_end(end: &[u8], entries: u64, records: u64) -> Result<(), EntryError> {
    let mut want = Vec::with_capacity(16);
    want.extend_from_slice(&entries.to_le_bytes());
    want.extend_from_slice(&records.to_le_bytes());
    if end == want.as_slice() {
        Ok(())
    } else {
        Err(EntryError::Field {
            index: entries,
            at: 0,
            what: "end marker's counts differ from the entries read",
        })
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint and its length; `None` when truncated or longer than 10 bytes.
fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().take(10).enumerate() {
        let bits = u64::from(b & 0x7f);
        if i == 9 && bits > 1 {
            return None;
        }
        v |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}
