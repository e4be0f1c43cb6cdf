//! The module against `slidelog_core::engine` on a `Log` in this process,
//! on seeded random traces: several limits, weighted records, a cost per
//! limit, peeks, resets, the caller's time stepping back, the server's
//! clock (`*`) and late checks refused by their deadline. Every field of
//! every answer must be equal, on Redis and on Valkey.

mod common;

use common::{Limits, ServerKind, check, decision, request, server};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_core::{Log, engine};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

/// The limits a key is used with, and sometimes a shorter set.
fn limit_sets(rng: &mut StdRng) -> Vec<Vec<(u64, u64)>> {
    let n = rng.random_range(1..=3);
    let full: Vec<(u64, u64)> = (0..n)
        .map(|_| (rng.random_range(1..=12), rng.random_range(10..=3_000)))
        .collect();
    let mut sets = vec![full.clone()];
    if n > 1 {
        sets.push(full[..n - 1].to_vec());
    }
    sets
}

/// Costs for `set`: mostly 1, sometimes one cost, sometimes one per limit.
fn with_costs(rng: &mut StdRng, set: &[(u64, u64)]) -> Vec<(u64, u64, u64)> {
    let smallest = set.iter().map(|l| l.0).min().unwrap();
    let one = rng.random_range(1..=smallest);
    let kind = rng.random_range(0..10);
    set.iter()
        .map(|&(m, w)| {
            let cost = match kind {
                0..=5 => 1,
                6..=7 => one,
                _ => rng.random_range(1..=m),
            };
            (m, w, cost)
        })
        .collect()
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn info(conn: &mut redis::Connection, key: &str) -> HashMap<String, i64> {
    let flat: Vec<redis::Value> = redis::cmd("SLIDELOG.INFO").arg(key).query(conn).unwrap();
    flat.chunks(2)
        .map(|p| {
            let name: String = redis::from_redis_value(p[0].clone()).unwrap();
            let v: i64 = redis::from_redis_value(p[1].clone()).unwrap();
            (name, v)
        })
        .collect()
}

/// One seeded trace of `ops` operations over a few keys.
fn trace(conn: &mut redis::Connection, seed: u64, ops: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let keys: Vec<String> = (0..4).map(|i| format!("diff:{seed}:{i}")).collect();
    let sets: Vec<Vec<Vec<(u64, u64)>>> = keys.iter().map(|_| limit_sets(&mut rng)).collect();
    let mut logs: Vec<Log> = keys.iter().map(|_| Log::new()).collect();
    let mut now = wall_ms();
    // (admitted, rejected) of the checks on the caller's time: a trace
    // that never rejects (or never admits) would prove little.
    let mut seen = (0, 0);
    for step in 0..ops {
        let k = rng.random_range(0..keys.len());
        // Time mostly moves on, faster than the wall clock (so the keys'
        // TTLs, on the server's clock, outlast their records), and
        // sometimes steps back.
        now = match rng.random_range(0..20) {
            0 => now.saturating_sub(rng.random_range(1..=2_000)),
            _ => now + rng.random_range(0..=120),
        };
        let set = &sets[k][usize::from(rng.random_range(0..10) == 0) % sets[k].len()];
        let limits: Vec<(u64, u64, u64)> = with_costs(&mut rng, set);
        let req = request(&limits);
        let ctx = format!("seed {seed} step {step} key {k} now {now} limits {limits:?}");
        let at = At {
            key: &keys[k],
            now,
            limits: &limits,
            ctx: &ctx,
        };
        match rng.random_range(0..40) {
            0 => {
                let had: i64 = redis::cmd("SLIDELOG.RESET")
                    .arg(&keys[k])
                    .query(conn)
                    .unwrap();
                let live = logs[k].len() > logs[k].first_live(now, 3_000);
                assert_eq!(had == 1, !logs[k].is_empty() || live, "{ctx}: reset");
                logs[k] = Log::new();
            }
            1..=6 => peek(conn, &logs[k], &at),
            7..=8 => {
                // The server's clock: the model decides at the time it used.
                let reply = check(conn, &keys[k], true, None, 0, &limits).unwrap();
                let (got, used) = decision(&reply);
                let want = engine::decide_and_record(&mut logs[k], used, &req);
                assert_eq!(got, want, "{ctx}: server time {used}");
            }
            9 => late(conn, &mut logs[k], &at),
            _ => {
                let reply = check(conn, &keys[k], true, Some(now), 0, &limits).unwrap();
                let (got, used) = decision(&reply);
                let want = engine::decide_and_record(&mut logs[k], now, &req);
                assert_eq!((got, used), (want, now), "{ctx}");
                if got.allowed {
                    seen.0 += 1;
                } else {
                    seen.1 += 1;
                }
                let i = info(conn, &keys[k]);
                let log = &logs[k];
                assert_eq!(i["records"], log.len() as i64, "{ctx}: records");
                assert_eq!(i["units"], log.units_from(0, 0) as i64, "{ctx}: units");
                assert_eq!(i["newest_ms"], log.newest().unwrap_or(0) as i64, "{ctx}");
                assert_eq!(i["weighted"], i64::from(log.is_weighted()), "{ctx}");
            }
        }
    }
    assert!(
        seen.0 > ops / 10 && seen.1 > ops / 10,
        "seed {seed}: {seen:?}"
    );
    assert!(
        logs.iter().any(Log::is_weighted),
        "seed {seed}: no weighted log"
    );
}

/// What one step of a trace checks: the key, at what time, with which
/// limits, and its context for failure messages.
struct At<'a> {
    key: &'a str,
    now: u64,
    limits: &'a Limits,
    ctx: &'a str,
}

fn peek(conn: &mut redis::Connection, log: &Log, at: &At) {
    let reply = check(conn, at.key, false, Some(at.now), 0, at.limits).unwrap();
    let (got, used) = decision(&reply);
    assert_eq!(
        (got, used),
        (engine::evaluate(log, at.now, &request(at.limits)), at.now),
        "{}: peek",
        at.ctx
    );
}

/// A check whose deadline (1 ms after the epoch) has long passed: refused
/// with DEADLINE, nothing recorded, when it would be admitted; answered as
/// usual when rejected.
fn late(conn: &mut redis::Connection, log: &mut Log, at: &At) {
    let req = request(at.limits);
    let result = check(conn, at.key, true, Some(at.now), 1, at.limits);
    if engine::evaluate(log, at.now, &req).allowed {
        let err = result.expect_err(at.ctx);
        assert_eq!(err.code(), Some("DEADLINE"), "{}: {err}", at.ctx);
    } else {
        let (got, _) = decision(&result.unwrap());
        assert_eq!(
            got,
            engine::decide_and_record(log, at.now, &req),
            "{}: late rejection",
            at.ctx
        );
    }
}

fn run(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    for seed in 1..=6 {
        trace(&mut conn, seed, 2_500);
    }
}

#[test]
fn the_module_decides_as_the_engine_on_redis() {
    run(ServerKind::Redis);
}

#[test]
fn the_module_decides_as_the_engine_on_valkey() {
    run(ServerKind::Valkey);
}
