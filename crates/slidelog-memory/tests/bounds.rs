//! Memory bounds: the key cap holds for 1,000,000 distinct keys, expired logs
//! are swept to make room, a live log is never dropped, and a log never holds
//! more records than its limit admits.

use slidelog_core::{FullLimit, Limit, ManualClock, Mode, Request, StoreError};
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::time::Duration;

/// The process's resident set, from `/proc/self/statm`. Panics when it
/// cannot be read: a bound checked against 0 would pass vacuously.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_else(|e| {
        panic!("/proc/self/statm cannot be read ({e}): this test needs Linux's /proc")
    });
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("/proc/self/statm has no resident page count: {statm:?}"));
    pages * 4096
}

#[test]
fn a_million_distinct_keys_stay_within_the_cap_and_its_memory() {
    const CAP: usize = 1_000_000;
    let clock = ManualClock::new(1_000_000);
    let store = MemoryStore::new()
        .with_key_cap(CAP)
        .with_clock(Arc::new(clock.clone()));
    let limit = Limit::new(10, 60_000).unwrap();
    let before = resident_bytes();
    for i in 0..CAP {
        let request = Request::single(format!("user:{i:07}"), limit).unwrap();
        assert!(
            store
                .decide_at(&request, Mode::Record, 1_000_000)
                .unwrap()
                .allowed
        );
    }
    assert_eq!(store.key_count(), CAP);
    let grown = resident_bytes().saturating_sub(before);
    // A million keys cannot fit in nothing: a growth under 8 bytes a key
    // means the measurement, not the store, is wrong.
    assert!(
        grown >= 8 * CAP as u64,
        "resident memory grew by only {grown} bytes for 1M keys: the measurement is broken"
    );
    // One record per key plus the key itself: well under 256 bytes a key.
    assert!(
        grown < 256 * CAP as u64,
        "1M keys took {} MB",
        grown / 1_000_000
    );

    // At the cap, with every log live: a clear error, nothing admitted or dropped.
    let newcomer = Request::single("newcomer", limit).unwrap();
    let err = store
        .decide_at(&newcomer, Mode::Record, 1_000_001)
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::Full {
            limit: FullLimit::Keys(CAP),
            // The first log expires a window after it was written.
            retry_after_ms: Some(59_999),
        }
    );
    assert!(err.is_full());
    assert!(!err.is_transient());
    assert_eq!(store.key_count(), CAP);
    // Existing keys still decide exactly.
    let old = Request::single("user:0000001", limit).unwrap();
    assert_eq!(
        store
            .decide_at(&old, Mode::Record, 1_000_001)
            .unwrap()
            .count,
        2
    );

    // A window later every log but the one just used has expired: room again.
    clock.advance(Duration::from_millis(60_000));
    let d = store.decide_at(&newcomer, Mode::Record, 1_060_000).unwrap();
    assert!(d.allowed);
    // The rest are swept as the shards are used, or all at once:
    store.sweep();
    assert_eq!(store.key_count(), 2);
    // The live log survived the sweep with its record.
    assert_eq!(
        store.decide_at(&old, Mode::Peek, 1_060_000).unwrap().count,
        2
    );
}

#[test]
fn a_log_never_holds_more_than_max_records() {
    let store = MemoryStore::new();
    let request = Request::single("flood", Limit::new(5, 1_000).unwrap()).unwrap();
    for t in 0..10_000u64 {
        store
            .decide_at(&request, Mode::Record, 1_000_000 + t / 10)
            .unwrap();
        assert!(store.record_count() <= 5);
    }
}

#[test]
fn sweeping_reclaims_keys_that_are_never_touched_again() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::new().with_clock(Arc::new(clock.clone()));
    let limit = Limit::new(3, 500).unwrap();
    for i in 0..10_000 {
        let request = Request::single(format!("k{i}"), limit).unwrap();
        store.decide_at(&request, Mode::Record, 0).unwrap();
    }
    assert_eq!(store.key_count(), 10_000);
    clock.set(499);
    assert_eq!(store.sweep(), 0);
    clock.set(500);
    assert_eq!(store.sweep(), 10_000);
    assert_eq!((store.key_count(), store.record_count()), (0, 0));
}

#[test]
fn peek_on_an_unknown_key_creates_nothing() {
    let store = MemoryStore::new().with_key_cap(1);
    let request = Request::single("ghost", Limit::new(3, 500).unwrap()).unwrap();
    let d = store.decide_at(&request, Mode::Peek, 10).unwrap();
    assert!(d.allowed && d.count == 1);
    assert_eq!(store.key_count(), 0);
}

#[test]
fn a_clock_stepping_back_does_not_let_the_sweeper_drop_live_logs() {
    let clock = ManualClock::new(50_000);
    let store = MemoryStore::new().with_clock(Arc::new(clock.clone()));
    let request = Request::single("k", Limit::new(1, 1_000).unwrap()).unwrap();
    assert!(
        store
            .decide_at(&request, Mode::Record, 50_000)
            .unwrap()
            .allowed
    );
    // Back in time: the record is in the future, still live, and not swept.
    clock.set(10_000);
    assert!(
        !store
            .decide_at(&request, Mode::Record, 10_000)
            .unwrap()
            .allowed
    );
    assert_eq!(store.sweep(), 0);
    assert_eq!(store.key_count(), 1);
}

#[test]
fn a_check_at_the_largest_cost_is_one_record() {
    let store = MemoryStore::new();
    let limit = Limit::new(slidelog_core::MAX_MAX, 60_000).unwrap();
    let big = Request::new("tokens", vec![limit], slidelog_core::MAX_MAX).unwrap();
    let before = store.bytes_held();
    for t in 0..5 {
        store.decide_at(&big, Mode::Record, 1_000_000 + t).unwrap();
    }
    // One admitted (a whole window's worth), four rejected: one record.
    assert_eq!(store.record_count(), 1);
    assert!(
        store.bytes_held() - before < 512,
        "{} bytes",
        store.bytes_held()
    );
    let d = store.decide_at(&big, Mode::Record, 1_000_010).unwrap();
    assert_eq!(
        (d.allowed, d.count, d.retry_after_ms),
        (false, 10_000_000, 59_990)
    );
}

#[test]
fn the_memory_budget_refuses_new_keys_and_keeps_deciding_old_ones() {
    let clock = ManualClock::new(6_003);
    let store = MemoryStore::new()
        .with_memory_limit(64 * 1024)
        .with_clock(Arc::new(clock));
    let limit = Limit::new(3, 1_000).unwrap();
    let mut admitted = 0;
    let err = loop {
        let request = Request::single(format!("key-{admitted}"), limit).unwrap();
        match store.decide_at(&request, Mode::Record, 5_000) {
            Ok(d) => {
                assert!(d.allowed);
                admitted += 1;
            }
            Err(e) => break e,
        }
        assert!(admitted < 10_000, "the budget never applied");
    };
    assert!(store.bytes_held() >= 64 * 1024);
    assert_eq!(
        err,
        StoreError::Full {
            limit: FullLimit::Bytes(64 * 1024),
            retry_after_ms: Some(1_000),
        }
    );
    assert!(err.to_string().contains("--memory-limit"), "{err}");
    // Existing keys are decided exactly: 2 more, then rejected.
    let old = Request::single("key-0", limit).unwrap();
    assert!(store.decide_at(&old, Mode::Record, 5_001).unwrap().allowed);
    assert!(store.decide_at(&old, Mode::Record, 5_002).unwrap().allowed);
    assert!(!store.decide_at(&old, Mode::Record, 5_003).unwrap().allowed);
    // Once the logs expire there is room again, and the bytes are given back.
    let fresh = Request::single("fresh", limit).unwrap();
    assert!(
        store
            .decide_at(&fresh, Mode::Record, 6_003)
            .unwrap()
            .allowed
    );
    store.sweep();
    assert_eq!(store.key_count(), 1);
    assert!(store.bytes_held() < 1024, "{}", store.bytes_held());
}
