//! What the Redis store leaves in Redis: `PTTL` is never -1 after a decision
//! (docs/design.md §4), one unique member per admitted request whatever its
//! cost (ZCARD == admitted requests), a weights hash in the log's slot only
//! while weighted records exist, scores in ms, and no slow script run at
//! the largest cost.

mod common;

use slidelog_core::{Limit, Mode, Now, Request, Store};
use slidelog_redis::keys::{slot, weights_key};
use slidelog_redis::members::costs_of;
use slidelog_testkit::RedisServer;
use std::collections::HashSet;

#[tokio::test]
async fn pttl_is_never_minus_one_after_a_decision() {
    let server = RedisServer::start();
    let store = common::store(&server, "pttl").await;
    let mut c = server.client();
    let pttl = |c: &mut redis::Connection, key: &[u8]| -> i64 {
        redis::cmd("PTTL").arg(key).query(c).unwrap()
    };
    let key = store.redis_key("k");
    let r = Request::new(
        "k",
        vec![
            Limit::new(2, 10_000).unwrap(),
            Limit::new(3, 30_000).unwrap(),
        ],
        1,
    )
    .unwrap();
    let t = 1_767_225_600_000u64;
    // Admitted, rejected, after the clock steps back, and on a key someone
    // else wrote without a TTL.
    for (at, allowed) in [(t, true), (t + 1, true), (t + 2, false), (t - 5_000, false)] {
        let d = store.decide(&r, Mode::Record, Now::At(at)).await.unwrap();
        assert_eq!(d.allowed, allowed);
        let p = pttl(&mut c, &key);
        assert!(p > 0 && p <= 35_002 + 5_000, "{p} after {d:?}");
    }
    let _: () = redis::cmd("PERSIST").arg(&key).query(&mut c).unwrap();
    assert_eq!(pttl(&mut c, &key), -1);
    let d = store
        .decide(&r, Mode::Record, Now::At(t + 3))
        .await
        .unwrap();
    assert!(!d.allowed);
    assert!(pttl(&mut c, &key) > 0);
    // With a record in the future, the TTL covers it.
    let r2 = Request::single("k2", Limit::new(5, 10_000).unwrap()).unwrap();
    store
        .decide(&r2, Mode::Record, Now::At(t + 50_000))
        .await
        .unwrap();
    store.decide(&r2, Mode::Record, Now::At(t)).await.unwrap();
    let p = pttl(&mut c, &store.redis_key("k2"));
    assert!(p > 50_000 && p <= 60_000, "{p}");
}

#[tokio::test]
async fn one_unique_member_per_request_whatever_its_cost() {
    let server = RedisServer::start();
    let store = common::store(&server, "members").await;
    let mut c = server.client();
    let t = 1_767_225_600_000u64;
    for (key, cost, times) in [("one", 1, 50), ("seven", 7, 3), ("big", 100_000, 5)] {
        let r = Request::new(key, vec![Limit::new(1_000_000, 60_000).unwrap()], cost).unwrap();
        for _ in 0..times {
            // All at the same ms: only unique members keep every record.
            assert!(
                store
                    .decide(&r, Mode::Record, Now::At(t))
                    .await
                    .unwrap()
                    .allowed
            );
        }
        let members: Vec<(String, u64)> = redis::cmd("ZRANGE")
            .arg(store.redis_key(key))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(&mut c)
            .unwrap();
        assert_eq!(members.len() as u64, times, "{key}");
        let distinct: HashSet<_> = members.iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(distinct.len(), members.len());
        assert!(members.iter().all(|(_, s)| *s == t));
        assert!(members.iter().all(|(m, _)| costs_of(m) == vec![cost]));
        // Cost-1 members are bare ULIDs, as the original script's.
        if cost == 1 {
            assert!(members.iter().all(|(m, _)| m.len() == 26));
        }
        // The weights hash exists only for weighted logs, in the same slot,
        // with a TTL.
        let log_key = store.redis_key(key);
        let wkey = weights_key(&log_key);
        assert_eq!(slot(&wkey), slot(&log_key));
        let exists: i64 = redis::cmd("EXISTS").arg(&wkey).query(&mut c).unwrap();
        assert_eq!(exists == 1, cost > 1, "{key}");
        if cost > 1 {
            let p: i64 = redis::cmd("PTTL").arg(&wkey).query(&mut c).unwrap();
            assert!(p > 0 && p <= 60_000, "{p}");
        }
        // A reset deletes both.
        assert!(store.reset(key).await.unwrap());
        let left: i64 = redis::cmd("EXISTS")
            .arg(&log_key)
            .arg(&wkey)
            .query(&mut c)
            .unwrap();
        assert_eq!(left, 0);
    }
}

#[tokio::test]
async fn no_slow_script_at_the_largest_cost_and_max() {
    let server = RedisServer::start();
    let store = common::store(&server, "slowlog").await;
    let mut c = server.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(10_000)
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut c).unwrap();
    let t = 1_767_225_600_000u64;
    let limit = Limit::new(slidelog_core::MAX_MAX, 60_000).unwrap();
    let huge = Request::new("huge", vec![limit], slidelog_core::MAX_MAX).unwrap();
    let one = Request::single("huge", limit).unwrap();
    for i in 0..20 {
        store
            .decide(&huge, Mode::Record, Now::At(t + i))
            .await
            .unwrap();
        store
            .decide(&one, Mode::Record, Now::At(t + i))
            .await
            .unwrap();
    }
    let records: i64 = redis::cmd("ZCARD")
        .arg(store.redis_key("huge"))
        .query(&mut c)
        .unwrap();
    assert_eq!(records, 1, "one admitted request, one record");
    let bytes: i64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(store.redis_key("huge"))
        .query(&mut c)
        .unwrap();
    assert!(bytes < 1_000, "{bytes} bytes for one record");
    let slow: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").query(&mut c).unwrap();
    assert!(slow.is_empty(), "slow commands: {slow:?}");
}
