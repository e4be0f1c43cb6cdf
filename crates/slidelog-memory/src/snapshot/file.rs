//! Snapshots on disk: written crash-safe (a temporary file in the same
//! directory, fsync, atomic rename, fsync of the directory), so that the
//! path holds either the previous snapshot or the new one, whole. A writer
//! killed mid-write leaves its temporary file (`.NAME.XXXXXX.tmp`); the next
//! load removes it.

use super::{LoadBounds, LoadReport, SaveReport, SnapshotError};
use crate::MemoryStore;
use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, BufReader};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A snapshot file that could not be written or loaded, naming it.
///
/// Its message names the file (`memory snapshot PATH`); what went wrong is
/// its [`source`](std::error::Error::source), which an error-chain printer
/// (anyhow's `{:#}`) adds once. [`SnapshotFileError::with_causes`] is both
/// on one line, for a log or a message that shows one string.
#[derive(Debug, thiserror::Error)]
#[error("memory snapshot {}", path.display())]
pub struct SnapshotFileError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    #[source]
    pub source: SnapshotError,
}

impl SnapshotFileError {
    /// Returns this error and its causes on one line, each said once:
    /// `memory snapshot /var/lib/x.snap: truncated or corrupt (...)`.
    pub fn with_causes(&self) -> String {
        slidelog_core::error::with_causes(self)
    }
}

impl MemoryStore {
    /// Writes a snapshot to `path`, replacing the previous one atomically.
    pub fn save_path(&self, path: &Path) -> Result<SaveReport, SnapshotFileError> {
        let started = Instant::now();
        let named = |e: io::Error| SnapshotFileError {
            path: path.to_owned(),
            source: SnapshotError::Io(e),
        };
        let dir = dir_of(path);
        let mut tmp = tempfile::Builder::new()
            .prefix(&temp_prefix(path))
            .suffix(TEMP_SUFFIX)
            .permissions(Permissions::from_mode(SNAPSHOT_MODE))
            .tempfile_in(dir)
            .map_err(named)?;
        let mut report = self.save(tmp.as_file_mut()).map_err(named)?;
        tmp.as_file().sync_all().map_err(named)?;
        tmp.persist(path).map_err(|e| named(e.error))?;
        // The rename is durable once the directory is.
        File::open(dir).and_then(|d| d.sync_all()).map_err(named)?;
        report.duration = started.elapsed();
        Ok(report)
    }

    /// Loads the snapshot at `path` within [`MemoryStore::load_bounds`];
    /// `Ok(None)` when there is no file there. Also removes the temporary
    /// files of `path` that a writer killed mid-write left beside it.
    pub fn load_path(&self, path: &Path) -> Result<Option<LoadReport>, SnapshotFileError> {
        self.load_path_with(path, self.load_bounds())
    }

    /// [`MemoryStore::load_path`] within `bounds`.
    pub fn load_path_with(
        &self,
        path: &Path,
        bounds: LoadBounds,
    ) -> Result<Option<LoadReport>, SnapshotFileError> {
        remove_temporaries(path);
        let named = |source| SnapshotFileError {
            path: path.to_owned(),
            source,
        };
        let Some(file) = open_regular(path, bounds.max_bytes).map_err(named)? else {
            return Ok(None);
        };
        self.load_with(&mut BufReader::new(file), bounds)
            .map(Some)
            .map_err(named)
    }
}

/// The mode of a snapshot file: its owner's only.
const SNAPSHOT_MODE: u32 = 0o600;

/// Opens `path` for reading if it is a regular file of at most `max_bytes`
/// (links followed); `None` when nothing is there. Opened non-blocking, so
/// that a named pipe answers at once rather than wait for a writer; the
/// checks are on the opened file, so the path cannot change in between.
fn open_regular(path: &Path, max_bytes: u64) -> Result<Option<File>, SnapshotError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SnapshotError::Io(e)),
    };
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let kind = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a named pipe (FIFO)"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a file"
        };
        return Err(SnapshotError::NotAFile { kind });
    }
    if meta.len() > max_bytes {
        return Err(SnapshotError::TooLarge {
            len: meta.len(),
            max: max_bytes,
        });
    }
    Ok(Some(file))
}

/// A snapshot's temporary files are `.NAME.XXXXXX.tmp` beside it.
const TEMP_SUFFIX: &str = ".tmp";

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

fn temp_prefix(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    format!(".{name}.")
}

/// Removes the temporary files of `path` (best effort); returns how many.
fn remove_temporaries(path: &Path) -> usize {
    let prefix = temp_prefix(path);
    let Ok(entries) = std::fs::read_dir(dir_of(path)) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.len() > prefix.len() + TEMP_SUFFIX.len()
                && name.starts_with(&prefix)
                && name.ends_with(TEMP_SUFFIX)
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::EntryError;
    use slidelog_core::codec::CodecError;
    use std::error::Error as _;

    /// The messages of `e` and of its sources, outermost first.
    fn chain(e: &SnapshotFileError) -> Vec<String> {
        let mut out = vec![e.to_string()];
        let mut cause = e.source();
        while let Some(c) = cause {
            out.push(c.to_string());
            cause = c.source();
        }
        out
    }

    /// Each message in the chain says something the others do not, and the
    /// whole line names the file and the root cause exactly once.
    fn assert_said_once(e: &SnapshotFileError, root: &str) {
        let line = e.with_causes();
        assert_eq!(line, chain(e).join(": "));
        assert_eq!(line.matches(root).count(), 1, "{line}");
        let path = e.path.display().to_string();
        assert_eq!(line.matches(&path).count(), 1, "{line}");
    }

    #[test]
    fn an_io_error_is_said_once_in_the_chain() {
        let path = Path::new("/nonexistent-slidelog-dir/x.snap");
        let e = MemoryStore::new().save_path(path).unwrap_err();
        assert_eq!(e.to_string(), format!("memory snapshot {}", path.display()));
        let io = e.source().expect("the I/O error is the source").to_string();
        assert!(!io.is_empty());
        assert_said_once(&e, &io);
    }

    #[test]
    fn an_invalid_file_and_an_invalid_entry_are_said_once_in_the_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory.snap");
        std::fs::write(&path, b"garbage").unwrap();
        let e = MemoryStore::new().load_path(&path).unwrap_err();
        assert!(e.source.is_invalid());
        assert_said_once(&e, "not a slidelog memory snapshot");
        let codec = CodecError::Truncated { at: 3, needed: 8 };
        let e = SnapshotFileError {
            path,
            source: SnapshotError::Entries(EntryError::Log {
                index: 7,
                source: codec.clone(),
            }),
        };
        assert_eq!(
            chain(&e)[1..],
            ["invalid content", "entry 7", &codec.to_string()]
        );
        assert_said_once(&e, &codec.to_string());
    }
}
