//! Every limit's state from the scripts (docs/design.md §2,
//! `Store::decide_each`): on seeded random traces of checks and peeks with
//! 2-3 named limits and a cost per limit, settles (down, to 0 in a limit,
//! refunds) and charges, the Redis store's `decide_each` answers exactly
//! what the memory store's does, every field of every limit; its decision
//! is the plain `decide`'s; a Cluster (same script path) answers the same;
//! and a key the module holds, asked through the scripts, answers the
//! module's every-limit reply.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_core::{Detailed, Limit, Mode, Now, Receipt, Request, Store};
use slidelog_memory::MemoryStore;
use slidelog_redis::{ClusterStore, RedisOptions, RedisStore};
use slidelog_testkit::{RedisCluster, RedisServer, ServerKind, unique_prefix};
use std::time::Duration;

/// The limit sets (one per key), named, 2 or 3 limits. Windows >= 10 s:
/// Redis TTLs run on real time.
fn limit_sets() -> Vec<Vec<Limit>> {
    let l = |m, w, name| Limit::new(m, w).unwrap().named(name).unwrap();
    vec![
        vec![l(5, 10_000, "requests"), l(400, 20_000, "tokens")],
        vec![l(3, 10_000, "burst"), l(8, 30_000, "sustained")],
        vec![
            l(4, 15_000, "requests"),
            l(100, 10_000, "tokens"),
            l(6, 40_000, "hourly"),
        ],
    ]
}

/// A check's costs: one for every limit, or one per limit (1 request and
/// some tokens).
fn check_request(rng: &mut StdRng, key: &str, limits: &[Limit]) -> Request {
    if rng.random_ratio(1, 4) {
        let smallest = limits.iter().map(Limit::max).min().unwrap();
        let cost = rng.random_range(1..=smallest.min(2));
        return Request::new(key, limits.to_vec(), cost).unwrap();
    }
    let costs: Vec<u64> = limits
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                1
            } else {
                rng.random_range(1..=l.max() / 2)
            }
        })
        .collect();
    Request::with_costs(key, limits.to_vec(), costs).unwrap()
}

/// Costs to settle or charge to: down, 0 in a limit, 0 everywhere, above a max.
fn usage_costs(rng: &mut StdRng, limits: &[Limit]) -> Vec<u64> {
    if rng.random_ratio(1, 6) {
        return vec![0];
    }
    limits
        .iter()
        .map(|l| match rng.random_range(0..4) {
            0 => 0,
            1 => l.max() + 1,
            _ => rng.random_range(1..=l.max()),
        })
        .collect()
}

/// Asserts every limit of `got` has counts and equals `want`.
fn same_each(got: &Detailed, want: &Detailed, context: &str) {
    assert!(
        got.limits.iter().all(|s| s.counts.is_some()),
        "every limit's counts, {context}: {got:?}"
    );
    assert_eq!(got, want, "{context}");
}

/// A receipt of the same record in each store.
struct Held {
    key: usize,
    redis: Receipt,
    memory: Receipt,
    /// A charge merged on its key since: the scripts may have renamed its
    /// member (docs/design.md §4.5).
    renamed: bool,
}

/// Runs `seeds` random traces on `redis` against a memory store.
async fn trace(redis: &dyn Store, tag: &str, seeds: std::ops::Range<u64>, steps: usize) -> usize {
    let sets = limit_sets();
    let mut decisions = 0;
    for seed in seeds {
        let memory = MemoryStore::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let keys: Vec<(String, Vec<Limit>)> = (0..3)
            .map(|i| {
                let set = sets[rng.random_range(0..sets.len())].clone();
                (format!("{tag}{seed}k{i}"), set)
            })
            .collect();
        let mut held: Vec<Held> = Vec::new();
        // Both merge a charge into a full log's newest record
        // (docs/design.md §4.5, §4.6); the memory store settles any share
        // of a millisecond's record, the scripts only the receipt that named
        // the member last (a merge renames it). A key is compared until a
        // receipt of a key a charge merged on settles on the memory store
        // only, and again after its reset.
        let mut diverged = [false; 3];
        let mut now: u64 = 1_767_225_600_000;
        for step in 0..steps {
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
            let ctx = format!("seed {seed} step {step} key {key} at {now}");
            match rng.random_range(0..12) {
                0..=6 => {
                    let r = check_request(&mut rng, key, limits);
                    let mode = common::random_mode(&mut rng, 4);
                    if rng.random_ratio(1, 5) {
                        // The plain decision on the same state is the
                        // detailed one's (a peek changes nothing).
                        let plain = redis.decide(&r, Mode::Peek, at).await.unwrap();
                        let each = redis.decide_each(&r, Mode::Peek, at).await.unwrap();
                        assert_eq!(plain, each.decision, "peek, {ctx}");
                    }
                    let got = redis.decide_each(&r, mode, at).await.unwrap();
                    let want = memory.decide_each(&r, mode, at).await.unwrap();
                    if !diverged[k] {
                        same_each(&got, &want, &format!("{mode:?} {r:?}, {ctx}"));
                        decisions += 1;
                    }
                    if let (Some(a), Some(b)) = (got.decision.record, want.decision.record) {
                        held.push(Held {
                            key: k,
                            redis: Receipt::new(&r, a),
                            memory: Receipt::new(&r, b),
                            renamed: false,
                        });
                    }
                }
                7..=9 if !held.is_empty() => {
                    let h = held.swap_remove(rng.random_range(0..held.len()));
                    let (key, limits) = &keys[h.key];
                    let costs = usage_costs(&mut rng, limits);
                    let r = Request::usage(key.clone(), limits.clone(), costs).unwrap();
                    let got = redis.settle(&r, &h.redis, at).await.unwrap();
                    let want = memory.settle(&r, &h.memory, at).await.unwrap();
                    diverged[h.key] |= h.renamed && want.settled && !got.settled;
                    if !diverged[h.key] {
                        assert_eq!(got.settled, want.settled, "settle, {ctx}");
                        same_each(&got.detailed(), &want.detailed(), &format!("settle, {ctx}"));
                    }
                    if let (Some(a), Some(b)) = (got.decision.record, want.decision.record) {
                        held.push(Held {
                            key: h.key,
                            redis: Receipt::new(&r, a),
                            memory: Receipt::new(&r, b),
                            renamed: false,
                        });
                    }
                }
                10 => {
                    let costs = usage_costs(&mut rng, limits);
                    let r = Request::usage(key.clone(), limits.clone(), costs).unwrap();
                    let got = redis.charge(&r, at).await.unwrap();
                    let want = memory.charge(&r, at).await.unwrap();
                    // Merged when a limit it costs in held its max before:
                    // the count after less the cost (a merged record moved
                    // to now may count more, never less).
                    let merged =
                        want.limits
                            .iter()
                            .zip(r.limits())
                            .enumerate()
                            .any(|(i, (s, l))| {
                                let count = s.counts.map_or(0, |c| c.count);
                                r.cost_for(i) > 0 && count.saturating_sub(r.cost_for(i)) >= l.max()
                            });
                    for h in held.iter_mut().filter(|h| h.key == k) {
                        h.renamed |= merged;
                    }
                    if !diverged[k] {
                        same_each(&got, &want, &format!("charge, {ctx}"));
                    }
                }
                _ => {
                    // (Whether a key existed may differ: the memory store
                    // keeps a key whose records were refunded.)
                    redis.reset(key).await.unwrap();
                    memory.reset(key).await.unwrap();
                    diverged[k] = false;
                }
            }
        }
    }
    decisions
}

#[tokio::test]
async fn redis_reports_every_limit_as_the_memory_store_does() {
    let server = RedisServer::start();
    let redis = common::store(&server, "each").await;
    let decisions = trace(&redis, "e", 0..24, 200).await;
    assert!(decisions > 2_000, "{decisions}");
}

#[tokio::test]
async fn one_limit_and_the_plain_check_are_unchanged() {
    let server = RedisServer::start();
    let redis = common::store(&server, "each-one").await;
    let memory = MemoryStore::new();
    let now = 1_767_225_600_000u64;
    // One limit: the deciding limit is every limit (the single-limit
    // script answers it; nothing more is asked).
    let one = Request::single("solo", Limit::new(2, 10_000).unwrap()).unwrap();
    for t in 0..4 {
        let at = Now::At(now + t);
        let got = redis.decide_each(&one, Mode::Record, at).await.unwrap();
        let want = memory.decide_each(&one, Mode::Record, at).await.unwrap();
        same_each(&got, &want, &format!("one limit at +{t}"));
    }
    // The plain check of two limits still answers the 8 numbers only.
    let limits = limit_sets().remove(0);
    let two = Request::with_costs("pair", limits, vec![1, 50]).unwrap();
    let key = format!("{}pair", redis.prefix());
    let mut conn = redis.connection();
    let args = slidelog_redis::script::limit_args(&two);
    let plain: Vec<i64> = slidelog_redis::script::SCRIPT
        .key(&key)
        .key(slidelog_redis::keys::weights_key(key.as_bytes()))
        .arg(0)
        .arg(now)
        .arg(&args)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(plain.len(), 8, "{plain:?}");
    let each: Vec<i64> = slidelog_redis::script::SCRIPT
        .key(&key)
        .key(slidelog_redis::keys::weights_key(key.as_bytes()))
        .arg(2)
        .arg(now)
        .arg(&args)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(each.len(), 8 + 4 * 2, "{each:?}");
    assert_eq!(each[..8], plain[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_reports_every_limit_as_the_memory_store_does() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("cluster-each"))
        .with_timeout(Duration::from_secs(2));
    let store = ClusterStore::connect_cluster(&cluster.url(), options)
        .await
        .expect("connect to the cluster");
    let decisions = trace(&store, "c", 100..104, 120).await;
    assert!(decisions > 200, "{decisions}");
}

/// A key the module holds, asked for every limit through the scripts: the
/// general script hands it to `SLIDELOG.CHECK ... EACH` and answers the
/// module's every-limit reply, as the module engine and the memory store do.
#[tokio::test]
async fn the_scripts_hand_every_limit_of_a_module_key_to_the_module() {
    for kind in ServerKind::ALL {
        let server = RedisServer::start_with_module(kind, &[]);
        let prefix = unique_prefix("each-handover");
        let open = |engine: &str| {
            let url = format!("{}?engine={engine}", server.url());
            let options = common::options("unused").with_prefix(&prefix);
            async move { RedisStore::connect(&url, options).await.unwrap() }
        };
        let (module, scripts) = (open("module").await, open("script").await);
        let memory = MemoryStore::new();
        let limits = limit_sets().remove(2);
        let t = 1_767_225_600_000u64;
        for (step, tokens) in [30u64, 40, 20, 50, 5].into_iter().enumerate() {
            let r = Request::with_costs("k", limits.clone(), vec![1, tokens, 1]).unwrap();
            let at = Now::At(t + 100 * step as u64);
            // The module first (it converts the key), then both in turn.
            let store = if step % 2 == 0 { &module } else { &scripts };
            let got = store.decide_each(&r, Mode::Record, at).await.unwrap();
            let want = memory.decide_each(&r, Mode::Record, at).await.unwrap();
            same_each(&got, &want, &format!("{kind} step {step}"));
            let peek = scripts.decide_each(&r, Mode::Peek, at).await.unwrap();
            let want = memory.decide_each(&r, Mode::Peek, at).await.unwrap();
            same_each(&peek, &want, &format!("{kind} peek {step}"));
        }
        let key = scripts.redis_key("k");
        let kind_of: String = redis::cmd("TYPE")
            .arg(&key)
            .query(&mut server.client())
            .unwrap();
        assert_eq!(kind_of, "slide-log", "{kind}: the module holds the key");
    }
}
