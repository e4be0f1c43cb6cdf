//! The caller's own deadline, carried down to the store's calls: a gRPC
//! client's `grpc-timeout` shorter than the store timeout becomes the
//! deadline the script or module command refuses to record past, so a call
//! answered `CANCELLED` at the client's deadline never records later on
//! Redis (docs/design.md §6, "Late records").
//!
//! A task-local, not an argument: the deadline belongs to the caller's task
//! (the transport sets it around the whole call), and every store method
//! between the transport and the script would otherwise carry it.

use std::future::Future;
use std::time::{Duration, Instant};

tokio::task_local! {
    static CALLER_DEADLINE: Instant;
}

/// Runs `work` with `deadline` as its caller's deadline: every check it
/// sends to a Redis store carries `min(store deadline, deadline)`.
pub async fn within<F: Future>(deadline: Instant, work: F) -> F::Output {
    CALLER_DEADLINE.scope(deadline, work).await
}

/// The time left before the current task's caller deadline, if it has one.
pub(crate) fn remaining() -> Option<Duration> {
    CALLER_DEADLINE
        .try_with(|d| d.saturating_duration_since(Instant::now()))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_deadline_is_seen_inside_its_scope_only() {
        assert_eq!(remaining(), None);
        let deadline = Instant::now() + Duration::from_millis(500);
        let left = within(deadline, async { remaining() }).await.unwrap();
        assert!(left <= Duration::from_millis(500) && left > Duration::from_millis(100));
    }
}
