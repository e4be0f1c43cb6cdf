//! Differential test of joint decisions (docs/design.md §4.7): seeded
//! random joint requests (1 to 4 keys, a key sometimes given twice and so
//! merged, 1 to 3 limits per key, costs of 1, weighted and per limit,
//! peeks) with charges interleaved, at explicit times (advances, window
//! boundaries, steps back), answered field by field as
//! `slidelog_core::engine::decide_all` answers over plain `Log`s: through
//! the scripts (`check_all.lua`) and the module (`SLIDELOG.CHECKALL`), and
//! with granular limits on the scripts (docs/design.md §1.1), and
//! on a Cluster whose keys spread over slots, through reservations
//! (docs/design.md §4.7: a refused request's reservations cancelled, their
//! weights with them, an admitted one's confirmed) and, on the module
//! engine, by record-then-refund (a refused request's admitted slots
//! settle its share to 0). Across slots the
//! clock never steps back: a slot that recorded drops its expired records
//! as a check does, which the engine's joint refusal does not, and only a
//! clock stepping back can tell (§4.7).

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_core::{Checks, Limit, Log, Mode, Now, Request, Store, engine};
use slidelog_redis::{ClusterStore, RedisOptions, RedisStore};
use slidelog_testkit::{RedisCluster, RedisServer, ServerKind, unique_prefix};
use std::collections::HashMap;

/// Each key keeps one set of limits (docs/design.md §1); windows of 10 s
/// and more, since Redis TTLs run on real time.
fn key_limits() -> Vec<Vec<Limit>> {
    let l = |m, w| Limit::new(m, w).unwrap();
    vec![
        vec![l(3, 10_000)],
        vec![l(5, 20_000)],
        vec![l(2, 10_000), l(4, 30_000)],
        vec![l(5, 10_000), l(400, 20_000)],
        vec![l(4, 15_000), l(4, 10_000), l(6, 40_000)],
        vec![l(1, 10_000)],
    ]
}

/// Granular limits (docs/design.md §1.1), none of whose sets moves
/// records to a coarse tier (the scripts keep none: a tier move changes
/// which record a charge merges into); windows of 10 s and more.
fn granular_key_limits() -> Vec<Vec<Limit>> {
    let l = |m, w, g| Limit::new(m, w).unwrap().with_granularity(g).unwrap();
    vec![
        vec![l(3, 10_000, 1_000)],
        vec![l(5, 20_000, 500)],
        vec![l(2, 10_000, 1_000), l(4, 30_000, 500)],
        vec![l(5, 10_000, 1_000), l(400, 20_000, 250)],
        vec![l(4, 15_000, 1), l(4, 10_000, 2_000), l(6, 40_000, 1)],
        vec![l(1, 10_000, 10_000)],
    ]
}

/// A request on `key` under `limits`: cost 1 mostly, else weighted, or
/// one cost per limit.
fn request(rng: &mut StdRng, key: &str, limits: &[Limit]) -> Request {
    let smallest = limits.iter().map(Limit::max).min().unwrap();
    match rng.random_range(0..6) {
        0..=2 => Request::new(key, limits.to_vec(), 1).unwrap(),
        3..=4 => Request::new(key, limits.to_vec(), rng.random_range(1..=smallest)).unwrap(),
        _ => {
            let costs: Vec<u64> = limits
                .iter()
                .map(|l| rng.random_range(1..=l.max()))
                .collect();
            Request::with_costs(key, limits.to_vec(), costs).unwrap()
        }
    }
}

/// The next time: the same ms, the next, a window boundary, a step back
/// (when `back`), or an advance.
fn advance(rng: &mut StdRng, now: u64, back: bool) -> u64 {
    match rng.random_range(0..10) {
        0 => now,
        1 => now + 1,
        2 => now + 9_999,
        3 => now + 10_000,
        4 if back => now - rng.random_range(1..3_000),
        _ => now + rng.random_range(1..5_000),
    }
}

/// Runs `seeds` traces on `store` against the engine (the clock stepping
/// back when `back`); the number of joint decisions compared.
async fn traces(store: &dyn Store, seeds: std::ops::Range<u64>, tag: &str, back: bool) -> usize {
    traces_of(store, &key_limits(), seeds, tag, back).await
}

/// [`traces`] over the keys' limit `sets`.
async fn traces_of(
    store: &dyn Store,
    sets: &[Vec<Limit>],
    seeds: std::ops::Range<u64>,
    tag: &str,
    back: bool,
) -> usize {
    let mut compared = 0;
    for seed in seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let keys: Vec<String> = (0..sets.len())
            .map(|i| format!("{tag}{seed}k{i}"))
            .collect();
        let mut logs: HashMap<String, Log> = HashMap::new();
        let mut now: u64 = 1_767_225_600_000;
        for step in 0..120 {
            now = advance(&mut rng, now, back);
            let context = format!("seed {seed} step {step} at {now}");
            if rng.random_ratio(1, 8) {
                charge(store, &mut logs, (&mut rng, sets), &keys, now, &context).await;
                continue;
            }
            let picked = rng.random_range(1..=4);
            let requests: Vec<Request> = (0..picked)
                .map(|_| {
                    let i = rng.random_range(0..keys.len());
                    request(&mut rng, &keys[i], &sets[i])
                })
                .collect();
            let checks = Checks::new(requests).unwrap();
            let mode = common::random_mode(&mut rng, 5);
            let got = store.decide_all(&checks, mode, Now::At(now)).await;
            let got = got.unwrap_or_else(|e| panic!("{context}: {e}"));
            let mut held: Vec<Log> = checks
                .into_iter()
                .map(|r| logs.remove(r.key()).unwrap_or_default())
                .collect();
            let want = {
                let mut refs: Vec<&mut Log> = held.iter_mut().collect();
                engine::decide_all(&mut refs, now, &checks, mode)
            };
            for (r, log) in checks.into_iter().zip(held) {
                logs.insert(r.key().to_owned(), log);
            }
            assert_eq!(got, want, "{context}: {checks:?} {mode:?}");
            let named = got.checks.iter().all(|d| d.decision.record.is_some());
            assert_eq!(named, got.allowed && mode == Mode::Record, "{context}");
            compared += 1;
        }
    }
    compared
}

/// A charge of one key, interleaved: the store's and the engine's answers.
async fn charge(
    store: &dyn Store,
    logs: &mut HashMap<String, Log>,
    (rng, sets): (&mut StdRng, &[Vec<Limit>]),
    keys: &[String],
    now: u64,
    context: &str,
) {
    let i = rng.random_range(0..keys.len());
    let limits = &sets[i];
    let costs: Vec<u64> = limits.iter().map(|_| rng.random_range(0..=3)).collect();
    let usage = Request::usage(keys[i].clone(), limits.clone(), costs).unwrap();
    let got = store.charge(&usage, Now::At(now)).await.unwrap();
    let log = logs.entry(keys[i].clone()).or_default();
    let want = engine::charge(log, now, &usage);
    assert_eq!(got, want, "{context}: charge {usage:?}");
}

async fn store(server: &RedisServer, engine: &str) -> RedisStore {
    let url = format!("{}?engine={engine}", server.url());
    RedisStore::connect(&url, common::options("joint-diff"))
        .await
        .expect("connect")
}

#[tokio::test]
async fn the_scripts_decide_joint_requests_as_the_engine() {
    let server = RedisServer::start();
    let compared = traces(&store(&server, "script").await, 0..12, "s", true).await;
    assert!(compared > 1_000, "{compared}");
}

/// Granular limits on the scripts: every key of a joint decision counts at
/// its limits' frontiers and stores its record at its stored time (merged
/// with the record already there), as the engine does.
#[tokio::test]
async fn the_scripts_decide_granular_joint_requests_as_the_engine() {
    let server = RedisServer::start();
    let store = store(&server, "script").await;
    let compared = traces_of(&store, &granular_key_limits(), 400..412, "g", true).await;
    assert!(compared > 1_000, "{compared}");
}

#[tokio::test]
async fn the_module_decides_joint_requests_as_the_engine() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let compared = traces(&store(&server, "module").await, 100..112, "m", true).await;
    assert!(compared > 1_000, "{compared}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_across_cluster_slots_decide_as_the_engine() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("joint-diff-cross"))
        .with_timeout(std::time::Duration::from_secs(2));
    let url = format!("{}?engine=script", cluster.url());
    let store = ClusterStore::connect_cluster(&url, options).await.unwrap();
    let compared = traces(&store, 200..206, "c", false).await;
    assert!(compared > 500, "{compared}");
    // Granular limits: a reservation is never merged into (nor merged
    // with) the record at its stored time, so a cancel takes out its own.
    let compared = traces_of(&store, &granular_key_limits(), 500..503, "cg", false).await;
    assert!(compared > 250, "{compared}");
}

/// The module engine across slots: each slot records, a refused request's
/// admitted slots refund their share (docs/design.md §4.7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_then_refund_across_module_cluster_slots_decides_as_the_engine() {
    let path = slidelog_testkit::module_path();
    let cluster = tokio::task::spawn_blocking(move || {
        RedisCluster::start_with_node_args(3, 0, &|| {
            vec!["--loadmodule".into(), path.display().to_string()]
        })
    })
    .await
    .unwrap();
    let options = RedisOptions::default()
        .with_prefix(unique_prefix("joint-diff-cross-module"))
        .with_timeout(std::time::Duration::from_secs(2));
    let url = format!("{}?engine=module", cluster.url());
    let store = ClusterStore::connect_cluster(&url, options).await.unwrap();
    let compared = traces(&store, 300..306, "cm", false).await;
    assert!(compared > 500, "{compared}");
}
