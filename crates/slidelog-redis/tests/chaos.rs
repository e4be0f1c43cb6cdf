//! The chaos suite (docs/design.md §6): under load from 8 tasks, each fault is
//! injected into a real Redis the test started, and the outcomes are
//! counted: calls, errors (each one a degraded answer under fail-open, a
//! 503 under fail-closed), admissions beyond the limit (what clients saw
//! admitted past each key's max), and the time to recover (from the end of
//! the fault — the restart, SIGCONT, the freeze, the failover command — to
//! the first call after which every call succeeds).
//!
//! Faults: kill -9 and restart without and with persistence (AOF, fsync
//! always), SIGSTOP/SIGCONT, a black-holed connection, `SCRIPT FLUSH` every
//! 100 ms, a Cluster failover and a Sentinel failover. The table is printed
//! (`--nocapture`) and kept in the operations guide (docs/guide/operations.md). Admissions
//! beyond the limit are 0 whenever Redis keeps its data; a restart without
//! persistence forgets every log, and the table shows what that costs.

mod common;
mod ha;

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{ClusterStore, RedisStore, SentinelStore};
use slidelog_testkit::{FreezingProxy, RedisCluster, RedisServer, SentinelGroup};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const TASKS: usize = 8;
const KEYS: usize = 16;
/// Per key and window: the load fills every key within the first second.
const MAX: u64 = 100;
const TIMEOUT: Duration = Duration::from_millis(100);

/// What the load saw during one fault.
#[derive(Debug, Default)]
struct Outcome {
    calls: u64,
    errors: u64,
    beyond: u64,
    recovery: Duration,
}

/// One call: when it ended (since the load started) and whether it failed.
type Trace = Vec<(Duration, bool)>;

/// Runs the load on `store` for `before` (keys fill up), then `fault`
/// (which returns when the fault is over: the restart, SIGCONT…), then
/// until the store has answered for 1.5 s in a row (at most 20 s).
async fn under_load<F>(store: Arc<dyn Store>, before: Duration, fault: F) -> Outcome
where
    F: FnOnce() + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (store, stop) = (store.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut admitted: HashMap<usize, u64> = HashMap::new();
            let mut trace = Trace::new();
            let mut i = t;
            while !stop.load(Ordering::Relaxed) {
                let key = i % KEYS;
                i += 1;
                let request =
                    Request::single(format!("k{key}"), Limit::new(MAX, 60_000).unwrap()).unwrap();
                let result = store.check(&request).await;
                trace.push((started.elapsed(), result.is_err()));
                match result {
                    Ok(d) if d.allowed => *admitted.entry(key).or_default() += 1,
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
                // Room for the other tasks on a shared 2-core machine.
                tokio::task::yield_now().await;
            }
            (admitted, trace)
        }));
    }
    tokio::time::sleep(before).await;
    tokio::task::spawn_blocking(fault).await.unwrap();
    let fault_over = started.elapsed();
    // Load on until the store answers, then for 1.5 s without an error
    // (a probe every 100 ms; at most 20 s in all).
    let probe = Request::single("probe", Limit::new(1, 1_000).unwrap()).unwrap();
    ha::eventually(Duration::from_secs(20), || store.peek(&probe)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline && quiet_since.elapsed() < Duration::from_millis(1_500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if store.peek(&probe).await.is_err() {
            quiet_since = Instant::now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut admitted: HashMap<usize, u64> = HashMap::new();
    let mut trace = Trace::new();
    for t in tasks {
        let (a, tr) = t.await.unwrap();
        for (k, n) in a {
            *admitted.entry(k).or_default() += n;
        }
        trace.extend(tr);
    }
    trace.sort();
    let last_error = trace
        .iter()
        .rev()
        .find(|(_, failed)| *failed)
        .map(|(at, _)| *at);
    Outcome {
        calls: trace.len() as u64,
        errors: trace.iter().filter(|(_, failed)| *failed).count() as u64,
        beyond: admitted.values().map(|n| n.saturating_sub(MAX)).sum(),
        recovery: last_error.map_or(Duration::ZERO, |at| at.saturating_sub(fault_over)),
    }
}

fn row(fault: &str, o: &Outcome) -> String {
    format!(
        "| {fault} | {} | {} | {} | {:.2} s |",
        o.calls,
        o.errors,
        o.beyond,
        o.recovery.as_secs_f64()
    )
}

async fn standalone(url: &str, test: &str) -> Arc<dyn Store> {
    Arc::new(
        RedisStore::connect(url, common::options_with_timeout(test, TIMEOUT))
            .await
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_table() {
    let mut rows = Vec::new();

    // kill -9 and restart, nothing persisted: every log is forgotten.
    let redis = Arc::new(std::sync::Mutex::new(RedisServer::start()));
    let url = redis.lock().unwrap().url();
    let store = standalone(&url, "chaos-kill").await;
    let r = redis.clone();
    let kill = under_load(store, Duration::from_secs(1), move || {
        let mut r = r.lock().unwrap();
        r.kill();
        std::thread::sleep(Duration::from_millis(500));
        r.restart();
    })
    .await;
    rows.push(row("kill -9, restart, no persistence", &kill));
    assert!(kill.recovery < Duration::from_secs(3), "{kill:?}");

    // kill -9 and restart with AOF (fsync always): nothing forgotten.
    let redis = Arc::new(std::sync::Mutex::new(RedisServer::start_with_args(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])));
    let url = redis.lock().unwrap().url();
    let store = standalone(&url, "chaos-aof").await;
    let r = redis.clone();
    let aof = under_load(store, Duration::from_secs(1), move || {
        let mut r = r.lock().unwrap();
        r.kill();
        std::thread::sleep(Duration::from_millis(500));
        r.restart();
    })
    .await;
    rows.push(row("kill -9, restart, AOF fsync always", &aof));
    assert_eq!(aof.beyond, 0, "{aof:?}");
    assert!(aof.recovery < Duration::from_secs(3), "{aof:?}");

    // SIGSTOP for 2 s, then SIGCONT.
    let redis = Arc::new(RedisServer::start());
    let store = standalone(&redis.url(), "chaos-stop").await;
    let r = redis.clone();
    let stopped = under_load(store, Duration::from_secs(1), move || {
        r.pause();
        std::thread::sleep(Duration::from_secs(2));
        r.resume();
    })
    .await;
    rows.push(row("SIGSTOP 2 s, SIGCONT", &stopped));
    assert_eq!(stopped.beyond, 0, "{stopped:?}");
    assert!(stopped.recovery < Duration::from_secs(2), "{stopped:?}");

    // A black-holed connection (never thawed).
    let redis = RedisServer::start();
    let proxy = Arc::new(FreezingProxy::start(&redis.addr()));
    let store: Arc<dyn Store> = Arc::new(
        RedisStore::connect(
            &proxy.url(),
            common::options_with_timeout("chaos-hole", TIMEOUT),
        )
        .await
        .unwrap(),
    );
    let p = proxy.clone();
    let hole = under_load(store, Duration::from_secs(1), move || {
        p.freeze();
    })
    .await;
    rows.push(row("black-holed connection", &hole));
    assert_eq!(hole.beyond, 0, "{hole:?}");
    assert!(hole.recovery < Duration::from_millis(1_500), "{hole:?}");

    // SCRIPT FLUSH every 100 ms for 2 s.
    let redis = Arc::new(RedisServer::start());
    let store = standalone(&redis.url(), "chaos-flush").await;
    let r = redis.clone();
    let flush = under_load(store, Duration::from_secs(1), move || {
        let mut c = r.client();
        for _ in 0..20 {
            redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query::<()>(&mut c)
                .unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await;
    rows.push(row("SCRIPT FLUSH every 100 ms for 2 s", &flush));
    assert_eq!((flush.beyond, flush.errors), (0, 0), "{flush:?}");

    // Cluster: a manual failover of the master of some keys.
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with(3, 1))
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(
        ClusterStore::connect_cluster(
            &cluster.url(),
            common::options_with_timeout("chaos-cluster", TIMEOUT),
        )
        .await
        .unwrap(),
    );
    let cluster = Arc::new(cluster);
    let c = cluster.clone();
    let failover = under_load(store, Duration::from_secs(1), move || {
        let master = c.master_ports()[0];
        let replica = c.replica_of(master).expect("a replica");
        c.failover(replica);
    })
    .await;
    rows.push(row("Cluster manual failover", &failover));
    assert!(failover.recovery < Duration::from_secs(5), "{failover:?}");

    // Sentinel: SENTINEL FAILOVER.
    let group = tokio::task::spawn_blocking(SentinelGroup::start)
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SentinelStore::connect_sentinel(
            &group.url(),
            common::options_with_timeout("chaos-sentinel", TIMEOUT),
        )
        .await
        .unwrap(),
    );
    let group = Arc::new(group);
    let g = group.clone();
    let sentinel = under_load(store, Duration::from_secs(1), move || {
        g.failover();
    })
    .await;
    rows.push(row("Sentinel failover (SENTINEL FAILOVER)", &sentinel));
    assert!(sentinel.recovery < Duration::from_secs(5), "{sentinel:?}");

    println!(
        "\n| fault | calls | errors (degraded under fail-open) | admissions beyond the limit | time to recover |"
    );
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
}
