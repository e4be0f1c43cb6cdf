//! A store that counts the decisions it is asked for, over a memory store
//! that it does not present as in-process (so the limiter treats it as a
//! remote store: bounded calls, health, the warning of unnamed layers).
#![allow(dead_code)]

use slidelog::store::{MemoryStore, Store};
use slidelog::{Checks, Decision, Detailed, JointDecision, Mode, Now, Request, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts `decide`, `decide_each` and `decide_all` calls.
#[derive(Debug, Default)]
pub struct Counting {
    inner: MemoryStore,
    calls: AtomicUsize,
}

impl Counting {
    /// A new counting store, shared.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// How many decisions the store was asked for.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn count(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Store for Counting {
    async fn decide(&self, r: &Request, mode: Mode, now: Now) -> Result<Decision, StoreError> {
        self.count();
        self.inner.decide(r, mode, now).await
    }

    async fn decide_each(&self, r: &Request, mode: Mode, now: Now) -> Result<Detailed, StoreError> {
        self.count();
        self.inner.decide_each(r, mode, now).await
    }

    async fn decide_all(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        self.count();
        self.inner.decide_all(checks, mode, now).await
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        self.inner.reset(key).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    fn kind(&self) -> &'static str {
        "counting"
    }
}
