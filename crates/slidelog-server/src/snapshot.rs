//! `serve --memory-snapshot PATH`: the in-memory store survives a restart.
//! At start the file is loaded (or refused: exit 2 naming it); while serving
//! it is written every `--memory-snapshot-interval`; at shutdown, once more
//! after the drain. A crash loses at most the records admitted since the last
//! write (docs/design.md §4, "Snapshots"). The writes copy the store shard
//! by shard (`slidelog_memory`'s save) on a blocking thread, so decisions go on.
//!
//! The file is trusted content: its CRC-32 catches a torn file, not an
//! edited one. It is written with mode 0600 and must be protected like a
//! database file. A load still refuses, at start and naming the flag and the
//! path, what no writer makes: a path that is no regular file (a named pipe,
//! a device, a directory), more bytes than twice the memory budget, a key
//! twice, a record more than an hour past the clock (docs/design.md §4,
//! "Snapshots").

use crate::app::App;
use crate::duration::parse_duration;
use crate::metrics::Metrics;
use anyhow::bail;
use metrics::{counter, gauge};
use slidelog::store::MemoryStore;
use slidelog_inspect::names::{
    MEMORY_SNAPSHOT_AGE_SECONDS as AGE, MEMORY_SNAPSHOT_BYTES as BYTES,
    MEMORY_SNAPSHOT_DURATION_SECONDS as DURATION, MEMORY_SNAPSHOT_FAILURES_TOTAL as FAILURES,
    MEMORY_SNAPSHOT_LAST_SUCCESS_TIMESTAMP_SECONDS as LAST_SUCCESS,
    MEMORY_SNAPSHOT_LOCK_HOLD_SECONDS as LOCK_HOLD,
};
use slidelog_memory::{LoadBounds, SaveReport, SnapshotError, SnapshotFileError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The snapshot flags of `slidelog serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct SnapshotArgs {
    /// Keep the in-memory store's logs in this file (memory:// only): loaded
    /// at start, written every --memory-snapshot-interval and once more at
    /// shutdown after the drain. A crash loses at most the records admitted
    /// since the last write. Instances never share one: use Redis for that.
    ///
    /// The file is trusted: its checksum catches damage, not edits, so
    /// protect it like a database file (it is written with mode 0600; keep
    /// its directory writable by the service's user only). Refused at start:
    /// anything but a regular file, a file larger than twice --memory-limit,
    /// a key held twice, a record more than 1 hour past the clock (with
    /// --trust-client-time: any time a client may give).
    #[arg(long, env = "SLIDELOG_MEMORY_SNAPSHOT")]
    pub memory_snapshot: Option<PathBuf>,
    /// How often the snapshot is written while serving.
    #[arg(long, default_value = "1s", value_parser = parse_duration, requires = "memory_snapshot")]
    pub memory_snapshot_interval: Duration,
    /// Start with an empty store when the snapshot is truncated, corrupt, of
    /// an unknown version, not a snapshot, or out of bounds (a key twice, a
    /// record too far ahead, above twice --memory-limit); the file is kept
    /// as PATH.invalid. Without it, serve refuses to start on such a file
    /// (exit 2). A path that is no regular file is refused either way.
    #[arg(long, requires = "memory_snapshot")]
    pub memory_snapshot_discard_invalid: bool,
}

/// The snapshots of a running service: the periodic writer and the last write.
#[derive(Debug)]
pub struct Snapshots {
    writer: Writer,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Writer>,
}

/// What writes the file and reports how it went.
#[derive(Debug, Clone)]
struct Writer {
    store: Arc<MemoryStore>,
    path: PathBuf,
    metrics: Arc<Metrics>,
    /// The last successful write (or the start), for the age gauge.
    last_success: Instant,
    failing: bool,
}

/// Loads the snapshot into the app's memory store, writes it once (so that
/// an unwritable path refuses to start rather than fail later) and starts
/// the periodic writes. `None` without --memory-snapshot.
pub fn start(args: &SnapshotArgs, app: &App) -> anyhow::Result<Option<Snapshots>> {
    let Some(path) = &args.memory_snapshot else {
        return Ok(None);
    };
    let Some(store) = app.memory_store() else {
        bail!(
            "--memory-snapshot keeps the in-memory store; the store is {}",
            app.store_kind()
        );
    };
    let mut bounds = store.load_bounds();
    if app.config().trust_client_time {
        // Clients may stamp their records at any time up to this bound.
        bounds.max_future_ms = slidelog::store::MAX_NOW_MS;
    }
    load(&store, path, bounds, args.memory_snapshot_discard_invalid)?;
    describe(app.metrics());
    let mut writer = Writer {
        store,
        path: path.clone(),
        metrics: app.metrics().clone(),
        last_success: Instant::now(),
        failing: false,
    };
    match writer.store.save_path(path) {
        Ok(report) => writer.succeeded(&report),
        Err(e) => bail!("--memory-snapshot: {}; cannot write it", e.with_causes()),
    }
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(writer.clone().every(args.memory_snapshot_interval, stopped));
    Ok(Some(Snapshots { writer, stop, task }))
}

impl Snapshots {
    /// Stops the periodic writes and writes the last snapshot: call it after
    /// the drain, when no decision is in flight.
    pub async fn finish(self) {
        let _ = self.stop.send(());
        let mut writer = self.task.await.unwrap_or(self.writer);
        match writer.write().await {
            Some(report) => tracing::info!(
                path = %writer.path.display(),
                keys = report.keys,
                records = report.records,
                bytes = report.bytes,
                "memory snapshot written at shutdown"
            ),
            None => {
                tracing::error!(path = %writer.path.display(), "no memory snapshot at shutdown")
            }
        }
    }
}

/// Loads `path` into `store` within `bounds`: a missing file starts empty;
/// an invalid one refuses to start unless `discard`, which starts empty and
/// keeps the file aside as PATH.invalid; a path that is no regular file, or
/// cannot be read, refuses to start. Every refusal names the flag and the path.
fn load(store: &MemoryStore, path: &Path, bounds: LoadBounds, discard: bool) -> anyhow::Result<()> {
    warn_if_open_to_others(path);
    match store.load_path_with(path, bounds) {
        Ok(None) => {
            tracing::info!(path = %path.display(), "no memory snapshot yet: starting empty");
            Ok(())
        }
        Ok(Some(r)) => {
            tracing::info!(
                path = %path.display(), keys = r.keys, records = r.records,
                expired_records = r.expired_records, "memory snapshot loaded"
            );
            if r.refused_keys > 0 {
                tracing::warn!(
                    refused_keys = r.refused_keys,
                    refused_records = r.refused_records,
                    "memory snapshot holds more than --memory-key-cap/--memory-limit allow: \
                     these keys start with an empty log"
                );
            }
            Ok(())
        }
        Err(e) if e.source.is_invalid() && discard => discard_invalid(&e),
        Err(
            e @ SnapshotFileError {
                source: SnapshotError::TooLarge { .. },
                ..
            },
        ) => bail!(
            "--memory-snapshot: {}; refusing to start: raise --memory-limit, move the file \
             away, or start empty with --memory-snapshot-discard-invalid (which keeps it as \
             {}.invalid)",
            e.with_causes(),
            e.path.display()
        ),
        // The file's message leaves the cause to its source: with_causes() says both.
        Err(e) if e.source.is_invalid() => bail!(
            "--memory-snapshot: {}; refusing to start: move the file away, or start empty with \
             --memory-snapshot-discard-invalid (which keeps it as {}.invalid)",
            e.with_causes(),
            e.path.display()
        ),
        Err(
            e @ SnapshotFileError {
                source: SnapshotError::NotAFile { .. },
                ..
            },
        ) => bail!(
            "--memory-snapshot: {}; refusing to start: a snapshot is a regular file \
             (or nothing yet, to start empty)",
            e.with_causes()
        ),
        Err(e) => bail!("--memory-snapshot: {}; refusing to start", e.with_causes()),
    }
}

/// Warns when others than the file's owner may read or write the snapshot:
/// whoever can write it decides what the limits start from.
fn warn_if_open_to_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if meta.is_file() && mode & 0o077 != 0 {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:o}"),
            "memory snapshot is open to other users: it holds the keys and is trusted \
             to say what the limits start from (the next write makes it 0600)"
        );
    }
}

fn discard_invalid(e: &SnapshotFileError) -> anyhow::Result<()> {
    let mut aside = e.path.clone().into_os_string();
    aside.push(".invalid");
    let aside = PathBuf::from(aside);
    if let Err(rename) = std::fs::rename(&e.path, &aside) {
        bail!(
            "{}; --memory-snapshot-discard-invalid could not move it to {}: {rename}",
            e.with_causes(),
            aside.display()
        );
    }
    tracing::warn!(
        error = %e.with_causes(), kept_as = %aside.display(),
        "invalid memory snapshot discarded (--memory-snapshot-discard-invalid): starting with an empty store"
    );
    Ok(())
}

impl Writer {
    /// Writes every `interval` until `stopped`; hands itself back for the last write.
    async fn every(mut self, interval: Duration, mut stopped: oneshot::Receiver<()>) -> Self {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = &mut stopped => return self,
                _ = tick.tick() => {
                    self.write().await;
                }
            }
        }
    }

    /// One write on a blocking thread; its outcome goes to the metrics and,
    /// when it starts or stops failing, to the log.
    async fn write(&mut self) -> Option<SaveReport> {
        let (store, path) = (self.store.clone(), self.path.clone());
        let result = tokio::task::spawn_blocking(move || store.save_path(&path)).await;
        match result {
            Ok(Ok(report)) => {
                if self.failing {
                    tracing::info!(path = %self.path.display(), "memory snapshots written again");
                }
                self.succeeded(&report);
                Some(report)
            }
            Ok(Err(e)) => {
                self.failed(&e.with_causes());
                None
            }
            Err(join) => {
                self.failed(&join);
                None
            }
        }
    }

    fn succeeded(&mut self, report: &SaveReport) {
        self.failing = false;
        self.last_success = Instant::now();
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.metrics.with_recorder(|| {
            gauge!(LAST_SUCCESS).set(unix.as_secs_f64());
            gauge!(AGE).set(0.0);
            gauge!(DURATION).set(report.duration.as_secs_f64());
            gauge!(BYTES).set(report.bytes as f64);
            gauge!(LOCK_HOLD).set(report.longest_lock_hold.as_secs_f64());
        });
    }

    fn failed(&mut self, error: &dyn std::fmt::Display) {
        if !self.failing {
            tracing::error!(error = %error, "memory snapshot not written; retrying every interval");
        }
        self.failing = true;
        let age = self.last_success.elapsed().as_secs_f64();
        self.metrics.with_recorder(|| {
            counter!(FAILURES).increment(1);
            gauge!(AGE).set(age);
        });
    }
}

fn describe(metrics: &Metrics) {
    use metrics::{Unit, describe_counter, describe_gauge};
    metrics.with_recorder(|| {
        describe_gauge!(
            LAST_SUCCESS,
            Unit::Seconds,
            "Unix time of the last memory snapshot written."
        );
        describe_gauge!(
            AGE,
            Unit::Seconds,
            "Seconds since the last memory snapshot written, as of the last attempt."
        );
        describe_gauge!(
            DURATION,
            Unit::Seconds,
            "Time the last memory snapshot took, file sync included."
        );
        describe_gauge!(BYTES, Unit::Bytes, "Size of the last memory snapshot.");
        describe_gauge!(
            LOCK_HOLD,
            Unit::Seconds,
            "Longest a shard lock was held to copy the last memory snapshot."
        );
        describe_counter!(FAILURES, "Memory snapshots that could not be written.");
        counter!(FAILURES).increment(0);
    });
}
