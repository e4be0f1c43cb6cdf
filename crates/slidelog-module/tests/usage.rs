//! Settle and charge (docs/design.md §4.5), three ways on one trace: the
//! module's `SLIDELOG.SETTLE` / `SLIDELOG.CHARGE` on a module log, the Lua
//! scripts (`sliding_log.lua` checks, `usage.lua` settles and charges, run
//! through EVAL from their sources) on a sorted set, and
//! `slidelog_core::engine` on a `Log` in this process (the memory store's
//! code). Seeded random check / settle / charge / peek / reset on keys with a
//! cost per limit (1 request + N tokens): settles down, up past the max,
//! to 0 in a limit, refunds (0 everywhere), settles of expired, reset and
//! already settled records, charges above the max. Every field of every
//! answer equal (the scripts' too, as far as their reply goes), checks and
//! peeks with and without `EACH` (every limit's counts), on Redis and on
//! Valkey. Then a sorted set the scripts settled is adopted by the
//! module with its costs of 0 kept.
//!
//! The module and the engine settle a receipt's *share* of its record and
//! merge a charge into a full log's newest record, moved to now
//! (docs/design.md §4.6); the scripts (not changed yet) settle their member
//! and append every charge. So a key's answers are compared with the
//! scripts' only until such a difference is possible on it (a receipt
//! settled a second time, a charge merged), and again after its reset;
//! the module is compared with the engine at every step.

mod common;

use common::{ServerKind, server};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Connection;
use slidelog_core::{Detailed, Limit, Log, Receipt, RecordRef, Request, engine};
use std::time::{SystemTime, UNIX_EPOCH};

/// The general script as slidelog-redis builds and sends it.
const GENERAL: &str = slidelog_redis::script::SOURCE;
/// `usage.lua` as slidelog-redis builds and sends it.
const USAGE: &str = slidelog_redis::usage::USAGE_SOURCE;

/// The limit sets of the trace, one per key: a request limit and a token
/// limit (and a third). Windows >= 10 s: the scripts' TTLs run on the
/// server's clock.
fn limit_sets() -> Vec<Vec<(u64, u64)>> {
    vec![
        vec![(5, 10_000), (400, 20_000)],
        vec![(3, 10_000)],
        vec![(4, 15_000), (100, 10_000), (6, 40_000)],
        vec![(1_000, 15_000)],
    ]
}

fn limits_of(set: &[(u64, u64)]) -> Vec<Limit> {
    set.iter()
        .map(|&(m, w)| Limit::new(m, w).unwrap())
        .collect()
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A check's costs: 1 request and some tokens, or one cost for all.
fn check_costs(rng: &mut StdRng, set: &[(u64, u64)]) -> Vec<u64> {
    let smallest = set.iter().map(|l| l.0).min().unwrap();
    match rng.random_range(0..4) {
        0 => vec![1],
        1 => vec![rng.random_range(1..=smallest.min(3))],
        _ => set
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 0 {
                    1
                } else {
                    rng.random_range(1..=l.0 / 2)
                }
            })
            .collect(),
    }
}

/// Costs to settle to or charge: down, up past the max, 0 in a limit, or
/// 0 everywhere.
fn usage_costs(rng: &mut StdRng, set: &[(u64, u64)]) -> Vec<u64> {
    match rng.random_range(0..6) {
        0 => vec![0],
        1 => vec![1],
        _ => set
            .iter()
            .map(|l| match rng.random_range(0..4) {
                0 => 0,
                1 => l.0 + rng.random_range(1..50),
                _ => rng.random_range(1..=l.0),
            })
            .collect(),
    }
}

/// The text after a scripts' member's `#` (`slidelog_redis::members::cost_list`).
fn cost_list(costs: &[u64]) -> String {
    if costs.iter().all(|&c| c == 1) {
        return String::new();
    }
    let parts: Vec<String> = costs.iter().map(u64::to_string).collect();
    parts.join(",")
}

fn comma(costs: &[u64]) -> String {
    let parts: Vec<String> = costs.iter().map(u64::to_string).collect();
    parts.join(",")
}

/// One key's three copies: the module's key, the scripts' key, the model.
struct Key {
    module: String,
    script: String,
    set: Vec<(u64, u64)>,
    log: Log,
    /// The scripts may now answer otherwise (docs/design.md §4.6).
    diverged: bool,
}

/// A receipt the trace holds: the record's key, timestamp, costs as listed,
/// and the scripts' member id for it.
#[derive(Clone)]
struct Held {
    key: usize,
    ts: u64,
    costs: Vec<u64>,
    id: String,
    /// Settled before: a second settle is of a share the scripts' member
    /// no longer lists.
    used: bool,
}

/// `(max, window, cost)` triples.
fn triples(cmd: &mut redis::Cmd, set: &[(u64, u64)], costs: &[u64]) {
    cmd.arg(set.len());
    for (i, &(m, w)) in set.iter().enumerate() {
        cmd.arg(m).arg(w).arg(costs[i.min(costs.len() - 1)]);
    }
}

/// `SLIDELOG.CHECK`, with `EACH` (every limit's counts) when `each`.
fn module_check(
    conn: &mut Connection,
    k: &Key,
    (record, each): (bool, bool),
    now: u64,
    costs: &[u64],
) -> Vec<i64> {
    let mut cmd = redis::cmd("SLIDELOG.CHECK");
    cmd.arg(&k.module)
        .arg(if record { "RECORD" } else { "PEEK" })
        .arg(now)
        .arg(0);
    triples(&mut cmd, &k.set, costs);
    if each {
        cmd.arg("EACH");
    }
    cmd.query(conn).unwrap()
}

/// `sliding_log.lua` (mode 2 / 3: with every limit's counts, when `each`).
fn script_check(
    conn: &mut Connection,
    k: &Key,
    (record, each): (bool, bool),
    now: u64,
    costs: &[u64],
    id: &str,
) -> Vec<i64> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(GENERAL)
        .arg(2)
        .arg(&k.script)
        .arg(format!("{{{}}}#w", k.script))
        .arg(i32::from(record) + 2 * i32::from(each))
        .arg(now);
    triples(&mut cmd, &k.set, costs);
    if record {
        let list = cost_list(costs);
        let member = if list.is_empty() {
            id.to_string()
        } else {
            format!("{id}#{list}")
        };
        cmd.arg(member).arg(-1);
    }
    cmd.query(conn).unwrap()
}

/// `SLIDELOG.SETTLE` (`held` given) or `SLIDELOG.CHARGE`.
fn module_usage(
    conn: &mut Connection,
    k: &Key,
    now: u64,
    costs: &[u64],
    held: Option<&Held>,
) -> Vec<i64> {
    let mut cmd = redis::cmd(if held.is_some() {
        "SLIDELOG.SETTLE"
    } else {
        "SLIDELOG.CHARGE"
    });
    cmd.arg(&k.module).arg(now).arg(0);
    if let Some(h) = held {
        cmd.arg(h.ts).arg(comma(&h.costs));
    }
    triples(&mut cmd, &k.set, costs);
    cmd.query(conn).unwrap()
}

/// `usage.lua`'s settle (`held` given) or charge (of member `id`).
fn script_usage(
    conn: &mut Connection,
    k: &Key,
    now: u64,
    costs: &[u64],
    held: Option<&Held>,
    id: &str,
) -> Vec<i64> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(USAGE)
        .arg(2)
        .arg(&k.script)
        .arg(format!("{{{}}}#w", k.script))
        .arg(if held.is_some() { "settle" } else { "charge" })
        .arg(now)
        .arg(-1);
    triples(&mut cmd, &k.set, costs);
    match held {
        Some(h) => {
            cmd.arg(&h.id)
                .arg(h.ts)
                .arg(cost_list(&h.costs))
                .arg(cost_list(costs));
        }
        None => {
            let list = cost_list(costs);
            cmd.arg(if list.is_empty() {
                id.to_string()
            } else {
                format!("{id}#{list}")
            });
        }
    }
    cmd.query(conn).unwrap()
}

/// A settle's or charge's reply as the engine gives it: `[done, the
/// decision's fields, now, every limit's four counts]`.
fn usage_reply(done: bool, d: &Detailed, now: u64) -> Vec<i64> {
    let mut out = vec![i64::from(done)];
    out.extend(check_reply(d, now, true));
    out
}

/// A check's reply as the engine gives it (the decision's fields, now;
/// then every limit's four counts when `each`).
fn check_reply(d: &Detailed, now: u64, each_too: bool) -> Vec<i64> {
    let mut out = decision_fields(d, now);
    if each_too {
        out.extend(each(d));
    }
    out
}

/// The decision's fields and now.
fn decision_fields(d: &Detailed, now: u64) -> Vec<i64> {
    let x = d.decision;
    let v = [
        u64::from(x.allowed),
        x.limit,
        x.window_ms,
        x.count,
        x.remaining,
        x.retry_after_ms,
        x.reset_after_ms,
        now,
    ];
    v.iter().map(|&n| n as i64).collect()
}

/// Every limit's four counts, as the module appends them.
fn each(d: &Detailed) -> Vec<i64> {
    d.limits
        .iter()
        .flat_map(|s| {
            let c = s.counts.unwrap();
            [c.count, c.remaining, c.retry_after_ms, c.reset_after_ms]
        })
        .map(|n| n as i64)
        .collect()
}

/// The scripts' reply against the module's: equal as far as the scripts'
/// reply goes (it carries every limit's counts only where it was asked to).
fn same_as_scripts(module: &[i64], script: &[i64], ctx: &str) {
    let n = if script.len() == module.len() {
        module.len()
    } else {
        script.len().min(module.len())
    };
    assert_eq!(&module[..n], &script[..n], "{ctx}: module vs scripts");
}

fn request(key: &Key, costs: &[u64], usage: bool) -> Request {
    let limits = limits_of(&key.set);
    match (usage, costs.len()) {
        (true, _) => Request::usage("k", limits, costs.to_vec()).unwrap(),
        (false, 1) => Request::new("k", limits, costs[0]).unwrap(),
        (false, _) => Request::with_costs("k", limits, costs.to_vec()).unwrap(),
    }
}

/// One seeded trace of `ops` steps; returns (settled, refunds, not found,
/// charges, steps compared with the scripts) to show the trace covered them.
fn trace(conn: &mut Connection, seed: u64, ops: usize) -> [usize; 5] {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut keys: Vec<Key> = limit_sets()
        .into_iter()
        .enumerate()
        .map(|(i, set)| Key {
            module: format!("usage:{seed}:m{i}"),
            script: format!("usage:{seed}:s{i}"),
            set,
            log: Log::new(),
            diverged: false,
        })
        .collect();
    let mut held: Vec<Held> = Vec::new();
    let mut seen = [0usize; 5];
    let mut now = wall_ms();
    let mut ids = 0u64;
    for step in 0..ops {
        // Forward, faster than the wall clock: the keys' TTLs outlast
        // their records. Never twice the same ms, so no two records share
        // a timestamp and costs (such twins are interchangeable: a stale
        // receipt may settle the module's other one, never the scripts'
        // member of another id).
        now += rng.random_range(1..=400);
        let k = rng.random_range(0..keys.len());
        let ctx = format!("seed {seed} step {step} key {k} now {now}");
        ids += 1;
        let id = format!("m{ids:025}");
        match rng.random_range(0..20) {
            0 => {
                let _: i64 = redis::cmd("SLIDELOG.RESET")
                    .arg(&keys[k].module)
                    .query(conn)
                    .unwrap();
                let script = &keys[k].script;
                let _: i64 = redis::cmd("DEL")
                    .arg(script)
                    .arg(format!("{{{script}}}#w"))
                    .query(conn)
                    .unwrap();
                keys[k].log = Log::new();
                keys[k].diverged = false;
            }
            1..=2 => {
                let each_too = rng.random_bool(0.5);
                let costs = check_costs(&mut rng, &keys[k].set);
                let req = request(&keys[k], &costs, false);
                let got = module_check(conn, &keys[k], (false, each_too), now, &costs);
                let want = engine::evaluate_each(&keys[k].log, now, &req);
                assert_eq!(got, check_reply(&want, now, each_too), "{ctx}: peek");
                let script = script_check(conn, &keys[k], (false, each_too), now, &costs, "");
                if !keys[k].diverged {
                    same_as_scripts(&got, &script, &ctx);
                    seen[4] += 1;
                }
            }
            3..=9 => {
                let each_too = rng.random_bool(0.5);
                let costs = check_costs(&mut rng, &keys[k].set);
                let req = request(&keys[k], &costs, false);
                let got = module_check(conn, &keys[k], (true, each_too), now, &costs);
                let want = engine::decide_and_record_each(&mut keys[k].log, now, &req);
                assert_eq!(got, check_reply(&want, now, each_too), "{ctx}: check");
                let flags = (true, each_too);
                let script = script_check(conn, &keys[k], flags, now, req.costs(), &id);
                if !keys[k].diverged {
                    same_as_scripts(&got, &script, &ctx);
                    seen[4] += 1;
                }
                if want.decision.allowed {
                    held.push(Held {
                        key: k,
                        ts: now,
                        costs: req.costs().to_vec(),
                        id,
                        used: false,
                    });
                }
            }
            10..=16 if !held.is_empty() => {
                // Settle a held receipt: mostly a recent one, sometimes an
                // old one (expired, reset or settled since).
                let h = if rng.random_bool(0.7) {
                    held.len() - 1 - rng.random_range(0..held.len().min(4))
                } else {
                    rng.random_range(0..held.len())
                };
                let at = h;
                let h = held[at].clone();
                held[at].used = true;
                let ctx = format!("seed {seed} step {step} key {} now {now}", h.key);
                let key = &mut keys[h.key];
                let costs = usage_costs(&mut rng, &key.set);
                let req = request(key, &costs, true);
                let named = request(key, &h.costs, true);
                let receipt = Receipt::new(&named, RecordRef { ts: h.ts, id: None });
                let got = module_usage(conn, key, now, &costs, Some(&h));
                let s = engine::settle(&mut key.log, now, &req, &receipt);
                let d = Detailed {
                    decision: s.decision,
                    limits: s.limits,
                };
                let want = usage_reply(s.settled, &d, now);
                assert_eq!(
                    got,
                    want,
                    "{ctx}: settle {h:?} to {costs:?}",
                    h = (h.ts, &h.costs)
                );
                let script = script_usage(conn, key, now, req.costs(), Some(&h), "");
                key.diverged |= h.used;
                if !key.diverged {
                    same_as_scripts(&got, &script, &ctx);
                    seen[4] += 1;
                }
                let removed = req.costs().iter().all(|&c| c == 0);
                seen[match (s.settled, removed) {
                    (true, false) => 0,
                    (true, true) => 1,
                    _ => 2,
                }] += 1;
                if s.settled && !removed {
                    held.push(Held {
                        key: h.key,
                        ts: h.ts,
                        costs: req.costs().to_vec(),
                        id: h.id,
                        used: false,
                    });
                }
            }
            _ => {
                let costs = usage_costs(&mut rng, &keys[k].set);
                let req = request(&keys[k], &costs, true);
                let got = module_usage(conn, &keys[k], now, &costs, None);
                let merges =
                    costs.iter().any(|&c| c > 0) && engine::charge_merges(&keys[k].log, now, &req);
                keys[k].diverged |= merges;
                let d = engine::charge(&mut keys[k].log, now, &req);
                let want = usage_reply(d.decision.record.is_some(), &d, now);
                assert_eq!(got, want, "{ctx}: charge {costs:?}");
                // The member lists the request's costs (one for all when equal),
                // as the client makes it.
                let script = script_usage(conn, &keys[k], now, req.costs(), None, &id);
                if !keys[k].diverged {
                    same_as_scripts(&got, &script, &ctx);
                    seen[4] += 1;
                }
                seen[3] += 1;
                if let Some(record) = d.decision.record {
                    held.push(Held {
                        key: k,
                        ts: record.ts,
                        costs: req.costs().to_vec(),
                        id,
                        used: false,
                    });
                }
            }
        }
    }
    seen
}

fn run(kind: ServerKind) {
    let server = server(kind);
    let mut conn = server.client();
    let mut total = [0usize; 5];
    for seed in 1..=8 {
        let seen = trace(&mut conn, seed, 500);
        for (t, s) in total.iter_mut().zip(seen) {
            *t += s;
        }
    }
    // Settled, refunded, not found (expired, reset, settled before),
    // charged; and most steps compared with the scripts too.
    assert!(total[..4].iter().all(|&n| n > 40), "{total:?}");
    assert!(total[4] > 800, "{total:?}");
    eprintln!("settled, refunded, not found, charged, compared with the scripts: {total:?}");
}

#[test]
fn settle_and_charge_agree_module_scripts_and_engine_on_redis() {
    run(ServerKind::Redis);
}

#[test]
fn settle_and_charge_agree_module_scripts_and_engine_on_valkey() {
    run(ServerKind::Valkey);
}

/// A sorted set the scripts settled to 0 tokens is adopted with that 0
/// kept: the record counts as a request and nowhere in the token limit.
#[test]
fn adoption_keeps_a_cost_of_0() {
    let server = server(ServerKind::Redis);
    let mut conn = server.client();
    let key = Key {
        module: "adopted".into(),
        script: "adopted".into(),
        set: vec![(5, 60_000), (100, 60_000)],
        log: Log::new(),
        diverged: false,
    };
    let now = wall_ms();
    script_check(&mut conn, &key, (true, false), now, &[1, 60], "a");
    script_check(&mut conn, &key, (true, false), now + 1, &[1, 30], "b");
    let held = Held {
        key: 0,
        ts: now + 1,
        costs: vec![1, 30],
        id: "b".into(),
        used: false,
    };
    let settled = script_usage(&mut conn, &key, now + 2, &[1, 0], Some(&held), "");
    assert_eq!(settled[0], 1);
    let mut model = Log::new();
    model.append(now, &[1, 60]);
    model.append(now + 1, &[1, 0]);
    // A peek of 41 tokens: 60 live (not 61), so it fits; reset from the
    // first record (the second counts no token).
    let got = module_check(&mut conn, &key, (false, true), now + 3, &[1, 40]);
    let req = request(&key, &[1, 40], false);
    let want = engine::evaluate_each(&model, now + 3, &req);
    assert_eq!(got, check_reply(&want, now + 3, true));
    let got = module_check(&mut conn, &key, (true, true), now + 3, &[1, 40]);
    let want = engine::decide_and_record_each(&mut model, now + 3, &req);
    assert_eq!(got, check_reply(&want, now + 3, true));
    let kind: String = redis::cmd("TYPE").arg("adopted").query(&mut conn).unwrap();
    assert_eq!(kind, "slide-log");
    // The adopted record settles through the module like any other.
    let got = module_usage(
        &mut conn,
        &key,
        now + 4,
        &[0],
        Some(&held_at(now + 1, &[1, 0])),
    );
    assert_eq!(
        got[0], 1,
        "the adopted 0-token record is found by its costs"
    );
}

fn held_at(ts: u64, costs: &[u64]) -> Held {
    Held {
        key: 0,
        ts,
        costs: costs.to_vec(),
        id: String::new(),
        used: false,
    }
}
