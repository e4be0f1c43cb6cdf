//! `inspect` of a real 3-master Redis Cluster (each master with a replica):
//! every master is scanned on its own, replicas are not counted twice, the
//! totals are exact, and problems are found on whichever master holds them.

use futures::StreamExt;
use slidelog_inspect::{InspectOptions, ProblemKind, inspect};
use slidelog_testkit::{RedisCluster, unique_prefix};

const KEYS: u64 = 3_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_master_is_scanned_once() {
    let cluster = RedisCluster::start();
    let p = unique_prefix("cluster");
    let seeds: Vec<String> = cluster
        .seeds()
        .iter()
        .map(|s| format!("redis://{s}"))
        .collect();
    let client = redis::cluster::ClusterClient::new(seeds).unwrap();
    let conn = client.get_async_connection().await.unwrap();
    let now = 1_764_400_000_000u64;

    // Key i holds i % 4 + 1 records with a TTL; a few keys have no TTL.
    let writes = futures::stream::iter(0..KEYS).map(|i| {
        let mut conn = conn.clone();
        let key = format!("{p}user{i}");
        async move {
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(&key);
            for r in 0..(i % 4 + 1) {
                zadd.arg(now + r).arg(format!("01JDQ3W7ZK{i:08}{r:08}"));
            }
            zadd.exec_async(&mut conn).await.unwrap();
            if i % 1000 != 7 {
                redis::cmd("PEXPIRE")
                    .arg(&key)
                    .arg(600_000)
                    .exec_async(&mut conn)
                    .await
                    .unwrap();
            }
        }
    });
    writes.buffer_unordered(64).collect::<Vec<()>>().await;

    let options = InspectOptions {
        pattern: format!("{p}*"),
        count: 100,
        ..InspectOptions::default()
    };
    let report = inspect(&cluster.url(), &options, None).await.unwrap();
    let masters = cluster.master_ports();
    assert_eq!(report.nodes.len(), 3);
    assert_eq!(masters.len(), 3);
    for n in &report.nodes {
        let port: u16 = n.addr.rsplit_once(':').unwrap().1.parse().unwrap();
        assert!(masters.contains(&port), "{} is not a master", n.addr);
        assert!(n.keys > 0, "{} holds no key", n.addr);
    }
    let expected_records: u64 = (0..KEYS).map(|i| i % 4 + 1).sum();
    assert_eq!(report.summary.keys, KEYS);
    assert_eq!(report.summary.records, expected_records);
    assert_eq!(report.nodes.iter().map(|n| n.keys).sum::<u64>(), KEYS);
    let no_ttl = report.problem(ProblemKind::NoTtl).unwrap();
    assert_eq!(no_ttl.count, 3);
    let mut keys: Vec<_> = no_ttl.keys.iter().map(|k| k.key.clone()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            format!("{p}user1007"),
            format!("{p}user2007"),
            format!("{p}user7")
        ]
    );
    assert_eq!(report.problem_keys, 3);
}
