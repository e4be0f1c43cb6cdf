//! Running the service: serve a router on a bound listener until the shutdown
//! signal, then stop accepting, let in-flight requests finish, and give up on
//! them after a grace period so that the process always exits in time.
//!
//! Both ports share one [`Conns`] (connection cap with eviction of quiet
//! connections, idle timeouts; see [`crate::conns`]). HTTP adds a
//! header-read timeout; gRPC caps concurrent HTTP/2 streams per connection
//! and sends keep-alive pings, closing a connection whose peer stops
//! answering them. With TLS ([`crate::tls`]) each connection's handshake
//! runs on its own task before it is served.

use crate::conns::{Conns, Drain, default_max_connections};
use crate::http::Api;
use crate::shutdown::Shutdown;
use crate::tls::{Port, Tls};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// Default time in-flight requests get after the shutdown signal.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// Default time a client gets to send a request's headers (which is also
/// how long a kept-alive connection may wait for its next request).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time an HTTP connection may send nothing before it is closed.
pub const DEFAULT_HTTP_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time a gRPC connection may send nothing (keep-alive ping
/// answers count) before it is closed.
pub const DEFAULT_GRPC_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default cap on concurrent HTTP/2 streams of one gRPC connection (the
/// Envoy crate's `serve_grpc` uses the same).
pub const DEFAULT_GRPC_MAX_STREAMS: u32 = slidelog_envoy::service::GRPC_MAX_STREAMS;
/// Default interval of the gRPC server's HTTP/2 keep-alive pings.
pub const DEFAULT_GRPC_KEEPALIVE_INTERVAL: Duration = slidelog_envoy::service::GRPC_KEEPALIVE.0;
/// Default time a ping may go unanswered before the connection is closed.
pub const DEFAULT_GRPC_KEEPALIVE_TIMEOUT: Duration = slidelog_envoy::service::GRPC_KEEPALIVE.1;

/// How a server run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every in-flight request finished within the grace period.
    Drained,
    /// The grace period ran out with requests still in flight; they were dropped.
    GraceExpired,
}

/// Connection limits of both ports (flags of `serve`).
#[derive(Debug, Clone)]
pub struct Hygiene {
    /// The connections of both ports, with their cap.
    pub conns: Conns,
    /// Time to receive an HTTP request's headers.
    pub header_timeout: Duration,
    /// An HTTP connection that sends nothing this long is closed.
    pub http_idle_timeout: Duration,
    /// A gRPC connection that sends nothing this long is closed.
    pub grpc_idle_timeout: Duration,
    /// Concurrent HTTP/2 streams per gRPC connection.
    pub grpc_max_streams: u32,
    /// Interval of gRPC keep-alive pings.
    pub grpc_keepalive_interval: Duration,
    /// Time a keep-alive ping may go unanswered.
    pub grpc_keepalive_timeout: Duration,
    /// TLS of both ports (`--tls-cert`); none: plain TCP.
    pub tls: Option<crate::tls::Tls>,
    /// Client tokens of gRPC calls (`--api-token-file`); HTTP's are the
    /// router's ([`Api::with_auth`]).
    pub auth: Option<crate::auth::Auth>,
}

impl Default for Hygiene {
    fn default() -> Self {
        Self {
            conns: Conns::new(default_max_connections()),
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            http_idle_timeout: DEFAULT_HTTP_IDLE_TIMEOUT,
            grpc_idle_timeout: DEFAULT_GRPC_IDLE_TIMEOUT,
            grpc_max_streams: DEFAULT_GRPC_MAX_STREAMS,
            grpc_keepalive_interval: DEFAULT_GRPC_KEEPALIVE_INTERVAL,
            grpc_keepalive_timeout: DEFAULT_GRPC_KEEPALIVE_TIMEOUT,
            tls: None,
            auth: None,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` fires; then finishes the
/// requests in flight for at most `grace`. Default connection limits. A
/// panic in the router is answered 500 ([`Api`]).
///
/// Tests bind `127.0.0.1:0` and read the port from the listener first.
pub async fn serve_http(
    listener: TcpListener,
    router: impl Into<Api>,
    shutdown: Shutdown,
    grace: Duration,
) -> io::Result<Stopped> {
    serve_http_with(listener, router, shutdown, grace, &Hygiene::default()).await
}

/// [`serve_http`] with the given connection limits.
pub async fn serve_http_with(
    listener: TcpListener,
    router: impl Into<Api>,
    shutdown: Shutdown,
    grace: Duration,
    hygiene: &Hygiene,
) -> io::Result<Stopped> {
    let router = router.into();
    let conns = hygiene.conns.clone();
    conns.spawn_idle_sweep("http", hygiene.http_idle_timeout, shutdown.clone().wait());
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().header_read_timeout(hygiene.header_timeout);
    let tls = hygiene.tls.clone().map(|tls| (tls, Port::Http));
    let connector = HttpConnector { router, builder };
    let live = serve_connections(listener, &conns, ("http", tls), shutdown, connector).await;
    // In-flight requests get `grace`, then each connection closes (at once
    // when it is between requests).
    tokio::select! {
        () = live.closed() => Ok(Stopped::Drained),
        () = tokio::time::sleep(grace) => {
            tracing::warn!(grace = ?grace, "grace period over: dropping requests still in flight");
            Ok(Stopped::GraceExpired)
        }
    }
}

/// What serves a port's connections: hyper's connection over an accepted
/// stream, plain or TLS. A method generic over the stream rather than a
/// closure over one type: a plain connection is served over the socket
/// itself, as without TLS, not through an enum of both streams (a branch
/// in every read and write). Measured with scripts/bench/service_callgrind.sh
/// (plain HTTP check, no TLS flag): +100 to +150 instructions per request
/// of ~29,500, partly the API's token field (cloned and dropped with the
/// service for each request), mostly hyper's dispatcher and serde inlined
/// differently once hyper's code is also compiled for TLS streams (a build
/// without the TLS instantiation measured as before).
trait Connector: Clone + Send + 'static {
    /// hyper's connection serving `io`.
    fn connect<IO>(
        &self,
        io: IO,
        peer: Option<std::net::SocketAddr>,
    ) -> impl GracefulConnection<Error: std::fmt::Display + Send> + Send + 'static
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static;
}

/// The HTTP port's connections: HTTP/1.1 or HTTP/2, the API's router.
#[derive(Clone)]
struct HttpConnector {
    router: Api,
    builder: Builder<TokioExecutor>,
}

impl Connector for HttpConnector {
    fn connect<IO>(
        &self,
        io: IO,
        peer: Option<std::net::SocketAddr>,
    ) -> impl GracefulConnection<Error: std::fmt::Display + Send> + Send + 'static
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = TowerToHyperService::new(self.router.for_peer(peer));
        // The header-read timeout on a timer of the connection's own.
        let mut builder = self.builder.clone();
        builder.http1().timer(HeaderTimer::default());
        builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned()
    }
}

/// The gRPC port's connections: HTTP/2 only, the rate limit service.
#[derive(Clone)]
struct GrpcConnector<S> {
    service: S,
    builder: Builder<TokioExecutor>,
}

impl<S> Connector for GrpcConnector<S>
where
    S: tower::Service<
            axum::http::Request<hyper::body::Incoming>,
            Response = axum::http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    fn connect<IO>(
        &self,
        io: IO,
        _peer: Option<std::net::SocketAddr>,
    ) -> impl GracefulConnection<Error: std::fmt::Display + Send> + Send + 'static
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let service = TowerToHyperService::new(self.service.clone());
        self.builder
            .serve_connection(TokioIo::new(io), service)
            .into_owned()
    }
}

/// The accept loop of both ports: serves each connection `connector` makes
/// of an accepted one (after its TLS handshake, when `tls` is given, on
/// the connection's task), on a task of its own, until `shutdown` fires; then
/// stops accepting (the listener is dropped) and asks the port's
/// connections to finish (`Conns::drain`: each closes after its request or
/// streams in flight). Returns a sender whose `closed()` completes once
/// every connection has ended (each task holds a receiver; nothing is ever
/// sent).
async fn serve_connections(
    listener: TcpListener,
    conns: &Conns,
    (port, tls): (&'static str, Option<(Tls, Port)>),
    shutdown: Shutdown,
    connector: impl Connector,
) -> tokio::sync::watch::Sender<()> {
    let (live, _) = tokio::sync::watch::channel(());
    let stop = shutdown.wait();
    tokio::pin!(stop);
    loop {
        let io = tokio::select! {
            () = &mut stop => break,
            io = conns.accept(&listener, port) => io,
        };
        let drain = io.drain_signal();
        let peer = io.peer_addr();
        let alive = live.subscribe();
        let Some((tls, tls_port)) = &tls else {
            let conn = connector.connect(io, peer);
            tokio::spawn(async move {
                if let Err(e) = until_drained(conn, drain).await {
                    tracing::debug!(error = %e, port, "connection ended with an error");
                }
                drop(alive);
            });
            continue;
        };
        // The handshake on the connection's own task: a slow client does
        // not hold up the accept loop.
        let (tls, tls_port, connector) = (tls.clone(), *tls_port, connector.clone());
        tokio::spawn(async move {
            if let Some(io) = tls.accept(io, tls_port).await
                && let Err(e) = until_drained(connector.connect(io, peer), drain).await
            {
                tracing::debug!(error = %e, port, "connection ended with an error");
            }
            drop(alive);
        });
    }
    drop(listener);
    conns.drain(port);
    live
}

/// Serves `conn` to its end, asking it to finish the request in flight and
/// close once `drain` is set (what hyper-util's `GracefulShutdown::watch`
/// does with a `watch` channel it polls whenever the connection is).
async fn until_drained<C: GracefulConnection>(conn: C, drain: Drain) -> Result<(), C::Error> {
    let mut conn = std::pin::pin!(conn);
    let mut asked = false;
    std::future::poll_fn(move |cx| {
        loop {
            if !asked && drain.is_set() {
                asked = true;
                conn.as_mut().graceful_shutdown();
            }
            match conn.as_mut().poll(cx) {
                // Set while the connection was polled, maybe before its read
                // registered the waker that `Conns::drain` wakes: ask now.
                Poll::Pending if !asked && drain.is_set() => {}
                polled => return polled,
            }
        }
    })
    .await
}

/// hyper's timer of one HTTP/1 connection, for its header-read timeout.
///
/// hyper asks for a new sleep for every request's head (and drops it once
/// the head is read): with `TokioTimer` each one is a new tokio `Sleep`,
/// inserted into the timer wheel and removed again for every request (~3% of
/// serve's CPU under wrk). Here the connection's sleeps share one tokio
/// `Sleep`, moved only when it fires before a later deadline: a request's
/// sleep is ready exactly when its own deadline passes, as before (the same
/// bound; tests/hygiene.rs's slowloris test), and the wheel sees one
/// insertion per connection and header timeout rather than per request.
#[derive(Clone, Default)]
struct HeaderTimer(Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>);

impl hyper::rt::Timer for HeaderTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HeaderDeadline {
            deadline: tokio::time::Instant::from_std(deadline),
            shared: Arc::clone(&self.0),
        })
    }
}

/// One request head's deadline on its connection's shared `Sleep`.
struct HeaderDeadline {
    deadline: tokio::time::Instant,
    shared: Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>,
}

impl Future for HeaderDeadline {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let sleep = shared.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.deadline() > deadline {
            sleep.as_mut().reset(deadline);
        }
        loop {
            match sleep.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                // Fired at or after this deadline: this deadline has passed.
                Poll::Ready(()) if sleep.deadline() >= deadline => return Poll::Ready(()),
                // An earlier request's deadline: wait on to this one.
                Poll::Ready(()) => sleep.as_mut().reset(deadline),
            }
        }
    }
}

impl hyper::rt::Sleep for HeaderDeadline {}

/// Serves the Envoy rate limit gRPC API on `listener` until `shutdown`
/// fires, with the connection limits of `hygiene`; returns once every
/// connection has closed (the calls in flight at shutdown answered: each
/// connection is sent a GOAWAY and closes after its last stream).
///
/// hyper serves the generated `RateLimitServiceServer` straight, on the
/// same connection loop as HTTP, with tonic's HTTP/2 settings: HTTP/2 only,
/// `max_concurrent_streams` and keep-alive pings from `hygiene`, hyper's
/// other defaults (which tonic keeps), on a timer whose keep-alive sleep
/// is cheap to poll again (`h2_timer.rs`). Not through `tonic::transport::Server`:
/// its router (an axum `Router` in front of the one service, ~2,300
/// instructions per call), its per-connection shutdown `watch`, and its
/// service layers cost every call and do nothing here (docs/design.md §0,
/// BENCHMARKS.md). What they did is kept: a path that is not
/// `ShouldRateLimit` is answered `UNIMPLEMENTED` by the generated server, as
/// the router answered it; the service cannot fail (its error type is
/// `Infallible`), so tonic's error recovery had nothing to recover; the
/// client's deadline (`grpc-timeout`) ends a call as tonic ended it
/// ([`crate::grpc_deadline`]). One default differs, for the better: tonic
/// turned off h2's bound on streams a connection makes the server reset
/// for protocol errors (`max_local_error_reset_streams(None)`); hyper's
/// default keeps it (1,024 per connection, then GOAWAY): a client that
/// makes the server reset stream after stream is cut off.
pub async fn serve_grpc(
    listener: TcpListener,
    limiter: std::sync::Arc<slidelog_envoy::RateLimiter>,
    shutdown: Shutdown,
    hygiene: &Hygiene,
) -> io::Result<()> {
    let conns = hygiene.conns.clone();
    conns.spawn_idle_sweep("grpc", hygiene.grpc_idle_timeout, shutdown.clone().wait());
    let service = crate::auth::GrpcAuth::new(
        crate::grpc_deadline::ClientDeadline::new(
            slidelog_envoy::service::GrpcService::new(limiter).into_server(),
        ),
        hygiene.auth.clone(),
    );
    let mut builder = Builder::new(TokioExecutor::new()).http2_only();
    builder
        .http2()
        .timer(crate::h2_timer::H2Timer)
        .max_concurrent_streams(hygiene.grpc_max_streams)
        .keep_alive_interval(Some(hygiene.grpc_keepalive_interval))
        .keep_alive_timeout(hygiene.grpc_keepalive_timeout);
    let tls = hygiene.tls.clone().map(|tls| (tls, Port::Grpc));
    let connector = GrpcConnector { service, builder };
    let live = serve_connections(listener, &conns, ("grpc", tls), shutdown, connector).await;
    live.closed().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use hyper::rt::Timer as _;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// Reads one answer (headers and a body of `Content-Length` bytes).
    async fn read_answer(tcp: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let n = tcp.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before an answer: {got:?}");
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let length: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if got.len() >= end + 4 + length {
                    return text;
                }
            }
        }
    }

    /// At shutdown a kept-alive connection between requests is closed at
    /// once, a request in flight is answered (then its connection closes),
    /// and the server reports Drained without waiting for the grace period.
    #[tokio::test]
    async fn shutdown_closes_idle_connections_and_finishes_requests_in_flight() {
        let started = Arc::new(tokio::sync::Notify::new());
        let release = Arc::new(tokio::sync::Notify::new());
        let router = {
            let (started, release) = (started.clone(), release.clone());
            Router::new()
                .route("/fast", axum::routing::get(|| async { "fast" }))
                .route(
                    "/slow",
                    axum::routing::get(move || async move {
                        started.notify_one();
                        release.notified().await;
                        "slow"
                    }),
                )
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (trigger, shutdown) = crate::shutdown::channel();
        let server = tokio::spawn(serve_http(
            listener,
            router,
            shutdown,
            Duration::from_secs(60),
        ));
        let mut idle = TcpStream::connect(addr).await.unwrap();
        idle.write_all(b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        assert!(read_answer(&mut idle).await.ends_with("fast"));
        let mut busy = TcpStream::connect(addr).await.unwrap();
        busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        started.notified().await;

        trigger.trigger();
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut rest));
        assert!(closed.await.is_ok(), "the idle connection stayed open");
        assert!(rest.is_empty(), "{rest:?}");
        assert!(!server.is_finished(), "stopped with a request in flight");

        release.notify_one();
        let answer = read_answer(&mut busy).await;
        assert!(answer.ends_with("slow"), "{answer}");
        let stopped = tokio::time::timeout(Duration::from_secs(5), server).await;
        assert_eq!(
            stopped.expect("drained in time").unwrap().unwrap(),
            Stopped::Drained
        );
    }

    /// The shared sleep never makes a request's deadline earlier or later:
    /// after an earlier request's (shorter) deadline, and before a later
    /// one's, each fires at its own.
    #[tokio::test]
    async fn a_header_deadline_is_ready_when_its_own_deadline_passes() {
        let timer = HeaderTimer::default();
        let start = Instant::now();
        let mut first = timer.sleep_until(start + Duration::from_millis(100));
        assert!(futures::poll!(first.as_mut()).is_pending());
        drop(first);
        // The shared sleep fires at 100 ms: this one waits on to 400 ms.
        timer.sleep_until(start + Duration::from_millis(400)).await;
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(400), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");

        let mut far = timer.sleep_until(Instant::now() + Duration::from_secs(3_600));
        assert!(futures::poll!(far.as_mut()).is_pending());
        drop(far);
        // An earlier deadline than the shared sleep's is kept as well.
        let start = Instant::now();
        timer.sleep(Duration::from_millis(50)).await;
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(50), "{took:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
}
