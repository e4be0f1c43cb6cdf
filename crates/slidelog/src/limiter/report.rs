//! The report of a [`Limiter`](crate::Limiter)'s calls: every decision and
//! store failure told to the [`MetricsHook`] (timed only when a hook
//! listens), and store outages logged once per episode ([`Episodes`]), with
//! the misconfiguration that readiness reports.

use super::FailurePolicy;
use crate::episode::Episodes;
use crate::metrics::{MetricsHook, Op};
use slidelog_core::{Decision, Store, StoreError};
use std::sync::Arc;
use std::time::Instant;

/// When a reported call started: read only when a hook will be told.
pub(crate) type Started = Option<Instant>;

/// Where a limiter's calls are reported: its hook and its episodes.
#[derive(Debug)]
pub(crate) struct Report {
    /// The store's kind, for every log line.
    store: &'static str,
    /// The store itself: an episode stays open while it reports a node
    /// down ([`Episodes::success_unless`]).
    nodes: Arc<dyn Store>,
    policy: FailurePolicy,
    /// `None` when nobody listens: then a call is not even timed.
    metrics: Option<Arc<dyn MetricsHook>>,
    episodes: Episodes,
}

impl Report {
    /// Returns a report on the calls to `store`.
    pub(crate) fn new(
        store: &Arc<dyn Store>,
        policy: FailurePolicy,
        metrics: Option<Arc<dyn MetricsHook>>,
    ) -> Self {
        Self {
            store: store.kind(),
            nodes: store.clone(),
            policy,
            metrics,
            episodes: Episodes::default(),
        }
    }

    /// Returns the start of a call, read only when a hook will be told.
    pub(crate) fn start(&self) -> Started {
        self.metrics.as_ref().map(|_| Instant::now())
    }

    /// Reports `decision` (from the store or answered locally). By
    /// reference: the caller keeps it where it is (no copy in and out).
    pub(crate) fn decided(&self, op: Op, decision: &Decision, started: Started) {
        if let (Some(metrics), Some(started)) = (&self.metrics, started) {
            metrics.decided(op, decision, started.elapsed());
        }
    }

    /// Records that a store call succeeded (`decided`: it was a decision): ends an open
    /// outage episode, once, when no node of the store is known down (a
    /// cluster master down fails its keys only: one episode, not one per
    /// second of calls for the other masters' keys).
    pub(crate) fn answered(&self, decided: bool) {
        let nodes = &self.nodes;
        self.episodes
            .success_unless(self.store, decided, || nodes.stats().nodes_down > 0);
    }

    /// Records that a readiness probe succeeded.
    pub(crate) fn ready(&self) {
        self.answered(false);
        if let Some(metrics) = &self.metrics {
            metrics.store_up();
        }
    }

    /// Records that a store call failed (`degraded`: the policy admitted anyway): counted
    /// every time, logged once per outage episode.
    pub(crate) fn failed(
        &self,
        op: Op,
        error: &StoreError,
        degraded: bool,
        started: Started,
    ) {
        if let (Some(metrics), Some(started)) = (&self.metrics, started) {
            metrics.store_failed(op, error, degraded, started.elapsed());
        }
        self.episodes
            .failure(self.store, op.as_str(), error, &self.policy);
    }

    /// Returns the misconfiguration seen since the last successful decision.
    pub(crate) fn misconfiguration(&self) -> Option<String> {
        self.episodes.misconfiguration()
    }

    /// Records a misconfiguration found outside a store call.
    pub(crate) fn misconfigured(&self, cause: &str) {
        self.episodes.misconfigured(self.store, cause, &self.policy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::time::Duration;

    #[derive(Debug, Default)]
    struct Calls(Mutex<Vec<String>>);
    impl MetricsHook for Calls {
        fn decided(&self, op: Op, decision: &Decision, _: Duration) {
            self.0
                .lock()
                .push(format!("{} {}", op.as_str(), decision.allowed));
        }
        fn store_failed(&self, op: Op, _: &StoreError, degraded: bool, _: Duration) {
            self.0
                .lock()
                .push(format!("{} failed degraded={degraded}", op.as_str()));
        }
        fn store_up(&self) {
            self.0.lock().push("up".into());
        }
    }

    #[test]
    fn calls_reach_the_hook_and_a_misconfiguration_stays_until_a_decision() {
        let calls = Arc::new(Calls::default());
        let store: Arc<dyn Store> = Arc::new(crate::store::MemoryStore::new());
        let report = Report::new(&store, FailurePolicy::FailOpen, Some(calls.clone()));
        let started = report.start();
        assert!(started.is_some(), "timed when a hook listens");
        let limit = slidelog_core::Limit::new(1, 1_000).unwrap();
        report.decided(Op::Check, &Decision::degraded_allow(&limit), started);
        report.failed(
            Op::Ping,
            &StoreError::Misconfigured("NOPERM".into()),
            false,
            started,
        );
        report.ready();
        assert!(
            report.misconfiguration().is_some(),
            "a ping does not clear it"
        );
        report.answered(true);
        assert_eq!(report.misconfiguration(), None);
        assert_eq!(
            *calls.0.lock(),
            ["check true", "ping failed degraded=false", "up"]
        );
        let silent = Report::new(&store, FailurePolicy::FailOpen, None);
        assert!(silent.start().is_none(), "not timed when nobody listens");
    }
}
