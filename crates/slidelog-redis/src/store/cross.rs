//! Joint decisions over keys in several Cluster slots (docs/design.md
//! §4.7): no script can hold them all, so the scripts decide in two phases.
//!
//! 1. In every slot at once, `check_all.lua` in mode `reserve`: the slot's
//!    checks decided together and, when they all admit, recorded as
//!    *reservations*: normal records that count in every decision, also
//!    listed in their log's pending set until the call's deadline.
//! 2. Every slot admitted: `reservation.lua confirm` in every slot (each
//!    reservation leaves the pending set and stays, a normal record at its
//!    own time). Otherwise `cancel` in the slots that admitted (their
//!    records leave the logs), and the request is refused.
//!
//! A reservation never confirmed (the caller crashed, a master died, a
//! reply was lost) is dropped by the next decision on its key once its
//! deadline has passed on that master's clock, so nothing waits on it and
//! it counts for no decision after the deadline. The deadline is the
//! call's own (its start plus the timeout less the skew margin): a call
//! whose cancel could not be sent returns only once it has passed.

use super::{ScriptStore, explicit_ms};
use crate::joint::{JointCall, reserved_member, run_script, settle_reservations};
use crate::script::Outcome;
use futures::future::join_all;
use redis::RedisResult;
use redis::aio::ConnectionLike;
use slidelog_core::{Checks, JointDecision, Mode, Now, Request, StoreError};
use std::time::{Duration, Instant};

/// One slot's share of a joint request: its checks' positions in the
/// request, their Redis keys and the checks themselves.
pub(super) struct Slot {
    pub(super) at: Vec<usize>,
    pub(super) keys: Vec<Vec<u8>>,
    pub(super) checks: Checks,
}

impl Slot {
    fn key_refs(&self) -> Vec<&[u8]> {
        self.keys.iter().map(Vec::as_slice).collect()
    }
}

/// Groups the checks by their key's slot, in the order slots first appear.
pub(super) fn slots(checks: &Checks, keys: Vec<Vec<u8>>) -> Result<Vec<Slot>, StoreError> {
    let slot_of: Vec<u16> = keys.iter().map(|k| crate::cluster::key_slot(k)).collect();
    let mut order: Vec<u16> = Vec::new();
    for s in &slot_of {
        if !order.contains(s) {
            order.push(*s);
        }
    }
    let mut keys: Vec<Option<Vec<u8>>> = keys.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|slot| {
            let at: Vec<usize> = (0..slot_of.len()).filter(|&i| slot_of[i] == slot).collect();
            let requests: Vec<Request> = at.iter().map(|&i| checks.as_slice()[i].clone()).collect();
            let checks = Checks::new(requests).map_err(|e| StoreError::Backend(e.to_string()))?;
            let keys = at.iter().filter_map(|&i| keys[i].take()).collect();
            Ok(Slot { at, keys, checks })
        })
        .collect()
}

impl<C> ScriptStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// [`slidelog_core::Store::decide_all`] over keys of several slots, by
    /// reservations (see the module docs). A peek asks each slot (each
    /// slot's keys at one instant, the slots one after the other's time).
    pub(crate) async fn decide_cross_slot(
        &self,
        checks: &Checks,
        keys: Vec<Vec<u8>>,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        let now_ms = explicit_ms(now)?;
        let slots = slots(checks, keys)?;
        let started = Instant::now();
        let deadline_ms = self.record_deadline(mode)?;
        let phase1 = slots.iter().map(|slot| {
            let mut conn = self.conn.clone();
            let call = JointCall {
                keys: &slot.keys,
                checks: &slot.checks,
                mode,
                now_ms,
                deadline_ms,
                reserve: mode == Mode::Record,
            };
            async move { run_script(&mut conn, call).await }
        });
        let replies = self.within(started, join_all(phase1)).await?;
        let admitted: Vec<bool> = replies.iter().map(|r| all_admit(r.as_ref().ok())).collect();
        let every = admitted.iter().all(|&a| a);
        if mode == Mode::Peek {
            return answer(checks, &slots, replies, false).map_err(|e| self.redis_error(e));
        }
        if every && self.confirm(&slots, &replies, started).await {
            return answer(checks, &slots, replies, true).map_err(|e| self.redis_error(e));
        }
        // Refused, failed, or a confirm that did not complete: take back
        // every slot's records (a refused slot recorded none).
        let cancelled = self.cancel(&slots, &replies, &admitted, started).await;
        if !cancelled {
            // Not cancelled: the reservations vanish at the deadline, which
            // this call waits for, so none is seen as recorded after it.
            tokio::time::sleep(self.timeout.saturating_sub(started.elapsed())).await;
        }
        if every {
            return Err(StoreError::Timeout(self.timeout));
        }
        answer(checks, &slots, replies, false).map_err(|e| self.redis_error(e))
    }

    /// Phase 2, confirm: true when every slot confirmed its reservations.
    async fn confirm(
        &self,
        slots: &[Slot],
        replies: &[RedisResult<Vec<Outcome>>],
        started: Instant,
    ) -> bool {
        let calls = slots.iter().zip(replies).map(|(slot, reply)| {
            let mut conn = self.conn.clone();
            let members = members_of(slot, reply);
            async move {
                let keys = slot.key_refs();
                settle_reservations(&mut conn, &keys, &members, true).await
            }
        });
        match self.within(started, join_all(calls)).await {
            Ok(answers) => answers.into_iter().all(|a| matches!(a, Ok(true))),
            Err(_) => false,
        }
    }

    /// Phase 2, cancel, in the slots that admitted: true when every one of
    /// them answered.
    async fn cancel(
        &self,
        slots: &[Slot],
        replies: &[RedisResult<Vec<Outcome>>],
        admitted: &[bool],
        started: Instant,
    ) -> bool {
        let calls = slots
            .iter()
            .zip(replies)
            .zip(admitted)
            .filter(|(_, admitted)| **admitted)
            .map(|((slot, reply), _)| {
                let mut conn = self.conn.clone();
                let members = members_of(slot, reply);
                async move {
                    let keys = slot.key_refs();
                    settle_reservations(&mut conn, &keys, &members, false).await
                }
            });
        match self.within(started, join_all(calls)).await {
            Ok(answers) => answers.into_iter().all(|a| a.is_ok()),
            Err(_) => false,
        }
    }

    /// `work` within what is left of the call's timeout.
    pub(super) async fn within<T>(
        &self,
        started: Instant,
        work: impl Future<Output = T>,
    ) -> Result<T, StoreError> {
        let left = self.timeout.saturating_sub(started.elapsed());
        tokio::time::timeout(left.max(Duration::from_millis(1)), work)
            .await
            .map_err(|_| StoreError::Timeout(self.timeout))
    }

    pub(super) fn redis_error(&self, error: redis::RedisError) -> StoreError {
        self.store_error(crate::watched::CallError::Redis(error))
    }
}

/// True when a slot answered and every check of it admitted.
fn all_admit(reply: Option<&Vec<Outcome>>) -> bool {
    reply.is_some_and(|o| o.iter().all(|o| o.decision.allowed))
}

/// The members a slot's phase 1 recorded (its checks' reservations).
fn members_of(slot: &Slot, reply: &RedisResult<Vec<Outcome>>) -> Vec<String> {
    let Ok(outcomes) = reply else {
        return Vec::new();
    };
    outcomes
        .iter()
        .zip(&slot.checks)
        .filter_map(|(o, request)| {
            let id = o.decision.record.and_then(|r| r.id)?;
            Some(reserved_member(request, id))
        })
        .collect()
}

/// The joint answer in the request's order: each check's reply, its record
/// named only when the whole request was `recorded`. A slot's error is
/// the answer's.
fn answer(
    checks: &Checks,
    slots: &[Slot],
    replies: Vec<RedisResult<Vec<Outcome>>>,
    recorded: bool,
) -> RedisResult<JointDecision> {
    let mut ordered: Vec<Option<Outcome>> = vec![None; checks.len()];
    for (slot, reply) in slots.iter().zip(replies) {
        for (at, mut outcome) in slot.at.iter().zip(reply?) {
            if !recorded {
                outcome.decision.record = None;
            }
            ordered[*at] = Some(outcome);
        }
    }
    let outcomes: Vec<Outcome> = ordered.into_iter().flatten().collect();
    Ok(crate::joint::joint_of(&outcomes, checks))
}
