//! The weighted-log marker of sliding_log.lua (docs/design.md §4.1): the
//! script tells a plain log from a weighted one by a '#' on its newest record
//! instead of reading the weights key on every decision. These traces aim at
//! what could hide the marker (many records in one ms, where a plain member
//! sorts after a weighted one; clocks stepping back so the newest record is
//! in the future; logs that expire whole and come back plain, leaving a
//! stale weights hash) and check every decision against the memory store.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_core::{Limit, Mode, Now, Request, Store};
use slidelog_memory::MemoryStore;
use slidelog_testkit::RedisServer;

#[tokio::test]
async fn ties_steps_back_and_stale_weights_decide_as_the_memory_store() {
    let server = RedisServer::start();
    let redis = common::store(&server, "marker").await;
    let l = |m, w| Limit::new(m, w).unwrap();
    let sets = [vec![l(6, 10_000)], vec![l(4, 10_000), l(30, 20_000)]];
    let mut weighted_answers = 0;
    for seed in 0..24u64 {
        let memory = MemoryStore::new();
        let mut rng = StdRng::seed_from_u64(7_000 + seed);
        let limits = &sets[(seed % 2) as usize];
        let key = format!("m{seed}");
        let mut now: u64 = 1_767_225_600_000;
        for step in 0..120 {
            now = match rng.random_range(0..10) {
                0..=4 => now,                                        // same ms: ties
                5 => now.saturating_sub(rng.random_range(1..4_000)), // a step back
                6 => now + 25_000,                                   // every record expires
                _ => now + rng.random_range(1..3_000),
            };
            let weighted = rng.random_ratio(1, 4);
            let costs: Vec<u64> = limits
                .iter()
                .map(|_| if weighted { rng.random_range(2..=3) } else { 1 })
                .collect();
            let request = Request::with_costs(key.clone(), limits.clone(), costs).unwrap();
            let mode = common::random_mode(&mut rng, 6);
            let a = redis.decide(&request, mode, Now::At(now)).await.unwrap();
            let b = memory.decide(&request, mode, Now::At(now)).await.unwrap();
            assert_eq!(
                a, b,
                "seed {seed} step {step}: {request:?} {mode:?} at {now}"
            );
            weighted_answers += usize::from(weighted);
        }
    }
    assert!(weighted_answers > 400);
}

/// A plain record written in the same ms after a weighted log began, whose
/// member sorts after the weighted one, still leaves the mark on the newest.
#[tokio::test]
async fn a_plain_request_on_a_weighted_log_writes_a_marked_member() {
    let server = RedisServer::start();
    let redis = common::store(&server, "marker-member").await;
    let mut c = server.client();
    let limits = vec![Limit::new(100, 60_000).unwrap()];
    let t = 1_767_225_600_000u64;
    let plain = Request::new("k", limits.clone(), 1).unwrap();
    let heavy = Request::new("k", limits.clone(), 10).unwrap();
    for r in [&plain, &plain, &heavy, &plain] {
        assert!(
            redis
                .decide(r, Mode::Record, Now::At(t))
                .await
                .unwrap()
                .allowed
        );
    }
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(redis.redis_key("k"))
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    // Every record at or after the weighted one's ms carries a '#'.
    assert!(members.iter().all(|m| m.contains('#')), "{members:?}");
    let d = redis.decide(&plain, Mode::Peek, Now::At(t)).await.unwrap();
    assert_eq!(d.count, 1 + 1 + 10 + 1 + 1);
}
