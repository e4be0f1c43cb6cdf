//! The original design's script and slidelog's decide side by side on the
//! same keys (docs/design.md §4): same layout, same units (ms scores), same boundary
//! (a record exactly one window old has expired). A seeded random
//! interleaving of both scripts agrees with the reference rule at every step.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::Script;
use slidelog_core::{Limit, Mode, Now, Request, Store, engine};
use slidelog_testkit::RedisServer;

const ORIGINAL: &str = include_str!("original_sliding_window.lua");

/// Runs the original script: `(allowed, count)`.
async fn original<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    key: &str,
    now_ms: u64,
    window_s: u64,
    max: u64,
) -> (bool, u64) {
    let member = ulid::Ulid::generate().to_string();
    let (allowed, count): (i64, u64) = Script::new(ORIGINAL)
        .key(key)
        .arg(now_ms)
        .arg(window_s)
        .arg(max)
        .arg(member)
        .invoke_async(conn)
        .await
        .expect("original script");
    (allowed == 1, count)
}

#[tokio::test]
async fn both_scripts_share_keys_counts_and_boundaries() {
    let server = RedisServer::start();
    let store = common::store(&server, "orig").await;
    let prefix = store.prefix().to_owned();
    let mut conn = store.connection();
    let key = "user123";
    let full = format!("{prefix}{key}");
    let r = Request::single(key, Limit::new(5, 10_000).unwrap()).unwrap();
    let t = 1_767_225_600_000u64;
    let ours = |at| {
        let store = store.clone();
        let r = r.clone();
        async move { store.decide(&r, Mode::Record, Now::At(at)).await.unwrap() }
    };

    // The original admits three; ours sees them and admits two more.
    for i in 0..3 {
        assert_eq!(
            original(&mut conn, &full, t + i, 10, 5).await,
            (true, i + 1)
        );
    }
    let d = ours(t + 3).await;
    assert_eq!((d.allowed, d.count), (true, 4));
    assert_eq!(
        (ours(t + 4).await.count, ours(t + 5).await.allowed),
        (5, false)
    );
    // The original sees ours' records: full.
    assert_eq!(original(&mut conn, &full, t + 6, 10, 5).await, (false, 5));
    // Ours says the first record (t) frees a place at t + 10_000 ...
    let d = ours(t + 7).await;
    assert_eq!(d.retry_after_ms, 10_000 - 7);
    // ... and both agree it is still live 1 ms before and expired exactly then.
    assert_eq!(
        original(&mut conn, &full, t + 9_999, 10, 5).await,
        (false, 5)
    );
    assert!(!ours(t + 9_999).await.allowed);
    assert_eq!(
        original(&mut conn, &full, t + 10_000, 10, 5).await,
        (true, 5)
    );
    assert!(!ours(t + 10_000).await.allowed);
    let d = ours(t + 10_001).await;
    assert_eq!((d.allowed, d.count), (true, 5));
    // Scores are ms; the original's EXPIRE (s) and our PEXPIRE (ms) both leave a TTL.
    let mut c = server.client();
    let scores: Vec<(String, u64)> = redis::cmd("ZRANGE")
        .arg(&full)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    let ts: Vec<u64> = scores.iter().map(|(_, s)| *s).collect();
    assert_eq!(ts, vec![t + 2, t + 3, t + 4, t + 10_000, t + 10_001]);
    let pttl: i64 = redis::cmd("PTTL").arg(&full).query(&mut c).unwrap();
    assert!(pttl > 0, "{pttl}");
    // A window later only t + 10_001 is live: the original admits a second.
    assert_eq!(
        original(&mut conn, &full, t + 20_000, 10, 5).await,
        (true, 2)
    );
    let pttl: i64 = redis::cmd("PTTL").arg(&full).query(&mut c).unwrap();
    assert!(pttl > 0 && pttl <= 10_000, "{pttl}");
}

#[tokio::test]
async fn random_interleavings_agree_with_the_reference_rule() {
    let server = RedisServer::start();
    let store = common::store(&server, "orig-rand").await;
    let prefix = store.prefix().to_owned();
    let mut conn = store.connection();
    for seed in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let max = rng.random_range(1..=6u64);
        let window_s = rng.random_range(10..=30u64);
        let key = format!("k{seed}");
        let full = format!("{prefix}{key}");
        let r = Request::single(key.as_str(), Limit::new(max, window_s * 1000).unwrap()).unwrap();
        let mut log = slidelog_core::Log::new();
        let mut now = 1_767_225_600_000u64;
        for step in 0..120 {
            now += match rng.random_range(0..6) {
                0 => 0,
                1 => window_s * 1000,
                2 => window_s * 1000 - 1,
                _ => rng.random_range(1..window_s * 1000 / 3),
            };
            let expected = engine::decide_and_record(&mut log, now, &r);
            if rng.random_bool(0.5) {
                let got = original(&mut conn, &full, now, window_s, max).await;
                assert_eq!(
                    got,
                    (expected.allowed, expected.count),
                    "seed {seed} step {step}"
                );
            } else {
                let got = store.decide(&r, Mode::Record, Now::At(now)).await.unwrap();
                assert_eq!(got, expected, "seed {seed} step {step}");
            }
        }
    }
}
