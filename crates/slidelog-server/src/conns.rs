//! Connection hygiene shared by both ports: idle or hostile clients cannot
//! lock anyone out.
//!
//! - A cap on open connections (HTTP and gRPC together) below the process's
//!   file descriptor limit, so that the store, the config watcher and new
//!   clients always find a descriptor ([`default_max_connections`]).
//! - At the cap, a new client is served by closing the connection that has
//!   been quiet (sent nothing) the longest, if it has been quiet for at
//!   least [`EVICTABLE_AFTER`]; only when every connection is active is the
//!   new one refused. 1,000 connections that send nothing therefore never
//!   keep a real client out.
//! - A connection that sends nothing for its port's idle timeout is closed
//!   (a sweep every second), whatever state it is in.
//! - `accept` failing (EMFILE: the descriptor limit was reached anyway) is
//!   logged once per episode, and frees a descriptor by closing the
//!   quietest connection, rather than spinning or giving up.
//!
//! Every accepted socket is wrapped in a [`TrackedIo`] that records when it
//! last received bytes and can be closed from outside (its reads end, its
//! writes fail, and the HTTP or gRPC server drops it).

use futures::task::AtomicWaker;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::Connected;

/// A connection quiet for less than this is never closed to make room.
pub const EVICTABLE_AFTER: Duration = Duration::from_millis(500);

/// Descriptors kept free for everything but client connections, at least.
pub const MIN_HEADROOM: usize = 64;

/// The soft limit on open file descriptors (`RLIMIT_NOFILE`), read from
/// `/proc/self/limits`; `None` where that cannot be read.
pub fn nofile_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line["Max open files".len()..].split_whitespace().next()?;
    soft.parse().ok()
}

/// The default connection cap: the descriptor limit less an eighth of it
/// (at least [`MIN_HEADROOM`]) for the store, files and new clients, at most
/// 10,000; 1,000 when the limit is unknown.
pub fn default_max_connections() -> usize {
    match nofile_limit() {
        Some(n) => n.saturating_sub((n / 8).max(MIN_HEADROOM)).clamp(1, 10_000),
        None => 1_000,
    }
}

/// State of one tracked connection, shared with its [`TrackedIo`].
#[derive(Debug)]
struct ConnState {
    port: &'static str,
    /// Last time bytes arrived, in ms since the tracker's epoch.
    last_read_ms: AtomicU64,
    closed: AtomicBool,
    /// Set at shutdown: the connection's server is to finish the request in
    /// flight and close (see [`Drain`]).
    draining: AtomicBool,
    /// The waker of the task reading the connection (registered by its
    /// reads, see `TrackedIo::poll_read`): wakes it to close, or to see
    /// `draining`.
    waker: AtomicWaker,
}

impl ConnState {
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.waker.wake();
    }

    fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        self.waker.wake();
    }
}

/// The open connections of both ports (see the module docs). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Conns {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    max: usize,
    epoch: Instant,
    next_id: AtomicU64,
    open: AtomicUsize,
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    /// Counters for logs and tests.
    evicted: AtomicU64,
    refused: AtomicU64,
    idle_closed: AtomicU64,
    accept_failing: AtomicBool,
}

impl Conns {
    /// A tracker that holds at most `max` connections (at least 1).
    pub fn new(max: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                max: max.max(1),
                epoch: Instant::now(),
                next_id: AtomicU64::new(0),
                open: AtomicUsize::new(0),
                conns: Mutex::new(HashMap::new()),
                evicted: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                idle_closed: AtomicU64::new(0),
                accept_failing: AtomicBool::new(false),
            }),
        }
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::Relaxed)
    }

    /// Connections closed to make room for a new one so far.
    pub fn evicted(&self) -> u64 {
        self.inner.evicted.load(Ordering::Relaxed)
    }

    /// New connections refused because every open one was active.
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        self.inner.epoch.elapsed().as_millis() as u64
    }

    /// Takes `tcp` in, making room at the cap; `None` when it is refused.
    pub fn admit<T>(&self, io: T, port: &'static str) -> Option<TrackedIo<T>> {
        if self.open() >= self.inner.max && !self.close_quietest(EVICTABLE_AFTER) {
            self.inner.refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                port,
                max = self.inner.max,
                "connection refused: every connection is active"
            );
            return None;
        }
        let state = Arc::new(ConnState {
            port,
            last_read_ms: AtomicU64::new(self.now_ms()),
            closed: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        });
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.inner.conns.lock().insert(id, state.clone());
        self.inner.open.fetch_add(1, Ordering::Relaxed);
        Some(TrackedIo {
            io,
            id,
            state,
            conns: self.clone(),
            registered: None,
        })
    }

    /// Closes the connection quiet the longest, if quiet for `at_least`;
    /// false when there is none.
    fn close_quietest(&self, at_least: Duration) -> bool {
        let (now, at_least) = (self.now_ms(), at_least.as_millis() as u64);
        let quietest = self
            .inner
            .conns
            .lock()
            .values()
            .filter(|c| !c.closed.load(Ordering::Acquire))
            .filter(|c| now.saturating_sub(c.last_read_ms.load(Ordering::Relaxed)) >= at_least)
            .min_by_key(|c| c.last_read_ms.load(Ordering::Relaxed))
            .cloned();
        match quietest {
            Some(c) => {
                c.close();
                self.inner.evicted.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Closes every connection of `port` quiet for longer than `idle`.
    fn close_idle(&self, port: &'static str, idle: Duration) {
        let (now, idle) = (self.now_ms(), idle.as_millis() as u64);
        for c in self.inner.conns.lock().values() {
            if c.port == port
                && now.saturating_sub(c.last_read_ms.load(Ordering::Relaxed)) > idle
                && !c.closed.load(Ordering::Acquire)
            {
                c.close();
                self.inner.idle_closed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Asks every open connection of `port` to finish the request in flight
    /// and close (graceful shutdown; see [`Drain`]). Connections admitted
    /// later are not asked: call it once no more are accepted.
    pub fn drain(&self, port: &'static str) {
        for c in self.inner.conns.lock().values() {
            if c.port == port {
                c.drain();
            }
        }
    }

    /// Every second, closes the connections of `port` idle for longer than
    /// `idle`, until `stop` completes.
    pub fn spawn_idle_sweep(
        &self,
        port: &'static str,
        idle: Duration,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let conns = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1).min(idle));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tokio::pin!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => return,
                    _ = tick.tick() => conns.close_idle(port, idle),
                }
            }
        });
    }

    /// Accepts the next connection that is admitted. A failing `accept`
    /// (EMFILE, ENFILE, …) is logged once until it works again; the
    /// quietest connection is closed to free a descriptor, then it retries.
    pub async fn accept(&self, listener: &TcpListener, port: &'static str) -> TrackedIo<TcpStream> {
        loop {
            match listener.accept().await {
                Ok((tcp, _)) => {
                    if self.inner.accept_failing.swap(false, Ordering::Relaxed) {
                        tracing::info!(port, "accepting connections again");
                    }
                    if let Err(e) = tcp.set_nodelay(true) {
                        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                    }
                    if let Some(io) = self.admit(tcp, port) {
                        return io;
                    }
                }
                Err(e) => {
                    if !self.inner.accept_failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            port,
                            error = %e,
                            open = self.open(),
                            max = self.inner.max,
                            "cannot accept connections; closing the quietest to free a descriptor (logged once until it works again)"
                        );
                    }
                    self.close_quietest(Duration::ZERO);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// An accepted socket whose activity is tracked and which [`Conns`] can
/// close: after that, reads end (EOF) and writes fail.
#[derive(Debug)]
pub struct TrackedIo<T> {
    io: T,
    id: u64,
    state: Arc<ConnState>,
    conns: Conns,
    /// The waker last put into `state.waker`, while it is there (see
    /// `poll_read`).
    registered: Option<Waker>,
}

impl TrackedIo<TcpStream> {
    /// The address of the connection's peer (for the admin guard's
    /// loopback rule, `crate::auth::admin`).
    pub fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        self.io.peer_addr().ok()
    }
}

impl<T> TrackedIo<T> {
    /// The connection's drain request, for the task that serves it.
    pub fn drain_signal(&self) -> Drain {
        Drain(self.state.clone())
    }
}

/// Whether [`Conns::drain`] has asked a connection to finish and close.
///
/// The task serving the connection checks it each time it is polled (one
/// atomic load): [`Conns::drain`] wakes the waker the connection's last read
/// registered, which is that task's. This replaces a shutdown channel polled
/// on every wake-up of every connection (hyper-util's graceful wrapper: a
/// `watch` receiver's `changed()` future re-polled for every request).
#[derive(Debug, Clone)]
pub struct Drain(Arc<ConnState>);

impl Drain {
    /// True once the connection is to finish and close.
    pub fn is_set(&self) -> bool {
        self.0.draining.load(Ordering::Acquire)
    }
}

impl<T> Drop for TrackedIo<T> {
    fn drop(&mut self) {
        self.conns.inner.conns.lock().remove(&self.id);
        self.conns.inner.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TrackedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // The waker is registered again only when it changed or once the
        // connection is draining: `AtomicWaker::register` is two locked
        // compare-exchanges per read, and the waker of a connection's task
        // never changes. The one registered stays in `state.waker` until
        // `close` or `drain` takes it to wake it, each after setting its
        // flag: a read that sees neither flag set still has its waker there
        // (or has been woken already, and is polled again to see the flag).
        // After a drain, reads register every time, for a later `close`.
        let same = (self.registered.as_ref()).is_some_and(|w| w.will_wake(cx.waker()));
        if !same {
            self.registered = Some(cx.waker().clone());
        }
        if !same || self.state.draining.load(Ordering::Acquire) {
            self.state.waker.register(cx.waker());
        }
        if self.state.closed.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let now = self.conns.now_ms();
            self.state.last_read_ms.store(now, Ordering::Relaxed);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TrackedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.state.closed.load(Ordering::Acquire) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl Connected for TrackedIo<TcpStream> {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_headroom_below_the_descriptor_limit() {
        let limit = nofile_limit().expect("/proc/self/limits");
        let max = default_max_connections();
        assert!(
            max + MIN_HEADROOM <= limit.max(MIN_HEADROOM + 1),
            "{max} of {limit}"
        );
    }

    #[tokio::test]
    async fn at_the_cap_the_quietest_connection_makes_room() {
        let conns = Conns::new(2);
        let a = conns.admit((), "http").unwrap();
        let _b = conns.admit((), "http").unwrap();
        // Too fresh to evict: refused.
        assert!(conns.admit((), "http").is_none());
        assert_eq!(conns.refused(), 1);
        tokio::time::sleep(EVICTABLE_AFTER + Duration::from_millis(50)).await;
        a.state.last_read_ms.store(0, Ordering::Relaxed);
        _b.state
            .last_read_ms
            .store(conns.now_ms(), Ordering::Relaxed);
        let _c = conns.admit((), "http").expect("room made");
        assert!(a.state.closed.load(Ordering::Acquire));
        assert_eq!(conns.evicted(), 1);
    }

    /// Counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl futures::task::ArcWake for Wakes {
        fn wake_by_ref(this: &Arc<Self>) {
            this.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads with `waker` until pending; true when the read ended (EOF).
    fn read(io: &mut TrackedIo<tokio::io::DuplexStream>, waker: &Waker) -> bool {
        let mut cx = Context::from_waker(waker);
        let mut bytes = [0u8; 16];
        loop {
            let mut buf = ReadBuf::new(&mut bytes);
            match Pin::new(&mut *io).poll_read(&mut cx, &mut buf) {
                Poll::Pending => return false,
                Poll::Ready(result) => {
                    result.unwrap();
                    if buf.filled().is_empty() {
                        return true;
                    }
                }
            }
        }
    }

    /// Reads that skip registering an unchanged waker still leave it to be
    /// woken by a drain, then by a close after the drain; a new waker is
    /// the one woken.
    #[tokio::test]
    async fn drain_and_close_wake_the_task_that_reads_last() {
        let conns = Conns::new(4);
        let (mut client, server) = tokio::io::duplex(64);
        let mut io = conns.admit(server, "http").unwrap();
        let (first, second) = (Arc::new(Wakes::default()), Arc::new(Wakes::default()));
        let (first_waker, second_waker) = (
            futures::task::waker(first.clone()),
            futures::task::waker(second.clone()),
        );
        for _ in 0..3 {
            tokio::io::AsyncWriteExt::write_all(&mut client, b"GET")
                .await
                .unwrap();
            assert!(!read(&mut io, &first_waker));
        }
        assert!(!read(&mut io, &second_waker));
        assert!(!read(&mut io, &second_waker));
        // (The duplex stream wakes its reader on a write: counted apart.)
        let wakes = |w: &Arc<Wakes>| w.0.load(Ordering::Relaxed);
        let before = (wakes(&first), wakes(&second));
        conns.drain("http");
        assert_eq!((wakes(&first), wakes(&second)), (before.0, before.1 + 1));
        assert!(io.drain_signal().is_set());
        // Draining: each read registers again, for the close to come.
        assert!(!read(&mut io, &second_waker));
        assert!(!read(&mut io, &second_waker));
        assert!(conns.close_quietest(Duration::ZERO));
        assert_eq!((wakes(&first), wakes(&second)), (before.0, before.1 + 2));
        assert!(
            read(&mut io, &second_waker),
            "a closed connection's read ends"
        );
    }
}
