//! The store check before `serve` starts: is the store reachable, and does
//! it accept slidelog as configured? A wrong password, an unknown ACL user,
//! a user who may not run the script (NOPERM), a database index the server
//! does not have or a failed TLS handshake will not pass by itself, so
//! `serve` refuses to start on one (exit 2, naming the cause) unless told to
//! start anyway; a store that is merely down is a passing fault, and `serve`
//! starts and answers with its failure policy until it comes up.
//!
//! The check connects eagerly (bounded by the connect timeout) and makes one
//! peek decision on a probe key under the key prefix, which records nothing:
//! a ping alone would pass for a user who may not run the script. The store
//! it opened is handed back ([`Checked::store`]): `serve` decides through it,
//! so the server is asked (and the log says) which engine decides once.

use slidelog::store::Store;
use slidelog::url::{StoreOptions, open_store};
use slidelog::{Limit, Mode, Now, Request};
use std::sync::Arc;
use std::time::Duration;

/// The key (after the prefix) of the peek decision.
pub const PROBE_KEY: &str = "slidelog:startup-check";

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Preflight {
    /// The store made a decision.
    Ready,
    /// The store did not answer (down, unreachable, too slow): may pass.
    Unreachable(String),
    /// The store refuses this configuration: the cause, masked of secrets.
    Misconfigured(String),
}

/// What [`check`] found, and the store it opened.
pub struct Checked {
    /// What the check found.
    pub found: Preflight,
    /// The store, connected (its engine settled), when it could be opened:
    /// none when opening failed (down, or refused at connect).
    pub store: Option<Arc<dyn Store>>,
}

/// Checks the store that `url` names, opened with `options` and the
/// per-call `timeout` (see the module docs).
pub async fn check(url: &str, options: &StoreOptions, timeout: Duration) -> Checked {
    let mut eager = options.clone();
    eager.lazy_connect = false;
    let store = match open_store(url, &eager, timeout).await {
        Ok(store) => store,
        Err(e) => {
            let cause = e.with_causes();
            let found = if e.is_transient() {
                Preflight::Unreachable(cause)
            } else {
                Preflight::Misconfigured(cause)
            };
            return Checked { found, store: None };
        }
    };
    let found = peek(&store, options.connect_timeout).await;
    Checked {
        found,
        store: Some(store),
    }
}

/// One peek decision on the probe key, bounded by `patience`.
async fn peek(store: &Arc<dyn Store>, patience: Duration) -> Preflight {
    let request = match Limit::new(1, 1_000).and_then(|l| Request::single(PROBE_KEY, l)) {
        Ok(r) => r,
        Err(e) => return Preflight::Unreachable(format!("cannot build the probe request: {e}")),
    };
    let peek = store.decide(&request, Mode::Peek, Now::Server);
    match tokio::time::timeout(patience, peek).await {
        Ok(Ok(_)) => Preflight::Ready,
        Ok(Err(e)) if e.is_transient() => Preflight::Unreachable(e.to_string()),
        // Store full is about keys, not configuration: the service can run.
        Ok(Err(e)) if e.is_full() => Preflight::Ready,
        Ok(Err(e)) => Preflight::Misconfigured(e.to_string()),
        Err(_) => Preflight::Unreachable(format!(
            "no decision within the connect timeout ({patience:?})"
        )),
    }
}

/// The misconfiguration the limiter's store reported, if it still stands:
/// one peek decision on the probe key (which records nothing) tells whether
/// it was fixed meanwhile, so readiness recovers without traffic.
pub async fn standing_misconfiguration(limiter: &slidelog::Limiter) -> Option<String> {
    limiter.misconfiguration()?;
    if let Ok(request) = Limit::new(1, 1_000).and_then(|l| Request::single(PROBE_KEY, l)) {
        let _ = limiter.decide(&request, Mode::Peek).await;
    }
    limiter.misconfiguration()
}
