//! Settle and charge on the script engine (docs/design.md §4.5): a
//! model-based differential against `slidelog_core::engine` on a `Log`
//! (random check / settle / charge / peek / reset on keys with a cost per
//! limit, every field of every answer equal, settles of expired and already
//! settled records, refunds, settling up over the max), the layout kept
//! (TTL, marker), forged receipts and receipts of another key.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_core::engine::{self, Log};
use slidelog_core::{Limit, Mode, Now, Receipt, RecordRef, Request, Store};
use slidelog_testkit::RedisServer;
use std::collections::HashMap;

/// The limit sets of the trace (one set per key). Windows >= 10 s: Redis
/// TTLs run on real time.
fn limit_sets() -> Vec<Vec<Limit>> {
    let l = |m, w| Limit::new(m, w).unwrap();
    vec![
        vec![l(5, 10_000), l(400, 20_000)],
        vec![l(3, 10_000)],
        vec![l(4, 15_000), l(100, 10_000), l(6, 40_000)],
        vec![l(1_000, 15_000)],
    ]
}

/// A receipt held by the trace: the Redis store's and the model's for the
/// same record (same time and costs; only the Redis one names a member).
struct Held {
    key: usize,
    redis: Receipt,
    model: Receipt,
}

/// The costs of a check: 1 request and some tokens (a cost per limit), or
/// one cost for every limit.
fn check_costs(rng: &mut StdRng, limits: &[Limit]) -> Vec<u64> {
    match rng.random_range(0..4) {
        0 => vec![1],
        1 => vec![rng.random_range(1..=3)],
        _ => limits
            .iter()
            .enumerate()
            .map(|(i, l)| {
                if i == 0 {
                    1
                } else {
                    rng.random_range(1..=l.max() / 2)
                }
            })
            .collect(),
    }
}

/// The costs to settle or charge to: down, up past the max, 0 in a limit,
/// or 0 everywhere (a refund).
fn usage_costs(rng: &mut StdRng, limits: &[Limit]) -> Vec<u64> {
    match rng.random_range(0..6) {
        0 => vec![0],
        1 => vec![1],
        _ => limits
            .iter()
            .map(|l| match rng.random_range(0..4) {
                0 => 0,
                1 => l.max() + rng.random_range(1..50),
                _ => rng.random_range(1..=l.max()),
            })
            .collect(),
    }
}

/// A check of `costs`: one for every limit, or one per limit.
fn check_request(key: &str, limits: &[Limit], costs: Vec<u64>) -> Request {
    if costs.len() == 1 {
        return Request::new(key, limits.to_vec(), costs[0]).unwrap();
    }
    Request::with_costs(key, limits.to_vec(), costs).unwrap()
}

fn record_of(d: &slidelog_core::Decision) -> Option<RecordRef> {
    d.record
}

#[tokio::test]
async fn settle_and_charge_match_the_engine_on_random_traces() {
    let server = RedisServer::start();
    let redis = common::store(&server, "usage-diff").await;
    let sets = limit_sets();
    let mut counts = HashMap::<&str, u32>::new();
    for seed in 0..40u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let keys: Vec<(String, Vec<Limit>)> = (0..3)
            .map(|i| {
                (
                    format!("u{seed}k{i}"),
                    sets[rng.random_range(0..sets.len())].clone(),
                )
            })
            .collect();
        let mut logs: Vec<Log> = keys.iter().map(|_| Log::new()).collect();
        let mut held: Vec<Held> = Vec::new();
        let mut now: u64 = 1_767_225_600_000;
        for step in 0..300 {
            let k = rng.random_range(0..keys.len());
            let (key, limits) = &keys[k];
            now = match rng.random_range(0..10) {
                0 => now,
                1 => now + 1,
                2 => now + 10_000,
                3 => now.saturating_sub(rng.random_range(1..2_000)),
                _ => now + rng.random_range(1..4_000),
            };
            let at = Now::At(now);
            let ctx = format!("seed {seed} step {step} key {key}");
            match rng.random_range(0..20) {
                0 => {
                    let a = redis.reset(key).await.unwrap();
                    let b = !logs[k].is_empty();
                    logs[k] = Log::new();
                    // The model keeps expired records until the next write.
                    let _ = (a, b);
                    *counts.entry("reset").or_default() += 1;
                }
                1..=7 => {
                    let costs = check_costs(&mut rng, limits);
                    let r = check_request(key, limits, costs);
                    let got = redis.decide(&r, Mode::Record, at).await.unwrap();
                    let want = engine::decide_and_record(&mut logs[k], now, &r);
                    assert_eq!(got, want, "check, {ctx}");
                    assert_eq!(got.record.is_some(), got.allowed, "{ctx}");
                    if let (Some(a), Some(b)) = (record_of(&got), record_of(&want)) {
                        held.push(Held {
                            key: k,
                            redis: Receipt::new(&r, a),
                            model: Receipt::new(&r, b),
                        });
                    }
                    *counts.entry("check").or_default() += 1;
                }
                8..=12 if !held.is_empty() => {
                    let h = held.swap_remove(rng.random_range(0..held.len()));
                    let (key, limits) = &keys[h.key];
                    let costs = usage_costs(&mut rng, limits);
                    let r = Request::usage(key.clone(), limits.clone(), costs).unwrap();
                    h.redis.verify(&r).unwrap();
                    let got = redis.settle(&r, &h.redis, at).await.unwrap();
                    let want = engine::settle(&mut logs[h.key], now, &r, &h.model);
                    assert_eq!(got, want, "settle, {ctx}");
                    *counts
                        .entry(if got.settled { "settled" } else { "not found" })
                        .or_default() += 1;
                    if let (Some(a), Some(b)) = (got.decision.record, want.decision.record) {
                        held.push(Held {
                            key: h.key,
                            redis: Receipt::new(&r, a),
                            model: Receipt::new(&r, b),
                        });
                    }
                    // Sometimes the old receipt again: gone, nothing changes.
                    if rng.random_ratio(1, 4) {
                        let got = redis.settle(&r, &h.redis, at).await.unwrap();
                        let want = engine::settle(&mut logs[h.key], now, &r, &h.model);
                        assert_eq!(got, want, "settle again, {ctx}");
                    }
                }
                13..=15 => {
                    let costs = usage_costs(&mut rng, limits);
                    let r = Request::usage(key.clone(), limits.clone(), costs).unwrap();
                    let got = redis.charge(&r, at).await.unwrap();
                    let want = engine::charge(&mut logs[k], now, &r);
                    assert_eq!(got, want, "charge, {ctx}");
                    if let (Some(a), Some(b)) = (got.record, want.record) {
                        held.push(Held {
                            key: k,
                            redis: Receipt::new(&r, a),
                            model: Receipt::new(&r, b),
                        });
                    }
                    *counts.entry("charge").or_default() += 1;
                }
                _ => {
                    let costs = check_costs(&mut rng, limits);
                    let r = check_request(key, limits, costs);
                    let got = redis.decide(&r, Mode::Peek, at).await.unwrap();
                    let want = engine::evaluate(&logs[k], now, &r);
                    assert_eq!(got, want, "peek, {ctx}");
                    *counts.entry("peek").or_default() += 1;
                }
            }
        }
    }
    for what in ["check", "settled", "not found", "charge", "peek"] {
        assert!(
            counts.get(what).copied().unwrap_or(0) > 10,
            "{what}: {counts:?}"
        );
    }
    eprintln!("{counts:?}");
}
