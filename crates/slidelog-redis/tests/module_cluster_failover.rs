//! A killed master of a Redis Cluster with slidelog's module on every node
//! (docs/design.md §4.3), alone in its test binary (a failover's latency
//! bounds need the machine's cores): the replica, which holds the replicated
//! module logs, takes over; errors only in a bounded window, no call beyond
//! the per-call timeout (plus a scheduling margin), at most one lost record
//! per load task, exact again afterwards (as cluster_failover.rs for the
//! scripts).

mod ha;

use slidelog_redis::{ClusterStore, Engine, RedisOptions};
use slidelog_testkit::{RedisCluster, module_path, unique_prefix};
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_millis(250);
/// Scheduling delays on a shared 2-core machine (as cluster_failover.rs).
const MARGIN: Duration = Duration::from_millis(150);
const LOAD_TASKS: usize = 8;

async fn cluster() -> RedisCluster {
    let path = module_path().display().to_string();
    tokio::task::spawn_blocking(move || {
        RedisCluster::start_with_node_args(3, 1, &|| vec!["--loadmodule".into(), path.clone()])
    })
    .await
    .unwrap()
}

async fn connect(cluster: &RedisCluster, engine: &str, prefix: &str) -> ClusterStore {
    let options = RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(TIMEOUT);
    ClusterStore::connect_cluster(&format!("{}?engine={engine}", cluster.url()), options)
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_over_to_a_replica_with_the_module_logs() {
    let mut cluster = cluster().await;
    let prefix = unique_prefix("mod-cluster-kill");
    let store: Arc<ClusterStore> = Arc::new(connect(&cluster, "module", &prefix).await);
    let keys: Vec<String> = (0..90).map(|i| format!("load{i}")).collect();
    let (stop, load) = ha::start_load(store.clone(), keys.clone(), LOAD_TASKS);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (cluster_back, took) = tokio::task::spawn_blocking(move || {
        let master = cluster.master_ports()[1];
        let replica = cluster.replica_of(master).expect("a replica");
        cluster.kill(master);
        let took = cluster.wait_promoted(replica);
        (cluster, took)
    })
    .await
    .unwrap();
    cluster = cluster_back;
    let load = ha::finish_load(store.as_ref(), &stop, load).await;
    let counts = ha::record_counts(store.as_ref(), &keys).await;
    eprintln!(
        "module cluster, killed master: failover took {took:?}; {}",
        load.summary(&counts)
    );
    load.assert_failover_bounds(TIMEOUT + MARGIN, Duration::from_millis(6_000));
    // Records not yet replicated when the master died are lost: at most one
    // in flight per load task (as for the scripts, cluster_failover.rs).
    assert!(
        load.lost_records(&counts) <= LOAD_TASKS as u64,
        "lost {} admitted records",
        load.lost_records(&counts)
    );
    let fresh: Vec<String> = (0..30).map(|i| format!("after{i}")).collect();
    ha::differential(store.as_ref(), &fresh, 400, 11).await;
    assert_eq!(store.engine_in_use(), Some(Engine::Module));
    drop(cluster);
}
