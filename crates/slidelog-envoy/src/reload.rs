//! The live config: a snapshot swapped whole, reloaded on SIGHUP and when a
//! file under the config path changes. A reload that fails keeps the last
//! good config, logs why, and is reported by [`ConfigHandle::last_error`].
//!
//! Changes are found by polling (default every second): the list of YAML
//! files and a hash of their contents. Polling needs no inotify limits, works
//! on every file system and sees atomic renames (as Kubernetes ConfigMaps
//! do them) the same as edits.

use crate::config::{ConfigError, LoadOptions, RateLimitConfig, config_files};
use arc_swap::{ArcSwap, Guard};
use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A config that can be read by many tasks and replaced on reload.
#[derive(Debug)]
pub struct ConfigHandle {
    /// Read by every request: an `ArcSwap`, whose load writes only to the
    /// reading thread's own slot, where a lock and a reference count are
    /// atomic writes to lines every worker thread writes (measured: BENCHMARKS.md).
    current: ArcSwap<RateLimitConfig>,
    path: Option<PathBuf>,
    options: LoadOptions,
    fingerprint: RwLock<u128>,
    last_error: RwLock<Option<String>>,
    reloads: AtomicU64,
}

impl ConfigHandle {
    /// Loads `path` (a file or a folder) with the options of the environment
    /// ([`LoadOptions::from_env`]); fails with the file, line and problem
    /// when the config is invalid.
    pub fn load(path: impl Into<PathBuf>) -> Result<Arc<Self>, ConfigError> {
        Self::load_with(path, LoadOptions::from_env())
    }

    /// Does what [`ConfigHandle::load`] does, with explicit options kept for every reload.
    pub fn load_with(
        path: impl Into<PathBuf>,
        options: LoadOptions,
    ) -> Result<Arc<Self>, ConfigError> {
        let path = path.into();
        let config = RateLimitConfig::load_with(&path, &options)?;
        let fingerprint = fingerprint(&path).unwrap_or(0);
        Ok(Arc::new(Self {
            current: ArcSwap::from_pointee(config),
            path: Some(path),
            options,
            fingerprint: RwLock::new(fingerprint),
            last_error: RwLock::new(None),
            reloads: AtomicU64::new(0),
        }))
    }

    /// Returns a fixed config with no file behind it (tests, embedding, no `--config`).
    pub fn fixed(config: RateLimitConfig) -> Arc<Self> {
        Arc::new(Self {
            current: ArcSwap::from_pointee(config),
            path: None,
            options: LoadOptions::default(),
            fingerprint: RwLock::new(0),
            last_error: RwLock::new(None),
            reloads: AtomicU64::new(0),
        })
    }

    /// Returns the current snapshot.
    pub fn get(&self) -> Arc<RateLimitConfig> {
        self.current.load_full()
    }

    /// Returns the current snapshot for a short use (one request): no
    /// reference count is taken while the reading thread has a free slot.
    pub fn snapshot(&self) -> Guard<Arc<RateLimitConfig>> {
        self.current.load()
    }

    /// Returns the config path, when loaded from one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Returns why the last reload failed; `None` after a successful one.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.read().clone()
    }

    /// Returns how many reloads succeeded.
    pub fn reload_count(&self) -> u64 {
        self.reloads.load(Ordering::Relaxed)
    }

    /// Reads the config path again. On error the current config stays.
    pub fn reload(&self) -> Result<(), ConfigError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let fp = fingerprint(path).unwrap_or(0);
        match RateLimitConfig::load_with(path, &self.options) {
            Ok(mut config) => {
                // The metric-name budgets outlive a reload: a domain's
                // override names (shared with the old config), a rule's
                // renamed names (handed to the rule at the same path).
                config.keep_metric_names(&self.get());
                self.current.store(Arc::new(config));
                *self.fingerprint.write() = fp;
                *self.last_error.write() = None;
                self.reloads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(path = %path.display(), "rate limit config reloaded");
                Ok(())
            }
            Err(e) => {
                // Remember the broken version so polling does not log it every tick.
                *self.fingerprint.write() = fp;
                *self.last_error.write() = Some(e.to_string());
                tracing::error!(error = %e, "rate limit config reload failed; keeping the last good config");
                Err(e)
            }
        }
    }

    /// Reloads when the files changed since the last load or reload attempt.
    /// Returns whether a reload was attempted.
    pub fn reload_if_changed(&self) -> bool {
        let Some(path) = &self.path else {
            return false;
        };
        let fp = fingerprint(path).unwrap_or(0);
        if fp == *self.fingerprint.read() {
            return false;
        }
        let _ = self.reload();
        true
    }

    /// Spawns the task that reloads on SIGHUP and polls for changes every
    /// `interval`. It runs until the runtime stops or the handle is aborted.
    pub fn spawn_watcher(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            #[cfg(unix)]
            let mut hup =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen for SIGHUP; polling only");
                        None
                    }
                };
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                #[cfg(unix)]
                {
                    let hup_recv = async {
                        match hup.as_mut() {
                            Some(s) => s.recv().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = hup_recv => {
                            tracing::info!("SIGHUP: reloading the rate limit config");
                            let _ = this.reload();
                        }
                        _ = tick.tick() => { this.reload_if_changed(); }
                    }
                }
                #[cfg(not(unix))]
                {
                    tick.tick().await;
                    this.reload_if_changed();
                }
            }
        })
    }
}

/// Hashes the YAML files' names and contents under `path`.
fn fingerprint(path: &Path) -> Option<u128> {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for file in config_files(path).ok()? {
        h.update(file.to_string_lossy().as_bytes());
        h.update(&[0]);
        h.update(&std::fs::read(&file).ok()?);
        h.update(&[0]);
    }
    Some(h.digest128())
}
