//! Reading the small files serve's flags name (TLS certificates and keys,
//! token files), which are read again whenever they may have changed: only
//! a regular file is read (a named pipe would block the reader, a device
//! such as /dev/zero would never end), and at most [`MAX_FLAG_FILE_BYTES`]
//! of it. Every error names the flag and the path.

use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// Largest file a flag may name: a PEM chain or CA bundle of a few hundred
/// certificates, or tens of thousands of tokens, fits well within it.
pub const MAX_FLAG_FILE_BYTES: u64 = 1024 * 1024;

/// Why a flag's file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FlagFileError {
    /// The file could not be opened or read.
    #[error("{flag} {}: cannot read it: {source}", path.display())]
    Io {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A named pipe, device, socket or directory.
    #[error("{flag} {}: not a regular file (a named pipe, device or directory is refused)", path.display())]
    NotRegular {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// Larger than the bound.
    #[error("{flag} {}: larger than {max} bytes", path.display())]
    TooLarge {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// The bound.
        max: u64,
    },
}

/// Reads the regular file `path` that `flag` names, at most `max` bytes.
pub fn read(path: &Path, flag: &'static str, max: u64) -> Result<Vec<u8>, FlagFileError> {
    let io = |source| FlagFileError::Io {
        flag,
        path: path.to_owned(),
        source,
    };
    // O_NONBLOCK: opening a named pipe without a writer would block here,
    // before its type can be seen on the open file (no race with a rename
    // between a check and the open). A regular file's reads ignore it.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FlagFileError::NotRegular {
            flag,
            path: path.to_owned(),
        });
    }
    let too_large = || FlagFileError::TooLarge {
        flag,
        path: path.to_owned(),
        max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    // The file may grow between the stat and the read: read one byte past
    // the bound to see it, never more.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Calls `poll` every `every` until `shutdown` fires (the reload of the
/// files, which are small: reading them whole is the cheap and sure way to
/// see a change, whatever their mtime says after a copy or a rename).
pub fn spawn_poll(
    shutdown: crate::shutdown::Shutdown,
    every: std::time::Duration,
    mut poll: impl FnMut() + Send + 'static,
) {
    tokio::spawn(async move {
        let stop = shutdown.wait();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(every) => poll(),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_and_refuses_a_pipe_a_device_and_a_large_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc").unwrap();
        assert_eq!(read(&file, "--x", 3).unwrap(), b"abc");
        let e = read(&file, "--x", 2).unwrap_err().to_string();
        assert!(
            e.starts_with("--x ") && e.ends_with("larger than 2 bytes"),
            "{e}"
        );

        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let e = read(&fifo, "--tls-cert", MAX_FLAG_FILE_BYTES).unwrap_err();
        assert!(matches!(e, FlagFileError::NotRegular { .. }), "{e}");
        assert!(e.to_string().starts_with("--tls-cert "), "{e}");

        for device in ["/dev/zero", "/tmp"] {
            let e = read(Path::new(device), "--tls-key", MAX_FLAG_FILE_BYTES).unwrap_err();
            assert!(matches!(e, FlagFileError::NotRegular { .. }), "{e}");
        }
        let e = read(&dir.path().join("missing"), "--tls-key", 10).unwrap_err();
        assert!(e.to_string().contains("--tls-key") && e.to_string().contains("missing"));
    }
}
