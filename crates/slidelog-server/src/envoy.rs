//! Wiring of Envoy's rate limit API (crate `slidelog-envoy`) into the service:
//! gRPC `ShouldRateLimit` on `--grpc` and `POST /json` on the HTTP router,
//! both deciding through the app's [`slidelog::Limiter`], so the store
//! timeout, the failure policy and the metrics are the same as for
//! `/v1/check`; the Envoy API's own counters go to the app's recorder.

use crate::app::App;
use crate::shutdown::Shutdown;
use anyhow::Context;
use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Loads `--config` (or no rules at all without it) and starts its watcher.
pub fn load_config(
    path: Option<&PathBuf>,
    poll: Duration,
    options: slidelog_envoy::LoadOptions,
) -> anyhow::Result<Arc<ConfigHandle>> {
    let Some(path) = path else {
        // `serve` says so at startup, with the addresses that answer.
        return Ok(ConfigHandle::fixed(RateLimitConfig::empty()));
    };
    let handle = ConfigHandle::load_with(path, options).context("invalid --config")?;
    let config = handle.get();
    tracing::info!(
        path = %path.display(),
        files = config.files().len(),
        domains = ?config.domains(),
        "rate limit config loaded (reloaded on SIGHUP and file change)"
    );
    handle.spawn_watcher(poll);
    Ok(handle)
}

/// The Envoy service's options from `serve`'s flags. Warns when
/// `--max-descriptors` lets through more distinct keys than one joint
/// decision takes (docs/design.md §5.1): such requests are refused, and the
/// operator should hear it at start rather than from each client.
pub fn options(
    response_headers: bool,
    independent_descriptors: bool,
    max_descriptors: usize,
) -> ServiceOptions {
    let joint_max = slidelog_core::MAX_CHECKS;
    if max_descriptors > joint_max {
        tracing::warn!(
            max_descriptors,
            joint_max,
            "--max-descriptors is above the most distinct keys one joint decision takes: \
             an HTTP request with more checks is refused, and so is an Envoy request with \
             more distinct limited keys unless --envoy-independent-descriptors is set"
        );
    }
    ServiceOptions {
        response_headers,
        independent_descriptors,
    }
}

/// The Envoy service over the app's limiter, counting into the app's metrics.
pub fn limiter(app: &App, config: Arc<ConfigHandle>, options: ServiceOptions) -> Arc<RateLimiter> {
    Arc::new(
        RateLimiter::new(app.limiter().clone(), config, options)
            .with_recorder(app.metrics().recorder()),
    )
}

/// Binds `--grpc` and serves `ShouldRateLimit` until `shutdown` fires,
/// within the connection limits of `hygiene`; returns the bound address and
/// the server's task, which ends once the calls in flight at shutdown have
/// been answered (join it before anything that must see their decisions).
pub async fn spawn_grpc(
    addr: &str,
    limiter: Arc<RateLimiter>,
    shutdown: Shutdown,
    hygiene: crate::server::Hygiene,
) -> anyhow::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on --grpc {addr}"))?;
    let local = listener.local_addr()?;
    let task = tokio::spawn(async move {
        if let Err(e) = crate::server::serve_grpc(listener, limiter, shutdown, &hygiene).await {
            tracing::error!(error = %e, "gRPC server stopped");
        }
    });
    Ok((local, task))
}
