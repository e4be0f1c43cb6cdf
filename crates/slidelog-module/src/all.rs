//! `SLIDELOG.CHECKALL`: one joint decision over several keys of one slot,
//! all or nothing (docs/design.md §1 "One request, several keys", §4.3,
//! §4.7), by `slidelog_core::engine::decide_all` on the keys' logs, so the
//! module decides a joint request exactly as the memory store does.
//!
//! The server runs one command at a time, so every log is held for the
//! whole call, as `decide_all` requires. Each key's change is propagated as
//! a single check's is (one `SLIDELOG.APPLY` per key that changed, which
//! the server sends as one `MULTI`/`EXEC`), so replicas and the AOF hold
//! the same logs.

use crate::args::{self, CheckAll};
use crate::clock;
use crate::commands::{self, Outcome, Reply};
use crate::error::CommandError;
use crate::ffi::{Ctx, Key, Kind};
use slidelog_core::{JointDecision, Log, Mode, engine};

/// One check's key, taken out of the server for the call.
struct Held<'a> {
    key: Key<'a>,
    was_module: bool,
    adopted: bool,
    log: Log,
}

/// `SLIDELOG.CHECKALL <RECORD|PEEK> <now_ms|*> <deadline_ms|0> (<key>
/// <limits>)+`: every check's reply (8 + 4n numbers each, n its limits).
pub fn check_all(ctx: &Ctx, argv: &[&[u8]]) -> Result<Reply, CommandError> {
    let call = args::check_all(argv)?;
    let server = ctx.server_ms();
    if let Some(now) = call.now_ms {
        clock::caller_now(now, server)?;
    }
    let now = call.now_ms.unwrap_or(server);
    let mut held = hold(ctx, argv, &call)?;
    // A record written after the caller gave up is refused, recording
    // nothing; a refusal is answered whatever the time (as CHECK).
    let late = call.mode == Mode::Record && call.deadline_ms.is_some_and(|d| server > d);
    let mode = if late { Mode::Peek } else { call.mode };
    rebuild_tiers(&mut held, now, &call, mode);
    let joint = {
        let mut logs: Vec<&mut Log> = held.iter_mut().map(|h| &mut h.log).collect();
        engine::decide_all(&mut logs, now, &call.checks, mode)
    };
    let recorded = mode == Mode::Record && joint.allowed;
    for (h, request) in held.into_iter().zip(&call.checks) {
        let Held {
            mut key,
            was_module,
            adopted,
            log,
        } = h;
        // A joint refusal changes no log (engine::decide_all): only an
        // adopted sorted set is stored and propagated then.
        let outcome = Outcome {
            adopted,
            dropped: 0,
            appended: recorded,
            recorded,
        };
        commands::persist(&mut key, was_module, log, request, (now, server), &outcome)?;
    }
    if late && joint.allowed {
        return Err(CommandError::Deadline);
    }
    Ok(Reply::Integers(reply(&joint, now)))
}

/// Before a joint decision that will record, the expiry and the coarse
/// tiers' rebuilds (docs/design.md §1.1) that `engine::decide_all` would
/// make, made here so that replicas replay them first (its own then find
/// nothing to do). Only for checks with tiers, and only when the joint
/// decision admits (a refusal changes no log).
fn rebuild_tiers(held: &mut [Held<'_>], now: u64, call: &CheckAll, mode: Mode) {
    let tiered = call
        .checks
        .as_slice()
        .iter()
        .any(|r| engine::has_tiers(r.limits()));
    if mode != Mode::Record || !tiered {
        return;
    }
    let admits = {
        let mut logs: Vec<&mut Log> = held.iter_mut().map(|h| &mut h.log).collect();
        engine::decide_all(&mut logs, now, &call.checks, Mode::Peek).allowed
    };
    if !admits {
        return;
    }
    for (h, request) in held.iter_mut().zip(&call.checks) {
        h.log.expire(now, request.longest_window_ms());
        let rounds = engine::rebucket(&mut h.log, now, request.limits(), false);
        commands::replicate_rounds(&h.key, now, request, &rounds);
    }
}

/// Opens every check's key and takes its log out (adopting a sorted set),
/// after making sure that every key holds a log, a sorted set or nothing:
/// a key of another type refuses the call before any key is touched.
fn hold<'a>(ctx: &'a Ctx, argv: &[&[u8]], call: &CheckAll) -> Result<Vec<Held<'a>>, CommandError> {
    let keys: Vec<Key<'a>> = (0..call.checks.len())
        .map(|c| ctx.open_key_at(3 + 2 * c, true))
        .collect();
    if keys.iter().any(|k| k.kind() == Kind::Other) {
        return Err(CommandError::WrongType);
    }
    let mut held = Vec::with_capacity(keys.len());
    for (c, mut key) in keys.into_iter().enumerate() {
        let was_module = key.kind() == Kind::Log;
        let (log, adopted) =
            commands::take_log(ctx, &mut key, argv[3 + 2 * c])?.unwrap_or_default();
        held.push(Held {
            key,
            was_module,
            adopted,
            log,
        });
    }
    Ok(held)
}

/// Every check's 8 decision fields and 4 numbers per limit, in order.
fn reply(joint: &JointDecision, now: u64) -> commands::Integers {
    let mut out = commands::Integers::with_capacity(
        joint.checks.iter().map(|d| 8 + 4 * d.limits.len()).sum(),
    );
    for detailed in &joint.checks {
        out.extend(commands::decision_fields(&detailed.decision, now));
        commands::each_limit(detailed, &mut out);
    }
    out
}
