//! Helpers shared by the cluster and sentinel tests (`mod ha;`): a differential run
//! against the in-memory store, and a load generator that records every
//! call's outcome and latency while a failover happens.
#![allow(dead_code)]

use rand::{Rng, SeedableRng, rngs::StdRng};
use slidelog_core::{Limit, Mode, Now, Request, Store};
use slidelog_memory::MemoryStore;
use slidelog_testkit::RedisCluster;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Runs `steps` random decisions (explicit time, random keys among `keys`,
/// costs, peeks and resets) on `store` and on a fresh memory store, and
/// asserts they decide identically. Returns the keys used.
pub async fn differential(store: &dyn Store, keys: &[String], steps: usize, seed: u64) {
    let memory = MemoryStore::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let limits = vec![
        Limit::new(5, 1_000).unwrap(),
        Limit::new(12, 10_000).unwrap(),
    ];
    let mut now = 1_700_000_000_000u64;
    for step in 0..steps {
        now += rng.random_range(0..250);
        let key = &keys[rng.random_range(0..keys.len())];
        if rng.random_range(0..50) == 0 {
            let a = store.reset(key).await.expect("reset");
            let b = memory.reset(key).await.unwrap();
            assert_eq!(a, b, "step {step}: reset of {key}");
            continue;
        }
        // Weighted records: one cost for both limits, or one per limit.
        let cost = rng.random_range(1..=3);
        let request = if rng.random_range(0..3) == 0 {
            let tokens = rng.random_range(1..=12);
            Request::with_costs(key.clone(), limits.clone(), vec![cost, tokens]).unwrap()
        } else {
            Request::new(key.clone(), limits.clone(), cost).unwrap()
        };
        let mode = if rng.random_range(0..5) == 0 {
            Mode::Peek
        } else {
            Mode::Record
        };
        let got = store
            .decide(&request, mode, Now::At(now))
            .await
            .unwrap_or_else(|e| panic!("step {step}: {key}: {e}"));
        let want = memory.decide(&request, mode, Now::At(now)).await.unwrap();
        assert_eq!(
            got, want,
            "step {step}: {key} cost {cost} {mode:?} at {now}"
        );
    }
}

/// What one call of the load saw.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// When it started, since the load started.
    pub at: Duration,
    /// How long it took.
    pub took: Duration,
    /// `Some(allowed)` or `None` for an error.
    pub allowed: Option<bool>,
}

/// A failed call's start (since the load started) and its error.
pub type Failure = (Duration, String);

/// Load on `keys` with a limit that never fills (so every admission is
/// one record), from `tasks` concurrent tasks, until `stop` is set.
#[derive(Debug, Default)]
pub struct Load {
    /// Every call, per task.
    pub calls: Vec<Call>,
    /// Admissions the client saw, per key.
    pub admitted: HashMap<String, u64>,
    /// Calls that failed, per key (their outcome is unknown).
    pub errors: u64,
    /// The first error's message.
    pub first_error: Option<String>,
    /// The last failed calls (at most 20), to tell why a tail of errors came.
    pub last_errors: Vec<Failure>,
}

/// The limit the load uses: it never rejects within a test.
pub fn load_limit() -> Limit {
    Limit::new(10_000_000, 600_000).unwrap()
}

/// Starts the load; returns the stop flag and the handle to join.
pub fn start_load(
    store: Arc<dyn Store>,
    keys: Vec<String>,
    tasks: usize,
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<Load>) {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let handle = tokio::spawn(async move {
        let started = Instant::now();
        let keys = Arc::new(keys);
        let joins: Vec<_> = (0..tasks)
            .map(|t| {
                let (store, keys, stop) = (store.clone(), keys.clone(), flag.clone());
                tokio::spawn(load_task(store, keys, t, tasks, stop, started))
            })
            .collect();
        let mut load = Load::default();
        for j in joins {
            load.merge(j.await.unwrap());
        }
        load.calls.sort_by_key(|c| c.at);
        load.last_errors.sort_by_key(|(at, _)| *at);
        load
    });
    (stop, handle)
}

/// One task of the load: keys `first`, `first + step`, … in turn.
async fn load_task(
    store: Arc<dyn Store>,
    keys: Arc<Vec<String>>,
    first: usize,
    step: usize,
    stop: Arc<AtomicBool>,
    started: Instant,
) -> Load {
    let mut load = Load::default();
    let mut i = first;
    while !stop.load(Ordering::Relaxed) {
        let key = &keys[i % keys.len()];
        i += step;
        let request = Request::single(key.clone(), load_limit()).unwrap();
        let at = started.elapsed();
        let t0 = Instant::now();
        let result = store.check(&request).await;
        let took = t0.elapsed();
        let allowed = match result {
            Ok(d) => {
                if d.allowed {
                    *load.admitted.entry(key.clone()).or_default() += 1;
                }
                Some(d.allowed)
            }
            Err(e) => {
                load.failed(at, e.to_string());
                // Do not spin on a store that fails fast.
                tokio::time::sleep(Duration::from_millis(5)).await;
                None
            }
        };
        load.calls.push(Call { at, took, allowed });
    }
    load
}

/// How many of the last errors a load keeps.
const LAST_ERRORS: usize = 20;

impl Load {
    fn failed(&mut self, at: Duration, error: String) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| error.clone());
        if self.last_errors.len() == LAST_ERRORS {
            self.last_errors.remove(0);
        }
        self.last_errors.push((at, error));
    }

    fn merge(&mut self, other: Load) {
        self.calls.extend(other.calls);
        for (k, n) in other.admitted {
            *self.admitted.entry(k).or_default() += n;
        }
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.last_errors.extend(other.last_errors);
    }
    /// From the first failed call's start to the last failed call's end:
    /// the window in which callers saw errors.
    pub fn error_window(&self) -> Duration {
        let failed: Vec<&Call> = self.calls.iter().filter(|c| c.allowed.is_none()).collect();
        match (failed.first(), failed.last()) {
            (Some(a), Some(b)) => (b.at + b.took).saturating_sub(a.at),
            _ => Duration::ZERO,
        }
    }

    /// The slowest call.
    pub fn max_latency(&self) -> Duration {
        self.calls.iter().map(|c| c.took).max().unwrap_or_default()
    }

    /// Calls that succeeded.
    pub fn ok_calls(&self) -> usize {
        self.calls.iter().filter(|c| c.allowed.is_some()).count()
    }

    /// Admissions whose record is gone, given each key's record count now:
    /// each one lets a later request in beyond the limit (an extra
    /// admission). Calls that failed may have recorded too, which only
    /// hides losses, never invents them.
    pub fn lost_records(&self, records_now: &HashMap<String, u64>) -> u64 {
        self.admitted
            .iter()
            .map(|(k, n)| n.saturating_sub(records_now.get(k).copied().unwrap_or(0)))
            .sum()
    }

    /// A one-line summary for the test log.
    /// The bounds every failover test holds the load to: it ran, no call
    /// outlasted `max_latency`, errors stayed within `max_error_window`, and
    /// the last 1.5 s saw none.
    pub fn assert_failover_bounds(&self, max_latency: Duration, max_error_window: Duration) {
        assert!(self.ok_calls() > 200, "the load ran: {}", self.ok_calls());
        assert!(
            self.max_latency() <= max_latency,
            "a call took {:?} (bound {max_latency:?})",
            self.max_latency()
        );
        assert!(
            self.error_window() <= max_error_window,
            "errors for {:?} (bound {max_error_window:?})",
            self.error_window()
        );
        let end = self.calls.last().unwrap().at;
        assert!(
            self.calls
                .iter()
                .filter(|c| c.at + Duration::from_millis(1_500) > end)
                .all(|c| c.allowed.is_some()),
            "errors at the end of the load (ended at {end:?}; the last errors: {:#?})",
            self.last_errors
        );
    }

    pub fn summary(&self, records_now: &HashMap<String, u64>) -> String {
        format!(
            "calls {} ok {} errors {} error window {:?} max latency {:?} lost records {} (first error: {:?})",
            self.calls.len(),
            self.ok_calls(),
            self.errors,
            self.error_window(),
            self.max_latency(),
            self.lost_records(records_now),
            self.first_error
        )
    }
}

/// Record counts per key, asked of the store with a peek (a log's live
/// count is its record count while the window has not passed).
pub async fn record_counts(store: &dyn Store, keys: &[String]) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for key in keys {
        let request = Request::single(key.clone(), load_limit()).unwrap();
        let mut tries = 0;
        let d = loop {
            match store.peek(&request).await {
                Ok(d) => break d,
                Err(e) if tries < 50 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("peek {key}: {e}"),
            }
        };
        out.insert(key.clone(), d.count);
    }
    out
}

/// Ends a load run across a failover: waits (20 s at most) until the store
/// admits again, keeps the load on 2 s more, then stops it and returns it.
pub async fn finish_load(
    store: &dyn Store,
    stop: &AtomicBool,
    load: tokio::task::JoinHandle<Load>,
) -> Load {
    eventually(Duration::from_secs(20), || async {
        let r = Request::single("probe", load_limit()).unwrap();
        store.check(&r).await
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap()
}

/// Retries `f` until it succeeds or `limit` passes (for the store to
/// settle after a failover in tests that are not about the error window).
pub async fn eventually<T, E: std::fmt::Display, F, Fut>(limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("still failing after {limit:?}: {e}"),
        }
    }
}

/// `plain` keys `user0..` and one key for each slot rule of a weights key
/// (no hash tag, a tag of their own, a `}` without a tag); asserts that,
/// under `prefix`, they reach every master of the 3-master `cluster`.
pub fn keys_over_every_master(cluster: &RedisCluster, prefix: &str, plain: usize) -> Vec<String> {
    let mut keys: Vec<String> = (0..plain).map(|i| format!("user{i}")).collect();
    keys.extend(["{tenant7}:user".into(), "a}b".into(), "x{}y}z".into()]);
    let masters: HashSet<u16> = keys
        .iter()
        .map(|k| cluster.master_of_slot(cluster.key_slot(&format!("{prefix}{k}"))))
        .collect();
    assert_eq!(masters.len(), 3, "the keys must reach every master");
    keys
}
