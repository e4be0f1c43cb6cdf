//! Settle and charge on a local 3-master Redis Cluster (docs/design.md
//! §4.5): keys of each weights-key slot rule (no hash tag, a tag of their
//! own, a `}` without a tag) over every master settle and charge with no
//! CROSSSLOT, answering as slidelog_core::engine does, and a master that
//! lost its scripts (SCRIPT FLUSH) gets the usage script again.

mod ha;

use slidelog_core::engine::{self, Log};
use slidelog_core::{Limit, Mode, Now, Receipt, Request, Store};
use slidelog_redis::{ClusterStore, RedisOptions};
use slidelog_testkit::{RedisCluster, unique_prefix};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settles_and_charges_on_every_master_answer_as_the_engine() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let prefix = unique_prefix("cluster-usage");
    let options = RedisOptions::default()
        .with_prefix(&prefix)
        .with_timeout(Duration::from_secs(2));
    let store = ClusterStore::connect_cluster(&cluster.url(), options)
        .await
        .expect("connect to the cluster");
    let keys = ha::keys_over_every_master(&cluster, &prefix, 12);
    let limits = vec![
        Limit::new(5, 60_000).unwrap(),
        Limit::new(300, 60_000).unwrap(),
    ];
    let now = 1_767_225_600_000u64;
    for (round, key) in keys.iter().enumerate() {
        if round == 6 {
            // Every master forgets its scripts: the next call loads them.
            for port in cluster.master_ports() {
                let mut c = cluster.node(port).client();
                let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
            }
        }
        let mut log = Log::new();
        let check = Request::with_costs(key.clone(), limits.clone(), vec![1, 100]).unwrap();
        for step in 0..3u64 {
            let at = now + step;
            let got = store
                .decide(&check, Mode::Record, Now::At(at))
                .await
                .unwrap();
            let want = engine::decide_and_record(&mut log, at, &check);
            assert_eq!(got, want, "{key} check {step}");
            let receipt = Receipt::new(&check, got.record.unwrap());
            let model = Receipt::new(&check, want.record.unwrap());
            let costs = if step == 1 {
                vec![0]
            } else {
                vec![1, 10 + step]
            };
            let usage = Request::usage(key.clone(), limits.clone(), costs).unwrap();
            let got = store.settle(&usage, &receipt, Now::At(at)).await.unwrap();
            let want = engine::settle(&mut log, at, &usage, &model);
            assert_eq!(got, want, "{key} settle {step}");
            assert!(got.settled);
        }
        let usage = Request::usage(key.clone(), limits.clone(), vec![2, 400]).unwrap();
        let got = store.charge(&usage, Now::At(now + 9)).await.unwrap();
        let want = engine::charge(&mut log, now + 9, &usage);
        assert_eq!(got, want, "{key} charge");
        assert!(!got.decision.allowed);
    }
}
