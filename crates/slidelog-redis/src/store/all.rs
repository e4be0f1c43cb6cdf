//! [`ScriptStore`]'s joint decisions (docs/design.md §1 "One request,
//! several keys", §4.7): every check's key in one call, one script run or
//! one module command, with the time, deadline, timeout and late-record
//! semantics of a single check.

use super::{ScriptStore, explicit_ms};
use crate::engine::Engine;
use crate::watched::AllCall;
use redis::aio::ConnectionLike;
use slidelog_core::{Checks, Clock, JointDecision, Mode, Now, StoreError, SystemClock};

impl<C> ScriptStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// [`slidelog_core::Store::decide_all`]: one atomic call over every
    /// check's key; on a Cluster, keys of several slots go through
    /// reservations on the scripts ([`super::cross`]) and record-then-refund
    /// on the module ([`super::cross_module`]).
    pub(crate) async fn decide_joint(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        let now_ms = explicit_ms(now)?;
        let deadline_ms = (mode == Mode::Record && now == Now::Server)
            .then(|| self.deadline_ms())
            .flatten();
        let keys: Vec<Vec<u8>> = checks
            .into_iter()
            .map(|r| self.redis_key(r.key()))
            .collect();
        let engine = self.engine.select(&self.conn)?;
        if crate::cluster::is_cluster(&self.conn) && !one_slot(&keys) {
            if engine == Engine::Module {
                return self
                    .decide_cross_slot_module(checks, keys, mode, now_ms)
                    .await;
            }
            return self.decide_cross_slot(checks, keys, mode, now).await;
        }
        let call = AllCall {
            engine,
            keys,
            checks: checks.clone(),
            mode,
            now_ms,
            deadline_ms,
        };
        let sent_ms = SystemClock.now_ms();
        let result =
            crate::watched::run_all(self.conn.clone(), call, self.timeout, self.counters.clone())
                .await;
        let used = result.as_ref().map(|o| o.first().map_or(0, |o| o.now_ms));
        self.watch_clock(now_ms.is_none(), sent_ms, used);
        let outcomes = result.map_err(|e| self.store_error(e))?;
        Ok(crate::joint::joint_of(&outcomes, checks))
    }
}

/// True when every key hashes to the first one's Cluster slot.
pub(crate) fn one_slot(keys: &[Vec<u8>]) -> bool {
    let mut slots = keys.iter().map(|k| crate::cluster::key_slot(k));
    let first = slots.next();
    slots.all(|s| Some(s) == first)
}
