//! `serve --policies FILE`: the operator's named limit sets
//! (`slidelog::policies`), read at start (an invalid file refuses to start,
//! naming file:line:col) and read again when the file changes, polled as
//! `--config` is: a change that does not parse keeps the last good
//! policies and logs why (docs/design.md §5, "Operators' API").

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use slidelog::policies::{Policies, PolicyError};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The live policies: swapped whole on reload; every request reads them.
#[derive(Debug)]
pub struct PolicyHandle {
    current: ArcSwap<Policies>,
    path: Option<PathBuf>,
    /// The file's bytes when last read, to see a change.
    seen: Mutex<Vec<u8>>,
    last_error: Mutex<Option<String>>,
}

impl PolicyHandle {
    /// Loads `path`; the error names file:line:col.
    pub fn load(path: impl Into<PathBuf>) -> Result<Arc<Self>, PolicyError> {
        let path = path.into();
        let bytes = std::fs::read(&path).unwrap_or_default();
        let policies = Policies::from_file(&path)?;
        Ok(Arc::new(Self {
            current: ArcSwap::from_pointee(policies),
            path: Some(path),
            seen: Mutex::new(bytes),
            last_error: Mutex::new(None),
        }))
    }

    /// Fixed policies with no file behind them (tests, embedding).
    pub fn fixed(policies: Policies) -> Arc<Self> {
        Arc::new(Self {
            current: ArcSwap::from_pointee(policies),
            path: None,
            seen: Mutex::new(Vec::new()),
            last_error: Mutex::new(None),
        })
    }

    /// The policies now in force.
    pub fn get(&self) -> Arc<Policies> {
        self.current.load_full()
    }

    /// Why the last reload failed, while the file stays invalid.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().clone()
    }

    /// Reads the file again if its bytes changed; keeps the last good
    /// policies when the new ones do not parse. Returns whether it swapped.
    pub fn reload(&self) -> bool {
        let Some(path) = &self.path else {
            return false;
        };
        let Ok(bytes) = std::fs::read(path) else {
            return false;
        };
        let mut seen = self.seen.lock();
        if *seen == bytes {
            return false;
        }
        *seen = bytes;
        match Policies::from_file(path) {
            Ok(policies) => {
                tracing::info!(path = %path.display(), policies = policies.len(), "policies reloaded");
                self.current.store(Arc::new(policies));
                *self.last_error.lock() = None;
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "policies not reloaded: keeping the last good ones");
                *self.last_error.lock() = Some(e.to_string());
                false
            }
        }
    }

    /// Polls the file every `every` until `shutdown`.
    pub fn spawn_reload(self: &Arc<Self>, shutdown: crate::shutdown::Shutdown, every: Duration) {
        let handle = self.clone();
        crate::flag_file::spawn_poll(shutdown, every, move || {
            handle.reload();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_picked_up_and_a_bad_one_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policies");
        std::fs::write(&file, "a: 1/s\n").unwrap();
        let handle = PolicyHandle::load(&file).unwrap();
        assert!(!handle.reload(), "unchanged");
        std::fs::write(&file, "a: 2/s\nb: 3/s\n").unwrap();
        assert!(handle.reload());
        assert_eq!(handle.get().len(), 2);
        std::fs::write(&file, "a: 2/s\nb 3/s\n").unwrap();
        assert!(!handle.reload());
        assert_eq!(handle.get().get("a").unwrap().limits()[0].max(), 2);
        let error = handle.last_error().unwrap();
        assert!(error.contains("policies:2:1:"), "{error}");
    }
}
