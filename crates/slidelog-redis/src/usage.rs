//! Settle and charge on the scripts' layout (docs/design.md §4.5): one run
//! of `usage.lua` per operation, atomically, on the log and its weights key
//! (one Cluster slot). The receipt names the record by its member's ULID,
//! made client-side when the check ran ([`crate::members`]), so the check
//! scripts' replies are unchanged; a settle renames the record to a fresh
//! ULID (so a receipt settles once) and a charge into a full log merges
//! into the newest record under the charge's ULID.

use crate::members::{cost_list, fresh_id, id_text, member_with_id};
use crate::script::{Outcome, limit_args, parse_reply};
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, RedisResult, Script};
use slidelog_core::{Receipt, RecordRef, Request};
use std::sync::LazyLock;

/// The Lua source of a settle or a charge: the steps every script shares
/// (`prelude.lua`), then `usage.lua`.
pub const USAGE_SOURCE: &str = concat!(include_str!("prelude.lua"), include_str!("usage.lua"));

/// The usage script, hashed once per process.
pub static USAGE: LazyLock<Script> = LazyLock::new(|| Script::new(USAGE_SOURCE));

/// The error code of a settle or charge on a key the module holds.
pub const MODULE_KEY_CODE: &str = "MODULEKEY";

/// True when `err` is the script refusing a key the module holds.
pub fn is_module_key(err: &RedisError) -> bool {
    err.code() == Some(MODULE_KEY_CODE)
}

/// What to do with the request's costs.
#[derive(Debug, Clone)]
pub enum Usage {
    /// Change the record the receipt names to the request's costs.
    Settle(Receipt),
    /// Append a record of the request's costs without deciding.
    Charge,
    /// [`Charge`](Self::Charge) at most once per mark's id: the once key
    /// (the log's slot, [`crate::keys::once_key`]) is checked and set in
    /// the same run (docs/design.md §6, "Local answers").
    ChargeOnce(slidelog_core::OnceMark),
}

impl Usage {
    /// "settle" or "charge".
    pub fn name(&self) -> &'static str {
        match self {
            Self::Settle(_) => "settle",
            Self::Charge | Self::ChargeOnce(_) => "charge",
        }
    }
}

/// What one settle or charge answers: whether it changed the log (the
/// record was found, or the costs were recorded) and the limits after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageOutcome {
    /// Settle: the record was found and settled. Charge: the costs were
    /// recorded (appended, or merged into a full log's newest record).
    pub done: bool,
    /// The limits after the change; its `record` names the settled record
    /// (under its new id) or the charged one (appended, or merged into).
    pub outcome: Outcome,
    /// A settle the store refused for its receipt: the module answers `2`
    /// for a receipt already settled, `3` for a key holding its most
    /// settled receipts (docs/design.md §4.6, "Single use").
    pub refused: Option<slidelog_core::ReceiptError>,
    /// A charge made once whose id had charged already (answered `4`):
    /// nothing changed.
    pub already: bool,
}

/// Runs one settle or charge of `request` (a [`Request::usage`]) on
/// `redis_key` (prefix applied). `now_ms` is `None` for Redis `TIME`;
/// `deadline_ms` as a check's (the script refuses past it, changing nothing).
pub async fn run<C: ConnectionLike>(
    conn: &mut C,
    redis_key: &[u8],
    request: &Request,
    usage: &Usage,
    now_ms: Option<u64>,
    deadline_ms: Option<u64>,
) -> RedisResult<UsageOutcome> {
    let mut invocation = USAGE.key(redis_key);
    invocation.key(crate::keys::weights_key(redis_key));
    if let Usage::ChargeOnce(once) = usage {
        invocation.key(crate::keys::once_key(redis_key, &once.id));
    }
    invocation
        .arg(usage.name())
        .arg(now_ms.map_or(-1, |ms| ms as i64))
        .arg(deadline_ms.map_or(-1, |ms| ms as i64))
        .arg(limit_args(request));
    let id = push_usage_args(&mut invocation, usage, request);
    let reply: Vec<i64> = invocation.invoke_async(conn).await?;
    let unexpected = "usage.lua answered an unexpected reply";
    // The last number is the record's timestamp: a charge merged into the
    // newest record names it where it is (later than now after a clock
    // stepped back).
    let Some((&record_ts, reply)) = reply.split_last() else {
        return Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            unexpected,
        )));
    };
    let removed = request.costs().iter().all(|&c| c == 0);
    let named = Named {
        id: Some(id),
        ts: u64::try_from(record_ts).ok().filter(|&ts| ts > 0),
    };
    parse_usage_reply(reply, (usage, request), named, removed, unexpected)
}

/// Adds what the script takes after the limits for `usage`: a charge's new
/// member (and a once charge's TTL), or a settle's record and costs. Returns
/// the id the record is named by afterwards.
fn push_usage_args(
    invocation: &mut redis::ScriptInvocation<'_>,
    usage: &Usage,
    request: &Request,
) -> u128 {
    match usage {
        Usage::Charge => {
            let (member, id) = member_with_id(request);
            invocation.arg(member);
            id
        }
        Usage::ChargeOnce(once) => {
            let (member, id) = member_with_id(request);
            invocation.arg(member).arg(once.ttl_ms);
            id
        }
        Usage::Settle(receipt) => {
            // A receipt without an id (another store's) names no member here.
            // The settled record takes a fresh id, so this receipt settles
            // once: the answer names the new one (docs/design.md §4.5).
            let fresh = fresh_id();
            invocation
                .arg(id_text(receipt.id().unwrap_or(0)))
                .arg(receipt.ts())
                .arg(cost_list(receipt.costs()))
                .arg(cost_list(request.costs()))
                .arg(id_text(fresh));
            fresh
        }
    }
}

/// How a settle's or charge's answer names its record: the id (the
/// scripts' members; `None` for the module, which finds records by time and
/// costs) and, when the reply carries it, the charged record's timestamp
/// (else a charge names `now`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Named {
    pub(crate) id: Option<u128>,
    pub(crate) ts: Option<u64>,
}

/// `[done, allowed, limit, window_ms, count, remaining, retry_after_ms,
/// reset_after_ms, now_ms, (count_i, remaining_i, retry_after_ms_i,
/// reset_after_ms_i){n}]`, as `usage.lua` and the module's SLIDELOG.SETTLE /
/// SLIDELOG.CHARGE both answer it (`unexpected`: the error's text when it
/// is not; `usage.lua`'s trailing record time is taken off before). The
/// record is named as `named` says; `removed`: the costs are 0 everywhere,
/// so a settle removed the record and there is nothing to name.
pub(crate) fn parse_usage_reply(
    reply: &[i64],
    (usage, request): (&Usage, &Request),
    named: Named,
    removed: bool,
    unexpected: &'static str,
) -> RedisResult<UsageOutcome> {
    let Some((&done, rest)) = reply.split_first().filter(|(d, _)| (0..=4).contains(*d)) else {
        return Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            unexpected,
            format!("{reply:?}"),
        )));
    };
    let mut outcome = parse_reply(rest)?;
    let refused = match done {
        2 => Some(slidelog_core::ReceiptError::Spent),
        3 => Some(slidelog_core::ReceiptError::TooManySettles),
        _ => None,
    };
    let already = done == 4;
    let done = done == 1;
    let kept = match usage {
        Usage::Charge | Usage::ChargeOnce(_) => {
            done.then_some(named.ts.unwrap_or(request.stored_at(outcome.now_ms)))
        }
        // A record settled to 0 everywhere is gone: nothing to name.
        Usage::Settle(receipt) => (done && !removed).then_some(receipt.ts()),
    };
    outcome.decision.record = kept.map(|ts| RecordRef { ts, id: named.id });
    Ok(UsageOutcome {
        done,
        outcome,
        refused,
        already,
    })
}
