//! `single_limit.lua` against `sliding_log.lua` (docs/design.md §4.2): the
//! lean script for a check of one limit at cost 1 must answer exactly as the
//! general one and leave the same log. Each trace runs twice on one
//! redis-server, once through each script on its own key, at explicit times
//! (ties, the window boundary, steps back); every field of every answer, the
//! records (members and scores) and the TTL must agree. Then the paths only
//! the lean script has: the hand-back of a weighted log, and the deadline.

mod common;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use slidelog_redis::script::{SCRIPT, SINGLE, parse_reply, parse_single_reply};
use slidelog_testkit::RedisServer;

/// One check through the general script: {allowed, max, window, count,
/// remaining, retry, reset, now}.
fn general(
    c: &mut redis::Connection,
    key: &str,
    max: u64,
    window: u64,
    now: u64,
    member: &str,
) -> Vec<i64> {
    SCRIPT
        .key(key)
        .key(format!("{{{key}}}#w"))
        .arg(1)
        .arg(now)
        .arg(1)
        .arg(max)
        .arg(window)
        .arg(1)
        .arg(member)
        .arg(-1)
        .invoke(c)
        .unwrap()
}

/// One check through the single-limit script, as the store sends it.
fn single(
    c: &mut redis::Connection,
    key: &str,
    max: u64,
    window: u64,
    now: Option<u64>,
    member: &str,
    deadline: i64,
) -> redis::RedisResult<Vec<i64>> {
    let mut invocation = SINGLE.key(key);
    invocation.arg(max).arg(window).arg(member).arg(deadline);
    if let Some(now) = now {
        invocation.arg(now);
    }
    invocation.invoke(c)
}

/// Members and scores, oldest first, and the TTL in ms.
fn log_of(c: &mut redis::Connection, key: &str) -> (Vec<(String, f64)>, i64) {
    let records = common::records(c, key);
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(c).unwrap();
    (records, ttl)
}

#[test]
fn single_limit_checks_answer_and_write_as_the_general_script() {
    let server = RedisServer::start();
    let mut c = server.client();
    let mut decisions = 0;
    for seed in 0..24u64 {
        let mut rng = StdRng::seed_from_u64(31_000 + seed);
        let (max, window) =
            [(1, 10_000), (3, 10_000), (5, 20_000), (150, 30_000)][(seed % 4) as usize];
        let (a, b) = (format!("single:{seed}:a"), format!("single:{seed}:b"));
        let mut now: u64 = 1_767_225_600_000;
        for step in 0..200 {
            now = match rng.random_range(0..10) {
                0..=2 => now,                                        // same ms
                3 => now.saturating_sub(rng.random_range(1..5_000)), // a step back
                4 => now + window,                                   // the boundary
                5 => now + window + 40_000,                          // everything expires
                _ => now + rng.random_range(1..window / 4),
            };
            let member = format!("{seed:04}-{step:05}");
            let want = parse_reply(&general(&mut c, &b, max, window, now, &member)).unwrap();
            let got = single(&mut c, &a, max, window, Some(now), &member, -1).unwrap();
            let got = parse_single_reply(&got, max, window)
                .unwrap()
                .expect("a plain log");
            assert_eq!(got, want, "seed {seed} step {step} at {now}");
            let (ra, ta) = log_of(&mut c, &a);
            let (rb, tb) = log_of(&mut c, &b);
            assert_eq!(ra, rb, "records, seed {seed} step {step}");
            if want.decision.allowed {
                // Both set the TTL in this step: they differ by the time
                // between the two calls at most.
                assert!((ta - tb).abs() <= 50, "TTL {ta} vs {tb}");
            } else {
                // A rejection writes nothing in the lean script: the TTL of
                // the last admission stands (it ends with the newest record
                // on a clock that moves; these traces move time by hand, so
                // only its presence is compared).
                assert!(ta > 0 && tb > 0, "TTL {ta} vs {tb}");
            }
            decisions += 1;
        }
    }
    assert_eq!(decisions, 24 * 200);
}

#[test]
fn a_weighted_log_is_handed_back_unchanged() {
    let server = RedisServer::start();
    let mut c = server.client();
    let key = "single:weighted";
    // A weighted record (cost 4; the store writes the cost into the member)
    // through the general script marks the log.
    let _: Vec<i64> = SCRIPT
        .key(key)
        .key(format!("{{{key}}}#w"))
        .arg(1)
        .arg(1_000_000)
        .arg(1)
        .arg(10)
        .arg(60_000)
        .arg(4)
        .arg("w1#4")
        .arg(-1)
        .invoke(&mut c)
        .unwrap();
    let before = log_of(&mut c, key);
    let reply = single(&mut c, key, 10, 60_000, Some(1_000_005), "p1", -1).unwrap();
    assert_eq!(reply, vec![-1]);
    assert!(parse_single_reply(&reply, 10, 60_000).unwrap().is_none());
    let after = log_of(&mut c, key);
    assert_eq!(before.0, after.0, "nothing written");
}

#[test]
fn the_deadline_stops_admissions_but_not_rejections() {
    let server = RedisServer::start();
    let mut c = server.client();
    let past = 1_000_000_000_000_i64; // 2001: long gone on Redis's clock
    // An admission past its deadline is refused and records nothing, on Redis
    // TIME and with the caller's time alike (the deadline is always compared
    // with Redis TIME).
    for now in [None, Some(5_000)] {
        let key = format!("single:late:{now:?}");
        let err = single(&mut c, &key, 3, 60_000, now, "m1", past).unwrap_err();
        assert_eq!(err.code(), Some("DEADLINE"));
        let (records, ttl) = log_of(&mut c, &key);
        assert!(records.is_empty());
        assert_eq!(ttl, -2);
        // A deadline ahead (13 digits, as the store sends) admits.
        let ahead = 9_999_999_999_999;
        let ok = single(&mut c, &key, 3, 60_000, now, "m2", ahead).unwrap();
        assert_eq!(ok[..2], [1, 1]);
    }
    // A full log: the rejection is answered even past the deadline (it
    // records nothing either way), so a late caller learns nothing false.
    let key = "single:late:full";
    single(&mut c, key, 1, 60_000, None, "a", -1).unwrap();
    let reply = single(&mut c, key, 1, 60_000, None, "b", past).unwrap();
    assert_eq!(reply[..2], [0, 1]);
    let (records, _) = log_of(&mut c, key);
    assert_eq!(records.len(), 1);
}

#[test]
fn redis_time_is_the_clock_by_default() {
    let server = RedisServer::start();
    let mut c = server.client();
    let (sec, usec): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let before = sec * 1000 + usec / 1000;
    let reply = single(&mut c, "single:time", 5, 60_000, None, "m", -1).unwrap();
    let (sec, usec): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let after = sec * 1000 + usec / 1000;
    let o = parse_single_reply(&reply, 5, 60_000).unwrap().unwrap();
    assert!(
        (before..=after).contains(&o.now_ms),
        "{before} <= {} <= {after}",
        o.now_ms
    );
    // The record's score is that ms, exactly.
    let score: f64 = redis::cmd("ZSCORE")
        .arg("single:time")
        .arg("m")
        .query(&mut c)
        .unwrap();
    assert_eq!(score as u64, o.now_ms);
    assert_eq!(
        (
            o.decision.count,
            o.decision.remaining,
            o.decision.reset_after_ms
        ),
        (1, 4, 60_000)
    );
}
