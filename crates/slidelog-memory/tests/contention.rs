//! Exactness under real contention: many OS threads deciding on one key at
//! once admit exactly `max` per window, never more, never fewer.

use slidelog_core::{Limit, ManualClock, Mode, Now, Request, Store};
use slidelog_memory::MemoryStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

const THREADS: usize = 64;
const REQUESTS_PER_THREAD: usize = 1_000;
const MAX: u64 = 100;
const WINDOW_MS: u64 = 1_000;
const WINDOWS: usize = 4;

#[test]
fn sixty_four_threads_on_one_key_admit_exactly_max_per_window() {
    let clock = ManualClock::new(1_000_000);
    let store = Arc::new(MemoryStore::new().with_clock(Arc::new(clock.clone())));
    let request = Request::single("hot", Limit::new(MAX, WINDOW_MS).unwrap()).unwrap();
    let admitted: Vec<AtomicU64> = (0..WINDOWS).map(|_| AtomicU64::new(0)).collect();
    let admitted = Arc::new(admitted);
    // Two barriers per window: all threads start together, then the clock
    // moves one full window while nobody decides.
    let start = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(Barrier::new(THREADS + 1));

    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (store, request, admitted) = (store.clone(), request.clone(), admitted.clone());
            let (start, done) = (start.clone(), done.clone());
            std::thread::spawn(move || {
                for window in 0..WINDOWS {
                    start.wait();
                    for _ in 0..REQUESTS_PER_THREAD / WINDOWS {
                        let now = store.now_ms();
                        if store
                            .decide_at(&request, Mode::Record, now)
                            .unwrap()
                            .allowed
                        {
                            admitted[window].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    done.wait();
                }
            })
        })
        .collect();

    for _ in 0..WINDOWS {
        start.wait();
        done.wait();
        clock.advance(Duration::from_millis(WINDOW_MS));
    }
    for w in workers {
        w.join().unwrap();
    }
    let per_window: Vec<u64> = admitted.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    assert_eq!(per_window, vec![MAX; WINDOWS]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn async_tasks_on_one_key_admit_exactly_max_with_cost() {
    let store = Arc::new(MemoryStore::new());
    // 1,000 per minute, requests of cost 3: at most 333 admitted (999 units).
    let request = Request::new("weighted", vec![Limit::new(1_000, 60_000).unwrap()], 3).unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let (store, request) = (store.clone(), request.clone());
            tokio::spawn(async move {
                let mut admitted = 0u64;
                for _ in 0..50 {
                    if store
                        .decide(&request, Mode::Record, Now::Server)
                        .await
                        .unwrap()
                        .allowed
                    {
                        admitted += 1;
                    }
                }
                admitted
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 333);
    // At most one weighted record per admitted request, whatever its cost
    // (requests of the same millisecond are one record), and every unit
    // counted.
    let records = store.record_count();
    assert!((1..=333).contains(&records), "{records} records");
    let peek = store
        .decide(&request, Mode::Peek, Now::Server)
        .await
        .unwrap();
    assert_eq!(peek.count, 999);
}
