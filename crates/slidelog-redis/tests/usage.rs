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
    /// A charge merged into its record: the scripts renamed the member
    /// (docs/design.md §4.5) where the engine may still find the share.
    renamed: bool,
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
        // Both merge a charge into a full log's newest record, moved to
        // now (docs/design.md §4.5, §4.6). The engine settles any share of
        // its millisecond's record; the scripts rename a member on every
        // settle and merge, so a receipt used once, or of a record a charge
        // merged into, names nothing there. A key is compared until such a
        // receipt settles on the engine only, and again after its reset.
        let mut diverged = vec![false; keys.len()];
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
                    diverged[k] = false;
                    // The model keeps expired records until the next write.
                    let _ = (a, b);
                    *counts.entry("reset").or_default() += 1;
                }
                1..=7 => {
                    let costs = check_costs(&mut rng, limits);
                    let r = check_request(key, limits, costs);
                    let got = redis.decide(&r, Mode::Record, at).await.unwrap();
                    let want = engine::decide_and_record(&mut logs[k], now, &r);
                    if !diverged[k] {
                        assert_eq!(got, want, "check, {ctx}");
                    }
                    assert_eq!(got.record.is_some(), got.allowed, "{ctx}");
                    if let (Some(a), Some(b)) = (record_of(&got), record_of(&want)) {
                        held.push(Held {
                            key: k,
                            redis: Receipt::new(&r, a),
                            model: Receipt::new(&r, b),
                            renamed: false,
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
                    diverged[h.key] |= h.renamed && want.settled && !got.settled;
                    if !diverged[h.key] {
                        assert_eq!(got, want, "settle, {ctx}");
                    }
                    *counts
                        .entry(if got.settled { "settled" } else { "not found" })
                        .or_default() += 1;
                    if let (Some(a), Some(b)) = (got.decision.record, want.decision.record) {
                        held.push(Held {
                            key: h.key,
                            redis: Receipt::new(&r, a),
                            model: Receipt::new(&r, b),
                            renamed: false,
                        });
                    }
                    // Sometimes the old receipt again: gone on the scripts,
                    // nothing changes; the engine may still find a share of
                    // that size in the record.
                    if rng.random_ratio(1, 4) {
                        let got = redis.settle(&r, &h.redis, at).await.unwrap();
                        let want = engine::settle(&mut logs[h.key], now, &r, &h.model);
                        diverged[h.key] |= want.settled && !got.settled;
                        if !diverged[h.key] {
                            assert_eq!(got, want, "settle again, {ctx}");
                        }
                    }
                }
                13..=15 => {
                    let costs = usage_costs(&mut rng, limits);
                    let r = Request::usage(key.clone(), limits.clone(), costs).unwrap();
                    let got = redis.charge(&r, at).await.unwrap();
                    let merges = r.costs().iter().any(|&c| c > 0)
                        && engine::charge_merges(&logs[k], now, &r);
                    if let Some(newest) = logs[k].newest().filter(|_| merges) {
                        for h in held.iter_mut().filter(|h| h.key == k) {
                            h.renamed |= h.model.ts() == newest;
                        }
                        *counts.entry("merged").or_default() += 1;
                    }
                    let want = engine::charge(&mut logs[k], now, &r);
                    if !diverged[k] {
                        assert_eq!(got, want, "charge, {ctx}");
                        // The record named: where it is (the merged record
                        // moved to now, or stayed later), on both.
                        let ts = |d: &slidelog_core::Decision| d.record.map(|r| r.ts);
                        assert_eq!(ts(&got.decision), ts(&want.decision), "{ctx}");
                    }
                    if let (Some(a), Some(b)) = (got.decision.record, want.decision.record) {
                        held.push(Held {
                            key: k,
                            redis: Receipt::new(&r, a),
                            model: Receipt::new(&r, b),
                            renamed: false,
                        });
                    }
                    *counts.entry("charge").or_default() += 1;
                }
                _ => {
                    let costs = check_costs(&mut rng, limits);
                    let r = check_request(key, limits, costs);
                    let got = redis.decide(&r, Mode::Peek, at).await.unwrap();
                    let want = engine::evaluate(&logs[k], now, &r);
                    if !diverged[k] {
                        assert_eq!(got, want, "peek, {ctx}");
                        *counts.entry("compared").or_default() += 1;
                    }
                    *counts.entry("peek").or_default() += 1;
                }
            }
        }
    }
    for what in [
        "check",
        "settled",
        "not found",
        "charge",
        "merged",
        "peek",
        "compared",
    ] {
        assert!(
            counts.get(what).copied().unwrap_or(0) > 10,
            "{what}: {counts:?}"
        );
    }
    eprintln!("{counts:?}");
}

fn tokens_limits() -> Vec<Limit> {
    vec![
        Limit::new(1_000, 60_000).unwrap(),
        Limit::new(2_000, 60_000).unwrap(),
    ]
}

/// Every record of `key`: (member, score).
fn log_of(server: &RedisServer, redis_key: &str) -> Vec<(String, u64)> {
    let url = format!("redis://127.0.0.1:{}", server.port());
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    common::records(&mut c, redis_key)
}

#[tokio::test]
async fn forged_receipts_and_receipts_of_another_key_change_nothing() {
    let server = RedisServer::start();
    let redis = common::store(&server, "usage-abuse").await;
    let now = 1_767_225_600_000u64;
    let check = Request::with_costs("a", tokens_limits(), vec![1, 50]).unwrap();
    let d = redis
        .decide(&check, Mode::Record, Now::At(now))
        .await
        .unwrap();
    let real = Receipt::new(&check, d.record.unwrap());
    let down = |key: &str| Request::usage(key, tokens_limits(), vec![1, 10]).unwrap();
    // Another key: refused before any store by its fingerprint; forced
    // through the store anyway, it names no member there.
    assert_eq!(
        Receipt::for_request(&real.encode(), &down("b")),
        Err(slidelog_core::ReceiptError::OtherKey)
    );
    let s = redis
        .settle(&down("b"), &real, Now::At(now + 1))
        .await
        .unwrap();
    assert!(!s.settled);
    assert_eq!(s.decision.count, 0);
    assert!(log_of(&server, &format!("{}b", redis.prefix())).is_empty());
    // Forged: random ids and times, the real time with another id, the
    // real id with another time or costs the record does not hold (costs
    // within it name a share of it, docs/design.md §4.5: a receipt edited
    // so is what the limiter's signature refuses, §4.6).
    let id = real.id().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut forged: Vec<Receipt> = (0..10_000)
        .map(|_| {
            let record = RecordRef {
                ts: now - rng.random_range(0..1_000),
                id: Some(rng.random()),
            };
            Receipt::new(&check, record)
        })
        .collect();
    forged.push(Receipt::new(
        &check,
        RecordRef {
            ts: now,
            id: Some(id ^ 1),
        },
    ));
    forged.push(Receipt::new(
        &check,
        RecordRef {
            ts: now + 1,
            id: Some(id),
        },
    ));
    let more = Request::usage("a", tokens_limits(), vec![1, 51]).unwrap();
    forged.push(Receipt::new(
        &more,
        RecordRef {
            ts: now,
            id: Some(id),
        },
    ));
    forged.push(Receipt::new(&check, RecordRef { ts: now, id: None }));
    for receipt in &forged {
        let s = redis
            .settle(&down("a"), receipt, Now::At(now + 2))
            .await
            .unwrap();
        assert!(!s.settled, "{receipt:?}");
        assert_eq!(s.decision.count, 1);
    }
    let before = log_of(&server, &format!("{}a", redis.prefix()));
    assert_eq!(before.len(), 1);
    // The real receipt still settles, once.
    let s = redis
        .settle(&down("a"), &real, Now::At(now + 3))
        .await
        .unwrap();
    assert!(s.settled);
    assert!(
        !redis
            .settle(&down("a"), &real, Now::At(now + 3))
            .await
            .unwrap()
            .settled
    );
    let after = log_of(&server, &format!("{}a", redis.prefix()));
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].1, now, "the record keeps its timestamp");
    assert!(after[0].0.ends_with("#1,10"), "{after:?}");
}

#[tokio::test]
async fn settles_and_charges_keep_the_ttl_and_the_marker() {
    let server = RedisServer::start();
    let redis = common::store(&server, "usage-layout").await;
    let url = format!("redis://127.0.0.1:{}", server.port());
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let limit = vec![Limit::new(10, 60_000).unwrap()];
    let key = format!("{}plain", redis.prefix());
    let plain = Request::new("plain", limit.clone(), 1).unwrap();
    let mut receipts = Vec::new();
    for _ in 0..3 {
        let d = redis.check(&plain).await.unwrap();
        receipts.push(Receipt::new(&plain, d.record.unwrap()));
    }
    // Settling the oldest to 4 turns the log weighted: the newest record
    // carries the marker, so the single-limit check hands it over and
    // counts 4 + 1 + 1 (+ 1 it admits).
    let four = Request::usage("plain", limit.clone(), vec![4]).unwrap();
    let s = redis
        .settle(&four, &receipts[0], Now::Server)
        .await
        .unwrap();
    assert!(s.settled);
    assert_eq!(s.decision.count, 6);
    let newest: Vec<String> = redis::cmd("ZRANGE")
        .arg(&key)
        .arg(-1)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert!(newest[0].contains('#'), "{newest:?}");
    let d = redis.check(&plain).await.unwrap();
    assert_eq!((d.allowed, d.count), (true, 7));
    // A refund removes the record; a charge over the max records anyway.
    let zero = Request::usage("plain", limit.clone(), vec![0]).unwrap();
    let s = redis
        .settle(&zero, &receipts[1], Now::Server)
        .await
        .unwrap();
    assert!(s.settled && s.decision.record.is_none());
    assert_eq!(s.decision.count, 6);
    let big = Request::usage("plain", limit.clone(), vec![20]).unwrap();
    let d = redis.charge(&big, Now::Server).await.unwrap().decision;
    assert_eq!((d.allowed, d.count, d.remaining), (false, 26, 0));
    for k in [
        key.clone(),
        String::from_utf8(slidelog_redis::keys::weights_key(key.as_bytes())).unwrap(),
    ] {
        let pttl: i64 = redis::cmd("PTTL").arg(&k).query(&mut c).unwrap();
        assert!(pttl > 59_000 && pttl <= 60_000, "{k}: {pttl}");
    }
    assert!(!redis.check(&plain).await.unwrap().allowed);
}

/// Several independent stores (their own connections) x 16 tasks reserve
/// an estimate and settle it down to the actual tokens, or refund it, on
/// one key: the live settled tokens never exceed the max (every record is in
/// one window, so the final log holds them all), and every settle is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reservations_settled_down_never_exceed_the_limit() {
    let server = RedisServer::start();
    let limits = vec![
        Limit::new(100_000, 600_000).unwrap(),
        Limit::new(3_000, 600_000).unwrap(),
    ];
    let mut tasks = Vec::new();
    let options = common::options("usage-race");
    let prefix = options.key_prefix.clone();
    for s in 0..3u64 {
        let store = std::sync::Arc::new(common::store_with(&server, options.clone()).await);
        for t in 0..16u64 {
            let store = store.clone();
            let limits = limits.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(s * 100 + t);
                let (mut settled, mut rejected) = (0u64, 0);
                while rejected < 20 {
                    let estimate = rng.random_range(20..=80);
                    let r = Request::with_costs("hot", limits.clone(), vec![1, estimate]).unwrap();
                    let d = store.check(&r).await.unwrap();
                    let Some(record) = d.record else {
                        rejected += 1;
                        continue;
                    };
                    let actual = if rng.random_ratio(1, 5) {
                        0
                    } else {
                        rng.random_range(1..=estimate)
                    };
                    let costs = if actual == 0 {
                        vec![0]
                    } else {
                        vec![1, actual]
                    };
                    let u = Request::usage("hot", limits.clone(), costs).unwrap();
                    let s = store
                        .settle(&u, &Receipt::new(&r, record), Now::Server)
                        .await
                        .unwrap();
                    assert!(s.settled);
                    settled += actual;
                }
                settled
            }));
        }
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let records = log_of(&server, &format!("{prefix}hot"));
    let in_log: u64 = records
        .iter()
        .map(|(m, _)| {
            slidelog_redis::members::costs_of(m)
                .last()
                .copied()
                .unwrap_or(1)
        })
        .sum();
    assert_eq!(in_log, total, "every settle is exact");
    assert!(total <= 3_000, "{total}");
    // Settling down made room: far more than 3,000 / 80 reservations fit.
    assert!(records.len() > 60, "{}", records.len());
    eprintln!("{} records, {total} tokens", records.len());
}
