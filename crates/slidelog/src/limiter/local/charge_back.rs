//! The charge-back of the local policy (docs/design.md §6, "Local
//! answers"): one task per limiter, started by the first record admitted
//! locally, that charges every journaled record back to the store at its
//! own timestamp with [`Store::charge_once`], and ends when the journal is
//! empty.
//!
//! Exactly once: each record carries an id (this instance's and a
//! sequence number) that the store checks and marks in the same atomic
//! step as the charge. A charge whose reply is lost (a timeout, a dropped
//! connection, a store frozen mid-way) stays in the journal and is sent
//! again; the store answers the second one "already" and changes nothing.
//! A record is removed from the journal only on the store's answer.

use super::Local;
use super::journal::Entry;
use crate::limiter::Inner;
use crate::limiter::bounded::CallBound;
use crate::limiter::health::{FIRST_RETRY, Health, LAST_RETRY};
use crate::metrics::ChargeBack;
use slidelog_core::{Clock, Now, Store, SystemClock};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Records charged per round before the journal is looked at again.
const BATCH: usize = 256;
/// How often the task looks at the store's health while it is down.
const WHILE_DOWN: Duration = Duration::from_millis(20);

/// Starts the charge-back task of `local` (needs a Tokio runtime; without
/// one the next local admission tries again). Returns whether it runs.
pub(super) fn start(local: &Arc<Local>, inner: &Inner) -> bool {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return false;
    };
    let task = Task {
        local: Arc::downgrade(local),
        store: inner.store.clone(),
        health: inner.health.clone(),
        bound: inner.bound,
    };
    runtime.spawn(task.run());
    true
}

/// What the task holds: the limiter's local part weakly (the task ends
/// with the limiter), its store, health and call bound.
struct Task {
    local: Weak<Local>,
    store: Arc<dyn Store>,
    health: Arc<Health>,
    bound: CallBound,
}

/// What one round of charges came to.
#[derive(Debug, Default)]
struct Round {
    /// Some charge failed transiently: wait before the next round.
    failed: bool,
    /// The store refused a record (not an outage): logged once per round.
    refused: Option<(String, slidelog_core::StoreError)>,
    dropped: usize,
}

impl Task {
    /// Charges back until the journal is empty.
    async fn run(self) {
        let mut wait = FIRST_RETRY;
        loop {
            let Some(local) = self.local.upgrade() else {
                return;
            };
            if self.health.is_down() {
                drop(local);
                tokio::time::sleep(WHILE_DOWN).await;
                continue;
            }
            let batch = local.journal.lock().batch(BATCH);
            if batch.is_empty() && local.finish() {
                return;
            }
            let round = self.round(&local, batch).await;
            drop(local);
            if let Some((key, error)) = &round.refused {
                tracing::error!(
                    key,
                    error = %error,
                    dropped = round.dropped,
                    "local records not charged back: the store refused them (not an outage); dropped from the journal"
                );
            }
            if round.failed {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(LAST_RETRY);
            } else {
                wait = FIRST_RETRY;
            }
        }
    }

    /// Charges `batch`, one record at a time. A key whose charge failed
    /// transiently is left for the next round (the other keys go on: one
    /// Cluster master down fails its keys at once); a timeout ends the
    /// round (a silent store would cost a timeout per key).
    async fn round(&self, local: &Local, batch: Vec<Entry>) -> Round {
        let mut round = Round::default();
        let mut failed_keys: Vec<String> = Vec::new();
        for entry in batch {
            let key = entry.charge.key();
            if failed_keys.iter().any(|k| k == key) {
                continue;
            }
            let outcome = match self.charge(&entry).await {
                Ok(outcome) => outcome,
                Err(e) if e.is_transient() => {
                    self.health.failed(&e, &self.store, self.bound);
                    round.failed = true;
                    if matches!(e, slidelog_core::StoreError::Timeout(_)) {
                        break;
                    }
                    failed_keys.push(key.to_owned());
                    continue;
                }
                Err(e) => {
                    round.dropped += 1;
                    round.refused.get_or_insert((key.to_owned(), e));
                    ChargeBack::Failed
                }
            };
            local.charged(&entry, outcome);
        }
        round
    }

    /// One record's charge: skipped when it has expired already (it would
    /// count nothing), else charged once at its own time.
    async fn charge(&self, entry: &Entry) -> Result<ChargeBack, slidelog_core::StoreError> {
        let ends = entry.ts.saturating_add(entry.charge.longest_window_ms());
        if ends <= SystemClock.now_ms() {
            return Ok(ChargeBack::Expired);
        }
        let call = self
            .store
            .charge_once(&entry.charge, Now::At(entry.ts), &entry.once);
        Ok(match self.bound.run(call).await? {
            true => ChargeBack::Charged,
            false => ChargeBack::Duplicate,
        })
    }
}

impl Local {
    /// Removes `entry` from the journal after the store answered it.
    fn charged(&self, entry: &Entry, outcome: ChargeBack) {
        let mut journal = self.journal.lock();
        journal.remove(entry.charge.key(), &entry.once.id);
        self.pending
            .store(journal.len(), std::sync::atomic::Ordering::Release);
        drop(journal);
        if let Some(m) = &self.metrics {
            m.local_charged_back(outcome);
            m.local_pending(self.pending());
        }
    }

    /// Ends the charge-back when nothing is left (under the journal's
    /// lock, so a record admitted meanwhile starts the next one): true
    /// when it ended. Expired local logs are swept then.
    fn finish(&self) -> bool {
        let mut journal = self.journal.lock();
        if journal.len() > 0 {
            return false;
        }
        journal.draining = false;
        drop(journal);
        self.store.sweep();
        tracing::info!("local answers charged back: every key decides on the store again");
        true
    }
}
