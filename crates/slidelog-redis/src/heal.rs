//! Replacing a silent connection. A black-holed TCP connection (a dead NAT
//! or conntrack entry, a frozen VM, a proxy that lost its upstream) never
//! reports an error: every call just times out, and redis-rs reconnects only
//! on errors that say the connection dropped. So a call that is abandoned
//! (its future dropped by the store's per-call timeout) or that times out
//! makes the connection *suspect*: one probe at a time sends `PING` on it,
//! and when no answer comes within the probe timeout the connection is
//! replaced by a fresh one. A slow but live Redis answers the probe and
//! keeps its connection; a stopped one gets a new connection that works as
//! soon as it runs again.
//!
//! - [`Watch`]: a drop guard that reports a call that never completed.
//! - [`Healing`]: any redis-rs connection plus a way to make a new one; the
//!   standalone store uses it over a `ConnectionManager` and the cluster
//!   store over a cluster connection (probing every primary).

use futures::future::BoxFuture;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Calls `on_abandon` when dropped before [`Watch::done`]: the call it
/// watches was cancelled (timed out by its caller) or panicked.
pub struct Watch<F: FnOnce()> {
    on_abandon: Option<F>,
}

impl<F: FnOnce()> Watch<F> {
    /// Starts watching one call.
    pub fn new(on_abandon: F) -> Self {
        Self {
            on_abandon: Some(on_abandon),
        }
    }

    /// The call completed (with any result): nothing to report.
    pub fn done(mut self) {
        self.on_abandon = None;
    }
}

impl<F: FnOnce()> Drop for Watch<F> {
    fn drop(&mut self) {
        if let Some(f) = self.on_abandon.take() {
            f();
        }
    }
}

/// True for a result that says the call got no answer in time.
pub fn timed_out<T>(result: &RedisResult<T>) -> bool {
    matches!(result, Err(e) if e.is_timeout())
}

/// Checks that a connection answers: `Ok` when it does within the probe
/// timeout (the caller bounds it).
pub type Probe<C> = Arc<dyn Fn(C) -> BoxFuture<'static, RedisResult<()>> + Send + Sync>;

/// Makes a fresh connection (lazily connecting), or `None` when it cannot.
pub type Maker<C> = Arc<dyn Fn() -> Option<C> + Send + Sync>;

/// A connection that is replaced when it falls silent (see the module docs).
/// Cheap to clone; clones share the connection.
pub struct Healing<C> {
    shared: Arc<Shared<C>>,
}

impl<C> Clone for Healing<C> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<C> {
    /// The connection in use and its epoch (bumped by each replacement).
    current: Mutex<(u64, C)>,
    make: Maker<C>,
    probe: Probe<C>,
    probe_timeout: Duration,
    probing: AtomicBool,
    replacements: AtomicU64,
    kind: &'static str,
}

impl<C> std::fmt::Debug for Healing<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Healing")
            .field("kind", &self.shared.kind)
            .field("probe_timeout", &self.shared.probe_timeout)
            .field(
                "replacements",
                &self.shared.replacements.load(Ordering::Relaxed),
            )
            .finish_non_exhaustive()
    }
}

/// A probe that sends `PING` over the connection itself.
pub fn ping_probe<C: ConnectionLike + Send + 'static>() -> Probe<C> {
    Arc::new(|mut conn: C| {
        Box::pin(async move {
            redis::cmd("PING").query_async::<String>(&mut conn).await?;
            Ok(())
        })
    })
}

impl<C> Healing<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Wraps `conn`; `make` builds its replacement, `probe` checks it answers
    /// (bounded by `probe_timeout`); `kind` names the store in logs.
    pub fn new(
        conn: C,
        make: Maker<C>,
        probe: Probe<C>,
        probe_timeout: Duration,
        kind: &'static str,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                current: Mutex::new((0, conn)),
                make,
                probe,
                probe_timeout,
                probing: AtomicBool::new(false),
                replacements: AtomicU64::new(0),
                kind,
            }),
        }
    }

    /// How many times a silent connection was replaced.
    pub fn replacements(&self) -> u64 {
        self.shared.replacements.load(Ordering::Relaxed)
    }

    /// The connection in use now (shares it).
    pub fn current(&self) -> C {
        self.current_with_epoch().1
    }

    fn current_with_epoch(&self) -> (u64, C) {
        let cur = lock(&self.shared.current);
        (cur.0, cur.1.clone())
    }

    /// The call on the connection of `epoch` got no answer: probe it, unless
    /// a probe is already running or it was replaced already.
    pub fn suspect(&self, epoch: u64) {
        if self.shared.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.shared.probing.store(false, Ordering::Release);
            return;
        };
        let shared = self.shared.clone();
        runtime.spawn(async move {
            probe_and_replace(&shared, epoch).await;
            shared.probing.store(false, Ordering::Release);
        });
    }

    /// After a call on the connection of `epoch`: a timeout makes it suspect.
    fn finish<T>(&self, epoch: u64, result: &RedisResult<T>) {
        if timed_out(result) {
            self.suspect(epoch);
        }
    }
}

async fn probe_and_replace<C>(shared: &Shared<C>, epoch: u64)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let conn = {
        let cur = lock(&shared.current);
        if cur.0 != epoch {
            return;
        }
        cur.1.clone()
    };
    let answered = matches!(
        tokio::time::timeout(shared.probe_timeout, (shared.probe)(conn)).await,
        Ok(Ok(()))
    );
    if answered {
        return;
    }
    let Some(fresh) = (shared.make)() else {
        return;
    };
    let mut cur = lock(&shared.current);
    if cur.0 == epoch {
        *cur = (epoch + 1, fresh);
        shared.replacements.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            store = shared.kind,
            probe_timeout = ?shared.probe_timeout,
            "Redis connection silent (a call got no answer and neither did a PING): replaced it"
        );
    }
}

impl<C> ConnectionLike for Healing<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (epoch, mut conn) = self.current_with_epoch();
            let watch = Watch::new(|| self.suspect(epoch));
            let result = conn.req_packed_command(cmd).await;
            watch.done();
            self.finish(epoch, &result);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (epoch, mut conn) = self.current_with_epoch();
            let watch = Watch::new(|| self.suspect(epoch));
            let result = conn.req_packed_commands(cmd, offset, count).await;
            watch.done();
            self.finish(epoch, &result);
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.current().get_db()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
