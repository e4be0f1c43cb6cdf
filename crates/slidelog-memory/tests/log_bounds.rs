//! The bounds the log keeps whatever its callers send (docs/design.md §1,
//! §4.1, §4.6): a request with shorter windows cannot shorten another's
//! log (the horizon), neither in a decision nor in the sweep of idle keys;
//! charges into a full key merge instead of growing it; requests of one
//! millisecond are one record.

use slidelog_core::{Limit, ManualClock, Mode, Request};
use slidelog_memory::MemoryStore;
use std::sync::Arc;

const T0: u64 = 1_767_225_600_000;

fn check(key: &str, max: u64, window_ms: u64) -> Request {
    Request::new(key, vec![Limit::new(max, window_ms).unwrap()], 1).unwrap()
}

#[test]
fn a_one_ms_window_does_not_shorten_another_requests_log() {
    let clock = ManualClock::new(T0);
    let store = MemoryStore::new().with_clock(Arc::new(clock.clone()));
    let victim = check("victim", 3, 3_600_000);
    for t in 0..3 {
        assert!(
            store
                .decide_at(&victim, Mode::Record, T0 + t)
                .unwrap()
                .allowed
        );
    }
    // Someone checks the same key with max 1 per 1 ms, admitted: it counts
    // only its own window, and drops nothing the victim's hour counts.
    let attacker = check("victim", 1, 1);
    assert!(
        store
            .decide_at(&attacker, Mode::Record, T0 + 10)
            .unwrap()
            .allowed
    );
    let d = store.decide_at(&victim, Mode::Peek, T0 + 20).unwrap();
    assert_eq!((d.allowed, d.count), (false, 4));
    // Nor does the sweep of idle keys: the key expires with its newest
    // record plus the hour.
    clock.set(T0 + 1_000);
    assert_eq!(store.sweep(), 0);
    assert_eq!(store.record_count(), 4);
    clock.set(T0 + 10 + 3_600_000);
    assert_eq!(store.sweep(), 1);
}

#[test]
fn charges_into_a_full_key_merge_and_its_memory_stays_bounded() {
    let store = MemoryStore::new();
    let limits = vec![Limit::new(10, 3_600_000).unwrap()];
    let charge = Request::usage("hog", limits.clone(), vec![1]).unwrap();
    let before = store.bytes_held();
    for i in 0..200_000u64 {
        store.charge_at(&charge, T0 + i).unwrap();
    }
    assert!(
        store.record_count() <= 12,
        "{} records",
        store.record_count()
    );
    let held = store.bytes_held() - before;
    assert!(held < 2_048, "{held} bytes for one key");
    // Every unit is still counted, at the newest record: a check waits a
    // whole window from the last charge.
    let d = store
        .decide_at(&check("hog", 10, 3_600_000), Mode::Peek, T0 + 200_000)
        .unwrap();
    assert_eq!((d.allowed, d.count), (false, 200_000));
    assert_eq!(d.retry_after_ms, 3_600_000 - 1);
}

#[test]
fn requests_of_one_millisecond_are_one_record() {
    let store = MemoryStore::new();
    let r = check("hot", 1_000, 1_000);
    for _ in 0..110 {
        assert!(store.decide_at(&r, Mode::Record, T0).unwrap().allowed);
    }
    assert_eq!(store.record_count(), 1);
    let d = store.decide_at(&r, Mode::Peek, T0 + 1).unwrap();
    assert_eq!(d.count, 111);
}
