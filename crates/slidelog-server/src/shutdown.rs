//! One shutdown signal shared by every listener of the service (HTTP now,
//! gRPC later): a [`ShutdownTrigger`] fires it once, and every clone of
//! [`Shutdown`] wakes. [`os_signal`] waits for SIGTERM or SIGINT.

use tokio::sync::watch;

/// Fires the shutdown. Dropping it fires it too, so a server never outlives
/// the code that started it.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

/// A cloneable future-maker that completes once shutdown has been triggered.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// A new trigger and the signal it fires.
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    /// Starts the shutdown of everything holding the matching [`Shutdown`].
    pub fn trigger(&self) {
        // `send_replace` works even when no receiver is left.
        self.tx.send_replace(true);
    }
}

impl Shutdown {
    /// Completes when shutdown has been triggered (or its trigger dropped).
    pub async fn wait(mut self) {
        // An error means the trigger is gone: that is a shutdown too.
        let _ = self.rx.wait_for(|fired| *fired).await;
    }

    /// True once shutdown has been triggered.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }
}

/// Waits for SIGTERM or SIGINT (Ctrl-C) and returns the signal's name.
pub async fn os_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            },
            // Without signal handlers only Ctrl-C can stop us.
            _ => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_clone_wakes_once_triggered() {
        let (trigger, shutdown) = channel();
        let a = tokio::spawn(shutdown.clone().wait());
        let b = tokio::spawn(shutdown.clone().wait());
        assert!(!shutdown.is_triggered());
        trigger.trigger();
        a.await.unwrap();
        b.await.unwrap();
        assert!(shutdown.is_triggered());
        // A waiter that starts after the trigger completes at once.
        shutdown.wait().await;
    }

    #[tokio::test]
    async fn dropping_the_trigger_shuts_down() {
        let (trigger, shutdown) = channel();
        drop(trigger);
        shutdown.wait().await;
    }
}
