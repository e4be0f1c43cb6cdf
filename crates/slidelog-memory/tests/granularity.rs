//! Granularity per limit on the memory store (docs/design.md §1.1): the
//! differential run of slidelog-core's granularity test (checks, peeks,
//! settles, charges, the clock stepping back; 1 to 3 limits with
//! granularities from 1 ms to the window) against the same plain model,
//! field by field; and the time of a hot key's check at 1 and at 100,000
//! granules (`--ignored`; its bytes: slidelog-module's `bytes_per_key`).

#[path = "../../slidelog-core/tests/granular/mod.rs"]
mod granular;

use granular::run::{Subject, counts, limit, ops, run};
use proptest::prelude::*;
use slidelog_core::{Counts, Decision, Limit, Mode, Receipt, Request};
use slidelog_memory::MemoryStore;

/// The memory store, one key.
struct Memory(MemoryStore);

impl Subject for Memory {
    fn check(&mut self, request: &Request, now: u64, record: bool) -> Decision {
        let mode = if record { Mode::Record } else { Mode::Peek };
        self.0.decide_at(request, mode, now).unwrap()
    }

    fn settle(
        &mut self,
        request: &Request,
        receipt: &Receipt,
        now: u64,
    ) -> (bool, Decision, Vec<Counts>) {
        let s = self.0.settle_at(request, receipt, now);
        (s.settled, s.decision, counts(&s.limits))
    }

    fn charge(&mut self, request: &Request, now: u64) -> (Decision, Vec<Counts>) {
        let d = self.0.charge_at(request, now).unwrap();
        (d.decision, counts(&d.limits))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn granular_limits_match_the_model_on_the_memory_store(
        limits in proptest::collection::vec(limit(), 1..=3),
        ops in ops(),
    ) {
        run(&mut Memory(MemoryStore::new()), limits, ops)?;
    }
}

/// The mean time of a recorded check on one hot key whose log holds
/// `granules` records (`per` checks in each granule of 10 ms, the window
/// 10 ms × `granules`: one check a granule keeps a plain log of
/// timestamps, several a weighted one, which goes dense), measured over
/// 200,000 checks that each land in the current granule (so the log keeps
/// its size).
fn check_ns(granules: u64, per: u64) -> f64 {
    let store = MemoryStore::new();
    let window = 10 * granules;
    let limit = Limit::new(10_000_000, window)
        .unwrap()
        .with_granularity(10)
        .unwrap();
    let r = Request::new("hot", vec![limit], 1).unwrap();
    let start = 1_700_000_000_000u64;
    for g in 0..granules {
        for _ in 0..per {
            store.decide_at(&r, Mode::Record, start + 10 * g).unwrap();
        }
    }
    let now = start + 10 * granules;
    let n = 200_000u32;
    let t = std::time::Instant::now();
    for i in 0..n {
        // Within one granule: the log neither grows nor expires.
        let d = store
            .decide_at(&r, Mode::Record, now + u64::from(i % 10))
            .unwrap();
        assert!(d.allowed);
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

#[test]
#[ignore = "a measurement: cargo test --release -p slidelog-memory --test granularity -- --ignored --nocapture"]
fn a_hot_key_s_check_does_not_grow_with_its_granules() {
    let (one, many) = (check_ns(1, 1), check_ns(100_000, 1));
    println!("check on a key of 1 granule: {one:.0} ns; of 100,000 granules: {many:.0} ns");
    let (one, many) = (check_ns(1, 3), check_ns(100_000, 3));
    println!(
        "3 checks a granule (weighted, dense): 1 granule {one:.0} ns; 100,000 granules {many:.0} ns"
    );
}
