//! The module engine (docs/design.md §4.3): one decision is one
//! `SLIDELOG.CHECK` of the native module (`crates/slidelog-module`, loaded
//! with `--loadmodule`), which keeps the log as a `slidelog_core::Log` inside
//! Redis and decides it with `slidelog_core`'s engine.
//!
//! `SLIDELOG.CHECK <key> <RECORD|PEEK> <now_ms|*> <deadline_ms|0> <n>
//! <max_1> <window_ms_1> <cost_1> …` answers the general script's reply,
//! `[allowed, limit, window_ms, count, remaining, retry_after_ms,
//! reset_after_ms, now_ms]`, and refuses a check past its deadline with the
//! scripts' error code (`DEADLINE`), so both engines' answers go through one
//! mapping: [`crate::script::parse_reply`] and [`crate::script::is_deadline`].
//!
//! Whether a server has the module is asked with `COMMAND INFO
//! SLIDELOG.CHECK` (nil when the command is unknown): it names exactly the
//! command the store calls and, unlike `MODULE LIST` (`@admin`), needs no
//! administrative right, so a least-privilege ACL user can be asked too.

use crate::script::Check;
use crate::script::{Outcome, limit_args, parse_reply};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use slidelog_core::{Mode, Request};

/// The module's decision command.
pub const CHECK: &str = "SLIDELOG.CHECK";
/// The module's reset command (`1` when a log existed).
pub const RESET: &str = "SLIDELOG.RESET";
/// The module's read-only description of a log, for `inspect`.
pub const INFO: &str = "SLIDELOG.INFO";
/// The file `cargo build --release -p slidelog-module` writes.
pub const LIBRARY: &str = "libslidelog_module.so";

/// How to load the module, for errors that say it is missing.
pub fn how_to_load() -> String {
    format!(
        "start the server with `--loadmodule /path/to/{LIBRARY}` (built by \
         `cargo build --release -p slidelog-module`, in target/release/), or \
         choose engine=auto or engine=script in the store URL"
    )
}

/// The `SLIDELOG.CHECK` command of one decision on `redis_key` (prefix
/// applied). `now_ms`: `None` for the server's clock (`*`). `deadline_ms`
/// (checks only): refused, recording nothing, once the server's clock is
/// past it.
pub fn check_command(
    redis_key: &[u8],
    request: &Request,
    mode: Mode,
    now_ms: Option<u64>,
    deadline_ms: Option<u64>,
) -> redis::Cmd {
    let mut cmd = redis::cmd(CHECK);
    cmd.arg(redis_key).arg(if mode == Mode::Record {
        "RECORD"
    } else {
        "PEEK"
    });
    match now_ms {
        Some(ms) => cmd.arg(ms),
        None => cmd.arg("*"),
    };
    let deadline = if mode == Mode::Record {
        deadline_ms
    } else {
        None
    };
    cmd.arg(deadline.unwrap_or(0)).arg(limit_args(request));
    cmd
}

/// Runs one decision through the module; the reply is mapped exactly as the
/// general script's is. The caller bounds the time this takes.
pub async fn run<C: ConnectionLike>(conn: &mut C, check: Check<'_>) -> RedisResult<Outcome> {
    let cmd = check_command(
        check.redis_key,
        check.request,
        check.mode,
        check.now_ms,
        check.deadline_ms,
    );
    let reply: Vec<i64> = cmd.query_async(conn).await?;
    parse_reply(&reply)
}

/// `COMMAND INFO SLIDELOG.CHECK`: whether the server `conn` talks to knows
/// the module's command.
pub async fn has_module<C: ConnectionLike>(conn: &mut C) -> RedisResult<bool> {
    let reply: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(CHECK)
        .query_async(conn)
        .await?;
    Ok(command_info_says_known(&reply))
}

/// True when a `COMMAND INFO <one command>` reply describes the command
/// (an unknown command is a nil entry).
pub fn command_info_says_known(reply: &Value) -> bool {
    match reply {
        Value::Array(entries) => entries.first().is_some_and(|e| !matches!(e, Value::Nil)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::Limit;

    fn args(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .collect()
    }

    #[test]
    fn the_command_follows_the_module_surface() {
        let limits = vec![
            Limit::new(10, 1_000).unwrap(),
            Limit::new(100, 60_000).unwrap(),
        ];
        let r = Request::new("k", limits, 2).unwrap();
        let cmd = check_command(b"p:k", &r, Mode::Record, None, Some(77));
        assert_eq!(
            args(&cmd),
            [
                "SLIDELOG.CHECK",
                "p:k",
                "RECORD",
                "*",
                "77",
                "2",
                "10",
                "1000",
                "2",
                "100",
                "60000",
                "2"
            ]
        );
        let peek = check_command(b"p:k", &r, Mode::Peek, Some(5), Some(77));
        assert_eq!(
            &args(&peek)[..6],
            ["SLIDELOG.CHECK", "p:k", "PEEK", "5", "0", "2"]
        );
        let single = Request::single("k", Limit::new(3, 10).unwrap()).unwrap();
        let cmd = check_command(b"k", &single, Mode::Record, Some(9), None);
        assert_eq!(args(&cmd)[2..], ["RECORD", "9", "0", "1", "3", "10", "1"]);
    }

    #[test]
    fn command_info_tells_a_known_command() {
        assert!(!command_info_says_known(&Value::Array(vec![Value::Nil])));
        assert!(command_info_says_known(&Value::Array(vec![Value::Array(
            vec![Value::BulkString(b"slidelog.check".to_vec())]
        )])));
        assert!(!command_info_says_known(&Value::Nil));
        assert!(how_to_load().contains("--loadmodule"));
    }
}
