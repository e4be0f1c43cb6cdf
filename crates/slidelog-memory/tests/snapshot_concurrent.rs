//! Snapshots taken while the store decides: the copy goes a range of buckets
//! at a time, so it must neither miss nor invent a key when tables grow
//! meanwhile, and no key may be admitted beyond its limit, before or after a
//! load. Also the case at full size: 1,000,000 keys, 64 clients.

use slidelog_core::{Limit, Mode, Request};
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

const NOW: u64 = 1_800_000_000_000;

fn request(k: usize) -> Request {
    Request::single(format!("user:{k}"), Limit::new(5, 3_600_000).unwrap()).unwrap()
}

fn filled(keys: usize) -> Arc<MemoryStore> {
    let store = MemoryStore::new().with_key_cap(4 * keys);
    for k in 0..keys {
        assert!(
            store
                .decide_at(&request(k), Mode::Record, NOW)
                .unwrap()
                .allowed
        );
    }
    Arc::new(store)
}

#[test]
fn a_snapshot_while_tables_grow_keeps_every_key_it_held() {
    // Enough keys that each shard is copied in several ranges of buckets.
    let keys = 200_000;
    let store = filled(keys);
    let stop = Arc::new(AtomicBool::new(false));
    let growers: Vec<_> = (0..4)
        .map(|t| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut k = keys + t * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    store.decide_at(&request(k), Mode::Record, NOW).unwrap();
                    k += 1;
                }
            })
        })
        .collect();
    let mut bytes = Vec::new();
    let report = store.save_at(&mut bytes, NOW).unwrap();
    stop.store(true, Ordering::Relaxed);
    growers.into_iter().for_each(|g| g.join().unwrap());
    let loaded = MemoryStore::new().with_key_cap(4 * keys);
    let load = loaded.load_bytes_at(&bytes, NOW).unwrap();
    assert_eq!(load.keys, report.keys, "a key written twice or lost");
    for k in 0..keys {
        let d = loaded.decide_at(&request(k), Mode::Peek, NOW).unwrap();
        assert_eq!(d.count, 2, "key {k} missing from the snapshot");
    }
}

/// 1,000,000 keys each 1 record under "5 per hour", 64 clients checking
/// random keys at one time while snapshots run back to back; then a last
/// snapshot, a load, and the clients again on the loaded store: no key is
/// admitted more than 5 times in all. Prints the decision p99.
#[test]
fn a_million_keys_and_64_clients_never_admit_beyond_a_limit() {
    let keys = 1_000_000;
    let store = filled(keys);
    let admitted: Arc<Vec<AtomicU8>> = Arc::new((0..keys).map(|_| AtomicU8::new(1)).collect());
    let (p99, hold, snapshots) = clients(&store, &admitted, Duration::from_secs(3), true);
    eprintln!(
        "1M keys, 64 clients, snapshots back to back: {snapshots} snapshots, decision p99 {p99:?}, \
         longest lock hold {hold:?} (debug build)"
    );
    assert!(snapshots >= 1);
    let mut bytes = Vec::new();
    store.save_at(&mut bytes, NOW).unwrap();
    let restarted = Arc::new(MemoryStore::new().with_key_cap(keys));
    assert_eq!(
        restarted.load_bytes_at(&bytes, NOW).unwrap().keys,
        keys as u64
    );
    clients(&restarted, &admitted, Duration::from_secs(1), false);
    let most = admitted
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .max()
        .unwrap();
    assert!(
        most <= 5,
        "a key admitted {most} times against a limit of 5"
    );
}

/// 64 threads check random keys for `run`, counting admissions per key;
/// returns the decision p99, the longest lock hold and how many snapshots ran.
fn clients(
    store: &Arc<MemoryStore>,
    admitted: &Arc<Vec<AtomicU8>>,
    run: Duration,
    snapshots: bool,
) -> (Duration, Duration, u32) {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..64)
        .map(|t| {
            let (store, admitted, stop) = (store.clone(), admitted.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut latencies, mut k) = (Vec::new(), t * 7_919);
                while !stop.load(Ordering::Relaxed) {
                    k = (k * 48_271 + 11) % admitted.len();
                    let started = Instant::now();
                    let d = store.decide_at(&request(k), Mode::Record, NOW).unwrap();
                    latencies.push(started.elapsed());
                    if d.allowed {
                        admitted[k].fetch_add(1, Ordering::Relaxed);
                    }
                }
                latencies
            })
        })
        .collect();
    let started = Instant::now();
    let (mut hold, mut taken) = (Duration::ZERO, 0);
    while started.elapsed() < run {
        if snapshots {
            let report = store.save_at(&mut std::io::sink(), NOW).unwrap();
            hold = hold.max(report.longest_lock_hold);
            taken += 1;
        } else {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut all: Vec<Duration> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    all.sort_unstable();
    (all[all.len() * 99 / 100], hold, taken)
}
