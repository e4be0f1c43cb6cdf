//! The Sentinel store on a local group (1 master, 1 replica, 3 sentinels):
//! it decides as the memory store does, and it follows a failover under
//! load — forced with `SENTINEL FAILOVER`, and after the master is killed —
//! with errors only during a bounded window (about twice the measured one),
//! no call beyond the timeout (plus a scheduling margin), exact decisions
//! afterwards, and no admitted record lost: while a sentinel reports a
//! failover in progress the store fences (fails calls at once) instead of
//! writing to the master being replaced. Without the fence a forced failover
//! lost thousands of records (9,721 in one run), so `lost == 0` together with
//! "the fence was seen up" is the fence's regression test.

mod ha;

use slidelog_core::{Request, Store};
use slidelog_redis::{RedisOptions, SentinelStore};
use slidelog_testkit::{SentinelGroup, unique_prefix};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_millis(250);
/// Scheduling delay on a shared 2-core machine: a call may return this much
/// after its timeout fired (the bound is then 1.6 × the timeout).
const MARGIN: Duration = Duration::from_millis(150);

async fn store(group: &SentinelGroup, prefix: &str) -> Arc<SentinelStore> {
    let options = RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(TIMEOUT);
    Arc::new(
        SentinelStore::connect_sentinel(&group.url(), options)
            .await
            .expect("connect through the sentinels"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decides_as_the_memory_store_does() {
    let group = tokio::task::spawn_blocking(SentinelGroup::start)
        .await
        .unwrap();
    let prefix = unique_prefix("sentinel-diff");
    let options = RedisOptions::default()
        .with_prefix(&prefix)
        .with_timeout(Duration::from_secs(2));
    let store = SentinelStore::connect_sentinel(&group.url(), options.clone())
        .await
        .expect("connect");
    assert_eq!(store.kind(), "redis-sentinel");
    let keys: Vec<String> = (0..20).map(|i| format!("u{i}")).collect();
    ha::differential(&store, &keys, 800, 3).await;
    // The records are on the master the sentinels name.
    let mut c = group.server(group.master_port()).client();
    let n: u64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}u0"))
        .query(&mut c)
        .unwrap();
    assert!(n > 0);
    // A wrong master name is a clear error, not a hang.
    let bad = group.url().replace("/mymaster", "/nosuchmaster");
    let started = std::time::Instant::now();
    let err = SentinelStore::connect_sentinel(&bad, options.clone())
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(err.to_string().contains("nosuchmaster"), "{err}");
    let err = SentinelStore::connect_sentinel("redis+sentinel://127.0.0.1:1", options)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("master name"), "{err}");
}

async fn failover_under_load(
    test: &str,
    fail: impl FnOnce(SentinelGroup) -> (SentinelGroup, u16) + Send + 'static,
    max_error_window: Duration,
    expect_fence: bool,
) {
    let group = tokio::task::spawn_blocking(SentinelGroup::start)
        .await
        .unwrap();
    let old_master = group.master_port();
    let prefix = unique_prefix(test);
    let store = store(&group, &prefix).await;
    let keys: Vec<String> = (0..60).map(|i| format!("load{i}")).collect();
    let (stop, load) = ha::start_load(store.clone(), keys.clone(), 8);
    // Watch the fence while the failover runs (the poll raises it every
    // 100 ms at most; sampling at 5 ms cannot miss a whole failover).
    let watched = store.clone();
    let watching = Arc::new(AtomicBool::new(true));
    let still_watching = watching.clone();
    let fence_seen = tokio::spawn(async move {
        // When the fence went up or down, since about when the load started.
        let (started, mut changes, mut up) = (std::time::Instant::now(), Vec::new(), false);
        while still_watching.load(Ordering::Relaxed) {
            if watched.connection().fenced() != up {
                up = !up;
                changes.push((started.elapsed(), up));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        changes
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = std::time::Instant::now();
    let (group, new_master) = tokio::task::spawn_blocking(move || fail(group))
        .await
        .unwrap();
    let took = started.elapsed();
    assert_ne!(new_master, old_master);
    ha::eventually(Duration::from_secs(20), || async {
        store
            .check(&Request::single("probe", ha::load_limit()).unwrap())
            .await
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let load = load.await.unwrap();
    watching.store(false, Ordering::Relaxed);
    let fence_changes = fence_seen.await.unwrap();
    let fence_seen = !fence_changes.is_empty();
    let counts = ha::record_counts(store.as_ref(), &keys).await;
    eprintln!(
        "{test}: failover took {took:?}; switches {}; fence (up?) {fence_changes:?}; {}",
        store.connection().switches(),
        load.summary(&counts)
    );
    assert_eq!(
        store.connection().master_addr(),
        Some(format!("127.0.0.1:{new_master}")),
        "the store follows the new master"
    );
    load.assert_failover_bounds(TIMEOUT + MARGIN, max_error_window);
    assert_eq!(
        load.lost_records(&counts),
        0,
        "admitted records lost in the failover: the fence should prevent every loss"
    );
    if expect_fence {
        assert!(
            fence_seen,
            "the store never fenced during a SENTINEL FAILOVER: the fence is what keeps records from being lost"
        );
    }
    let fresh: Vec<String> = (0..20).map(|i| format!("after{i}")).collect();
    ha::differential(store.as_ref(), &fresh, 400, 5).await;
    drop(group);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_failover_under_load() {
    failover_under_load(
        "sentinel-forced",
        |group| {
            let new = group.failover();
            (group, new)
        },
        // Measured 1.2–1.3 s (the fence lasts the whole failover): about 2×.
        Duration::from_millis(2_600),
        // A forced failover is announced by the sentinels for its whole
        // length: the poll must see it.
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_master_under_load() {
    failover_under_load(
        "sentinel-killed",
        |mut group| {
            let old = group.kill_master();
            let new = group.wait_master_change(old);
            (group, new)
        },
        // down-after (1 s) + election and promotion + the poll; measured
        // 2.2–2.4 s: about 2×.
        Duration::from_millis(5_000),
        // The dead master takes no writes, fence or not; the window in
        // which a sentinel reports the failover may fall between polls.
        false,
    )
    .await;
}
