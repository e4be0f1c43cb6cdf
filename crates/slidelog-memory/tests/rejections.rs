//! Rejections record nothing and change nothing a later decision reads
//! (docs/design.md §1): a long run of them matches the engine on a bare log,
//! every field, with the store's records and bytes unchanged; and what a
//! rejection does change (the log's expiry under longer limits, expired
//! records dropped) is kept. (Written for a shared-lock path for rejections,
//! since reverted: BENCHMARKS.md, "Memory store vs governor".)

use slidelog_core::{Limit, Log, ManualClock, Mode, Request, engine};
use slidelog_memory::MemoryStore;
use std::sync::Arc;

fn single(max: u64, window_ms: u64) -> Request {
    Request::single("k", Limit::new(max, window_ms).unwrap()).unwrap()
}

/// A long run of rejections (most on the shared path) against the engine on
/// a bare log, checked after every decision: decision, records, bytes.
#[test]
fn repeated_rejections_match_the_engine_and_change_nothing() {
    let store = MemoryStore::new();
    let mut log = Log::new();
    let requests = [
        single(5, 1_000),
        Request::new("k", vec![Limit::new(5, 1_000).unwrap()], 2).unwrap(),
    ];
    let mut held = None;
    for step in 0..5_000u64 {
        // Bursts of calls in the same ms, then a few ms later: most are
        // rejected, some admitted as records expire.
        let now = 1_000_000 + step / 7 * 3;
        let request = &requests[(step % 11 == 0) as usize];
        let got = store.decide_at(request, Mode::Record, now).unwrap();
        let want = engine::decide_and_record(&mut log, now, request);
        if !want.allowed {
            log.shrink_if_sparse();
        }
        assert_eq!(got, want, "step {step} at {now}");
        assert_eq!(store.record_count(), log.len(), "step {step}");
        // The key's bytes beyond its records never change.
        let fixed = store.bytes_held() - log.heap_bytes();
        assert_eq!(*held.get_or_insert(fixed), fixed, "step {step}");
        // A peek says what a check would, without recording.
        let peeked = store.decide_at(request, Mode::Peek, now).unwrap();
        assert_eq!(peeked, engine::evaluate(&log, now, request));
        assert_eq!(store.record_count(), log.len());
    }
}

/// A rejection under limits with a longer window than the last decision's
/// moves the log's expiry, so it takes the exclusive path: a sweep after the
/// old expiry keeps the log.
#[test]
fn a_rejection_that_moves_the_expiry_is_recorded_as_such() {
    let clock = ManualClock::new(0);
    let store = MemoryStore::new().with_clock(Arc::new(clock.clone()));
    let short = single(1, 1_000);
    let long = Request::new(
        "k",
        vec![
            Limit::new(1, 1_000).unwrap(),
            Limit::new(5, 100_000).unwrap(),
        ],
        1,
    )
    .unwrap();
    assert!(store.decide_at(&short, Mode::Record, 0).unwrap().allowed);
    for now in 1..10 {
        assert!(!store.decide_at(&short, Mode::Record, now).unwrap().allowed);
    }
    // Rejected by the 1 per second limit; the log now lives 100 s.
    let d = store.decide_at(&long, Mode::Record, 10).unwrap();
    assert_eq!((d.allowed, d.retry_after_ms), (false, 990));
    clock.set(50_000);
    assert_eq!(store.sweep(), 0);
    assert!(
        store
            .decide_at(&long, Mode::Record, 50_000)
            .unwrap()
            .allowed
    );
    assert_eq!(store.record_count(), 2);
}

/// Rejections after the oldest record expired for the request's longest
/// window go through the exclusive path and drop it.
#[test]
fn a_rejection_that_expires_records_drops_them() {
    let store = MemoryStore::new();
    let two_per_second = single(2, 1_000);
    let one_per_second = single(1, 1_000);
    assert!(
        store
            .decide_at(&two_per_second, Mode::Record, 0)
            .unwrap()
            .allowed
    );
    assert!(
        store
            .decide_at(&two_per_second, Mode::Record, 500)
            .unwrap()
            .allowed
    );
    assert!(
        !store
            .decide_at(&two_per_second, Mode::Record, 600)
            .unwrap()
            .allowed
    );
    // At 1,000 the record at 0 has expired; the one at 500 still rejects a
    // limit of 1, and the expired record is dropped on the way.
    let d = store
        .decide_at(&one_per_second, Mode::Record, 1_000)
        .unwrap();
    assert_eq!((d.allowed, d.count, d.retry_after_ms), (false, 1, 500));
    assert_eq!(store.record_count(), 1);
}
