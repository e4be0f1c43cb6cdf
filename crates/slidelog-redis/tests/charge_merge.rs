//! Charges into a full log and single-use settles on the scripts
//! (docs/design.md §4.5): a charge into a log at its max merges into the
//! newest record, so 200,000 charges keep one key small on Redis and
//! Valkey; the scripts agree with `slidelog_core::engine` on charges into
//! full logs (same-ms ties, records in the future); a settle renames its
//! record, so a receipt settles once; merged costs saturate as the engine's
//! and a sum past 2^52 is refused.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_core::engine::{self, Log};
use slidelog_core::{Limit, Mode, Now, Receipt, Request, Store};
use slidelog_redis::RedisStore;
use slidelog_testkit::{RedisServer, ServerKind};
use std::sync::Arc;

fn hour(max: u64) -> Vec<Limit> {
    vec![Limit::new(max, 3_600_000).unwrap()]
}

/// A key's records and its weights' extra units by field.
type Layout = (Vec<(String, u64)>, Vec<(String, String)>);

/// `(member, score)` of every record of `key`, and its weights' extra
/// units by field (their frontiers move with time, as any decision moves
/// them).
fn layout(c: &mut redis::Connection, key: &str) -> Layout {
    let weights = slidelog_redis::keys::weights_key(key.as_bytes());
    let hash: Vec<(String, String)> = redis::cmd("HGETALL").arg(weights).query(c).unwrap();
    let extras = hash
        .into_iter()
        .map(|(f, v)| (f, v.split(' ').next().unwrap_or("").to_string()))
        .collect();
    (common::records(c, key), extras)
}

async fn charges_keep_one_key_small(kind: ServerKind) {
    let server = RedisServer::start_kind(kind);
    let store = Arc::new(common::store(&server, "merge-bound").await);
    let key = format!("{}hot", store.prefix());
    let charge = Request::usage("hot", hour(10), vec![1]).unwrap();
    let started = std::time::Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (store, charge) = (store.clone(), charge.clone());
            tokio::spawn(async move {
                for _ in 0..25_000 {
                    store.charge(&charge, Now::Server).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let took = started.elapsed();
    let mut c = server.client();
    let zcard: u64 = redis::cmd("ZCARD").arg(&key).query(&mut c).unwrap();
    let bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .query(&mut c)
        .unwrap();
    let weights = slidelog_redis::keys::weights_key(key.as_bytes());
    let hash_bytes: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(weights)
        .query(&mut c)
        .unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut c).unwrap();
    // Every unit still counts: 200,000 live, one more charge 200,001.
    let d = store.charge(&charge, Now::Server).await.unwrap().decision;
    eprintln!(
        "{kind:?}: 200,000 charges in {took:?}: ZCARD {zcard}, MEMORY USAGE {bytes} B \
         (+ weights {hash_bytes:?} B), PTTL {pttl} ms, count {}",
        d.count
    );
    assert_eq!(d.count, 200_001);
    assert!(zcard <= 12, "{zcard}");
    assert!(bytes + hash_bytes.unwrap_or(0) <= 64 * 1024, "{bytes}");
    assert!(pttl > 0 && pttl <= 3_600_000, "{pttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_thousand_charges_keep_one_key_small_on_redis() {
    charges_keep_one_key_small(ServerKind::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_thousand_charges_keep_one_key_small_on_valkey() {
    charges_keep_one_key_small(ServerKind::Valkey).await;
}

#[tokio::test]
async fn a_receipt_settles_once() {
    let server = RedisServer::start();
    let store = common::store(&server, "settle-once").await;
    let mut c = server.client();
    let limits = vec![
        Limit::new(3, 60_000).unwrap(),
        Limit::new(500, 60_000).unwrap(),
    ];
    let key = format!("{}k", store.prefix());
    let now = 1_767_225_600_000u64;
    let check = Request::with_costs("k", limits.clone(), vec![1, 80]).unwrap();
    let d = store
        .decide(&check, Mode::Record, Now::At(now))
        .await
        .unwrap();
    let first = Receipt::new(&check, d.record.unwrap());
    let to = |tokens| Request::usage("k", limits.clone(), vec![1, tokens]).unwrap();
    let s = store
        .settle(&to(20), &first, Now::At(now + 1))
        .await
        .unwrap();
    assert!(s.settled);
    let next = s.decision.record.unwrap();
    assert_ne!(next.id, first.id(), "the settled record takes a fresh id");
    // The same receipt again: names nothing, changes nothing.
    let before = layout(&mut c, &key);
    let again = store
        .settle(&to(5), &first, Now::At(now + 2))
        .await
        .unwrap();
    assert!(!again.settled && again.refused.is_none());
    assert_eq!(
        (again.decision.count, again.limits[1].counts.unwrap().count),
        (1, 20)
    );
    assert_eq!(layout(&mut c, &key), before);
    // The answer's receipt settles once more, and only once.
    let second = Receipt::new(&to(20), next);
    assert!(
        store
            .settle(&to(7), &second, Now::At(now + 3))
            .await
            .unwrap()
            .settled
    );
    assert!(
        !store
            .settle(&to(9), &second, Now::At(now + 4))
            .await
            .unwrap()
            .settled
    );
    let (records, _) = layout(&mut c, &key);
    assert_eq!(records.len(), 1);
    assert!(
        records[0].0.ends_with("#1,7") && records[0].1 == now,
        "{records:?}"
    );
}

#[tokio::test]
async fn a_merged_charge_s_receipt_settles_its_share_once() {
    let server = RedisServer::start();
    let store = common::store(&server, "merge-share").await;
    let mut c = server.client();
    let key = format!("{}k", store.prefix());
    let now = 1_767_225_600_000u64;
    let charge = |cost| Request::usage("k", hour(2), vec![cost]).unwrap();
    // Two same-ms charges fill the log; a third, later, merges both (one
    // record per ms, as the engine) and moves them to its time.
    for _ in 0..2 {
        store.charge(&charge(1), Now::At(now)).await.unwrap();
    }
    let d = store
        .charge(&charge(5), Now::At(now + 10))
        .await
        .unwrap()
        .decision;
    let record = d.record.unwrap();
    assert_eq!((record.ts, d.count), (now + 10, 7));
    let (records, _) = layout(&mut c, &key);
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(records[0].0.ends_with("#7") && records[0].1 == now + 10);
    // Its receipt names its share (5 of the 7): settled to 1, 3 remain.
    let receipt = Receipt::new(&charge(5), record);
    let s = store
        .settle(&charge(1), &receipt, Now::At(now + 20))
        .await
        .unwrap();
    assert!(s.settled);
    assert_eq!(s.decision.count, 3);
    assert!(
        !store
            .settle(&charge(0), &receipt, Now::At(now + 30))
            .await
            .unwrap()
            .settled
    );
    // A charge into a record later than now (a clock stepped back) merges
    // where it is, and names that time.
    let d = store
        .charge(&charge(2), Now::At(now))
        .await
        .unwrap()
        .decision;
    assert_eq!((d.record.unwrap().ts, d.count), (now + 10, 5));
}

#[tokio::test]
async fn merged_costs_saturate_as_the_engine_s_and_huge_sums_are_refused() {
    let server = RedisServer::start();
    let store = common::store(&server, "merge-big").await;
    let mut c = server.client();
    let now = 1_767_225_600_000u64;
    let big = Request::usage("big", hour(10), vec![10_000_000]).unwrap();
    let mut log = Log::new();
    for i in 0..500 {
        let got = store.charge(&big, Now::At(now + i)).await.unwrap();
        let want = engine::charge(&mut log, now + i, &big);
        assert_eq!(got, want, "charge {i}");
    }
    let (records, _) = layout(&mut c, &format!("{}big", store.prefix()));
    assert_eq!(records.len(), 1);
    let costs = slidelog_redis::members::costs_of(&records[0].0);
    assert_eq!(costs, vec![u64::from(u32::MAX)]);
    // A weights sum at 2^52: a change past it is refused, nothing changed.
    let key = format!("{}edge", store.prefix());
    let r = Request::usage("edge", hour(10), vec![5]).unwrap();
    store.charge(&r, Now::At(now)).await.unwrap();
    let weights = slidelog_redis::keys::weights_key(key.as_bytes());
    let field = format!("1/{}", 3_600_000);
    let _: () = redis::cmd("HSET")
        .arg(&weights)
        .arg(&field)
        .arg(format!("{} {}", (1u64 << 52) - 2, now - 3_600_000))
        .query(&mut c)
        .unwrap();
    let before: Vec<(String, u64)> = common::records(&mut c, &key);
    let err = store.charge(&r, Now::At(now + 1)).await.unwrap_err();
    assert!(err.to_string().contains("TOOLARGE"), "{err}");
    let after: Vec<(String, u64)> = common::records(&mut c, &key);
    assert_eq!(after, before);
}

/// A key of the differential: its limits, the engine's log, and receipts.
struct Key {
    name: String,
    limits: Vec<Limit>,
    log: Log,
    held: Vec<(Receipt, Receipt, bool)>,
    diverged: bool,
}

/// Checks and charges (mostly into full logs) with settles of their
/// receipts at times that repeat, step back and advance: every answer and
/// every charged record's time as the engine's.
#[tokio::test]
async fn charges_into_full_logs_match_the_engine() {
    let server = RedisServer::start();
    let store = common::store(&server, "merge-diff").await;
    let l = |m, w| Limit::new(m, w).unwrap();
    let sets = [
        vec![l(2, 10_000)],
        vec![l(3, 10_000), l(40, 20_000)],
        vec![l(1, 15_000), l(5, 10_000), l(2, 30_000)],
    ];
    let mut merged = 0;
    for seed in 0..24u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut keys: Vec<Key> = sets
            .iter()
            .enumerate()
            .map(|(i, limits)| Key {
                name: format!("d{seed}k{i}"),
                limits: limits.clone(),
                log: Log::new(),
                held: Vec::new(),
                diverged: false,
            })
            .collect();
        let mut now = 1_767_225_600_000u64;
        for step in 0..200 {
            now = match rng.random_range(0..8) {
                0 | 1 => now,
                2 => now.saturating_sub(rng.random_range(1..3_000)),
                _ => now + rng.random_range(1..3_000),
            };
            let k = &mut keys[rng.random_range(0..3)];
            let ctx = format!("seed {seed} step {step} key {}", k.name);
            merged += step_once(&store, k, &mut rng, now, &ctx).await;
        }
    }
    assert!(merged > 500, "{merged}");
}

/// One random operation on `k` at `now`; 1 when it was a merged charge.
async fn step_once(store: &RedisStore, k: &mut Key, rng: &mut StdRng, now: u64, ctx: &str) -> u32 {
    let costs: Vec<u64> = k
        .limits
        .iter()
        .map(|l| rng.random_range(0..=l.max()))
        .collect();
    let costs = if costs.iter().all(|&c| c == 0) {
        vec![1]
    } else {
        costs
    };
    let usage = Request::usage(k.name.clone(), k.limits.clone(), costs.clone()).unwrap();
    let at = Now::At(now);
    match rng.random_range(0..10) {
        0..=1 => {
            let r = Request::new(k.name.clone(), k.limits.clone(), 1).unwrap();
            let got = store.decide(&r, Mode::Record, at).await.unwrap();
            let want = engine::decide_and_record(&mut k.log, now, &r);
            if let (Some(a), Some(b)) = (got.record, want.record) {
                k.held
                    .push((Receipt::new(&r, a), Receipt::new(&r, b), false));
            }
            assert!(k.diverged || got == want, "check, {ctx}");
            0
        }
        2..=3 if !k.held.is_empty() => {
            let (a, b, renamed) = k.held.swap_remove(rng.random_range(0..k.held.len()));
            let got = store.settle(&usage, &a, at).await.unwrap();
            let want = engine::settle(&mut k.log, now, &usage, &b);
            k.diverged |= renamed && want.settled && !got.settled;
            assert!(k.diverged || got == want, "settle, {ctx}: {got:?} {want:?}");
            if let (Some(x), Some(y)) = (got.decision.record, want.decision.record) {
                k.held
                    .push((Receipt::new(&usage, x), Receipt::new(&usage, y), false));
            }
            0
        }
        _ => {
            let merges = engine::charge_merges(&k.log, now, &usage);
            if let Some(newest) = k.log.newest().filter(|_| merges) {
                for h in k.held.iter_mut() {
                    h.2 |= h.1.ts() == newest;
                }
            }
            let got = store.charge(&usage, at).await.unwrap();
            let want = engine::charge(&mut k.log, now, &usage);
            let ts = |d: &slidelog_core::Detailed| d.decision.record.map(|r| r.ts);
            assert!(
                k.diverged || (got == want && ts(&got) == ts(&want)),
                "charge, {ctx}"
            );
            if let (Some(a), Some(b)) = (got.decision.record, want.decision.record) {
                k.held
                    .push((Receipt::new(&usage, a), Receipt::new(&usage, b), false));
            }
            u32::from(merges)
        }
    }
}

/// A merged record among more than 16 members of its millisecond is found
/// by its id (the binary search by rank); its neighbours' receipts still
/// settle.
#[tokio::test]
async fn a_merged_record_among_many_of_its_millisecond_is_found_by_id() {
    let server = RedisServer::start();
    let store = common::store(&server, "merge-many").await;
    let now = 1_767_225_600_000u64;
    let check = Request::new("k", hour(30), 1).unwrap();
    let mut receipts = Vec::new();
    for _ in 0..30 {
        let d = store
            .decide(&check, Mode::Record, Now::At(now))
            .await
            .unwrap();
        receipts.push(Receipt::new(&check, d.record.unwrap()));
    }
    let charge = Request::usage("k", hour(30), vec![2]).unwrap();
    let d = store.charge(&charge, Now::At(now)).await.unwrap().decision;
    assert_eq!((d.record.unwrap().ts, d.count), (now, 32));
    let refund = Request::usage("k", hour(30), vec![0]).unwrap();
    let merged = Receipt::new(&charge, d.record.unwrap());
    let s = store
        .settle(&refund, &merged, Now::At(now + 1))
        .await
        .unwrap();
    assert!(s.settled && s.decision.count == 30, "{s:?}");
    assert!(
        !store
            .settle(&refund, &merged, Now::At(now + 1))
            .await
            .unwrap()
            .settled
    );
    // Every check's receipt but the one merged into still settles.
    let mut settled = 0;
    for r in &receipts {
        settled += u64::from(
            store
                .settle(&refund, r, Now::At(now + 2))
                .await
                .unwrap()
                .settled,
        );
    }
    assert_eq!(settled, 29);
    let left = store
        .decide(&check, Mode::Peek, Now::At(now + 3))
        .await
        .unwrap();
    assert_eq!(
        left.count, 2,
        "the merged member's one unit, and the peek's"
    );
}
