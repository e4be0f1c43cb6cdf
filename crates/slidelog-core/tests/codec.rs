//! `slidelog_core::codec`: every log round-trips to the same records and
//! costs, and no input (truncated, bit-flipped, random, hostile lengths)
//! panics or allocates beyond its own length.

use proptest::prelude::*;
use slidelog_core::Log;
use slidelog_core::codec::{self, CodecError, VERSION, VERSION_1};

const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/codec.proptest-regressions"
);

fn persisted() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::Direct(REGRESSIONS),
        )),
        ..ProptestConfig::default()
    }
}

/// One step of building a log: append at `now + delta` with costs, or expire
/// for a window. Deltas cross the 32-bit offset range both ways.
#[derive(Debug, Clone)]
enum Op {
    Append(i64, Vec<u64>),
    Expire(i64, u64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let delta = prop_oneof![
        4 => 0i64..1_000,
        1 => -1_000i64..0,
        1 => -(1i64 << 33)..(1i64 << 33),
    ];
    let costs = prop_oneof![
        3 => Just(vec![1u64]),
        1 => (1u64..10_000_000).prop_map(|c| vec![c]),
        1 => proptest::collection::vec(1u64..5, 1..=16),
    ];
    let window = prop_oneof![1u64..2_000, 1u64..31_622_400_000];
    proptest::collection::vec(
        prop_oneof![
            4 => (delta.clone(), costs).prop_map(|(d, c)| Op::Append(d, c)),
            1 => (delta, window).prop_map(|(d, w)| Op::Expire(d, w)),
        ],
        0..150,
    )
}

fn build(ops: Vec<Op>) -> Log {
    let mut log = Log::new();
    let mut now: u64 = 1 << 40;
    for op in ops {
        match op {
            Op::Append(d, costs) => {
                now = now.saturating_add_signed(d);
                log.append(now, &costs);
            }
            Op::Expire(d, window) => {
                now = now.saturating_add_signed(d);
                log.expire(now, window);
            }
        }
    }
    log
}

/// Every record's timestamp and its cost at every position a request can have.
fn records(log: &Log) -> Vec<(u64, Vec<u64>)> {
    (0..log.len())
        .map(|j| (log.ts(j), (0..16).map(|p| log.cost(j, p)).collect()))
        .collect()
}

fn encoded(log: &Log) -> Vec<u8> {
    let mut out = Vec::new();
    codec::encode(log, &mut out);
    out
}

proptest! {
    #![proptest_config(persisted())]

    #[test]
    fn every_log_round_trips(ops in ops(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
        let log = build(ops);
        let mut bytes = encoded(&log);
        let len = bytes.len();
        bytes.extend_from_slice(&tail);
        let (back, read) = codec::decode(&bytes).unwrap();
        prop_assert_eq!(read, len);
        prop_assert_eq!(records(&back), records(&log));
        // Every strict prefix is refused, never read as a shorter log.
        for cut in 0..len {
            prop_assert!(codec::decode(&bytes[..cut]).is_err(), "prefix of {} bytes read", cut);
        }
    }

    #[test]
    fn flipped_bits_never_panic(ops in ops(), flips in proptest::collection::vec((any::<usize>(), 0u8..8), 1..4)) {
        let mut bytes = encoded(&build(ops));
        for (at, bit) in flips {
            let at = at % bytes.len();
            bytes[at] ^= 1 << bit;
        }
        if let Ok((log, read)) = codec::decode(&bytes) {
            prop_assert!(read <= bytes.len());
            // Whatever was read is a log that encodes again.
            let again = encoded(&log);
            prop_assert!(codec::decode(&again).is_ok());
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = codec::decode(&bytes);
        let mut versioned = vec![VERSION];
        versioned.extend_from_slice(&bytes);
        let _ = codec::decode(&versioned);
    }
}

#[test]
fn the_committed_regressions_file_is_where_the_config_reads_it() {
    std::fs::read_to_string(REGRESSIONS)
        .unwrap_or_else(|e| panic!("{REGRESSIONS} cannot be read: {e}"));
}

#[test]
fn a_plain_log_costs_4_bytes_a_record() {
    let log = Log::from_timestamps((0..1_000).map(|t| 1_700_000_000_000 + t * 3));
    // version, flags, horizon (1 byte: 0), count (2 bytes), base (6
    // bytes), 4 bytes per record.
    assert_eq!(encoded(&log).len(), 2 + 1 + 2 + 6 + 4_000);
    assert_eq!(encoded(&Log::new()), [VERSION, 0, 0, 0]);
}

#[test]
fn a_hostile_count_is_refused_without_allocating() {
    let mut bytes = vec![VERSION_1, 0];
    bytes.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    bytes.extend_from_slice(&[0; 16]);
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Truncated { .. })
    ));
    // Whole timestamps and a count just past what the input holds.
    let mut bytes = vec![VERSION_1, 1, 3];
    bytes.extend_from_slice(&[0; 16]);
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Truncated { .. })
    ));
}

#[test]
fn unknown_versions_flags_and_bad_fields_are_named() {
    assert_eq!(
        codec::decode(&[9, 0, 0]),
        Err(CodecError::UnknownVersion { got: 9 })
    );
    assert!(matches!(
        codec::decode(&[VERSION_1, 4, 0]),
        Err(CodecError::Invalid { at: 1, .. })
    ));
    // Descending offsets.
    let bytes = [VERSION_1, 0, 2, 0, 5, 0, 0, 0, 1, 0, 0, 0];
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Invalid { .. })
    ));
    // A record that costs 0 in every limit (0 in one limit of two is read).
    let bytes = [VERSION_1, 2, 1, 0, 0, 0, 0, 0, 1, 0];
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Invalid { .. })
    ));
    let (log, _) = codec::decode(&[VERSION_1, 2, 1, 0, 0, 0, 0, 0, 2, 0, 3]).unwrap();
    assert_eq!((log.units_from(0, 0), log.units_from(0, 1)), (0, 3));
    // A cost above MAX_COST.
    let bytes = [VERSION_1, 2, 1, 0, 0, 0, 0, 0, 1, 0x81, 0xad, 0xe2, 0x04];
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Invalid { .. })
    ));
    // A varint past u64.
    let mut bytes = vec![VERSION_1, 0];
    bytes.extend_from_slice(&[0xff; 11]);
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Invalid { .. })
    ));
    assert!(matches!(
        codec::decode(&[]),
        Err(CodecError::Truncated { .. })
    ));
}

#[test]
fn a_long_weighted_log_keeps_whole_timestamps_and_costs() {
    let day = 86_400_000;
    let mut log = Log::new();
    log.append(1_000, &[3]);
    log.append(1_000 + 60 * day, &[1, 400]);
    let bytes = encoded(&log);
    assert_eq!(bytes[1], 3, "whole timestamps and weighted");
    let (back, _) = codec::decode(&bytes).unwrap();
    assert_eq!(records(&back), records(&log));
    assert_eq!(back.units_from(0, 1), 403);
}

#[test]
fn version_2_keeps_the_horizon_and_merged_costs_past_max_cost() {
    let mut log = Log::new();
    for _ in 0..3 {
        log.append(5_000, &[10_000_000, 1]);
    }
    log.raise_horizon(86_400_000);
    let bytes = encoded(&log);
    assert_eq!(bytes[0], VERSION);
    let (back, read) = codec::decode(&bytes).unwrap();
    assert_eq!((read, back.horizon()), (bytes.len(), 86_400_000));
    assert_eq!((back.cost(0, 0), back.cost(0, 1)), (30_000_000, 3));
    assert_eq!(back, log);
    // A horizon past 366 days, a cost past u32::MAX: named, not read.
    let mut bytes = vec![VERSION, 0];
    bytes.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    bytes.push(0);
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Invalid { at: 2, .. })
    ));
    let mut bytes = vec![VERSION, 2, 0, 1, 0, 0, 0, 0, 0, 1];
    bytes.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x10]);
    assert!(matches!(
        codec::decode(&bytes),
        Err(CodecError::Invalid { at: 10, .. })
    ));
    // Version 1 is read with no horizon; its repeated timestamps are one record.
    let (v1, _) = codec::decode(&[VERSION_1, 0, 2, 7, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!((v1.len(), v1.cost(0, 0), v1.horizon()), (1, 2, 0));
}
