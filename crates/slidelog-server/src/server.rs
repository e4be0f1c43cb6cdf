//! Running the service: serve a router on a bound listener until the shutdown
//! signal, then stop accepting, let in-flight requests finish, and give up on
//! them after a grace period so that the process always exits in time.

use crate::shutdown::Shutdown;
use axum::Router;
use std::future::IntoFuture;
use std::io;
use std::time::Duration;
use tokio::net::TcpListener;

/// Default time in-flight requests get after the shutdown signal.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How a server run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Every in-flight request finished within the grace period.
    Drained,
    /// The grace period ran out with requests still in flight; they were dropped.
    GraceExpired,
}

/// Serves `router` on `listener` until `shutdown` fires; then finishes the
/// requests in flight for at most `grace`.
///
/// Tests bind `127.0.0.1:0` and read the port from the listener first.
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    shutdown: Shutdown,
    grace: Duration,
) -> io::Result<Stopped> {
    use axum::serve::ListenerExt;
    // Answers are small and written at once: never hold them back for Nagle.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
    });
    let server = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.clone().wait())
        .into_future();
    tokio::pin!(server);
    let deadline = async {
        shutdown.wait().await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = &mut server => result.map(|()| Stopped::Drained),
        () = deadline => {
            tracing::warn!(grace = ?grace, "grace period over: dropping requests still in flight");
            Ok(Stopped::GraceExpired)
        }
    }
}
