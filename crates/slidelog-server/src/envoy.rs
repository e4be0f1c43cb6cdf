//! Wiring of Envoy's rate limit API (crate `slidelog-envoy`) into the service:
//! gRPC `ShouldRateLimit` on `--grpc` and `POST /json` on the HTTP router,
//! both deciding through [`App`], so the store timeout, the failure policy and
//! the metrics are the same as for `/v1/check`.

use crate::app::App;
use crate::shutdown::Shutdown;
use anyhow::Context;
use slidelog_core::{Decision, Mode, Now, Request, Store, StoreError};
use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The [`App`] as a [`Store`]: every decision gets the app's timeout and
/// failure policy. Under fail-open a failed store answers a degraded
/// admission; under fail-closed the error reaches the Envoy service, which
/// answers gRPC UNAVAILABLE / HTTP 503.
#[derive(Debug, Clone)]
pub struct AppStore(pub App);

#[async_trait::async_trait]
impl Store for AppStore {
    async fn decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, StoreError> {
        self.0
            .decide(request, mode, now)
            .await
            .map_err(|refused| refused.0)
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        self.0.reset(key).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.0.ready().await
    }

    fn kind(&self) -> &'static str {
        self.0.store_kind()
    }
}

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

/// The Envoy service over the app.
pub fn limiter(app: &App, config: Arc<ConfigHandle>, response_headers: bool) -> Arc<RateLimiter> {
    let store = Arc::new(AppStore(app.clone()));
    Arc::new(RateLimiter::new(
        store,
        config,
        ServiceOptions {
            // The app already applied the policy: an error here is fail-closed.
            failure_policy: slidelog_envoy::FailurePolicy::Closed,
            response_headers,
        },
    ))
}

/// Binds `--grpc` and serves `ShouldRateLimit` until `shutdown` fires.
pub async fn spawn_grpc(
    addr: &str,
    limiter: Arc<RateLimiter>,
    shutdown: Shutdown,
) -> anyhow::Result<std::net::SocketAddr> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on --grpc {addr}"))?;
    let local = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) =
            slidelog_envoy::service::serve_grpc(listener, limiter, shutdown.wait()).await
        {
            tracing::error!(error = %e, "gRPC server stopped");
        }
    });
    Ok(local)
}
