//! Joint decisions over keys in several Cluster slots on the module engine
//! (docs/design.md §4.7). The module's log type keeps no reservations, so
//! the protocol is record-then-refund, with the module's own commands:
//!
//! 1. In every slot at once, `SLIDELOG.CHECKALL RECORD` over that slot's
//!    keys: the slot's checks decided together and, when they all admit,
//!    recorded (each admitted check's record is at the time the slot used).
//! 2. Every slot admitted: done, those records are the request's. Otherwise
//!    each admitted slot's records are refunded: `SLIDELOG.SETTLE` of the
//!    request's *share* of its record (the module merges the records of one
//!    millisecond, §4.1) to cost 0 in every limit, and the request is
//!    refused (a slot refused: each check's own answer) or fails.
//!
//! Never over-admits: a record counts from phase 1 until its refund, so a
//! decision in between can only be refused by it. A refund is sent from a
//! task of its own, so a caller that gives up (its own timeout) does not
//! stop it; a caller that crashes between the phases, or a refund that
//! cannot be delivered, leaves the records counted until they slide out
//! of their windows (conservative, §4.7).

use super::ScriptStore;
use super::cross::{Slot, slots};
use crate::joint::{JointCall, run_module};
use crate::script::Outcome;
use crate::usage::Usage;
use futures::future::join_all;
use redis::aio::ConnectionLike;
use slidelog_core::{Checks, JointDecision, Mode, Receipt, Request, StoreError};
use std::time::Instant;

/// One refund to send: the Redis key, the check's limits at cost 0, and
/// the receipt of the request's share of the record phase 1 made.
struct Refund {
    redis_key: Vec<u8>,
    usage: Request,
    receipt: Receipt,
}

impl<C> ScriptStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// [`slidelog_core::Store::decide_all`] over keys of several slots on
    /// the module engine (see the module docs). A peek asks each slot (each
    /// slot's keys at one instant, the slots each at its own).
    pub(crate) async fn decide_cross_slot_module(
        &self,
        checks: &Checks,
        keys: Vec<Vec<u8>>,
        mode: Mode,
        now_ms: Option<u64>,
    ) -> Result<JointDecision, StoreError> {
        let slots = slots(checks, keys)?;
        let started = Instant::now();
        let deadline_ms = self.record_deadline(mode)?;
        // Each slot bounded on its own: a slot that answered keeps its
        // reply (and so its records' times) when another one hangs.
        let phase1 = slots.iter().map(|slot| {
            let mut conn = self.conn.clone();
            let call = JointCall {
                keys: &slot.keys,
                checks: &slot.checks,
                mode,
                now_ms,
                deadline_ms,
                reserve: false,
            };
            async move {
                let reply = self.within(started, run_module(&mut conn, call)).await?;
                reply.map_err(|e| self.redis_error(e))
            }
        });
        let replies: Vec<Result<Vec<Outcome>, StoreError>> = join_all(phase1).await;
        let recorded = mode == Mode::Record && replies.iter().all(|r| all_admit(r.as_ref().ok()));
        if mode == Mode::Record && !recorded {
            self.refund(refunds(&slots, &replies)?, now_ms).await;
        }
        answer(checks, &slots, replies, recorded)
    }

    /// Phase 2: refunds every admitted slot's share, each settle bounded by
    /// the store's timeout, from a task of its own (a caller dropping this
    /// call does not cancel it). A refund that fails is logged: that
    /// record stays counted until it slides out (conservative).
    async fn refund(&self, refunds: Vec<Refund>, now_ms: Option<u64>) {
        if refunds.is_empty() {
            return;
        }
        let (conn, timeout) = (self.conn.clone(), self.timeout);
        let task = tokio::spawn(async move {
            let calls = refunds.into_iter().map(|r| {
                let mut conn = conn.clone();
                async move {
                    let usage = Usage::Settle(r.receipt);
                    // No deadline: a refund that lands late still takes
                    // back only this request's share, never another's.
                    let settle = crate::module::run_usage(
                        &mut conn,
                        &r.redis_key,
                        &r.usage,
                        &usage,
                        now_ms,
                        None,
                    );
                    crate::errors::bounded(timeout, settle).await
                }
            });
            join_all(calls).await
        });
        let failed = match task.await {
            Ok(answers) => answers.into_iter().filter(Result::is_err).count(),
            Err(_) => 1,
        };
        if failed > 0 {
            tracing::warn!(
                store = self.kind,
                failed,
                "a refused cross-slot joint decision on the module engine could not refund \
                 every admitted slot: those records count until they slide out (docs/design.md §4.7)"
            );
        }
    }
}

/// True when a slot answered and every check of it admitted.
fn all_admit(reply: Option<&Vec<Outcome>>) -> bool {
    reply.is_some_and(|o| o.iter().all(|o| o.decision.allowed))
}

/// The refunds of every slot that admitted (and so recorded): each check's
/// share of the record at the time its slot used.
fn refunds(
    slots: &[Slot],
    replies: &[Result<Vec<Outcome>, StoreError>],
) -> Result<Vec<Refund>, StoreError> {
    let mut refunds = Vec::new();
    for (slot, reply) in slots.iter().zip(replies) {
        let Ok(outcomes) = reply.as_ref() else {
            continue;
        };
        if !all_admit(Some(outcomes)) {
            continue;
        }
        for ((key, request), outcome) in slot.keys.iter().zip(&slot.checks).zip(outcomes) {
            let Some(record) = outcome.decision.record else {
                continue;
            };
            let zero = vec![0; request.limits().len()];
            let usage = Request::usage(request.key(), request.limits().to_vec(), zero)
                .map_err(|e| StoreError::Backend(e.to_string()))?;
            refunds.push(Refund {
                redis_key: key.clone(),
                usage,
                receipt: Receipt::new(request, record),
            });
        }
    }
    Ok(refunds)
}

/// The joint answer in the request's order: each check's reply, its record
/// named only when the whole request was `recorded`. A slot's error is the
/// answer's (the first, in the order the slots first appear).
fn answer(
    checks: &Checks,
    slots: &[Slot],
    replies: Vec<Result<Vec<Outcome>, StoreError>>,
    recorded: bool,
) -> Result<JointDecision, StoreError> {
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
