//! What the Redis store leaves in Redis: `PTTL` is never -1 after a decision
//! (docs/design.md §4), members are unique (ZCARD == admitted units, for costs above and
//! below the inline-member threshold), and scores are ms.

mod common;

use slidelog_core::{Limit, Mode, Now, Request, Store};
use slidelog_redis::members::INLINE_MEMBERS;
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
async fn members_are_unique_for_every_cost() {
    let server = RedisServer::start();
    let store = common::store(&server, "members").await;
    let mut c = server.client();
    let t = 1_767_225_600_000u64;
    for (key, cost, times) in [
        ("one", 1, 50),
        ("seven", 7, 3),
        ("big", INLINE_MEMBERS + 36, 2),
    ] {
        let r = Request::new(key, vec![Limit::new(1_000, 60_000).unwrap()], cost).unwrap();
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
        assert_eq!(members.len() as u64, cost * times, "{key}");
        let distinct: HashSet<_> = members.iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(distinct.len(), members.len());
        assert!(members.iter().all(|(_, s)| *s == t));
    }
}
