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
//! - [`Healing`]: any redis-rs connection plus a way to make a new one: the
//!   one healing mechanism of every store. The standalone store uses it over
//!   a `ConnectionManager`, the cluster store over a cluster connection
//!   (probing every primary), the Sentinel store over a link to the master
//!   the sentinels name (which also replaces it at once, without a probe,
//!   when it drops or its server was demoted: [`Healing::replace`]).

use futures::future::BoxFuture;
use parking_lot::Mutex;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

    /// The connection in use now and its epoch (bumped by each replacement).
    pub fn current_with_epoch(&self) -> (u64, C) {
        let cur = self.shared.current.lock();
        (cur.0, cur.1.clone())
    }

    /// The connection of `epoch` failed in a way that no probe needs to
    /// confirm (it dropped, or its server now refuses writes): replace it
    /// now, unless it was replaced already. True when this call replaced it.
    pub fn replace(&self, epoch: u64) -> bool {
        replace(&self.shared, epoch)
    }

    /// Sends `cmd` on the connection in use, watched (a call that gets no
    /// answer makes it suspect); returns the epoch it was sent on and the
    /// result, so that the caller can [`Healing::replace`] that connection.
    pub async fn call(&self, cmd: &Cmd) -> (u64, RedisResult<Value>) {
        let (epoch, mut conn) = self.current_with_epoch();
        let watch = Watch::new(|| self.suspect(epoch));
        let result = conn.req_packed_command(cmd).await;
        watch.done();
        self.finish(epoch, &result);
        (epoch, result)
    }

    /// [`Healing::call`] for a pipeline.
    pub async fn call_pipeline(
        &self,
        cmd: &Pipeline,
        offset: usize,
        count: usize,
    ) -> (u64, RedisResult<Vec<Value>>) {
        let (epoch, mut conn) = self.current_with_epoch();
        let watch = Watch::new(|| self.suspect(epoch));
        let result = conn.req_packed_commands(cmd, offset, count).await;
        watch.done();
        self.finish(epoch, &result);
        (epoch, result)
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
        let cur = shared.current.lock();
        if cur.0 != epoch {
            return;
        }
        cur.1.clone()
    };
    let answered = matches!(
        tokio::time::timeout(shared.probe_timeout, (shared.probe)(conn)).await,
        Ok(Ok(()))
    );
    if !answered && replace(shared, epoch) {
        tracing::warn!(
            store = shared.kind,
            probe_timeout = ?shared.probe_timeout,
            "Redis connection silent (a call got no answer and neither did a PING): replaced it"
        );
    }
}

/// Puts a fresh connection in place of the one of `epoch`, if that one is
/// still in use; true when it did.
fn replace<C>(shared: &Shared<C>, epoch: u64) -> bool {
    if shared.current.lock().0 != epoch {
        return false;
    }
    let Some(fresh) = (shared.make)() else {
        return false;
    };
    let mut cur = shared.current.lock();
    if cur.0 != epoch {
        return false;
    }
    *cur = (epoch + 1, fresh);
    shared.replacements.fetch_add(1, Ordering::Relaxed);
    true
}

impl<C> ConnectionLike for Healing<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move { self.call(cmd).await.1 })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move { self.call_pipeline(cmd, offset, count).await.1 })
    }

    fn get_db(&self) -> i64 {
        self.current().get_db()
    }
}
