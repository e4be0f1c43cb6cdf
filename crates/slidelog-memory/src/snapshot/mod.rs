//! The memory store survives a restart: its live logs written to a writer
//! or a file, and loaded back at start (docs/design.md §4, "Snapshots").
//!
//! Writing copies one shard at a time under that shard's lock (the logs'
//! bytes, no allocation per key) and writes them out with the lock released,
//! so decisions on other shards never wait and decisions on the shard being
//! copied wait for one copy at most ([`SaveReport::longest_lock_hold`]). The
//! snapshot is consistent per key, not across keys: it is taken while the
//! store decides.
//!
//! Loading reads at most [`LoadBounds::max_bytes`] and checks the whole
//! file (magic, version, checksum, every entry, no key twice, no record
//! more than [`LoadBounds::max_future_ms`] past the clock) before it adds
//! anything, so a torn, foreign or edited-out-of-bounds file adds nothing;
//! then it drops the records that expired while the process was down (by
//! the store's clock: records in the future within the bound stay live, as
//! in every decision) and adds the keys within the key cap and the memory
//! budget.
//!
//! The CRC-32 catches a torn or damaged file, not an edited one: whoever
//! can write the file can recompute it. A snapshot is trusted content, to
//! be protected like a database file (docs/design.md §4, "Snapshots"):
//! the writer creates it with mode 0600.

mod file;
pub(crate) mod format;

pub use file::SnapshotFileError;
pub use format::{EntryError, FORMAT_VERSION};

use crate::MemoryStore;
use crate::shard::Shard;
use parking_lot::Mutex;
use std::hash::BuildHasher;
use std::io::{self, Read, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a save wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaveReport {
    /// Keys written.
    pub keys: u64,
    /// Records written.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Time taken, file sync included for a path.
    pub duration: Duration,
    /// The longest time one shard's lock was held for a copy (wall time: a
    /// thread descheduled while it holds the lock counts).
    pub longest_lock_hold: Duration,
    /// How many times a shard's lock was taken for a copy.
    pub lock_holds: u64,
    /// The time the locks were held in all.
    pub total_lock_hold: Duration,
}

/// What a load added, and what it left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// When the snapshot was taken, by the clock of the store that wrote it (Unix ms).
    pub written_at_ms: u64,
    /// Keys added.
    pub keys: u64,
    /// Records added.
    pub records: u64,
    /// Records dropped because they expired while the process was down.
    pub expired_records: u64,
    /// Keys left out because the store already held them (their logs are kept).
    pub existing_keys: u64,
    /// Keys left out at the key cap or the memory budget, and their records.
    pub refused_keys: u64,
    /// The records of the refused keys.
    pub refused_records: u64,
}

/// Default of [`LoadBounds::max_future_ms`]: one hour.
pub const DEFAULT_MAX_FUTURE_MS: u64 = 3_600_000;

/// What a load accepts at most; beyond either it refuses the input whole.
/// [`MemoryStore::load_bounds`] gives a store's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadBounds {
    /// The most bytes read: a longer input is refused before it is read
    /// whole (a link to `/dev/zero` would otherwise fill the memory).
    pub max_bytes: u64,
    /// How far past the loading store's clock a record may lie, in ms. A
    /// host clock that stepped back further while the process was down is
    /// refused too: the operator decides (move the file away, or wait).
    pub max_future_ms: u64,
}

/// Why a snapshot cannot be written or loaded.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading or writing failed: the I/O error's message and source.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The input holds no byte.
    #[error("empty (0 bytes)")]
    Empty,
    /// The input does not start as a snapshot does.
    #[error("not a slidelog memory snapshot (no magic bytes at its start)")]
    Foreign,
    /// A version this build does not read.
    #[error("format version {got}; this build reads version {FORMAT_VERSION}")]
    UnknownVersion {
        /// The version found.
        got: u32,
    },
    /// The checksum does not match: the file is truncated or corrupt.
    #[error(
        "truncated or corrupt ({len} bytes; checksum {stored:#010x}, computed {computed:#010x})"
    )]
    Checksum {
        /// Bytes read.
        len: usize,
        /// The checksum the file ends with.
        stored: u32,
        /// The checksum of what precedes it.
        computed: u32,
    },
    /// The checksum matches but an entry is invalid (a writer's bug, or an
    /// edited file); which entry is the source.
    #[error("invalid content")]
    Entries(#[from] EntryError),
    /// The input is longer than a load reads ([`LoadBounds::max_bytes`]).
    #[error(
        "{len} bytes or more, above the {max} bytes a load reads \
         (by default twice the memory budget, --memory-limit)"
    )]
    TooLarge {
        /// Bytes found (at least: reading stopped past the bound).
        len: u64,
        /// The bound.
        max: u64,
    },
    /// The path is not a regular file (after following links): a named
    /// pipe would block the start, a device would never end.
    #[error("not a regular file but {kind}")]
    NotAFile {
        /// What it is: "a directory", "a named pipe (FIFO)", ….
        kind: &'static str,
    },
}

impl SnapshotError {
    /// True when the input was read but is not a snapshot this build can
    /// load (as opposed to an I/O failure, or a path that is no file).
    pub fn is_invalid(&self) -> bool {
        !matches!(self, Self::Io(_) | Self::NotAFile { .. })
    }
}

impl MemoryStore {
    /// Writes every live log to `out` (see the module doc); the store keeps deciding meanwhile.
    pub fn save(&self, out: &mut impl Write) -> io::Result<SaveReport> {
        self.save_at(out, self.now_ms())
    }

    /// [`MemoryStore::save`] at an explicit time: logs expired at `now_ms` are left out.
    pub fn save_at(&self, out: &mut impl Write, now_ms: u64) -> io::Result<SaveReport> {
        let started = Instant::now();
        let mut report = SaveReport::default();
        let mut crc = crc32fast::Hasher::new();
        let mut buf = Vec::with_capacity(1 << 16);
        format::put_header(&mut buf, now_ms);
        for shard in self.shards.iter() {
            copy_shard(shard, now_ms, &mut buf, &mut report);
            flush(out, &mut crc, &mut buf, &mut report)?;
        }
        format::put_end(&mut buf, report.keys, report.records);
        let checksum = {
            let mut crc = crc.clone();
            crc.update(&buf);
            crc.finalize()
        };
        buf.extend_from_slice(&checksum.to_le_bytes());
        flush(out, &mut crc, &mut buf, &mut report)?;
        out.flush()?;
        report.duration = started.elapsed();
        Ok(report)
    }

    /// The bounds a load of this store applies by default: twice the
    /// memory budget in bytes (a record takes at most 8 bytes in a file,
    /// where a log spans over 49 days, against 4 in memory, so a snapshot of
    /// a store within its budget fits), and [`DEFAULT_MAX_FUTURE_MS`].
    pub fn load_bounds(&self) -> LoadBounds {
        LoadBounds {
            max_bytes: (self.memory_limit as u64).saturating_mul(2),
            max_future_ms: DEFAULT_MAX_FUTURE_MS,
        }
    }

    /// Loads a snapshot from `input` into this store (see the module doc),
    /// within [`MemoryStore::load_bounds`]. Nothing is added unless the
    /// whole input is a valid snapshot.
    pub fn load(&self, input: &mut impl Read) -> Result<LoadReport, SnapshotError> {
        self.load_with(input, self.load_bounds())
    }

    /// [`MemoryStore::load`] within `bounds`.
    pub fn load_with(
        &self,
        input: &mut impl Read,
        bounds: LoadBounds,
    ) -> Result<LoadReport, SnapshotError> {
        let bytes = read_bounded(input, bounds.max_bytes)?;
        self.load_bytes_within(&bytes, self.now_ms(), bounds)
    }

    /// [`MemoryStore::load`] from bytes at an explicit time: records expired
    /// at `now_ms` are dropped.
    pub fn load_bytes_at(&self, bytes: &[u8], now_ms: u64) -> Result<LoadReport, SnapshotError> {
        self.load_bytes_within(bytes, now_ms, self.load_bounds())
    }

    /// [`MemoryStore::load_bytes_at`] within `bounds`.
    pub fn load_bytes_within(
        &self,
        bytes: &[u8],
        now_ms: u64,
        bounds: LoadBounds,
    ) -> Result<LoadReport, SnapshotError> {
        let len = bytes.len() as u64;
        if len > bounds.max_bytes {
            return Err(SnapshotError::TooLarge {
                len,
                max: bounds.max_bytes,
            });
        }
        let (written_at_ms, entries) = parse(bytes)?;
        check_future(&entries, now_ms, bounds.max_future_ms)?;
        let mut report = LoadReport {
            written_at_ms,
            ..LoadReport::default()
        };
        for mut entry in entries {
            report.expired_records += entry.log.expire(now_ms, entry.longest_window_ms) as u64;
            if entry.log.is_empty() {
                continue;
            }
            self.adopt(entry, &mut report);
        }
        Ok(report)
    }

    /// Adds one loaded key within the cap and the budget, unless held already.
    fn adopt(&self, entry: format::Entry, report: &mut LoadReport) {
        let hash = self.hasher.hash_one(entry.key.as_str());
        let mut shard = self.shards[self.shard_index(hash)].lock();
        let records = entry.log.len() as u64;
        if shard.contains(hash, &entry.key) {
            report.existing_keys += 1;
        } else if self.try_reserve_key().is_err() {
            report.refused_keys += 1;
            report.refused_records += records;
        } else {
            let bytes = shard.adopt(hash, entry, &self.hasher);
            self.bytes.fetch_add(bytes, Ordering::Relaxed);
            report.keys += 1;
            report.records += records;
        }
    }
}

/// Buckets copied per hold of a shard's lock: 900 keys at most (a table
/// is at most 7/8 full), a fraction of a millisecond.
const CHUNK: usize = 1024;
/// Restarts of a shard whose table moved entries mid-copy before the copy
/// takes the whole shard under one hold.
const RESTARTS: u32 = 3;

/// Copies one shard's live logs into `buf`, `CHUNK` buckets per lock hold.
/// Between holds keys may come and go (the copy is per key, as the module
/// doc says), but a table that moved entries is copied again from its start.
fn copy_shard(shard: &Mutex<Shard>, now_ms: u64, buf: &mut Vec<u8>, report: &mut SaveReport) {
    let mark = (buf.len(), report.keys, report.records);
    let mut restarts = 0;
    let (mut start, mut layout) = (0usize, None);
    loop {
        let guard = shard.lock();
        let held = Instant::now();
        if *layout.get_or_insert(guard.layout()) != guard.layout() {
            drop(guard);
            buf.truncate(mark.0);
            (report.keys, report.records) = (mark.1, mark.2);
            (start, layout, restarts) = (0, None, restarts + 1);
            continue;
        }
        let chunk = if restarts >= RESTARTS {
            usize::MAX
        } else {
            CHUNK
        };
        let end = start.saturating_add(chunk).min(guard.buckets());
        let (keys, records) = guard.encode_live(start..end, now_ms, buf);
        let done = end == guard.buckets();
        drop(guard);
        let held = held.elapsed();
        report.longest_lock_hold = report.longest_lock_hold.max(held);
        report.lock_holds += 1;
        report.total_lock_hold += held;
        report.keys += keys;
        report.records += records;
        if done {
            return;
        }
        start = end;
    }
}

fn flush(
    out: &mut impl Write,
    crc: &mut crc32fast::Hasher,
    buf: &mut Vec<u8>,
    report: &mut SaveReport,
) -> io::Result<()> {
    crc.update(buf);
    out.write_all(buf)?;
    report.bytes += buf.len() as u64;
    buf.clear();
    Ok(())
}

/// The whole of `input` up to `max` bytes; more is refused, unread.
fn read_bounded(input: &mut impl Read, max: u64) -> Result<Vec<u8>, SnapshotError> {
    let mut bytes = Vec::new();
    input.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    let len = bytes.len() as u64;
    if len > max {
        return Err(SnapshotError::TooLarge { len, max });
    }
    Ok(bytes)
}

/// Refuses the entries if one holds a record more than `bound_ms` past
/// `now_ms` (a log is in time order: its newest record is the one to check).
fn check_future(entries: &[format::Entry], now_ms: u64, bound_ms: u64) -> Result<(), EntryError> {
    let latest = now_ms.saturating_add(bound_ms);
    for (index, entry) in entries.iter().enumerate() {
        match entry.log.newest() {
            Some(record_ms) if record_ms > latest => {
                return Err(EntryError::Future {
                    index: index as u64,
                    record_ms,
                    ahead_ms: record_ms - now_ms,
                    bound_ms,
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks the whole snapshot and reads its entries: the time it was written and its keys.
fn parse(bytes: &[u8]) -> Result<(u64, Vec<format::Entry>), SnapshotError> {
    if bytes.is_empty() {
        return Err(SnapshotError::Empty);
    }
    let magic = format::MAGIC.len();
    if bytes.len() < magic || bytes[..magic] != format::MAGIC[..] {
        return Err(SnapshotError::Foreign);
    }
    let word = |at: usize, n: usize| {
        bytes
            .get(at..at + n)
            .map(|b| b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    };
    let version = word(magic, 4);
    if let Some(got) = version.filter(|&v| v != u64::from(FORMAT_VERSION)) {
        return Err(SnapshotError::UnknownVersion { got: got as u32 });
    }
    let len = bytes.len();
    if len < format::HEADER_LEN + format::TRAILER_LEN {
        return Err(SnapshotError::Checksum {
            len,
            stored: 0,
            computed: crc32fast::hash(bytes),
        });
    }
    let stored = word(len - 4, 4).unwrap_or_default() as u32;
    let computed = crc32fast::hash(&bytes[..len - 4]);
    if stored != computed {
        return Err(SnapshotError::Checksum {
            len,
            stored,
            computed,
        });
    }
    let written_at_ms = word(magic + 4, 8).unwrap_or_default();
    let entries = format::read_entries(&bytes[format::HEADER_LEN..len - 4])?;
    Ok((written_at_ms, entries))
}
