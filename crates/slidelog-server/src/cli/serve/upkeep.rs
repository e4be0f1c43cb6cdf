//! Serve's background chores until shutdown: fold histogram samples
//! (bounded memory without scrapes), sweep the memory store's expired
//! logs, and read `--policies` again when it changes.

use crate::app::App;
use crate::shutdown::Shutdown;
use std::time::Duration;

/// Runs the chores every 5 s, and polls the policies file every
/// `policies_poll`, until `shutdown` fires.
pub(super) fn spawn(app: App, shutdown: Shutdown, policies_poll: Duration) {
    if let Some(policies) = &app.config().policies {
        policies.spawn_reload(shutdown.clone(), policies_poll);
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stop = shutdown.wait();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = tick.tick() => chores(&app).await,
            }
        }
    });
}

/// Runs the chores once.
async fn chores(app: &App) {
    app.metrics().run_upkeep();
    if let Some(memory) = app.memory_store() {
        let swept = tokio::task::spawn_blocking(move || memory.sweep())
            .await
            .unwrap_or(0);
        if swept > 0 {
            tracing::debug!(swept, "expired logs dropped");
        }
    }
}
