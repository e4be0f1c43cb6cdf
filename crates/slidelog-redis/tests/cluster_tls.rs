//! `rediss+cluster://` against a Redis Cluster whose nodes also listen on
//! TLS (`tls-cluster yes`: the cluster answers TLS clients with TLS ports),
//! with a test CA made by the `openssl` command.

mod common;

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions};
use slidelog_testkit::{RedisCluster, free_port, unique_prefix};
use std::sync::Mutex;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_cluster_decides_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    slidelog_testkit::tls::make_test_certs(certs.path());
    let tls_ports = Mutex::new(Vec::new());
    let node_args = || {
        let port = free_port();
        tls_ports.lock().unwrap().push(port);
        let mut args = common::tls_args(certs.path(), port);
        args.extend(["--tls-cluster", "yes", "--tls-replication", "yes"].map(String::from));
        args
    };
    let cluster = std::thread::scope(|s| {
        s.spawn(|| RedisCluster::start_with_node_args(3, 0, &node_args))
            .join()
            .unwrap()
    });
    let seeds: Vec<String> = tls_ports
        .lock()
        .unwrap()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let url = format!("rediss+cluster://{}", seeds.join(","));
    let options = RedisOptions {
        tls_root_cert_pem: Some(std::fs::read(certs.path().join("ca.crt")).unwrap()),
        ..RedisOptions::default()
            .with_prefix(unique_prefix("cluster-tls"))
            .with_timeout(Duration::from_secs(2))
    };
    let store = ClusterStore::connect_cluster(&url, options)
        .await
        .expect("connect over TLS");
    let limit = Limit::new(1, 60_000).unwrap();
    // Keys on every master.
    for i in 0..30 {
        let r = Request::single(format!("k{i}"), limit).unwrap();
        assert!(store.check(&r).await.unwrap().allowed, "k{i}");
        assert!(!store.check(&r).await.unwrap().allowed, "k{i}");
    }
    drop(cluster);
}
