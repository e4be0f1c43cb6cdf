//! The decision scripts: `single_limit.lua` for the common check (one limit,
//! cost 1) and `sliding_log.lua` for everything else (docs/design.md §4.2);
//! their arguments, their invocation over any redis-rs async connection
//! (standalone, cluster or sentinel) and the parsing of their replies.
//!
//! `redis::Script` sends `EVALSHA` and, on `NOSCRIPT` (after `SCRIPT FLUSH`, a
//! restart or a failover), loads the script and retries once.

use crate::members::member_with_id;
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, RedisResult, Script};
use slidelog_core::{Counts, Decision, Detailed, Mode, Request};
use std::sync::LazyLock;

/// The Lua source of one decision: the steps every script shares
/// (`prelude.lua`), `sliding_log.lua`'s `decide()` (shared with the joint
/// decision, [`crate::joint`]) and the line that calls it on the script's
/// key.
pub const SOURCE: &str = concat!(
    include_str!("prelude.lua"),
    include_str!("sliding_log.lua"),
    include_str!("sliding_log_main.lua")
);

/// The script, hashed once per process.
pub static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(SOURCE));

/// The Lua source of a check of one limit at cost 1.
pub const SINGLE_SOURCE: &str = include_str!("single_limit.lua");

/// The single-limit script, hashed once per process.
pub static SINGLE: LazyLock<Script> = LazyLock::new(|| Script::new(SINGLE_SOURCE));

/// One decision to send: what every engine takes.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The log's Redis key (prefix already applied).
    pub redis_key: &'a [u8],
    /// The limits and costs.
    pub request: &'a Request,
    /// Record (a check) or peek.
    pub mode: Mode,
    /// The time to decide at, `None` for Redis `TIME`.
    pub now_ms: Option<u64>,
    /// A check's deadline on the server's clock: past it the check is
    /// refused, recording nothing.
    pub deadline_ms: Option<u64>,
    /// Ask for every limit's state too ([`Outcome::each`]; `Store::decide_each`).
    /// The general script then answers 4 more numbers per limit; a request of
    /// one limit needs none (the deciding limit is all of it), so it is sent
    /// as a plain decision. An engine that cannot answer them leaves
    /// [`Outcome::each`] empty.
    pub each: bool,
}

/// The error code of a check refused because its deadline had passed.
pub const DEADLINE_CODE: &str = "DEADLINE";

/// True when `err` is the script refusing a check past its deadline.
pub fn is_deadline(err: &RedisError) -> bool {
    err.code() == Some(DEADLINE_CODE)
}

/// Largest explicit time the script represents exactly (Lua numbers are
/// doubles): the one bound of every interface, docs/design.md §3.
pub use slidelog_core::MAX_NOW_MS;

/// What one run of the script answers: the decision and the time it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The decision of docs/design.md §2.
    pub decision: Decision,
    /// The time (Unix ms) the decision was made at: Redis `TIME` or the one given.
    pub now_ms: u64,
    /// Every limit's counts in the request's order, when the reply carried
    /// them (a check asked with [`Check::each`], a settle or a charge);
    /// empty otherwise.
    pub each: Vec<Counts>,
}

impl Outcome {
    /// The decision with every limit's state ([`Detailed::with_counts`]):
    /// the deciding limit only when the reply did not carry every limit.
    pub fn detailed(&self, request: &Request) -> Detailed {
        Detailed::with_counts(request, self.decision, &self.each)
    }
}

/// Runs one decision on `redis_key` (prefix already applied). `now_ms` is
/// `None` for Redis `TIME`. `deadline_ms` (checks only): the script refuses
/// the check, recording nothing, when Redis `TIME` is past it (an error
/// whose code is [`DEADLINE_CODE`]). The caller bounds the time this takes.
pub async fn run<C: ConnectionLike>(conn: &mut C, check: Check<'_>) -> RedisResult<Outcome> {
    let Check {
        redis_key,
        request,
        mode,
        now_ms,
        deadline_ms,
        each,
    } = check;
    // One limit: the deciding limit is every limit.
    let each = each && request.limits().len() > 1;
    // The member is made here, so an admitted check's receipt names it
    // (its ULID and the time the script used) without changing the reply.
    let (member, id) = if mode == Mode::Record {
        member_with_id(request)
    } else {
        (String::new(), 0)
    };
    // A limit's block_ms is set by the general script in the check's own
    // step (modes 5 / 7, docs/design.md §5.4).
    let penalty = mode == Mode::Record && request.limits().iter().any(|l| l.block_ms() > 0);
    if mode == Mode::Record
        && !each
        && !penalty
        && fits_single(request)
        && let Some(outcome) =
            run_single(conn, redis_key, request, &member, now_ms, deadline_ms).await?
    {
        return Ok(with_record(outcome, id, request));
    }
    let mut invocation = SCRIPT.key(redis_key);
    invocation
        .key(crate::keys::weights_key(redis_key))
        .key(crate::keys::pending_key(redis_key))
        .arg(script_mode(mode, each, penalty))
        .arg(now_ms.map_or(-1, |ms| ms as i64))
        .arg(limit_args(request));
    if mode == Mode::Record {
        invocation
            .arg(&member)
            .arg(deadline_ms.map_or(-1, |ms| ms as i64));
    }
    if penalty {
        invocation.arg(
            request
                .limits()
                .iter()
                .map(|l| l.block_ms())
                .collect::<Vec<_>>(),
        );
    }
    let reply: Vec<i64> = invocation.invoke_async(conn).await?;
    let outcome = parse_reply(&reply)?;
    Ok(if mode == Mode::Record {
        with_record(outcome, id, request)
    } else {
        outcome
    })
}

/// Whether `single_limit.lua` can decide `request`'s check: one exact
/// limit at cost 1 (the original layout, docs/design.md §4.2).
fn fits_single(request: &Request) -> bool {
    let limits = request.limits();
    limits.len() == 1 && request.cost_for(0) == 1 && limits[0].granularity_ms() == 1
}

/// The general script's mode (`sliding_log.lua`'s ARGV[1]): peek 0 / check
/// 1, answering every limit +2, with each limit's block_ms after the
/// deadline +4 (docs/design.md §5.4).
fn script_mode(mode: Mode, each: bool, penalty: bool) -> u8 {
    let base = match mode {
        Mode::Peek => 0,
        Mode::Record => 1,
    };
    base + if each { 2 } else { 0 } + if penalty { 4 } else { 0 }
}

/// The limits as every engine's call takes them: `<n> <max_1>
/// <window_ms_1> <cost_1> … <max_n> <window_ms_n> <cost_n>` (the scripts,
/// `usage.lua` and `SLIDELOG.CHECK` alike), a granular limit's window as
/// `window_ms@granularity_ms` (docs/design.md §1.1); one argument per
/// element.
pub fn limit_args(request: &Request) -> Vec<String> {
    let limits = request.limits();
    let mut args = Vec::with_capacity(1 + 3 * limits.len());
    args.push(limits.len().to_string());
    for (i, limit) in limits.iter().enumerate() {
        args.push(limit.max().to_string());
        args.push(match limit.granularity_ms() {
            1 => limit.window_ms().to_string(),
            g => format!("{}@{g}", limit.window_ms()),
        });
        args.push(request.cost_for(i).to_string());
    }
    args
}

/// `outcome` naming the record an admitted check appended: the member
/// `id` at the time the script used (docs/design.md §4.5).
fn with_record(mut outcome: Outcome, id: u128, request: &Request) -> Outcome {
    if outcome.decision.allowed {
        outcome.decision.record = Some(slidelog_core::RecordRef {
            // The request's stored time (`now` rounded up to its granule,
            // docs/design.md §1.1; `now` itself for exact limits).
            ts: request.stored_at(outcome.now_ms),
            id: Some(id),
        });
    }
    outcome
}

/// A check of one limit at cost 1 through `single_limit.lua`; `None` when
/// the log is weighted (the script then changed nothing, and the caller
/// runs the general script).
async fn run_single<C: ConnectionLike>(
    conn: &mut C,
    redis_key: &[u8],
    request: &Request,
    member: &str,
    now_ms: Option<u64>,
    deadline_ms: Option<u64>,
) -> RedisResult<Option<Outcome>> {
    let limit = request.limits()[0];
    let mut invocation = SINGLE.key(redis_key);
    invocation
        .key(crate::keys::block_key(redis_key))
        .arg(limit.max())
        .arg(limit.window_ms())
        .arg(member)
        .arg(deadline_ms.map_or(-1, |ms| ms as i64));
    if let Some(ms) = now_ms {
        invocation.arg(ms);
    }
    let reply: Vec<i64> = invocation.invoke_async(conn).await?;
    parse_single_reply(&reply, limit.max(), limit.window_ms())
}

/// `{allowed, count, retry_after_ms, reset_after_ms, now_ms}` of
/// `single_limit.lua`, or `{-1}` (a weighted log: `None`).
pub fn parse_single_reply(reply: &[i64], max: u64, window_ms: u64) -> RedisResult<Option<Outcome>> {
    let [allowed, count, retry, reset, now] = reply else {
        if reply == [-1] {
            return Ok(None);
        }
        return Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "single_limit.lua answered an unexpected reply",
            format!("{reply:?}"),
        )));
    };
    // The general script's reply, with what the caller knows filled in.
    // More than max records can be live after a clock step back or a
    // lowered max: remaining is then 0, as in the engine.
    let (max, window_ms) = (max as i64, window_ms as i64);
    let remaining = (max - count).max(0);
    parse_reply(&[
        *allowed, max, window_ms, *count, remaining, *retry, *reset, *now,
    ])
    .map(Some)
}

/// `{allowed, max, window_ms, count, remaining, retry_after_ms,
/// reset_after_ms, now_ms}`, optionally followed by every limit's
/// `count_i, remaining_i, retry_after_ms_i, reset_after_ms_i` in the
/// request's order (4 numbers per limit: [`Outcome::each`]).
pub fn parse_reply(reply: &[i64]) -> RedisResult<Outcome> {
    let unexpected = || {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "sliding_log.lua answered an unexpected reply",
            format!("{reply:?}"),
        ))
    };
    let (head, tail) = reply.split_at_checked(8).ok_or_else(unexpected)?;
    let [
        allowed,
        limit,
        window_ms,
        count,
        remaining,
        retry,
        reset,
        now,
    ] = head
    else {
        return Err(unexpected());
    };
    if tail.len() % 4 != 0 || tail.len() / 4 > slidelog_core::MAX_LIMITS {
        return Err(unexpected());
    }
    let u = |v: &i64| u64::try_from(*v).unwrap_or(0);
    // -2: the key is blocked (sliding_log.lua step 1c), every limit refused.
    let blocked = *allowed == -2;
    let each = tail
        .chunks_exact(4)
        .map(|c| Counts {
            count: u(&c[0]),
            remaining: u(&c[1]),
            retry_after_ms: u(&c[2]),
            reset_after_ms: u(&c[3]),
        })
        .collect();
    Ok(Outcome {
        decision: Decision {
            allowed: *allowed == 1,
            limit: u(limit),
            window_ms: u(window_ms),
            count: if blocked { 0 } else { u(count) },
            remaining: if blocked { 0 } else { u(remaining) },
            retry_after_ms: u(retry),
            reset_after_ms: u(reset),
            degraded: false,
            blocked,
            record: None,
        },
        now_ms: u(now),
        each,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_of_the_wrong_shape_is_an_error() {
        assert!(parse_reply(&[1, 2, 3]).is_err());
        let o = parse_reply(&[1, 10, 1000, 1, 9, 0, 1000, 5]).unwrap();
        assert!(o.decision.allowed);
        assert_eq!(
            (o.decision.limit, o.decision.remaining, o.now_ms),
            (10, 9, 5)
        );
    }

    #[test]
    fn every_limit_follows_the_decision_four_numbers_each() {
        let head = [0, 10, 1000, 10, 0, 300, 900, 5];
        let mut reply = head.to_vec();
        reply.extend([10, 0, 300, 900, 40, 60, 0, 2_000]);
        let o = parse_reply(&reply).unwrap();
        assert_eq!(o.decision, parse_reply(&head).unwrap().decision);
        assert_eq!(o.each.len(), 2);
        assert_eq!(
            (
                o.each[1].count,
                o.each[1].remaining,
                o.each[1].reset_after_ms
            ),
            (40, 60, 2_000)
        );
        assert!(parse_reply(&head).unwrap().each.is_empty());
        // A tail that is not 4 numbers per limit, or more than 16 limits.
        reply.push(1);
        assert!(parse_reply(&reply).is_err());
        let mut long = head.to_vec();
        long.extend(std::iter::repeat_n(1, 4 * 17));
        assert!(parse_reply(&long).is_err());
    }

    #[test]
    fn a_single_limit_reply_fills_in_what_the_caller_knows() {
        let o = parse_single_reply(&[1, 3, 0, 60_000, 7], 10, 60_000)
            .unwrap()
            .unwrap();
        assert!(o.decision.allowed);
        assert_eq!(
            (o.decision.limit, o.decision.window_ms, o.decision.count),
            (10, 60_000, 3)
        );
        assert_eq!((o.decision.remaining, o.now_ms), (7, 7));
        let full = parse_single_reply(&[0, 12, 500, 900, 7], 10, 60_000)
            .unwrap()
            .unwrap();
        assert_eq!((full.decision.allowed, full.decision.remaining), (false, 0));
        assert_eq!(full.decision.retry_after_ms, 500);
        assert!(parse_single_reply(&[-1], 10, 60_000).unwrap().is_none());
        assert!(parse_single_reply(&[1, 2], 10, 60_000).is_err());
    }

    #[test]
    fn the_script_hash_is_stable_for_its_source() {
        assert_eq!(SCRIPT.get_hash().len(), 40);
        assert!(SOURCE.contains("ZREMRANGEBYSCORE"));
    }
}
