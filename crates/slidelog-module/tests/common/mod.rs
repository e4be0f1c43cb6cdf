//! Helpers shared by the module's tests: a server with the module, and
//! `SLIDELOG.CHECK` as a function.
#![allow(dead_code)]

use redis::{Connection, RedisResult};
use slidelog_core::{Decision, Limit, Request};
pub use slidelog_testkit::{RedisServer, ServerKind};

pub mod dump;
pub mod persist;

/// A server of `kind` with the module loaded.
pub fn server(kind: ServerKind) -> RedisServer {
    RedisServer::start_with_module(kind, &[])
}

/// `(max, window_ms, cost)` of each limit.
pub type Limits = [(u64, u64, u64)];

/// `SLIDELOG.CHECK key RECORD|PEEK now|* deadline|0 n ...`.
pub fn check(
    conn: &mut Connection,
    key: &str,
    record: bool,
    now: Option<u64>,
    deadline: u64,
    limits: &Limits,
) -> RedisResult<Vec<i64>> {
    let mut cmd = redis::cmd("SLIDELOG.CHECK");
    cmd.arg(key)
        .arg(if record { "RECORD" } else { "PEEK" })
        .arg(now.map_or("*".to_string(), |n| n.to_string()))
        .arg(deadline)
        .arg(limits.len());
    for &(max, window, cost) in limits {
        cmd.arg(max).arg(window).arg(cost);
    }
    cmd.query(conn)
}

/// The request of `limits` (for the engine).
pub fn request(limits: &Limits) -> Request {
    let l: Vec<Limit> = limits
        .iter()
        .map(|&(m, w, _)| Limit::new(m, w).unwrap())
        .collect();
    let costs: Vec<u64> = limits.iter().map(|&(_, _, c)| c).collect();
    Request::with_costs("k", l, costs).unwrap()
}

/// The module's reply as the engine's decision plus the time it used.
pub fn decision(reply: &[i64]) -> (Decision, u64) {
    assert_eq!(reply.len(), 8, "reply {reply:?}");
    let u = |i: usize| u64::try_from(reply[i]).unwrap();
    (
        Decision {
            allowed: reply[0] == 1,
            limit: u(1),
            window_ms: u(2),
            count: u(3),
            remaining: u(4),
            retry_after_ms: u(5),
            reset_after_ms: u(6),
            degraded: false,
            blocked: false,
            record: None,
        },
        u(7),
    )
}
