//! The module's commands (docs/design.md §4.3), in safe Rust over
//! [`crate::ffi`]'s key handles. Each decision is `slidelog_core::engine`'s,
//! on the key's `slidelog_core::Log`, so the module and the memory store
//! decide by the same code.
//!
//! - `SLIDELOG.CHECK <key> <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <n> (<max> <window_ms> <cost>){n} [EACH]`
//!   answers `[allowed, limit, window_ms, count, remaining, retry_after_ms,
//!   reset_after_ms, now_ms_used]`; with `EACH`, followed by every limit's
//!   `count_i, remaining_i, retry_after_ms_i, reset_after_ms_i` in the
//!   request's order (`engine::evaluate_each`: the scripts' reply shape).
//! - `SLIDELOG.RESET <key>`: 1 when a log (module or sorted set) was deleted, else 0.
//! - `SLIDELOG.INFO <key>`: `records, units, oldest_ms, newest_ms, bytes, weighted`,
//!   then the granules ([`crate::granules`]): `span_ms, granule_ms, tiers` and
//!   `tier_<i>_granule_ms, tier_<i>_records` per tier.
//! - `SLIDELOG.SETTLE <key> <now_ms|*> <deadline_ms|0> <record_ts> <record_cost_1,...> <n> (<max> <window_ms> <cost>){n} [SPEND <nonce> <until_ms>]`:
//!   `engine::settle` of the share a receipt names (its costs) of the
//!   record at its timestamp, replaced by the costs given (0 in a limit:
//!   counts nowhere there; nothing left anywhere: refunded); with `SPEND`,
//!   the receipt settles once (its nonce is kept until `until_ms`).
//!   Answers `[settled, allowed, limit, window_ms, count, remaining,
//!   retry_after_ms, reset_after_ms, now_ms_used]`, the limits as
//!   `engine::standing` gives them after the change; `settled` is `2` for
//!   a receipt settled already and `3` for a key holding its most settled
//!   receipts (nothing changed).
//! - `SLIDELOG.CHARGE <key> <now_ms|*> <deadline_ms|0> <n> (<max> <window_ms> <cost>){n} [ONCE <once_key> <ttl_ms>]`:
//!   `engine::charge`, the costs recorded unchecked (into the newest record,
//!   moved to now, when a limit they cost in is full; costs 0 everywhere:
//!   nothing). Answers as SETTLE, its first field 1 when costs were recorded.
//!   With `ONCE` (a key in the log key's slot): when the once key exists
//!   nothing changes and the first field is `4`; else the charge is made
//!   and the once key set for `ttl_ms` (`SET ... PXAT` propagated beside
//!   the charge's APPLY), so a charge sent again counts once.
//! - `SLIDELOG.APPLY <key> <now_ms>:<expire_window_ms|0>:<expire_in_ms|_>:<cost_1,cost_2,...|0>[:<record_ts>/<n>/<record_cost_1,...>[/<nonce>/<until_ms>]|:merge|:spent/<nonce>/<until_ms>/...|:sweep]`:
//!   the change a decision, a settle or a charge made, with the time it
//!   used (and a settle's receipt's nonce); what they propagate to
//!   replicas and the AOF (which never read a clock). `spent/...` restores
//!   a log's settled receipts (an AOF rewrite writes it). It runs only from the replication link or an AOF being
//!   loaded, never from a client, and refuses times no primary propagates
//!   ([`crate::clock`]).
//!
//! An explicit `now_ms` is at most [`crate::clock::MAX_AHEAD_MS`] after the
//! server's clock (a record in the future blocks its key until the clock
//! passes it); any time before it is taken.

use crate::adopt;
use crate::args;
use crate::args::Action;
use crate::clock;
use crate::error::CommandError;
use crate::ffi::{Ctx, Key, Kind};
use crate::granules;
use slidelog_core::log::SPENT_MARGIN_MS;
use slidelog_core::{
    Decision, Detailed, Log, MAX_SPENT, Mode, ReceiptError, Request, Spend, engine,
};
use std::borrow::Cow;

/// A reply's integers: on the stack for a check's 8 fields and a usage
/// reply's 9 (no allocation per call in the server's allocator).
pub type Integers = smallvec::SmallVec<[i64; 9]>;

/// A successful reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// One integer.
    Integer(i64),
    /// An array of integers.
    Integers(Integers),
    /// A flat array of name / integer pairs (names fixed, or numbered as
    /// `SLIDELOG.INFO`'s tiers).
    Pairs(Vec<(Cow<'static, str>, i64)>),
}

/// Every record of `log` that counts as `(timestamp, costs)`, oldest first
/// (refunded records not yet compacted are left out).
pub fn records(log: &Log) -> impl Iterator<Item = (u64, Vec<u64>)> + '_ {
    log.records().map(|(ts, costs)| (ts, costs.to_vec()))
}

/// What `MEMORY USAGE` counts for a log: the value and its heap.
pub fn bytes(log: &Log) -> usize {
    std::mem::size_of::<Log>() + log.heap_bytes()
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The key's log, adopting a sorted set (and dropping its weights hash):
/// `(log, adopted)`, `None` for an empty key.
pub(crate) fn take_log(
    ctx: &Ctx,
    key: &mut Key<'_>,
    name: &[u8],
) -> Result<Option<(Log, bool)>, CommandError> {
    match key.kind() {
        Kind::Empty => Ok(None),
        Kind::Log => {
            let log = key.log_mut().ok_or(CommandError::WrongType)?;
            Ok(Some((std::mem::take(log), false)))
        }
        Kind::SortedSet => {
            let log = adopt::log_of(key.sorted_set_entries());
            ctx.delete_named(&adopt::weights_key(name));
            Ok(Some((log, true)))
        }
        Kind::Other => Err(CommandError::WrongType),
    }
}

/// Puts `log` back into the key (deleting the key when it is empty) and
/// sets its expiry when `expire_at_ms` is given.
fn store(
    key: &mut Key<'_>,
    log: Log,
    was_module: bool,
    expire_at_ms: Option<u64>,
) -> Result<(), CommandError> {
    if log.is_empty() {
        key.delete();
        return Ok(());
    }
    match key.log_mut() {
        Some(slot) if was_module => *slot = log,
        _ => key.set_log(log)?,
    }
    if let Some(at) = expire_at_ms {
        key.set_expire_at(at);
    }
    Ok(())
}

/// The expiry a log gets: its newest record plus its horizon (or the
/// request's longest window when longer: docs/design.md §1), on the
/// server's clock (equal to `newest + horizon` on server time; shifted by
/// the difference when the caller gave its own time, as the scripts'
/// relative `PEXPIRE` is), at most `clock::MAX_TTL_MS` ahead.
fn expire_at(log: &Log, now: u64, server_ms: u64, longest: u64) -> Option<u64> {
    let newest = log.newest()?;
    Some(clock::expiry(
        (newest + log.keep_for(longest)).saturating_sub(now),
        server_ms,
    ))
}

/// The server's clock for a call: `now` itself when the call used the
/// server's clock (`*`), else read afresh.
fn server_clock(ctx: &Ctx, call: &args::Check, now: u64) -> u64 {
    if call.now_ms.is_some() {
        ctx.server_ms()
    } else {
        now
    }
}

/// Whether an admitted record would be written after the caller's deadline
/// (compared on the server's clock, as the scripts compare theirs).
fn is_late(ctx: &Ctx, call: &args::Check, now: u64, allowed: bool) -> bool {
    call.mode == Mode::Record
        && allowed
        && call
            .deadline_ms
            .is_some_and(|d| server_clock(ctx, call, now) > d)
}

/// The decision's fields and the time it used, as CHECK answers them.
pub(crate) fn decision_fields(decision: &Decision, now: u64) -> [i64; 8] {
    [
        i64::from(decision.allowed),
        int(decision.limit),
        int(decision.window_ms),
        int(decision.count),
        int(decision.remaining),
        int(decision.retry_after_ms),
        int(decision.reset_after_ms),
        int(now),
    ]
}

/// Every limit's `count, remaining, retry_after_ms, reset_after_ms`, in
/// the request's order, after a reply's decision fields (the shape the
/// scripts answer, `slidelog_core::Detailed::with_counts`).
pub(crate) fn each_limit(detailed: &Detailed, out: &mut Integers) {
    for c in detailed.limits.iter().filter_map(|s| s.counts) {
        out.extend([
            int(c.count),
            int(c.remaining),
            int(c.retry_after_ms),
            int(c.reset_after_ms),
        ]);
    }
}

/// What a check did to the key's log, to be stored and replicated.
pub(crate) struct Outcome {
    /// The log was a sorted set converted on this touch.
    pub adopted: bool,
    /// Records dropped as expired.
    pub dropped: usize,
    /// The request's record was appended.
    pub appended: bool,
    /// The check recorded (RECORD and not refused by its deadline).
    pub recorded: bool,
}

/// Stores the log back into the key and, when the check changed it,
/// replicates the change as `SLIDELOG.APPLY` with the time used (`now`);
/// `server` is the server's clock, for the expiry.
pub(crate) fn persist(
    key: &mut Key<'_>,
    was_module: bool,
    log: Log,
    request: &Request,
    (now, server): (u64, u64),
    outcome: &Outcome,
) -> Result<(), CommandError> {
    if outcome.adopted || outcome.dropped > 0 || outcome.appended {
        let at = expire_at(&log, now, server, request.longest_window_ms());
        // An appended record is at its stored time, and a replica expires
        // from there what this decision expired from `now`
        // (docs/design.md §1.1).
        let ts = if outcome.appended {
            request.stored_at(now)
        } else {
            now
        };
        let window = if outcome.recorded {
            engine::keep_from(now, ts, request)
        } else {
            0
        };
        let mut change = args::Change::new();
        let costs: &[u64] = if outcome.appended {
            request.costs()
        } else {
            &[]
        };
        args::change(ts, window, at, costs, &mut change);
        store(key, log, was_module, at)?;
        key.replicate_apply(&change);
    } else if was_module {
        store(key, log, true, None)?;
    }
    Ok(())
}

/// Replicates a coarse tier's rebuilds (docs/design.md §1.1) before the
/// change of the call that made them: the expiry the call made first (a
/// record expired before the rebuild must not survive it by moving), then
/// each rebuild. Nothing when there was none (the usual call).
pub(crate) fn replicate_rounds(
    key: &Key<'_>,
    now: u64,
    request: &Request,
    rounds: &engine::Rounds,
) {
    if rounds.is_empty() {
        return;
    }
    let mut change = args::Change::new();
    args::change(now, request.longest_window_ms(), None, &[], &mut change);
    key.replicate_apply(&change);
    for &(through, granule) in rounds {
        let mut change = args::Change::new();
        args::round_change(now, through, granule, &mut change);
        key.replicate_apply(&change);
    }
}

/// `SLIDELOG.CHECK`.
pub fn check(ctx: &Ctx, argv: &[&[u8]]) -> Result<Reply, CommandError> {
    let call = args::check(argv)?;
    if let Some(now) = call.now_ms {
        clock::caller_now(now, ctx.server_ms())?;
    }
    let name = argv[0];
    let mut key = ctx.open_key(true);
    let kind = key.kind();
    let (mut log, adopted) = take_log(ctx, &mut key, name)?.unwrap_or_default();
    let now = match call.now_ms {
        Some(ms) => ms,
        None => ctx.server_ms(),
    };
    let request = &call.request;
    // engine::decide_and_record in its three steps (expire, evaluate,
    // append), with the deadline between: a record that would be written
    // after the caller gave up is refused, changing nothing. Evaluating
    // before the expiry gives the same decision (expired records are not
    // live for any of the request's windows).
    let detailed = if call.each {
        engine::evaluate_each(&log, now, request)
    } else {
        Detailed {
            decision: engine::evaluate(&log, now, request),
            limits: Vec::new(),
        }
    };
    let decision = detailed.decision;
    let late = is_late(ctx, &call, now, decision.allowed);
    let mut outcome = Outcome {
        adopted,
        dropped: 0,
        appended: false,
        recorded: call.mode == Mode::Record && !late,
    };
    if outcome.recorded {
        outcome.dropped = log.expire(now, request.longest_window_ms());
        let rounds = engine::rebucket(&mut log, now, request.limits(), false);
        replicate_rounds(&key, now, request, &rounds);
        if decision.allowed {
            let ts = request.stored_at(now);
            log.append(ts, request.costs());
            log.raise_horizon(engine::keep_from(now, ts, request));
            outcome.appended = true;
        }
    }
    let times = (now, server_clock(ctx, &call, now));
    persist(&mut key, kind == Kind::Log, log, request, times, &outcome)?;
    if late {
        return Err(CommandError::Deadline);
    }
    let mut reply = Integers::with_capacity(8 + 4 * detailed.limits.len());
    reply.extend(decision_fields(&decision, now));
    each_limit(&detailed, &mut reply);
    Ok(Reply::Integers(reply))
}

/// `SLIDELOG.SETTLE`.
pub fn settle(ctx: &Ctx, argv: &[&[u8]]) -> Result<Reply, CommandError> {
    usage(ctx, argv, args::settle(argv)?)
}

/// `SLIDELOG.CHARGE`: with `ONCE`, a no-op answered `4` when its once key
/// exists, else the charge and the once key set (docs/design.md §6, "Local
/// answers").
pub fn charge(ctx: &Ctx, argv: &[&[u8]]) -> Result<Reply, CommandError> {
    let call = args::charge(argv)?;
    let Some(once) = call.once.clone() else {
        return usage(ctx, argv, call);
    };
    let server = ctx.server_ms();
    usage_times(&call, server)?;
    if ctx.exists_named(&once.key) {
        return Ok(already(ctx, &call, server));
    }
    let reply = usage(ctx, argv, call)?;
    ctx.mark_once(&once.key, server.saturating_add(once.ttl_ms))?;
    Ok(reply)
}

/// The answer of a charge made already: `4`, then the limits as they
/// stand (a module log's, or none counted for another key), nothing changed.
fn already(ctx: &Ctx, call: &args::Usage, server: u64) -> Reply {
    let now = call.now_ms.unwrap_or(server);
    let mut key = ctx.open_key(false);
    let log = key.log_mut().cloned().unwrap_or_default();
    let detailed = engine::standing_each(&log, now, call.request.limits());
    let mut reply = Integers::with_capacity(9 + 4 * detailed.limits.len());
    reply.push(4);
    reply.extend(decision_fields(&detailed.decision, now));
    each_limit(&detailed, &mut reply);
    Reply::Integers(reply)
}

/// What a settle or charge did on the log, to be answered and replicated.
struct UsageRun {
    /// Settle: the share was settled. Charge: costs were recorded.
    done: bool,
    /// A settle refused for its receipt: settled already, or the key holds
    /// its most settled receipts (docs/design.md §4.6, "Single use").
    refused: Option<ReceiptError>,
    /// The limits after it.
    detailed: Detailed,
}

/// `engine::settle` (`call.receipt` given) or `engine::charge` on `log`.
fn run_usage(log: &mut Log, now: u64, call: &args::Usage) -> UsageRun {
    match &call.receipt {
        Some(receipt) => {
            let s = engine::settle(log, now, &call.request, receipt);
            UsageRun {
                done: s.settled,
                refused: s.refused,
                detailed: Detailed {
                    decision: s.decision,
                    limits: s.limits,
                },
            }
        }
        None => {
            let d = engine::charge(log, now, &call.request);
            UsageRun {
                done: d.decision.record.is_some(),
                refused: None,
                detailed: d,
            }
        }
    }
}

/// The `SLIDELOG.APPLY` change that replays `run`: the expiry, then a
/// settle's target with its receipt's nonce, a merged charge, a sweep of
/// expired nonces that settled nothing (`swept`), or an append.
fn usage_change(
    call: &args::Usage,
    run: &UsageRun,
    (now, home): (u64, Option<u64>),
    at: Option<u64>,
    merge: bool,
    swept: bool,
) -> args::Change {
    let request = &call.request;
    let mut change = args::Change::new();
    let costs: &[u64] = if run.done { request.costs() } else { &[] };
    // A charge records at its stored time, and the replica expires from
    // there what this call expired from `now` (docs/design.md §1.1).
    let ts = if call.receipt.is_none() {
        request.stored_at(now)
    } else {
        now
    };
    let window = engine::keep_from(now, ts, request);
    args::change(ts, window, at, costs, &mut change);
    match (&call.receipt, run.done) {
        (Some(receipt), true) => {
            let positions = request.limits().len();
            // Where the settle found the record: where it was stored, or
            // its coarse tier's time.
            let ts = home.unwrap_or(receipt.ts());
            let share = receipt.costs();
            args::settle_target(ts, positions, share, receipt.spend(), &mut change);
        }
        (None, true) if merge => args::merge_marker(&mut change),
        _ if swept => args::sweep_marker(&mut change),
        _ => {}
    }
    change
}

/// A settle's or charge's reply: `done` (`2` for a receipt settled
/// already, `3` for a key holding its most settled receipts), the deciding
/// limit's 8 fields, then 4 per limit.
fn usage_reply(run: &UsageRun, now: u64) -> Reply {
    let code = match run.refused {
        Some(ReceiptError::Spent) => 2,
        Some(ReceiptError::TooManySettles) => 3,
        Some(_) => 0,
        None => i64::from(run.done),
    };
    let mut reply = Integers::with_capacity(9 + 4 * run.detailed.limits.len());
    reply.push(code);
    reply.extend(decision_fields(&run.detailed.decision, now));
    each_limit(&run.detailed, &mut reply);
    Reply::Integers(reply)
}

/// A caller's times of a settle or charge, before the key is touched: its
/// `now_ms` and its receipt's `until_ms` against the server's clock, and
/// its deadline.
fn usage_times(call: &args::Usage, server: u64) -> Result<(), CommandError> {
    if let Some(now) = call.now_ms {
        clock::caller_now(now, server)?;
    }
    if let Some(spend) = call.receipt.as_ref().and_then(|r| r.spend()) {
        clock::caller_until(spend.until_ms, server)?;
    }
    if call.deadline_ms.is_some_and(|d| server > d) {
        return Err(CommandError::UsageDeadline);
    }
    Ok(())
}

/// A settle (`call.receipt` given) or a charge: refused past the caller's
/// deadline before the key is touched; else `engine::settle` /
/// `engine::charge` on the key's log, stored back, and, when the log
/// changed (adopted, records expired, the record settled or appended, a
/// full set of settled receipts swept), propagated as `SLIDELOG.APPLY`
/// with the time used.
fn usage(ctx: &Ctx, argv: &[&[u8]], call: args::Usage) -> Result<Reply, CommandError> {
    let server = ctx.server_ms();
    usage_times(&call, server)?;
    let now = call.now_ms.unwrap_or(server);
    let request = &call.request;
    let mut key = ctx.open_key(true);
    let kind = key.kind();
    let (mut log, adopted) = take_log(ctx, &mut key, argv[0])?.unwrap_or_default();
    let (records, spent) = (log.len(), log.spent().len());
    // A charge into a full log merges into its newest record: the replica
    // must do the same (judged before the expiry: what expires is live for
    // none of the request's windows, so the answer is the same).
    let merge = call.receipt.is_none()
        && request.costs().iter().any(|&c| c > 0)
        && engine::charge_merges(&log, now, request);
    // The expiry and the coarse tiers' rebuilds engine::settle and
    // engine::charge would make, made here so that replicas replay them
    // (theirs then find nothing to do).
    let expired = log.expire(now, request.longest_window_ms());
    let rounds = engine::rebucket(
        &mut log,
        now,
        request.limits(),
        call.receipt.is_some() || merge,
    );
    replicate_rounds(&key, now, request, &rounds);
    let home = call
        .receipt
        .as_ref()
        .and_then(|r| engine::settle_home(&log, now, r, request));
    let run = run_usage(&mut log, now, &call);
    // A settle that found the key's settled receipts full forgot the
    // expired ones first, even when it then settled nothing.
    let swept = !run.done && log.spent().len() != spent;
    let was_module = kind == Kind::Log;
    if adopted || run.done || log.len() != records || expired > 0 || swept {
        let at = expire_at(&log, now, server, request.longest_window_ms());
        let change = usage_change(&call, &run, (now, home), at, merge, swept);
        store(&mut key, log, was_module, at)?;
        ctx.replicate_apply(&change);
    } else if was_module {
        store(&mut key, log, true, None)?;
    }
    Ok(usage_reply(&run, now))
}

/// A settle's change on a replica, as `engine::settle` made it: a full set
/// of settled receipts swept first, the share the target names replaced
/// by `costs` (none: refunded), and its receipt's nonce kept.
fn apply_settle(log: &mut Log, now: u64, target: &args::Target, costs: &[u64]) {
    if target.spend.is_some() {
        log.can_spend(now);
    }
    // The share as the settle read it: its first `positions` costs.
    let share: Vec<u64> = (0..target.positions).map(|p| target.cost_at(p)).collect();
    let new: &[u64] = if costs.is_empty() { &[0] } else { costs };
    let settled = log.settle_share(target.ts, &share, new);
    if let Some(s) = target.spend.filter(|_| settled) {
        // Room was made above, as on the primary.
        let _ = log.spend(s.nonce, s.until_ms, now);
    }
}

/// Settled receipts an AOF rewrite wrote, kept as they were (until their
/// validity plus the margin); refused, changing nothing, past `MAX_SPENT`.
fn restore_spent(log: &mut Log, entries: &[Spend]) -> Result<(), CommandError> {
    let full = || CommandError::Argument {
        field: "spent".into(),
        problem: format!("must leave the key at most {MAX_SPENT} settled receipts"),
    };
    if log.spent().len() + entries.len() > MAX_SPENT {
        return Err(full());
    }
    let kept: Vec<(u64, u64)> = entries
        .iter()
        .map(|s| (s.nonce, s.until_ms.saturating_add(SPENT_MARGIN_MS)))
        .collect();
    log.restore_spent(&kept).map_err(|_| full())
}

/// What an APPLY does to the key's log: drops the records expired for its
/// window, then its [`args::Action`]. An error (settled receipts past
/// `MAX_SPENT`) changed nothing after the expiry.
pub fn replay(log: &mut Log, call: &args::Apply) -> Result<(), CommandError> {
    if call.expire_window_ms > 0 {
        log.expire(call.now_ms, call.expire_window_ms);
    }
    match &call.action {
        Action::Settle(target) => apply_settle(log, call.now_ms, target, &call.costs),
        Action::Append | Action::Merge if call.costs.is_empty() => {}
        Action::Append | Action::Merge => {
            if call.action == Action::Merge {
                log.merge_into_newest(call.now_ms, &call.costs);
            } else {
                log.append(call.now_ms, &call.costs);
            }
            // A check that admitted or a charge: it recorded.
            log.raise_horizon(call.expire_window_ms);
        }
        Action::Sweep => {
            log.can_spend(call.now_ms);
        }
        Action::Round {
            through_ms,
            granule_ms,
        } => {
            log.round_through(*through_ms, *granule_ms);
        }
        Action::Spent(entries) => restore_spent(log, entries)?,
    }
    Ok(())
}

/// `SLIDELOG.APPLY`: replays a decision's, a settle's or a charge's change
/// exactly, or restores a log's settled receipts (an AOF rewrite). Only
/// from the replication link or an AOF being loaded, and only times a
/// primary could have propagated (`clock::apply_times`).
pub fn apply(ctx: &Ctx, argv: &[&[u8]]) -> Result<Reply, CommandError> {
    if !ctx.is_replicated_or_loading() {
        return Err(CommandError::NotReplicated);
    }
    let call = args::apply(argv)?;
    clock::apply_times(&call, ctx.server_ms())?;
    let mut key = ctx.open_key(true);
    let kind = key.kind();
    let (mut log, _) = take_log(ctx, &mut key, argv[0])?.unwrap_or_default();
    // The log goes back into the key whatever happened (it was taken out).
    let applied = replay(&mut log, &call);
    let at = call.expire_at_ms.filter(|_| applied.is_ok());
    store(&mut key, log, kind == Kind::Log, at)?;
    applied?;
    ctx.replicate_verbatim();
    Ok(Reply::Integer(1))
}

/// `SLIDELOG.RESET`.
pub fn reset(ctx: &Ctx, argv: &[&[u8]]) -> Result<Reply, CommandError> {
    args::single_key("slidelog.reset", argv)?;
    let mut key = ctx.open_key(true);
    let existed = match key.kind() {
        Kind::Empty => false,
        Kind::Log => true,
        Kind::SortedSet => {
            ctx.delete_named(&adopt::weights_key(argv[0]));
            true
        }
        Kind::Other => return Err(CommandError::WrongType),
    };
    if existed {
        key.delete();
        ctx.replicate_verbatim();
    }
    Ok(Reply::Integer(i64::from(existed)))
}

/// `SLIDELOG.INFO`: a read of the log (a sorted set is read as the log it
/// would become, without converting it).
pub fn info(ctx: &Ctx, argv: &[&[u8]]) -> Result<Reply, CommandError> {
    args::single_key("slidelog.info", argv)?;
    let mut key = ctx.open_key(false);
    let adopted;
    let log = match key.kind() {
        Kind::Empty => {
            adopted = Log::new();
            &adopted
        }
        Kind::Log => key.log_mut().ok_or(CommandError::WrongType)?,
        Kind::SortedSet => {
            adopted = adopt::log_of(key.sorted_set_entries());
            &adopted
        }
        Kind::Other => return Err(CommandError::WrongType),
    };
    Ok(Reply::Pairs(info_pairs(log)))
}

/// `SLIDELOG.INFO`'s pairs: `records, units, oldest_ms, newest_ms, bytes,
/// weighted` (the first six, unchanged), then the granules
/// (docs/design.md §1.1): `span_ms`, `granule_ms` (the finest: 1 exact,
/// 0 unknown), `tiers`, and `tier_<i>_granule_ms`, `tier_<i>_records`
/// for each, oldest (coarsest) first.
pub fn info_pairs(log: &Log) -> Vec<(Cow<'static, str>, i64)> {
    let g = granules::of_times(
        (0..log.len())
            .filter(|&j| !log.is_tombstone(j))
            .map(|j| log.ts(j)),
    );
    let mut pairs: Vec<(Cow<'static, str>, i64)> = vec![
        ("records".into(), int(log.record_count() as u64)),
        ("units".into(), int(log.units_from(0, 0))),
        (
            "oldest_ms".into(),
            int(if log.is_empty() { 0 } else { log.ts(0) }),
        ),
        ("newest_ms".into(), int(log.newest().unwrap_or(0))),
        (
            "bytes".into(),
            int(if log.is_empty() { 0 } else { bytes(log) as u64 }),
        ),
        ("weighted".into(), i64::from(log.is_weighted())),
        ("span_ms".into(), int(g.span_ms)),
        ("granule_ms".into(), int(g.granule_ms)),
        ("tiers".into(), int(g.tiers.len() as u64)),
    ];
    for (i, (granule, records)) in g.tiers.iter().enumerate() {
        pairs.push((format!("tier_{}_granule_ms", i + 1).into(), int(*granule)));
        pairs.push((format!("tier_{}_records", i + 1).into(), int(*records)));
    }
    pairs
}
