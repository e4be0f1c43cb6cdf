//! The report of a [`Limiter`](crate::Limiter)'s calls: every decision and
//! store failure told to the [`MetricsHook`] (timed only when a hook
//! listens), and store outages logged once per episode ([`Episodes`]), with
//! the misconfiguration that readiness reports.
//!
//! A call that fails because one node of the store is down (a Redis
//! Cluster master: its keys fail at once while the other masters decide)
//! is counted as every failure is, but does not say the store is down: the
//! hook hears [`MetricsHook::store_up`] again after it, so the store's up
//! gauge stays steady through a partial outage and the per-node
//! figures ([`StoreStats::nodes_down`](slidelog_core::StoreStats::nodes_down))
//! report it. The store is down for the hook only when every node is, or
//! when the limiter's own probe found it down ([`Health`]).

use super::FailurePolicy;
use super::health::Health;
use crate::episode::Episodes;
use crate::metrics::{MetricsHook, Op};
use slidelog_core::clock::{Stopwatch, Tick};
use slidelog_core::{Decision, Store, StoreError};
use std::sync::Arc;

/// When a reported call started: read only when a hook will be told.
pub(crate) type Started = Option<Tick>;

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
    /// Times the calls told to the hook (a TSC read, not `clock_gettime`).
    stopwatch: Stopwatch,
    episodes: Episodes,
    /// Whether the limiter knows the whole store down: then no failure is
    /// one node's.
    health: Arc<Health>,
}

impl Report {
    /// Returns a report on the calls to `store`.
    pub(crate) fn new(
        store: &Arc<dyn Store>,
        policy: FailurePolicy,
        metrics: Option<Arc<dyn MetricsHook>>,
        health: Arc<Health>,
    ) -> Self {
        Self {
            store: store.kind(),
            nodes: store.clone(),
            policy,
            metrics,
            stopwatch: Stopwatch::new(),
            episodes: Episodes::default(),
            health,
        }
    }

    /// Returns the hook, when one listens.
    pub(crate) fn metrics(&self) -> Option<&Arc<dyn MetricsHook>> {
        self.metrics.as_ref()
    }

    /// Returns the start of a call, read only when a hook will be told.
    pub(crate) fn start(&self) -> Started {
        self.metrics.as_ref().map(|_| self.stopwatch.start())
    }

    /// Reports `decision` (from the store or answered locally). By
    /// reference: the caller keeps it where it is (no copy in and out).
    pub(crate) fn decided(&self, op: Op, decision: &Decision, started: Started) {
        if let (Some(metrics), Some(started)) = (&self.metrics, started) {
            metrics.decided(op, decision, self.stopwatch.elapsed(started));
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
    pub(crate) fn failed(&self, op: Op, error: &StoreError, degraded: bool, started: Started) {
        if let (Some(metrics), Some(started)) = (&self.metrics, started) {
            metrics.store_failed(op, error, degraded, self.stopwatch.elapsed(started));
            if self.one_node_down(error) {
                // Counted above as a failure; the store itself answers.
                metrics.store_up();
            }
        }
        self.episodes
            .failure(self.store, op.as_str(), error, &self.policy);
    }

    /// Tells whether `error` is a failure of part of the store while the
    /// rest answers: transient (a node refused, dropped or did not answer),
    /// with the store reporting some of its nodes down but not all, and the
    /// limiter not knowing the whole store down. Told by the store's own
    /// counts ([`Store::stats`]), never by the error's text.
    fn one_node_down(&self, error: &StoreError) -> bool {
        if !error.is_transient() || self.health.is_down() {
            return false;
        }
        let stats = self.nodes.stats();
        stats.nodes_down > 0 && stats.nodes_down < stats.nodes
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
        let health = Arc::new(Health::new("memory", None));
        let report = Report::new(
            &store,
            FailurePolicy::FailOpen,
            Some(calls.clone()),
            health.clone(),
        );
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
        let silent = Report::new(&store, FailurePolicy::FailOpen, None, health);
        assert!(silent.start().is_none(), "not timed when nobody listens");
    }

    /// A store of `nodes` nodes, `down` of them known down.
    #[derive(Debug)]
    struct Nodes {
        nodes: u32,
        down: u32,
    }

    #[async_trait::async_trait]
    impl Store for Nodes {
        async fn decide(
            &self,
            _: &slidelog_core::Request,
            _: slidelog_core::Mode,
            _: slidelog_core::Now,
        ) -> Result<Decision, StoreError> {
            unreachable!("the report never calls the store")
        }
        async fn reset(&self, _: &str) -> Result<bool, StoreError> {
            unreachable!()
        }
        async fn ping(&self) -> Result<(), StoreError> {
            unreachable!()
        }
        fn kind(&self) -> &'static str {
            "nodes"
        }
        fn stats(&self) -> slidelog_core::StoreStats {
            slidelog_core::StoreStats {
                nodes: self.nodes,
                nodes_down: self.down,
                ..Default::default()
            }
        }
    }

    #[test]
    fn a_failure_of_one_node_down_leaves_the_store_up_and_a_whole_outage_does_not() {
        let node = StoreError::Unavailable("cluster master 10.0.0.2:7001 known down".into());
        let after = |nodes, down, error: &StoreError, store_known_down: bool| {
            let calls = Arc::new(Calls::default());
            let store: Arc<dyn Store> = Arc::new(Nodes { nodes, down });
            let health = Arc::new(Health::new("nodes", None));
            if store_known_down {
                health.mark_down(StoreError::Unavailable("refused".into()));
            }
            let report = Report::new(&store, FailurePolicy::FailOpen, Some(calls.clone()), health);
            report.failed(Op::Check, error, true, report.start());
            calls.0.lock().clone()
        };
        let failed = "check failed degraded=true";
        // One master of three down: counted, and the store is up.
        assert_eq!(after(3, 1, &node, false), [failed, "up"]);
        assert_eq!(
            after(
                3,
                2,
                &StoreError::Timeout(Duration::from_millis(100)),
                false
            ),
            [failed, "up"]
        );
        // Every master down, or the whole store known down by the probe:
        // down, as on one node.
        assert_eq!(after(3, 3, &node, false), [failed]);
        assert_eq!(after(3, 1, &node, true), [failed]);
        assert_eq!(after(0, 0, &node, false), [failed]);
        // A failure that is not an outage says nothing of the nodes.
        assert_eq!(
            after(3, 1, &StoreError::Backend("WRONGTYPE".into()), false),
            [failed]
        );
    }
}
