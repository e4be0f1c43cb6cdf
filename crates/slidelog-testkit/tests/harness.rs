//! The cluster and sentinel harnesses themselves: they come up healthy,
//! fail over, and tear down every process they started.

use slidelog_testkit::{RedisCluster, SentinelGroup};
use std::time::Instant;

#[test]
fn cluster_comes_up_and_fails_over() {
    let started = Instant::now();
    let cluster = RedisCluster::start();
    eprintln!("cluster up in {:?}", started.elapsed());
    let masters = cluster.master_ports();
    assert_eq!(masters.len(), 3);
    let replica = cluster.replica_of(masters[0]).expect("a replica");
    let took = cluster.failover(replica);
    eprintln!("manual failover in {took:?}");
    assert!(cluster.master_ports().contains(&replica));
    assert!(!cluster.master_ports().contains(&masters[0]));
}

#[test]
fn cluster_replaces_a_killed_master() {
    let mut cluster = RedisCluster::start();
    let master = cluster.master_ports()[1];
    let replica = cluster.replica_of(master).expect("a replica");
    cluster.kill(master);
    let took = cluster.wait_promoted(replica);
    eprintln!("killed master replaced in {took:?}");
    cluster.restart(master);
    assert_eq!(cluster.master_ports().len(), 3);
}

#[test]
fn sentinel_group_fails_over() {
    let started = Instant::now();
    let group = SentinelGroup::start();
    eprintln!("sentinel group up in {:?}", started.elapsed());
    let old = group.master_port();
    let new = group.failover();
    eprintln!("forced failover done at {:?}", started.elapsed());
    assert_ne!(old, new);
}

#[test]
fn sentinel_group_replaces_a_killed_master() {
    let mut group = SentinelGroup::start();
    let started = Instant::now();
    let old = group.kill_master();
    let new = group.wait_master_change(old);
    eprintln!("killed master replaced in {:?}", started.elapsed());
    assert_ne!(old, new);
}
