//! Joint decisions on one Redis slot (docs/design.md §1 "One request,
//! several keys", §4.7): several keys decided as one request, all or
//! nothing, in one atomic call: `check_all.lua` (the scripts, every key
//! decided by `sliding_log.lua`'s `decide()`) or the module's
//! `SLIDELOG.CHECKALL` (`slidelog_core::engine::decide_all` on the module's
//! logs). Both answer every check's reply in the general script's
//! every-limit shape (8 + 4n numbers each), mapped by one function.

use crate::members::member_with_id;
use crate::script::{Outcome, limit_args, parse_reply};
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, RedisResult, Script};
use slidelog_core::{Checks, JointDecision, Mode, RecordRef};
use std::sync::LazyLock;

/// The Lua source of a joint decision: `prelude.lua`, `sliding_log.lua`'s
/// `decide()`, then `check_all.lua`, which calls it for every key.
pub const JOINT_SOURCE: &str = concat!(
    include_str!("prelude.lua"),
    include_str!("sliding_log.lua"),
    include_str!("check_all.lua")
);

/// The joint script, hashed once per process.
pub static JOINT: LazyLock<Script> = LazyLock::new(|| Script::new(JOINT_SOURCE));

/// The Lua source of phase 2 of a joint decision across Cluster slots
/// (confirm or cancel one slot's reservations): `prelude.lua` and
/// `sliding_log.lua`'s helpers, then `reservation.lua`.
pub const RESERVATION_SOURCE: &str = concat!(
    include_str!("prelude.lua"),
    include_str!("sliding_log.lua"),
    include_str!("reservation.lua")
);

/// The phase 2 script, hashed once per process.
pub static RESERVATION: LazyLock<Script> = LazyLock::new(|| Script::new(RESERVATION_SOURCE));

/// The module's joint decision command (docs/design.md §4.3).
pub const CHECKALL: &str = "SLIDELOG.CHECKALL";

/// One joint decision to send: the checks' Redis keys (prefix applied, in
/// the checks' order, every one in one Cluster slot), the checks, and the
/// time and deadline as a single check takes them.
#[derive(Debug, Clone, Copy)]
pub struct JointCall<'a> {
    /// The Redis key of each check.
    pub keys: &'a [Vec<u8>],
    /// The checks (one per distinct key).
    pub checks: &'a Checks,
    /// Record (a check) or peek.
    pub mode: Mode,
    /// The time to decide at, `None` for the server's clock.
    pub now_ms: Option<u64>,
    /// A check's deadline on the server's clock: past it nothing is recorded.
    pub deadline_ms: Option<u64>,
    /// Phase 1 of a joint decision across Cluster slots (docs/design.md
    /// §4.7, the scripts only): an admitted check's records are
    /// reservations until `deadline_ms`, which must be given.
    pub reserve: bool,
}

/// Runs one joint decision through `check_all.lua`: every check's outcome,
/// an admitted check naming the member it appended.
pub async fn run_script<C: ConnectionLike>(
    conn: &mut C,
    call: JointCall<'_>,
) -> RedisResult<Vec<Outcome>> {
    let record = call.mode == Mode::Record;
    let mut invocation = JOINT.prepare_invoke();
    for key in call.keys {
        add_keys(&mut invocation, key);
    }
    let mode = match (record, call.reserve) {
        (true, true) => 2,
        (true, false) => 1,
        (false, _) => 0,
    };
    invocation
        .arg(mode)
        .arg(call.now_ms.map_or(-1, |ms| ms as i64))
        .arg(call.deadline_ms.map_or(-1, |ms| ms as i64))
        .arg(call.checks.len());
    let mut ids = Vec::with_capacity(call.checks.len());
    for request in call.checks {
        let (member, id) = if record {
            member_with_id(request)
        } else {
            (String::new(), 0)
        };
        invocation.arg(limit_args(request)).arg(member);
        ids.push(id);
    }
    let reply: Vec<i64> = invocation.invoke_async(conn).await?;
    let mut outcomes = split_reply(&reply, call.checks)?;
    if recorded(&outcomes, call.mode) {
        for ((outcome, id), request) in outcomes.iter_mut().zip(ids).zip(call.checks) {
            name_record(outcome, Some(id), request);
        }
    }
    Ok(outcomes)
}

/// A check's three keys, as the scripts take them: its log, weights and
/// pending reservations (one slot).
fn add_keys(invocation: &mut redis::ScriptInvocation<'_>, key: &[u8]) {
    invocation
        .key(key)
        .key(crate::keys::weights_key(key))
        .key(crate::keys::pending_key(key));
}

/// The member a reservation of `request` recorded, whose id is `id`
/// (`members::named`): reservations always carry the marker `#`, so a
/// bare id gets `#1` (as the script appends it).
pub fn reserved_member(request: &slidelog_core::Request, id: u128) -> String {
    let member = crate::members::named(ulid::Ulid(id).to_string(), request.costs());
    if member.contains('#') {
        member
    } else {
        member + "#1"
    }
}

/// Phase 2 on one slot: confirms (`true`: every reservation was still
/// pending and is now a normal record; `false`: one was gone or past its
/// deadline, nothing changed) or cancels (always `true`) the reservations
/// `members` of the checks whose Redis keys are `keys`.
pub async fn settle_reservations<C: ConnectionLike>(
    conn: &mut C,
    keys: &[&[u8]],
    members: &[String],
    confirm: bool,
) -> RedisResult<bool> {
    let mut invocation = RESERVATION.prepare_invoke();
    for key in keys {
        add_keys(&mut invocation, key);
    }
    invocation.arg(if confirm { "confirm" } else { "cancel" });
    invocation.arg(members);
    let done: i64 = invocation.invoke_async(conn).await?;
    Ok(done == 1)
}

/// The `SLIDELOG.CHECKALL <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <key_1>
/// <limits_1> … <key_m> <limits_m>` command of `call`: each check's limits
/// as one argument, `<n>,<max_1>,<window_ms_1>,<cost_1>,…`, so the keys sit
/// at every other position and Cluster finds them (first 4, last -2, step 2).
pub fn checkall_command(call: JointCall<'_>) -> redis::Cmd {
    let mut cmd = redis::cmd(CHECKALL);
    cmd.arg(if call.mode == Mode::Record {
        "RECORD"
    } else {
        "PEEK"
    });
    match call.now_ms {
        Some(ms) => cmd.arg(ms),
        None => cmd.arg("*"),
    };
    let deadline = call.deadline_ms.filter(|_| call.mode == Mode::Record);
    cmd.arg(deadline.unwrap_or(0));
    for (key, request) in call.keys.iter().zip(call.checks) {
        let limits = crate::module::module_limit_args(request);
        cmd.arg(key).arg(limits.join(","));
    }
    cmd
}

/// Runs one joint decision through the module; an admitted check names its
/// record by the time the module used (its records carry no id).
pub async fn run_module<C: ConnectionLike>(
    conn: &mut C,
    call: JointCall<'_>,
) -> RedisResult<Vec<Outcome>> {
    let reply: Vec<i64> = checkall_command(call).query_async(conn).await?;
    let mut outcomes = split_reply(&reply, call.checks)?;
    if recorded(&outcomes, call.mode) {
        for (outcome, request) in outcomes.iter_mut().zip(call.checks) {
            name_record(outcome, None, request);
        }
    }
    Ok(outcomes)
}

/// Whether the joint decision recorded: a check, every key admitting (a
/// refused one answers each key's own peek, naming no record).
fn recorded(outcomes: &[Outcome], mode: Mode) -> bool {
    mode == Mode::Record && outcomes.iter().all(|o| o.decision.allowed)
}

/// A recorded check's record: the time used, and the member's id when the
/// engine has one.
fn name_record(outcome: &mut Outcome, id: Option<u128>, request: &slidelog_core::Request) {
    // At the request's stored time (docs/design.md §1.1; `now` itself for
    // exact limits).
    outcome.decision.record = Some(RecordRef {
        ts: request.stored_at(outcome.now_ms),
        id,
    });
}

/// The joint reply cut into each check's reply (8 + 4n numbers, n its
/// limits), each mapped as a single check's.
pub fn split_reply(reply: &[i64], checks: &Checks) -> RedisResult<Vec<Outcome>> {
    let unexpected = || {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "the joint decision answered an unexpected reply",
            format!("{} numbers for {} checks", reply.len(), checks.len()),
        ))
    };
    let mut rest = reply;
    let mut outcomes = Vec::with_capacity(checks.len());
    for request in checks {
        let (one, tail) = rest
            .split_at_checked(8 + 4 * request.limits().len())
            .ok_or_else(unexpected)?;
        outcomes.push(parse_reply(one)?);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(unexpected());
    }
    Ok(outcomes)
}

/// The joint answer over every check's outcome.
pub fn joint_of(outcomes: &[Outcome], checks: &Checks) -> JointDecision {
    JointDecision::of(
        outcomes
            .iter()
            .zip(checks)
            .map(|(outcome, request)| outcome.detailed(request))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::{Limit, Request};

    fn checks() -> Checks {
        let one = Request::single("a", Limit::new(10, 1_000).unwrap()).unwrap();
        let two = Request::new(
            "b",
            vec![
                Limit::new(3, 1_000).unwrap(),
                Limit::new(5, 60_000).unwrap(),
            ],
            1,
        )
        .unwrap();
        Checks::new([one, two]).unwrap()
    }

    #[test]
    fn the_reply_is_cut_per_check() {
        let mut reply = vec![1, 10, 1_000, 1, 9, 0, 1_000, 7, 1, 9, 0, 1_000];
        reply.extend([1, 3, 1_000, 1, 2, 0, 1_000, 7]);
        reply.extend([1, 2, 0, 1_000, 1, 4, 0, 60_000]);
        let outcomes = split_reply(&reply, &checks()).unwrap();
        assert_eq!(outcomes.len(), 2);
        assert_eq!(outcomes[1].each.len(), 2);
        assert!(split_reply(&reply[..reply.len() - 1], &checks()).is_err());
        reply.push(0);
        assert!(split_reply(&reply, &checks()).is_err());
    }

    #[test]
    fn the_module_command_puts_keys_at_every_other_position() {
        let keys = [b"ka".to_vec(), b"kb".to_vec()];
        let checks = checks();
        let call = JointCall {
            keys: &keys,
            checks: &checks,
            mode: Mode::Record,
            now_ms: None,
            deadline_ms: Some(9),
            reserve: false,
        };
        let args: Vec<Vec<u8>> = checkall_command(call)
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.to_vec(),
                _ => vec![],
            })
            .collect();
        let text: Vec<&str> = args
            .iter()
            .map(|a| std::str::from_utf8(a).unwrap())
            .collect();
        assert_eq!(
            text,
            [
                CHECKALL,
                "RECORD",
                "*",
                "9",
                "ka",
                "1,10,1000,1",
                "kb",
                "2,3,1000,1,5,60000,1"
            ]
        );
    }
}
