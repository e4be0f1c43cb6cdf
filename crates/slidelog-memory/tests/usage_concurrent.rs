//! 16 threads reserving an estimate and settling to the actual cost on one
//! key (docs/design.md §4.6): every admission finds room for its estimate
//! counting every other record at its settled (or still reserved) cost, and
//! at the end the log holds exactly the settled costs (in fewer records
//! than admissions: requests of one millisecond are one record).

use slidelog_core::{Limit, Mode, Receipt, Request};
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const MAX: u64 = 5_000;
const ESTIMATE: u64 = 50;

#[test]
fn reserving_and_settling_never_exceeds_the_limit_as_settled() {
    let store = Arc::new(MemoryStore::new());
    let limits = vec![Limit::new(MAX, 3_600_000).unwrap()];
    let settled_total = Arc::new(AtomicU64::new(0));
    let admitted = Arc::new(AtomicU64::new(0));
    let now = 1_767_225_600_000u64;
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let (store, limits, total) = (store.clone(), limits.clone(), settled_total.clone());
            let admitted = admitted.clone();
            std::thread::spawn(move || {
                let reserve = Request::new("hot", limits.clone(), ESTIMATE).unwrap();
                for i in 0..400u64 {
                    let d = store.decide_at(&reserve, Mode::Record, now + i).unwrap();
                    if !d.allowed {
                        continue;
                    }
                    // Admitted: the estimate fit with everything else counted.
                    assert!(d.count <= MAX, "{d:?}");
                    let actual = (t * 7 + i * 13) % (ESTIMATE + 1);
                    let usage = Request::usage("hot", limits.clone(), vec![actual]).unwrap();
                    let receipt = Receipt::new(&reserve, d.record.unwrap());
                    let s = store.settle_at(&usage, &receipt, now + i);
                    assert!(s.settled);
                    assert!(s.decision.count <= MAX, "{s:?}");
                    total.fetch_add(actual, Ordering::Relaxed);
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let peek = Request::new("hot", limits, 1).unwrap();
    let d = store.decide_at(&peek, Mode::Peek, now + 1_000).unwrap();
    let settled = settled_total.load(Ordering::Relaxed);
    // A peek counts as if admitted: the settled units plus this one.
    assert_eq!(d.count, settled + u64::from(d.allowed));
    assert!(settled <= MAX);
    // Settling down freed room: more than MAX / ESTIMATE reservations fit.
    let admitted = admitted.load(Ordering::Relaxed);
    assert!(admitted > MAX / ESTIMATE, "{admitted}");
    assert!((1..=admitted as usize).contains(&store.record_count()));
}
