//! Snapshots from a hostile hand: a path that is no regular file (a named
//! pipe, a link to `/dev/zero`, a directory), a file or reader larger than a
//! load reads, a key held twice, a record far in the future (with a
//! recomputed checksum: the CRC-32 is no signature). Each is refused
//! within a second, adding nothing, with an error that says which; and a
//! snapshot is written readable by its owner only.

use slidelog_core::{Limit, MAX_NOW_MS, Mode, Request};
use slidelog_memory::{
    DEFAULT_MAX_FUTURE_MS, EntryError, LoadBounds, MemoryStore, SnapshotError, SnapshotFileError,
};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

const T0: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;

fn five_per_hour(key: &str) -> Request {
    Request::single(key, Limit::new(5, HOUR).unwrap()).unwrap()
}

/// A snapshot of one key, `key`, with one record at `at`, written at `written`.
fn one_key(key: &str, at: u64, written: u64) -> Vec<u8> {
    let store = MemoryStore::new();
    store
        .decide_at(&five_per_hour(key), Mode::Record, at)
        .unwrap();
    let mut bytes = Vec::new();
    store.save_at(&mut bytes, written).unwrap();
    bytes
}

/// Loads `path` into a fresh store within 1 s; returns the error and
/// checks that nothing was added.
fn refused_path(path: &Path) -> SnapshotFileError {
    let store = MemoryStore::new();
    let started = Instant::now();
    let err = store.load_path(path).unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "{took:?}: {err}");
    assert_eq!(store.key_count(), 0);
    assert!(err.to_string().contains(&path.display().to_string()));
    err
}

#[test]
fn a_named_pipe_is_refused_at_once_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    let err = refused_path(&path);
    assert!(
        matches!(
            err.source,
            SnapshotError::NotAFile {
                kind: "a named pipe (FIFO)"
            }
        ),
        "{err:?}"
    );
    assert!(!err.source.is_invalid(), "never moved aside as a bad file");
    assert!(
        err.with_causes()
            .contains("not a regular file but a named pipe")
    );
}

#[test]
fn a_link_to_dev_zero_and_a_directory_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("zero.snap");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let err = refused_path(&link);
    assert!(
        matches!(
            err.source,
            SnapshotError::NotAFile {
                kind: "a character device"
            }
        ),
        "{err:?}"
    );
    let sub = dir.path().join("a-directory.snap");
    std::fs::create_dir(&sub).unwrap();
    let err = refused_path(&sub);
    assert!(
        matches!(
            err.source,
            SnapshotError::NotAFile {
                kind: "a directory"
            }
        ),
        "{err:?}"
    );
}

#[test]
fn more_bytes_than_twice_the_budget_are_refused_from_a_file_and_a_reader() {
    let store = MemoryStore::new().with_memory_limit(4_096);
    assert_eq!(store.load_bounds().max_bytes, 8_192);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    // A valid snapshot padded past the bound: refused by its size, unread.
    let mut bytes = one_key("a", T0, T0);
    bytes.resize(8_193, 0);
    std::fs::write(&path, &bytes).unwrap();
    let err = store.load_path(&path).unwrap_err();
    assert!(
        matches!(
            err.source,
            SnapshotError::TooLarge {
                len: 8_193,
                max: 8_192
            }
        ),
        "{err:?}"
    );
    assert!(err.with_causes().contains("--memory-limit"), "{err}");
    // A reader that never ends is read up to the bound, not to the end.
    let started = Instant::now();
    let err = store.load(&mut std::io::repeat(0)).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(
        matches!(err, SnapshotError::TooLarge { len: 8_193, .. }),
        "{err:?}"
    );
    assert_eq!(store.key_count(), 0);
}

/// A store filled to its budget writes a snapshot that the bound lets in.
#[test]
fn a_snapshot_of_a_full_store_fits_its_bound() {
    let store = MemoryStore::new().with_memory_limit(64 * 1024);
    let mut k = 0;
    while store
        .decide_at(&five_per_hour(&format!("key-{k}")), Mode::Record, T0)
        .is_ok()
    {
        k += 1;
    }
    let mut bytes = Vec::new();
    store.save_at(&mut bytes, T0).unwrap();
    assert!((bytes.len() as u64) < store.load_bounds().max_bytes);
    let loaded = MemoryStore::new().with_memory_limit(64 * 1024);
    assert_eq!(loaded.load_bytes_at(&bytes, T0).unwrap().keys, k);
}

/// The CRC-32 of `bytes` (IEEE), as the writer computes it.
fn with_checksum(mut bytes: Vec<u8>) -> Vec<u8> {
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// Bytes of the header (magic, version, time) and of the end marker, its
/// counts and the checksum (docs/design.md §4, "Snapshots").
const HEADER: usize = 20;
const TRAILER: usize = 21;

#[test]
fn a_key_held_twice_is_refused_naming_both_entries() {
    let first = one_key("user-42", T0, T0);
    let second = one_key("user-42", T0 + 1, T0 + 1);
    let entry = |b: &[u8]| b[HEADER..b.len() - TRAILER].to_vec();
    let mut edited = first[..HEADER].to_vec();
    edited.extend(entry(&first));
    edited.extend(entry(&one_key("other", T0, T0)));
    edited.extend(entry(&second));
    edited.push(0);
    edited.extend_from_slice(&3u64.to_le_bytes());
    edited.extend_from_slice(&3u64.to_le_bytes());
    let edited = with_checksum(edited);
    let store = MemoryStore::new();
    let err = store.load_bytes_at(&edited, T0 + 2).unwrap_err();
    let SnapshotError::Entries(entry_error) = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        *entry_error,
        EntryError::DuplicateKey {
            index: 2,
            first: 0,
            key_bytes: 7
        }
    );
    let message = slidelog_core::error::with_causes(&err);
    assert!(
        message.contains("entry 2 repeats the key of entry 0"),
        "{message}"
    );
    assert!(
        !message.contains("user-42"),
        "the key is not shown: {message}"
    );
    assert_eq!(store.key_count(), 0, "nothing added");
}

#[test]
fn a_record_past_the_clock_and_its_bound_is_refused() {
    let store = MemoryStore::new();
    // 30 min ahead (a clock that stepped back a little): loaded, kept live.
    let near = one_key("near", T0 + HOUR / 2, T0 + HOUR / 2);
    assert_eq!(store.load_bytes_at(&near, T0).unwrap().records, 1);
    // 2^53 - 1 ms: the record that would block its key for 285,000 years.
    for at in [T0 + HOUR + 1, MAX_NOW_MS] {
        let far = one_key("far", at, at);
        let err = store.load_bytes_at(&far, T0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid content",
            "an entry error: {err:?}"
        );
        let message = slidelog_core::error::with_causes(&err);
        assert!(
            message.contains(&format!("{} ms past the clock", at - T0)),
            "{message}"
        );
        assert!(
            message.contains("at most 3600000 ms ahead"),
            "the bound is named: {message}"
        );
        assert!(err.is_invalid());
    }
    assert_eq!(store.key_count(), 1, "only `near`");
    // A caller whose clients stamp their own time widens the bound.
    let trusting = MemoryStore::new();
    let bounds = LoadBounds {
        max_future_ms: MAX_NOW_MS,
        ..trusting.load_bounds()
    };
    let far = one_key("far", MAX_NOW_MS, T0);
    assert_eq!(
        trusting.load_bytes_within(&far, T0, bounds).unwrap().keys,
        1
    );
    assert_eq!(DEFAULT_MAX_FUTURE_MS, HOUR);
}

#[test]
fn snapshots_are_written_readable_by_their_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    // A file open to everyone is replaced by one that is not.
    std::fs::write(&path, b"old").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let store = MemoryStore::new();
    store
        .decide_at(&five_per_hour("a"), Mode::Record, store.now_ms())
        .unwrap();
    store.save_path(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    assert_eq!(
        MemoryStore::new().load_path(&path).unwrap().unwrap().keys,
        1
    );
}
