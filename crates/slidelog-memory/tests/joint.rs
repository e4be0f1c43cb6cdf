//! Joint decisions on the memory store (docs/design.md §1, "One request,
//! several keys"): equal field by field to `engine::decide_all` over plain
//! logs on random traces, and exact under real contention (threads deciding
//! overlapping key sets in every order never deadlock, never over-admit, and
//! never leave a refused request recorded).

use proptest::prelude::*;
use slidelog_core::{Checks, Limit, Log, ManualClock, Mode, Request, engine};
use slidelog_memory::MemoryStore;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

const KEYS: [&str; 4] = ["a", "b", "c", "d"];

/// One step of a trace: advance the clock, then a joint decision.
#[derive(Debug, Clone)]
struct Step {
    advance: i64,
    keys: Vec<usize>,
    limits: Vec<(u64, u64)>,
    costs: Vec<u64>,
    peek: bool,
}

fn step() -> impl Strategy<Value = Step> {
    (
        -50i64..400,
        prop::collection::vec(0..KEYS.len(), 1..4),
        prop::collection::vec(
            (1u64..6, prop::sample::select(vec![100u64, 300, 1_000])),
            1..3,
        ),
        prop::collection::vec(1u64..4, 1..3),
        any::<bool>(),
    )
        .prop_map(|(advance, keys, limits, costs, peek)| Step {
            advance,
            keys,
            limits,
            costs,
            peek,
        })
}

/// The step's checks, or `None` when a cost does not fit a limit's max.
fn checks_of(step: &Step) -> Option<Checks> {
    let limits: Vec<Limit> = step
        .limits
        .iter()
        .map(|&(max, w)| Limit::new(max, w).unwrap())
        .collect();
    let requests = step.keys.iter().enumerate().map(|(i, &k)| {
        // Each key its own cost (cycled), against the same limits.
        let cost = step.costs[i % step.costs.len()];
        Request::new(KEYS[k], limits.clone(), cost)
    });
    Checks::new(requests.collect::<Result<Vec<_>, _>>().ok()?).ok()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn the_store_agrees_with_the_reference_over_plain_logs(steps in prop::collection::vec(step(), 1..40)) {
        let store = MemoryStore::new();
        let mut logs: HashMap<&str, Log> = HashMap::new();
        let mut now: u64 = 1_000_000;
        for step in &steps {
            now = now.saturating_add_signed(step.advance);
            let Some(checks) = checks_of(step) else { continue };
            let mode = if step.peek { Mode::Peek } else { Mode::Record };
            let got = store.decide_all_at(&checks, mode, now).unwrap();
            let mut owned: Vec<Log> = checks
                .as_slice()
                .iter()
                .map(|r| logs.remove(r.key()).unwrap_or_default())
                .collect();
            let mut refs: Vec<&mut Log> = owned.iter_mut().collect();
            let want = engine::decide_all(&mut refs, now, &checks, mode);
            for (r, log) in checks.as_slice().iter().zip(owned) {
                let key = KEYS.iter().find(|k| **k == r.key()).unwrap();
                logs.insert(key, log);
            }
            prop_assert_eq!(got, want);
        }
    }
}

/// Threads deciding `user-i` + one shared `route` (in both orders, so that
/// lock order matters): the route admits exactly its max per window, and
/// each user's log holds exactly that user's admitted requests.
#[test]
fn contended_joint_decisions_are_exact_and_never_deadlock() {
    const THREADS: usize = 16;
    const USERS: usize = 5;
    const ROUTE_MAX: u64 = 30;
    const USER_MAX: u64 = 20;
    let clock = ManualClock::new(5_000_000);
    let store = Arc::new(MemoryStore::new().with_clock(Arc::new(clock)));
    let per_minute = |max| Limit::new(max, 60_000).unwrap();
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..USERS).map(|_| AtomicU64::new(0)).collect());
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, admitted, start) = (store.clone(), admitted.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                for i in 0..200 {
                    let u = (t + i) % USERS;
                    let user = Request::single(format!("user-{u}"), per_minute(USER_MAX)).unwrap();
                    let route = Request::single("route", per_minute(ROUTE_MAX)).unwrap();
                    let pair = if t % 2 == 0 {
                        [user, route]
                    } else {
                        [route, user]
                    };
                    let checks = Checks::new(pair).unwrap();
                    let joint = store
                        .decide_all_at(&checks, Mode::Record, 5_000_000)
                        .unwrap();
                    if joint.allowed {
                        admitted[u].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let total: u64 = admitted.iter().map(|a| a.load(Ordering::Relaxed)).sum();
    assert_eq!(total, ROUTE_MAX, "the route admits exactly its max");
    let route = Request::single("route", per_minute(ROUTE_MAX)).unwrap();
    let held = store.decide_at(&route, Mode::Peek, 5_000_000).unwrap();
    // A peek counts "as if admitted" when it would admit, else what is held.
    let units = |d: slidelog_core::Decision| d.count - u64::from(d.allowed);
    assert_eq!(units(held), ROUTE_MAX);
    for (u, a) in admitted.iter().enumerate() {
        let user = Request::single(format!("user-{u}"), per_minute(USER_MAX)).unwrap();
        let held = store.decide_at(&user, Mode::Peek, 5_000_000).unwrap();
        assert_eq!(
            units(held),
            a.load(Ordering::Relaxed),
            "user-{u}'s log holds exactly its admitted requests"
        );
    }
}
