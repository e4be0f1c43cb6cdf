//! Serve's TLS and client tokens (docs/design.md §5.2), loaded from their
//! flags before any port is bound (a file that does not load stops the
//! start, naming its flag), then read again in the background.

use super::ServeArgs;
use crate::app::App;
use crate::auth::Auth;
use crate::shutdown::Shutdown;
use crate::tls::Tls;

/// The TLS and token settings both servers get.
#[derive(Debug, Clone, Default)]
pub(super) struct Secured {
    /// TLS of both ports.
    pub tls: Option<Tls>,
    /// Client tokens.
    pub auth: Option<Auth>,
}

impl Secured {
    /// Loads `--tls-*` and the token files; their counters go to `app`'s metrics.
    pub(super) fn from_flags(args: &ServeArgs, app: &App) -> anyhow::Result<Self> {
        let recorder = app.metrics().recorder();
        let tls = Tls::from_flags(&args.tls, &*recorder)?;
        let auth = Auth::from_flags(&args.auth, recorder)?;
        Ok(Self { tls, auth })
    }

    /// Warns when client tokens would cross the network in clear text.
    pub(super) fn warn_if_clear(&self, http_addr: std::net::SocketAddr) {
        if self.tls.is_none() && self.auth.is_some() && !http_addr.ip().is_loopback() {
            tracing::warn!(
                http_addr = %http_addr,
                "client tokens without --tls-cert beyond loopback: anyone on the path can read them"
            );
        }
    }

    /// Reads the files again until `shutdown` (a renewed certificate, a
    /// changed token file).
    pub(super) fn spawn_reload(&self, shutdown: &Shutdown) {
        if let Some(tls) = &self.tls {
            tls.spawn_reload(shutdown.clone());
        }
        if let Some(auth) = &self.auth {
            auth.spawn_reload(shutdown.clone());
        }
    }
}
