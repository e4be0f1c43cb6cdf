//! Outage mode on a real redis-server (killed, then restarted on the same
//! port): while the store is known to be down every decision answers by
//! policy at once (fail-open degraded, fail-closed an error), and the first
//! answer after it returns is exact (docs/design.md §6). The p99 during the
//! outage and the time to exact are measured and printed. Standalone (mid-run
//! and from startup), Sentinel (the master killed, until a new one is
//! elected) and Cluster (a master killed and restarted on its port). Every
//! key has the hash tag `{o}`, so in the cluster all live on one slot.

use slidelog::url::StoreOptions;
use slidelog::{FailurePolicy, Limit, Limiter, StoreHealth};
use slidelog_testkit::{RedisCluster, SentinelGroup};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::{Duration, Instant};

/// The p99 of `samples` (sorted in place).
fn p99(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[(samples.len() * 99).div_ceil(100) - 1]
}

async fn limiter(url: &str, policy: FailurePolicy, test: &str) -> Limiter {
    Limiter::builder()
        .timeout(Duration::from_millis(100))
        .failure_policy(policy)
        .open(url, StoreOptions::default().prefix(unique_prefix(test)))
        .await
        .expect("open the test redis")
}

/// Times `n` checks; returns the p99 and whether each was answered by policy.
async fn outage_p99(limiter: &Limiter, limits: &[Limit], n: usize) -> Duration {
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        let answer = limiter.check(format!("{{o}}k{}", i % 7), limits, 1).await;
        samples.push(started.elapsed());
        match (limiter.failure_policy(), answer) {
            (FailurePolicy::FailOpen, Ok(d)) => assert!(d.allowed && d.degraded, "{d:?}"),
            (FailurePolicy::FailClosed, Err(slidelog::LimiterError::Store(e))) => {
                assert!(e.is_transient(), "{e}")
            }
            (_, other) => panic!("not answered by policy: {other:?}"),
        }
    }
    p99(&mut samples)
}

/// Checks (every 10 ms) until one is exact; returns how long that took.
/// Under fail-closed, no call may fail once one was exact.
async fn until_exact(limiter: &Limiter, limits: &[Limit]) -> Duration {
    let started = Instant::now();
    loop {
        if let Ok(d) = limiter.check("{o}probe", limits, 1).await {
            if !d.degraded {
                return started.elapsed();
            }
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never exact");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mid_run_outage_answers_at_once_and_is_exact_soon_after_redis_returns() {
    for policy in [FailurePolicy::FailOpen, FailurePolicy::FailClosed] {
        let mut redis = RedisServer::start();
        let limiter = limiter(&redis.url(), policy, "outage_mid_run").await;
        let limits = [Limit::new(1_000, 60_000).unwrap()];
        assert!(!limiter.check("k", &limits, 1).await.unwrap().degraded);
        // A key known full: its rejection is cached (the store's clock).
        let full = [Limit::new(1, 60_000).unwrap()];
        limiter.check("full", &full, 1).await.unwrap();
        assert!(!limiter.check("full", &full, 1).await.unwrap().allowed);
        redis.kill();
        outage_p99(&limiter, &limits, 20).await;
        // Long enough for the probe's backoff to reach its longest wait.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert!(matches!(limiter.store_health(), StoreHealth::Down { .. }));
        // The rejection cache still answers exactly for the key it knows is
        // full, under either policy.
        let d = limiter.check("full", &full, 1).await.unwrap();
        assert!(!d.allowed && !d.degraded, "{d:?}");
        let p99 = outage_p99(&limiter, &limits, 200).await;
        redis.restart();
        let back = until_exact(&limiter, &limits).await;
        eprintln!(
            "{policy}: outage p99 {p99:?}; exact again {back:?} after redis-server restarted"
        );
        for _ in 0..20 {
            let d = limiter
                .check("after", &limits, 1)
                .await
                .expect("no call fails once exact");
            assert!(!d.degraded, "{d:?}");
        }
        // Target 5 ms (measured well under 1 ms); margin for a loaded
        // machine, far under the 100 ms every answer waited before.
        assert!(
            p99 <= Duration::from_millis(20),
            "{policy}: outage p99 {p99:?}"
        );
        assert!(
            back <= Duration::from_millis(1_500),
            "{policy}: exact again after {back:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_at_startup_answers_at_once_then_exact() {
    let mut redis = RedisServer::start();
    redis.kill();
    let limiter = limiter(&redis.url(), FailurePolicy::FailOpen, "outage_startup").await;
    let limits = [Limit::new(1_000, 60_000).unwrap()];
    outage_p99(&limiter, &limits, 20).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let p99 = outage_p99(&limiter, &limits, 200).await;
    redis.restart();
    let back = until_exact(&limiter, &limits).await;
    eprintln!("from startup: outage p99 {p99:?}; exact again {back:?} after redis-server started");
    assert!(p99 <= Duration::from_millis(20), "outage p99 {p99:?}");
    assert!(
        back <= Duration::from_millis(1_500),
        "exact again after {back:?}"
    );
}

/// Sentinel: the master is killed; until the sentinels elect the replica,
/// answers come by policy at once; once they have, the limiter is exact
/// again within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_master_killed_answers_at_once_then_exact_on_the_new_master() {
    let mut group = tokio::task::spawn_blocking(SentinelGroup::start)
        .await
        .unwrap();
    let limiter = limiter(&group.url(), FailurePolicy::FailOpen, "outage_sentinel").await;
    let limits = [Limit::new(1_000, 60_000).unwrap()];
    assert!(!limiter.check("k", &limits, 1).await.unwrap().degraded);
    let old = group.kill_master();
    outage_p99(&limiter, &limits, 20).await;
    let p99 = outage_p99(&limiter, &limits, 200).await;
    let elected = tokio::task::spawn_blocking(move || {
        group.wait_master_change(old);
        group
    });
    let _group = elected.await.unwrap();
    let back = until_exact(&limiter, &limits).await;
    eprintln!(
        "sentinel: outage p99 {p99:?}; exact again {back:?} after the new master was elected"
    );
    assert!(p99 <= Duration::from_millis(20), "outage p99 {p99:?}");
    assert!(
        back <= Duration::from_millis(1_500),
        "exact again after {back:?}"
    );
}

/// Cluster (3 masters, no replicas): the master of the key's slot is
/// killed and restarted on the same port. Answers come by policy within the
/// timeout (not at once: see the gap below), exact again at once after it
/// rejoins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_master_killed_answers_by_policy_then_exact_when_it_returns() {
    let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with(3, 0))
        .await
        .unwrap();
    let limiter = limiter(&cluster.url(), FailurePolicy::FailOpen, "outage_cluster").await;
    let limits = [Limit::new(1_000, 60_000).unwrap()];
    assert!(
        !limiter
            .check("{o}probe", &limits, 1)
            .await
            .unwrap()
            .degraded
    );
    // Every key of outage_p99 and until_exact has the hash tag {o}: the
    // master of its slot is killed.
    let slot = cluster.key_slot("o");
    let port = cluster.master_of_slot(slot);
    cluster.kill(port);
    outage_p99(&limiter, &limits, 20).await;
    let p99 = outage_p99(&limiter, &limits, 200).await;
    // Known gap: the cluster mostly still answers a PING (redis-rs sends
    // it to a node it reaches), so the store is mostly not known down and a
    // call on the dead primary's slot waits the timeout (redis-rs retries a
    // refused node inside the call), then the policy answers.
    eprintln!(
        "cluster health during the outage: {:?}",
        limiter.store_health()
    );
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart(port);
        cluster
    });
    let _cluster = cluster.await.unwrap();
    let back = until_exact(&limiter, &limits).await;
    eprintln!("cluster: outage p99 {p99:?}; exact again {back:?} after the master rejoined");
    // The gap: about the 100 ms timeout (105-109 ms measured alone, up to
    // 405 ms beside the other tests on a loaded 2-core machine); bounded.
    assert!(p99 <= Duration::from_millis(1_000), "outage p99 {p99:?}");
    assert!(
        back <= Duration::from_millis(1_500),
        "exact again after {back:?}"
    );
}
