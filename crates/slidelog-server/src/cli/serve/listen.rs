//! Serve's ports: bind `--http`, install the SIGTERM/SIGINT handlers, bind
//! `--grpc`, and say where the service listens. The handlers are installed
//! before the line that says so: a signal sent as soon as it shows must stop
//! the service gracefully, not by its default action.

use super::ServeArgs;
use crate::server::Hygiene;
use crate::shutdown::{self, Shutdown, ShutdownTrigger};
use anyhow::Context;
use slidelog::redact::mask_password;
use slidelog_envoy::RateLimiter;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The bound ports and what serving them needs.
pub(super) struct Bound {
    /// The `--http` listener, not yet served.
    pub http: TcpListener,
    /// Its address (port 0 resolved).
    pub http_addr: SocketAddr,
    /// The address of the gRPC server, already serving; none with `--no-grpc`.
    pub grpc_addr: Option<SocketAddr>,
    /// The gRPC server's task: it ends once the calls in flight at shutdown
    /// are answered. None with `--no-grpc`.
    pub grpc_task: Option<JoinHandle<()>>,
    /// The connection limits of both ports.
    pub hygiene: Hygiene,
    /// Fires the shutdown of both servers.
    pub trigger: ShutdownTrigger,
    /// What the servers wait on.
    pub shutdown: Shutdown,
    /// The installed signal handlers.
    pub signal: Signal,
}

/// Binds both ports and starts the gRPC server; the HTTP listener is left
/// for the caller to serve.
pub(super) async fn bind(
    args: &ServeArgs,
    limiter: Arc<RateLimiter>,
    secured: &super::secure::Secured,
) -> anyhow::Result<Bound> {
    let http = TcpListener::bind(&args.http)
        .await
        .with_context(|| format!("cannot listen on --http {}", args.http))
        .map_err(|e| bind_error(e, "--http", &args.http, None))?;
    let http_addr = http.local_addr()?;
    if !http_addr.ip().is_loopback()
        && args.admin_token.is_none()
        && args.admin_token_file.is_none()
    {
        tracing::warn!(
            http_addr = %http_addr,
            "listening beyond loopback without --admin-token: admin operations (reset, key browser, blocks, overrides) answer loopback callers only"
        );
    }
    let (trigger, shutdown) = shutdown::channel();
    let hygiene = Hygiene {
        tls: secured.tls.clone(),
        auth: secured.auth.clone(),
        ..hygiene(args)
    };
    tracing::debug!(
        max_connections = hygiene.conns.max(),
        "connection cap (HTTP and gRPC together)"
    );
    let signal = Signal::install().await;
    let (grpc_addr, grpc_task) = bind_grpc(args, limiter, &shutdown, &hygiene).await?.unzip();
    Ok(Bound {
        http,
        http_addr,
        grpc_addr,
        grpc_task,
        hygiene,
        trigger,
        shutdown,
        signal,
    })
}

/// Binds `--grpc` and serves it, unless `--no-grpc`: its address and task.
async fn bind_grpc(
    args: &ServeArgs,
    limiter: Arc<RateLimiter>,
    shutdown: &Shutdown,
    hygiene: &Hygiene,
) -> anyhow::Result<Option<(SocketAddr, JoinHandle<()>)>> {
    if args.no_grpc {
        return Ok(None);
    }
    let bound = crate::envoy::spawn_grpc(&args.grpc, limiter, shutdown.clone(), hygiene.clone())
        .await
        .map_err(|e| bind_error(e, "--grpc", &args.grpc, Some("--no-grpc")))?;
    Ok(Some(bound))
}

/// Logs where the service listens, and that the Envoy APIs limit nothing
/// when no `--config` gives them rules.
pub(super) fn announce(args: &ServeArgs, bound: &Bound) {
    let grpc_shown = bound
        .grpc_addr
        .map_or_else(|| "off".to_owned(), |a| a.to_string());
    if args.config.is_none() {
        // Without rules the Envoy APIs limit nothing: say so where an
        // operator looks first, rather than let it pass for a limiter.
        let apis = if bound.grpc_addr.is_some() {
            "gRPC ShouldRateLimit and POST /json answer"
        } else {
            "POST /json answers"
        };
        tracing::info!(
            grpc_addr = %grpc_shown,
            "no --config: {apis} every descriptor OK, unlimited (give --config to set limits)"
        );
    }
    tracing::info!(
        http_addr = %bound.http_addr,
        grpc_addr = %grpc_shown,
        store = %mask_password(&args.store.store),
        policy = %args.failure_policy().map_or_else(|e| e.to_string(), |p| p.to_string()),
        trust_client_time = args.trust_client_time,
        tls = bound.hygiene.tls.is_some(),
        "slidelog listening"
    );
}

/// The SIGTERM/SIGINT handlers, installed, and a signal that arrived while
/// they were being installed.
pub(super) struct Signal {
    pending: Pin<Box<dyn Future<Output = &'static str> + Send>>,
    early: Option<&'static str>,
}

impl Signal {
    /// Installs the handlers: one poll of [`shutdown::os_signal`] registers them.
    async fn install() -> Self {
        let mut pending: Pin<Box<dyn Future<Output = &'static str> + Send>> =
            Box::pin(shutdown::os_signal());
        let early = tokio::select! {
            biased;
            s = &mut pending => Some(s),
            () = std::future::ready(()) => None,
        };
        Self { pending, early }
    }

    /// Fires `trigger` on the first signal, logging the grace period.
    pub(super) fn spawn_watch(self, trigger: ShutdownTrigger, grace: Duration) {
        tokio::spawn(async move {
            let signal = match self.early {
                Some(s) => s,
                None => self.pending.await,
            };
            tracing::info!(
                signal,
                grace = ?grace,
                "shutting down: no new connections, finishing requests in flight"
            );
            trigger.trigger();
        });
    }
}

/// Turns a failed bind into one message and, when the address is taken,
/// names the flag that moves it (and the one that turns the API off, if any).
fn bind_error(e: anyhow::Error, flag: &str, addr: &str, off: Option<&str>) -> anyhow::Error {
    let in_use = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::AddrInUse)
    });
    if !in_use {
        return e;
    }
    let off = off.map_or(String::new(), |off| format!(", or turn it off with {off}"));
    anyhow::anyhow!(
        "cannot listen on {flag} {addr}: the address is in use by another program; \
         choose another with {flag} HOST:PORT (port 0 picks a free one){off}"
    )
}

/// Gathers the connection limits of both ports from the flags (checked by
/// `validate`).
fn hygiene(args: &ServeArgs) -> Hygiene {
    Hygiene {
        conns: crate::conns::Conns::new(
            args.max_connections
                .unwrap_or_else(crate::conns::default_max_connections),
        ),
        header_timeout: args.http_header_timeout,
        http_idle_timeout: args.http_idle_timeout,
        grpc_idle_timeout: args.grpc_idle_timeout,
        grpc_max_streams: args.grpc_max_streams,
        grpc_keepalive_interval: args.grpc_keepalive_interval,
        grpc_keepalive_timeout: args.grpc_keepalive_timeout,
        tls: None,
        auth: None,
    }
}
