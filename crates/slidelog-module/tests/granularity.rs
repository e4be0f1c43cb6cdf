//! Granularity per limit on the module (docs/design.md §1.1): the
//! differential run of slidelog-core's granularity test (checks, peeks,
//! settles, charges, the clock stepping back; 1 to 3 limits with
//! granularities from 1 ms to the window, as `window_ms@granularity_ms`)
//! against the same plain model, field by field, on Redis and on Valkey.

mod common;
#[path = "../../slidelog-core/tests/granular/mod.rs"]
mod granular;

use common::{RedisServer, ServerKind, decision, server};
use granular::run::{Subject, limit, ops, run};
use proptest::prelude::*;
use slidelog_core::{Counts, Decision, Receipt, RecordRef, Request};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// One key of a server with the module, decided on at the run's times
/// (shifted to the wall clock: the module refuses times far ahead of it).
struct Module {
    conn: redis::Connection,
    key: String,
    shift: u64,
}

/// `n (max window_ms[@granularity_ms] cost){n}` of `request`.
fn limit_args(cmd: &mut redis::Cmd, request: &Request) {
    cmd.arg(request.limits().len());
    for (i, l) in request.limits().iter().enumerate() {
        let window = match l.granularity_ms() {
            1 => l.window_ms().to_string(),
            g => format!("{}@{g}", l.window_ms()),
        };
        cmd.arg(l.max()).arg(window).arg(request.cost_for(i));
    }
}

/// A usage reply: done, the 8 decision fields, 4 per limit.
fn usage_reply(reply: &[i64], n: usize) -> (bool, Decision, Vec<Counts>) {
    let (d, _) = decision(&reply[1..9]);
    let each = (0..n)
        .map(|i| {
            let c = |j: usize| reply[9 + 4 * i + j] as u64;
            Counts {
                count: c(0),
                remaining: c(1),
                retry_after_ms: c(2),
                reset_after_ms: c(3),
            }
        })
        .collect();
    (reply[0] == 1, d, each)
}

impl Module {
    /// A run's time as the module sees it, and back.
    fn at(&self, now: u64) -> u64 {
        now + self.shift
    }

    fn shifted(&self, mut d: Decision) -> Decision {
        if let Some(r) = d.record.as_mut() {
            r.ts -= self.shift;
        }
        d
    }
}

impl Subject for Module {
    fn check(&mut self, request: &Request, now: u64, record: bool) -> Decision {
        let mut cmd = redis::cmd("SLIDELOG.CHECK");
        cmd.arg(&self.key)
            .arg(if record { "RECORD" } else { "PEEK" })
            .arg(self.at(now))
            .arg(0);
        limit_args(&mut cmd, request);
        let reply: Vec<i64> = cmd.query(&mut self.conn).unwrap();
        let (mut d, _) = decision(&reply);
        if record && d.allowed {
            d.record = Some(RecordRef {
                ts: request.stored_at(self.at(now)),
                id: None,
            });
        }
        self.shifted(d)
    }

    fn settle(
        &mut self,
        request: &Request,
        receipt: &Receipt,
        now: u64,
    ) -> (bool, Decision, Vec<Counts>) {
        let costs: Vec<String> = receipt.costs().iter().map(u64::to_string).collect();
        let mut cmd = redis::cmd("SLIDELOG.SETTLE");
        cmd.arg(&self.key)
            .arg(self.at(now))
            .arg(0)
            .arg(receipt.ts() + self.shift)
            .arg(costs.join(","));
        limit_args(&mut cmd, request);
        let reply: Vec<i64> = cmd.query(&mut self.conn).unwrap();
        let (done, mut d, each) = usage_reply(&reply, request.limits().len());
        if done && request.costs().iter().any(|&c| c > 0) {
            d.record = Some(RecordRef {
                ts: receipt.ts(),
                id: None,
            });
        }
        (done, d, each)
    }

    fn charge(&mut self, request: &Request, now: u64) -> (Decision, Vec<Counts>) {
        let mut cmd = redis::cmd("SLIDELOG.CHARGE");
        cmd.arg(&self.key).arg(self.at(now)).arg(0);
        limit_args(&mut cmd, request);
        let reply: Vec<i64> = cmd.query(&mut self.conn).unwrap();
        let (done, d, each) = usage_reply(&reply, request.limits().len());
        let _ = done;
        (d, each)
    }

    fn names_merged_charges(&self) -> bool {
        false
    }
}

static KEYS: AtomicU64 = AtomicU64::new(0);

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn differential(server: &RedisServer) {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(128));
    let strategy = (proptest::collection::vec(limit(), 1..=3), ops());
    runner
        .run(&strategy, |(limits, ops)| {
            // The run starts at 100,000; the module sees the wall clock,
            // rounded to a multiple of every window (so granules line up).
            let base = wall_ms() / 3_600_000 * 3_600_000;
            let mut subject = Module {
                conn: server.client(),
                key: format!("gran:{}", KEYS.fetch_add(1, Ordering::Relaxed)),
                shift: base,
            };
            run(&mut subject, limits, ops)
        })
        .unwrap();
}

#[test]
fn granular_limits_match_the_model_on_redis() {
    differential(&server(ServerKind::Redis));
}

#[test]
fn granular_limits_match_the_model_on_valkey() {
    differential(&server(ServerKind::Valkey));
}

#[test]
fn a_bad_granularity_is_refused_by_name() {
    let server = server(ServerKind::Redis);
    let mut conn = server.client();
    for (window, text) in [
        ("1000@300", "granularity_ms"),
        ("1000@0", "granularity_ms_1"),
    ] {
        let err = redis::cmd("SLIDELOG.CHECK")
            .arg("k")
            .arg("RECORD")
            .arg("*")
            .arg(0)
            .arg(1)
            .arg(10)
            .arg(window)
            .arg(1)
            .query::<Vec<i64>>(&mut conn)
            .unwrap_err();
        assert!(err.to_string().contains(text), "{err}");
    }
}
