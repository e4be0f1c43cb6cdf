//! Snapshots of the memory store: save/load round-trips every log to the
//! same decisions, drops what expired while down, keeps records in the
//! future up to an hour, applies the key cap, and refuses every damaged
//! file by name (hostile ones: tests/snapshot_hostile.rs).

use proptest::prelude::*;
use slidelog_core::{Limit, Mode, Request};
use slidelog_memory::{LoadBounds, MemoryStore, SnapshotError};
use std::path::Path;

const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/snapshot.proptest-regressions"
);
const DAY: u64 = 86_400_000;
const T0: u64 = 1_800_000_000_000;

fn persisted() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(REGRESSIONS),
        )),
        ..ProptestConfig::default()
    }
}

/// The limit sets keys use: short, several at once, and spans over the
/// 49.7 days of 32-bit offsets.
fn limit_sets() -> Vec<Vec<Limit>> {
    let l = |max, window| Limit::new(max, window).unwrap();
    vec![
        vec![l(5, 1_000)],
        vec![l(10, 1_000), l(40, 60_000)],
        vec![l(30, 60 * DAY)],
        vec![l(1_000, 3_600_000), l(20, 366 * DAY)],
    ]
}

/// A request on key `k` (its limit set is `k % 4`), one cost or one per limit.
fn request(k: u8, costs: &[u64]) -> Request {
    let limits = limit_sets().swap_remove(usize::from(k % 4));
    let smallest = limits.iter().map(Limit::max).min().unwrap();
    let costs: Vec<u64> = limits
        .iter()
        .zip(costs.iter().cycle())
        .map(|(l, &c)| c.min(l.max()))
        .collect();
    let key = format!("key-{k}");
    if costs.len() == 1 || costs.iter().all(|&c| c == costs[0]) {
        Request::new(key, limits, costs[0].min(smallest)).unwrap()
    } else {
        Request::with_costs(key, limits, costs).unwrap()
    }
}

fn saved(store: &MemoryStore, now: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    store.save_at(&mut bytes, now).unwrap();
    bytes
}

/// Every key's decisions at `now` (a peek per cost), on both stores.
fn same_decisions(a: &MemoryStore, b: &MemoryStore, now: u64) -> Result<(), TestCaseError> {
    for k in 0..12u8 {
        for costs in [[1u64, 1], [3, 1], [1, 7]] {
            let r = request(k, &costs);
            let (x, y) = (
                a.decide_at(&r, Mode::Peek, now),
                b.decide_at(&r, Mode::Peek, now),
            );
            prop_assert_eq!(
                x.unwrap(),
                y.unwrap(),
                "key {} costs {:?} at {}",
                k,
                costs,
                now
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(persisted())]

    /// Checks on 12 keys while time moves by ms or by weeks (either way):
    /// the loaded store decides like the saved one, now and later.
    #[test]
    fn save_then_load_decides_the_same(
        ops in proptest::collection::vec((0u8..12, proptest::collection::vec(1u64..6, 1..3), -1_000i64..(8 * DAY as i64)), 1..150),
        later in proptest::collection::vec(0u64..(400 * DAY), 1..4),
    ) {
        let store = MemoryStore::new();
        let mut now = T0;
        for (k, costs, step) in ops {
            // Mostly small steps; a step above 1 s stands for a long pause.
            let step = if step > 1_000 && step % 7 != 0 { step % 1_000 } else { step };
            now = now.saturating_add_signed(step);
            store.decide_at(&request(k, &costs), Mode::Record, now).unwrap();
        }
        let loaded = MemoryStore::new();
        loaded.load_bytes_at(&saved(&store, now), now).unwrap();
        same_decisions(&store, &loaded, now)?;
        for dt in later {
            same_decisions(&store, &loaded, now + dt)?;
            // And the next checks record the same.
            for k in 0..12u8 {
                let r = request(k, &[2, 1]);
                prop_assert_eq!(store.decide_at(&r, Mode::Record, now + dt).unwrap(), loaded.decide_at(&r, Mode::Record, now + dt).unwrap());
            }
        }
    }
}

#[test]
fn the_committed_regressions_file_is_where_the_config_reads_it() {
    std::fs::read_to_string(REGRESSIONS)
        .unwrap_or_else(|e| panic!("{REGRESSIONS} cannot be read: {e}"));
}

fn five_per_hour(key: &str) -> Request {
    Request::single(key, Limit::new(5, 3_600_000).unwrap()).unwrap()
}

fn admit(store: &MemoryStore, request: &Request, now: u64) -> bool {
    store.decide_at(request, Mode::Record, now).unwrap().allowed
}

#[test]
fn records_that_expired_while_down_are_dropped_and_future_ones_stay() {
    let store = MemoryStore::new();
    let r = five_per_hour("a");
    for t in 0..5 {
        assert!(admit(&store, &r, T0 + t * 600_000));
    }
    let bytes = saved(&store, T0 + 2_400_000);
    // Down for 2,500 s: the records of 0, 600 and 1,200 s have expired by
    // 4,900 s, as they would have had the process run.
    let later = MemoryStore::new();
    let report = later.load_bytes_at(&bytes, T0 + 4_900_000).unwrap();
    assert_eq!(
        (report.keys, report.records, report.expired_records),
        (1, 2, 3)
    );
    assert_eq!(report.written_at_ms, T0 + 2_400_000);
    let d = later.decide_at(&r, Mode::Peek, T0 + 4_900_000).unwrap();
    assert_eq!(d.count, 3, "2 live records + the peeked request");
    // A host clock that stepped back while down frees nothing: within the
    // bound of an hour the records stay live; beyond it the file is refused
    // (an operator decides), never loaded with records that free nothing
    // for so long.
    let stepped_back = MemoryStore::new();
    let report = stepped_back.load_bytes_at(&bytes, T0 - 600_000).unwrap();
    assert_eq!((report.records, report.expired_records), (5, 0));
    assert!(!admit(&stepped_back, &r, T0 - 600_000));
    let err = MemoryStore::new()
        .load_bytes_at(&bytes, T0 - DAY)
        .unwrap_err();
    assert!(matches!(err, SnapshotError::Entries(_)), "{err:?}");
    // A log that expired whole is not loaded at all.
    let empty = MemoryStore::new();
    let report = empty.load_bytes_at(&bytes, T0 + 100 * DAY).unwrap();
    assert_eq!((report.keys, empty.key_count()), (0, 0));
}

#[test]
fn the_key_cap_and_the_budget_apply_to_what_is_loaded() {
    let store = MemoryStore::new();
    for k in 0..10 {
        assert!(admit(&store, &five_per_hour(&format!("k{k}")), T0));
    }
    let bytes = saved(&store, T0);
    let capped = MemoryStore::new().with_key_cap(4);
    let report = capped.load_bytes_at(&bytes, T0).unwrap();
    assert_eq!(
        (report.keys, report.refused_keys, report.refused_records),
        (4, 6, 6)
    );
    assert_eq!(capped.key_count(), 4);
    // A budget of 1 byte: the file is above what a load reads by default
    // (twice the budget); read anyway, the budget applies key by key.
    let budget = MemoryStore::new().with_memory_limit(1);
    let err = budget.load_bytes_at(&bytes, T0).unwrap_err();
    assert!(
        matches!(err, SnapshotError::TooLarge { max: 2, .. }),
        "{err:?}"
    );
    let unbounded = LoadBounds {
        max_bytes: u64::MAX,
        ..budget.load_bounds()
    };
    let report = budget.load_bytes_within(&bytes, T0, unbounded).unwrap();
    assert_eq!((report.keys, report.refused_keys), (1, 9));
    // A key the store already holds keeps its own log.
    let busy = MemoryStore::new();
    assert!(admit(&busy, &five_per_hour("k3"), T0));
    let report = busy.load_bytes_at(&bytes, T0).unwrap();
    assert_eq!((report.keys, report.existing_keys), (9, 1));
    assert_eq!(busy.record_count(), 10);
}

/// Every way a file can be damaged is refused, nothing is added, and the
/// error says which.
#[test]
fn damaged_inputs_are_refused_and_add_nothing() {
    let store = MemoryStore::new();
    for k in 0..3 {
        let r = Request::with_costs(
            format!("w{k}"),
            vec![
                Limit::new(10, 1_000).unwrap(),
                Limit::new(100, 60 * DAY).unwrap(),
            ],
            vec![2, 9],
        )
        .unwrap();
        assert!(admit(&store, &r, T0 + k));
    }
    let bytes = saved(&store, T0 + 3);
    let check = |input: &[u8]| {
        let fresh = MemoryStore::new();
        let err = fresh.load_bytes_at(input, T0 + 3).unwrap_err();
        assert!(err.is_invalid(), "{err}");
        assert_eq!(fresh.key_count(), 0, "{err}");
        err
    };
    assert!(matches!(check(&[]), SnapshotError::Empty));
    assert!(matches!(
        check(b"{\"not\": \"a snapshot\"}"),
        SnapshotError::Foreign
    ));
    assert!(matches!(check(&bytes[..5]), SnapshotError::Foreign));
    for cut in 8..bytes.len() {
        check(&bytes[..cut]);
    }
    // CRC-32 catches every single-bit error.
    for at in 12..bytes.len() {
        for bit in 0..8 {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1 << bit;
            assert!(matches!(check(&flipped), SnapshotError::Checksum { .. }));
        }
    }
    let mut future = bytes.clone();
    future[8] = 2;
    assert!(matches!(
        check(&future),
        SnapshotError::UnknownVersion { got: 2 }
    ));
}

#[test]
fn files_are_replaced_whole_and_errors_name_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.snap");
    let store = MemoryStore::new();
    assert!(
        store.load_path(&path).unwrap().is_none(),
        "no file: nothing to load"
    );
    for k in 0..100 {
        admit(&store, &five_per_hour(&format!("k{k}")), store.now_ms());
    }
    let first = store.save_path(&path).unwrap();
    assert_eq!((first.keys, first.records), (100, 100));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), first.bytes);
    let second = store.save_path(&path).unwrap();
    assert_eq!(second.bytes, first.bytes);
    // Only the snapshot is left in the directory: no temporary file.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["memory.snap"]);
    // A writer killed mid-write left its temporary file: the next load removes it.
    let stale = dir.path().join(".memory.snap.a1b2c3.tmp");
    std::fs::write(&stale, b"half a snapshot").unwrap();
    let loaded = MemoryStore::new();
    assert_eq!(loaded.load_path(&path).unwrap().unwrap().keys, 100);
    assert!(!stale.exists());
    std::fs::write(&path, b"garbage").unwrap();
    let err = MemoryStore::new().load_path(&path).unwrap_err();
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert!(err.source.is_invalid());
    // A directory that does not exist: an I/O error, named.
    let err = store
        .save_path(Path::new("/nonexistent-slidelog-dir/x.snap"))
        .unwrap_err();
    assert!(!err.source.is_invalid());
    assert!(
        err.to_string().contains("/nonexistent-slidelog-dir/x.snap"),
        "{err}"
    );
}
