//! The decision script (`sliding_log.lua`): its arguments, its invocation over
//! any redis-rs async connection (a `ConnectionManager` now; a cluster or
//! sentinel connection later) and the parsing of its reply.
//!
//! `redis::Script` sends `EVALSHA` and, on `NOSCRIPT` (after `SCRIPT FLUSH`, a
//! restart or a failover), loads the script and retries once.

use crate::members::member;
use redis::aio::ConnectionLike;
use redis::{ErrorKind, RedisError, RedisResult, Script};
use slidelog_core::{Decision, Mode, Request};
use std::sync::LazyLock;

/// The Lua source of one decision.
pub const SOURCE: &str = include_str!("sliding_log.lua");

/// The script, hashed once per process.
pub static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(SOURCE));

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The decision of docs/design.md §2.
    pub decision: Decision,
    /// The time (Unix ms) the decision was made at: Redis `TIME` or the one given.
    pub now_ms: u64,
}

/// Runs one decision on `redis_key` (prefix already applied). `now_ms` is
/// `None` for Redis `TIME`. `deadline_ms` (checks only): the script refuses
/// the check, recording nothing, when Redis `TIME` is past it (an error
/// whose code is [`DEADLINE_CODE`]). The caller bounds the time this takes.
pub async fn run<C: ConnectionLike>(
    conn: &mut C,
    redis_key: &[u8],
    request: &Request,
    mode: Mode,
    now_ms: Option<u64>,
    deadline_ms: Option<u64>,
) -> RedisResult<Outcome> {
    let mut invocation = SCRIPT.key(redis_key);
    invocation
        .key(crate::keys::weights_key(redis_key))
        .arg(if mode == Mode::Record { 1 } else { 0 })
        .arg(now_ms.map_or(-1, |ms| ms as i64))
        .arg(request.limits().len());
    for (i, limit) in request.limits().iter().enumerate() {
        invocation
            .arg(limit.max())
            .arg(limit.window_ms())
            .arg(request.cost_for(i));
    }
    if mode == Mode::Record {
        invocation
            .arg(member(request))
            .arg(deadline_ms.map_or(-1, |ms| ms as i64));
    }
    let reply: Vec<i64> = invocation.invoke_async(conn).await?;
    parse_reply(&reply)
}

/// `{allowed, max, window_ms, count, remaining, retry_after_ms, reset_after_ms, now_ms}`.
pub fn parse_reply(reply: &[i64]) -> RedisResult<Outcome> {
    let [
        allowed,
        limit,
        window_ms,
        count,
        remaining,
        retry,
        reset,
        now,
    ] = reply
    else {
        return Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "sliding_log.lua answered an unexpected reply",
            format!("{reply:?}"),
        )));
    };
    let u = |v: &i64| u64::try_from(*v).unwrap_or(0);
    Ok(Outcome {
        decision: Decision {
            allowed: *allowed == 1,
            limit: u(limit),
            window_ms: u(window_ms),
            count: u(count),
            remaining: u(remaining),
            retry_after_ms: u(retry),
            reset_after_ms: u(reset),
            degraded: false,
        },
        now_ms: u(now),
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
    fn the_script_hash_is_stable_for_its_source() {
        assert_eq!(SCRIPT.get_hash().len(), 40);
        assert!(SOURCE.contains("ZREMRANGEBYSCORE"));
    }
}
