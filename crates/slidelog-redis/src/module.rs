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
//! Settle and charge (docs/design.md §4.5) are `SLIDELOG.SETTLE <key>
//! <now_ms|*> <deadline_ms|0> <record_ts> <record_cost_1,...> <n> <max_1>
//! <window_ms_1> <cost_1> …` (the record the receipt names: its timestamp
//! and costs) and `SLIDELOG.CHARGE <key> <now_ms|*> <deadline_ms|0> <n> …`,
//! one atomic command each, answering `usage.lua`'s reply (`done` then the
//! check's fields). The module's records have no ids: its receipts name a
//! record by timestamp and costs (two such records are interchangeable).
//! A sealed receipt's settle ends with `SPEND <nonce> <until_ms>`: the
//! module keeps the nonce and answers `2` when the receipt comes again
//! (`3` when the key holds its most settled receipts), docs/design.md
//! §4.6 "Single use". A module from before single use refuses that
//! argument (wrong number of arguments): load the new module first.
//!
//! Whether a server has the module is asked with `COMMAND INFO
//! SLIDELOG.CHECK` (nil when the command is unknown): it names exactly the
//! command the store calls and, unlike `MODULE LIST` (`@admin`), needs no
//! administrative right, so a least-privilege ACL user can be asked too.

use crate::script::Check;
use crate::script::{Outcome, parse_reply};
use crate::usage::{Named, Usage, UsageOutcome, parse_usage_reply};
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use slidelog_core::{Mode, RecordRef, Request};

/// The module's decision command.
pub const CHECK: &str = "SLIDELOG.CHECK";
/// The module's settle command.
pub const SETTLE: &str = "SLIDELOG.SETTLE";
/// The module's charge command.
pub const CHARGE: &str = "SLIDELOG.CHARGE";
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
/// past it. With `EACH` when the check asks for every limit's state
/// ([`Check::each`]) and has more than one limit (one limit is all the
/// deciding limit says).
pub fn check_command(check: Check<'_>) -> redis::Cmd {
    let Check {
        redis_key,
        request,
        mode,
        now_ms,
        deadline_ms,
        each,
    } = check;
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
    cmd.arg(deadline.unwrap_or(0))
        .arg(module_limit_args(request));
    if each && request.limits().len() > 1 {
        cmd.arg("EACH");
    }
    cmd
}

/// Runs one decision through the module; the reply is mapped exactly as the
/// general script's is. An admitted check names its record by the time
/// the module used (the module's records carry no id). The caller bounds
/// the time this takes.
pub async fn run<C: ConnectionLike>(conn: &mut C, check: Check<'_>) -> RedisResult<Outcome> {
    let reply: Vec<i64> = check_command(check).query_async(conn).await?;
    let mut outcome = parse_reply(&reply)?;
    if check.mode == Mode::Record && outcome.decision.allowed {
        // The record is at the request's stored time (docs/design.md §1.1).
        outcome.decision.record = Some(RecordRef {
            ts: check.request.stored_at(outcome.now_ms),
            id: None,
        });
    }
    Ok(outcome)
}

/// `n` then each limit's `max`, `window_ms` (`window_ms@granularity_ms`
/// for a granular limit, docs/design.md §1.1) and cost, as the module's
/// commands take them: the scripts' arguments ([`crate::script::limit_args`]).
pub fn module_limit_args(request: &Request) -> Vec<String> {
    crate::script::limit_args(request)
}

/// The `SLIDELOG.SETTLE` or `SLIDELOG.CHARGE` command of one settle or
/// charge of `request` (a [`Request::usage`]) on `redis_key` (prefix
/// applied); `now_ms` and `deadline_ms` as a check's.
pub fn usage_command(
    redis_key: &[u8],
    request: &Request,
    usage: &Usage,
    now_ms: Option<u64>,
    deadline_ms: Option<u64>,
) -> redis::Cmd {
    let mut cmd = redis::cmd(match usage {
        Usage::Settle(_) => SETTLE,
        Usage::Charge | Usage::ChargeOnce(_) => CHARGE,
    });
    cmd.arg(redis_key);
    match now_ms {
        Some(ms) => cmd.arg(ms),
        None => cmd.arg("*"),
    };
    cmd.arg(deadline_ms.unwrap_or(0));
    if let Usage::Settle(receipt) = usage {
        let costs: Vec<String> = receipt.costs().iter().map(u64::to_string).collect();
        cmd.arg(receipt.ts()).arg(costs.join(","));
    }
    cmd.arg(module_limit_args(request));
    if let Usage::Settle(receipt) = usage
        && let Some(spend) = receipt.spend()
    {
        cmd.arg("SPEND").arg(spend.nonce).arg(spend.until_ms);
    }
    // The once key is declared beside the log (same slot), so Cluster
    // routes and checks it as the log.
    if let Usage::ChargeOnce(once) = usage {
        let key = crate::keys::once_key(redis_key, &once.id);
        cmd.arg("ONCE").arg(key).arg(once.ttl_ms);
    }
    cmd
}

/// Runs one settle or charge through the module (the module engine, or a
/// key the module holds under `engine=auto`). The caller bounds the time
/// this takes.
pub async fn run_usage<C: ConnectionLike>(
    conn: &mut C,
    redis_key: &[u8],
    request: &Request,
    usage: &Usage,
    now_ms: Option<u64>,
    deadline_ms: Option<u64>,
) -> RedisResult<UsageOutcome> {
    let cmd = usage_command(redis_key, request, usage, now_ms, deadline_ms);
    let reply: Vec<i64> = cmd.query_async(conn).await?;
    parse_module_usage_reply(&reply, usage, request)
}

/// The module's settle / charge reply ([`parse_usage_reply`]'s shape); its
/// records are found by time and costs, so named without an id.
fn parse_module_usage_reply(
    reply: &[i64],
    usage: &Usage,
    request: &Request,
) -> RedisResult<UsageOutcome> {
    let removed = request.costs().iter().all(|&c| c == 0);
    let unexpected = "the module answered an unexpected settle or charge reply";
    parse_usage_reply(
        reply,
        (usage, request),
        Named::default(),
        removed,
        unexpected,
    )
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
        let at = |mode, now_ms, each| Check {
            redis_key: b"p:k",
            request: &r,
            mode,
            now_ms,
            deadline_ms: Some(77),
            each,
        };
        let cmd = check_command(at(Mode::Record, None, false));
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
        let peek = check_command(at(Mode::Peek, Some(5), true));
        assert_eq!(
            &args(&peek)[..6],
            ["SLIDELOG.CHECK", "p:k", "PEEK", "5", "0", "2"]
        );
        assert_eq!(args(&peek).last().unwrap(), "EACH");
        let single = Request::single("k", Limit::new(3, 10).unwrap()).unwrap();
        let cmd = check_command(Check {
            redis_key: b"k",
            request: &single,
            mode: Mode::Record,
            now_ms: Some(9),
            deadline_ms: None,
            each: true,
        });
        assert_eq!(args(&cmd)[2..], ["RECORD", "9", "0", "1", "3", "10", "1"]);
    }

    #[test]
    fn settle_and_charge_send_the_receipt_and_the_costs() {
        let limits = vec![
            Limit::new(10, 1_000).unwrap(),
            Limit::new(100, 60_000).unwrap(),
        ];
        let usage = Request::usage("k", limits.clone(), vec![1, 0]).unwrap();
        let check = Request::with_costs("k", limits, vec![1, 40]).unwrap();
        let receipt = slidelog_core::Receipt::new(&check, RecordRef { ts: 5, id: None });
        let cmd = usage_command(b"p:k", &usage, &Usage::Settle(receipt), None, Some(9));
        assert_eq!(
            args(&cmd),
            [
                "SLIDELOG.SETTLE",
                "p:k",
                "*",
                "9",
                "5",
                "1,40",
                "2",
                "10",
                "1000",
                "1",
                "100",
                "60000",
                "0"
            ]
        );
        // A sealed receipt's settle ends with its nonce and validity.
        let spend = slidelog_core::Spend {
            nonce: u64::MAX,
            until_ms: 3_600_005,
        };
        let sealed = slidelog_core::Receipt::new(&check, RecordRef { ts: 5, id: None })
            .with_spend(Some(spend));
        let cmd = usage_command(b"p:k", &usage, &Usage::Settle(sealed), None, Some(9));
        assert_eq!(
            args(&cmd)[13..],
            ["SPEND", "18446744073709551615", "3600005"]
        );
        let cmd = usage_command(b"p:k", &usage, &Usage::Charge, Some(3), None);
        assert_eq!(args(&cmd)[..5], ["SLIDELOG.CHARGE", "p:k", "3", "0", "2"]);
        // done, the 8 fields, 4 per limit; a settle to 0 everywhere names no record.
        let reply = [
            1, 1, 10, 1_000, 1, 9, 0, 1_000, 7, 1, 9, 0, 1_000, 0, 100, 0, 0,
        ];
        let receipt = slidelog_core::Receipt::new(&check, RecordRef { ts: 5, id: None });
        let o = parse_module_usage_reply(&reply, &Usage::Settle(receipt.clone()), &usage).unwrap();
        assert!(o.done);
        assert_eq!(
            o.outcome.decision.record,
            Some(RecordRef { ts: 5, id: None })
        );
        let refund = Request::usage("k", usage.limits().to_vec(), vec![0]).unwrap();
        let o = parse_module_usage_reply(&reply, &Usage::Settle(receipt), &refund).unwrap();
        assert_eq!(o.outcome.decision.record, None);
        let o = parse_module_usage_reply(&reply, &Usage::Charge, &usage).unwrap();
        assert_eq!(
            o.outcome.decision.record,
            Some(RecordRef { ts: 7, id: None })
        );
        // 2: settled already; 3: the key holds its most settled receipts.
        let receipt = slidelog_core::Receipt::new(&check, RecordRef { ts: 5, id: None });
        for (code, why) in [
            (2, slidelog_core::ReceiptError::Spent),
            (3, slidelog_core::ReceiptError::TooManySettles),
        ] {
            let mut refused = reply;
            refused[0] = code;
            let o = parse_module_usage_reply(&refused, &Usage::Settle(receipt.clone()), &usage)
                .unwrap();
            assert_eq!(
                (o.done, o.refused, o.outcome.decision.record),
                (false, Some(why), None)
            );
        }
        assert!(parse_module_usage_reply(&[2, 1], &Usage::Charge, &usage).is_err());
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
