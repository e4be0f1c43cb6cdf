//! The local policy on Redis Cluster and Sentinel through the built
//! `slidelog serve` (docs/design.md §6, "Local answers"), three instances
//! each with `--on-store-error local --local-share 0.34` and a limit of 30
//! per minute.
//!
//! - Cluster, one master killed: only its keys are answered locally (at
//!   most 11 per instance), the other masters' keys decide on the store
//!   exactly; the master restarted empty counts exactly what the outage
//!   admitted within 3 s, and the checks after admit what is left of 30.
//! - Sentinel, the master killed: answered locally until the sentinels
//!   promote the replica; then the new master counts what it replicated
//!   before the outage plus what the outage admitted, exactly.

use slidelog_testkit::{RedisCluster, SentinelGroup};
use std::time::Duration;

mod common;

use common::child;
use common::local::{MAX, SHARE_MAX, check, serve, until_charged_back};

/// 20 checks of `key` on each instance: the admissions of each, after
/// checking every answer is degraded (`local`) or not.
fn round(fleet: &[child::Serve], key: &str, local: bool) -> Vec<u64> {
    fleet
        .iter()
        .map(|service| {
            let mut admitted = 0;
            for _ in 0..20 {
                let (ok, degraded, _) = check(service, key);
                assert_eq!(degraded, local, "{key}: degraded {degraded}");
                admitted += u64::from(ok);
            }
            admitted
        })
        .collect()
}

#[test]
fn cluster_one_master_down_sends_only_its_keys_local_and_charges_them_back() {
    let mut cluster = RedisCluster::start_with_node_args(3, 0, &|| {
        vec!["--cluster-require-full-coverage".into(), "no".into()]
    });
    let fleet: Vec<child::Serve> = (0..3).map(|_| serve(&cluster.url(), &[])).collect();
    let victim = cluster.master_ports()[1];
    let on_victim = |key: &str| {
        cluster.master_of_slot(cluster.key_slot(&format!("rate:sliding:{key}"))) == victim
    };
    let dead = (0..)
        .map(|i| format!("d{i}"))
        .find(|k| on_victim(k))
        .unwrap();
    let live = (0..)
        .map(|i| format!("l{i}"))
        .find(|k| !on_victim(k))
        .unwrap();
    for service in &fleet {
        assert!(check(service, &dead).0 && check(service, &live).0);
    }
    cluster.kill(victim);
    // Until each instance's store knows the master down, its calls fail
    // and are answered locally too: the dead key is local throughout.
    let outage = round(&fleet, &dead, true);
    for &admitted in &outage {
        assert!((1..=SHARE_MAX).contains(&admitted), "{outage:?}");
    }
    // The live master's key decides on the store: 3 before, 27 more.
    let live_admitted: u64 = round(&fleet, &live, false).iter().sum();
    assert_eq!(live_admitted, MAX - 3);
    cluster.restart(victim);
    let total: u64 = outage.iter().sum();
    let url = format!("redis://127.0.0.1:{victim}");
    let took = until_charged_back(&url, &fleet.iter().collect::<Vec<_>>(), &dead, total);
    eprintln!("cluster: outage admitted {outage:?}; charged back within {took:?} of the restart");
    let after: u64 = round(&fleet, &dead, false).iter().sum();
    assert_eq!(after, MAX.saturating_sub(total));
    assert!(
        took <= Duration::from_secs(3),
        "charged back after {took:?}"
    );
}

#[test]
fn sentinel_master_killed_answers_locally_until_the_failover_and_charges_back() {
    let mut group = SentinelGroup::start();
    let fleet: Vec<child::Serve> = (0..3).map(|_| serve(&group.url(), &[])).collect();
    let key = "sentinel";
    for service in &fleet {
        assert!(check(service, key).0);
    }
    // Replicated before the kill: the new master holds these 3.
    std::thread::sleep(Duration::from_millis(200));
    let old = group.kill_master();
    let outage = round(&fleet, key, true);
    for &admitted in &outage {
        assert!((1..=SHARE_MAX).contains(&admitted), "{outage:?}");
    }
    let new = group.wait_master_change(old);
    let total: u64 = outage.iter().sum();
    let url = format!("redis://127.0.0.1:{new}");
    let took = until_charged_back(&url, &fleet.iter().collect::<Vec<_>>(), key, 3 + total);
    eprintln!(
        "sentinel: outage admitted {outage:?}; charged back within {took:?} of the promotion"
    );
    let after: u64 = round(&fleet, key, false).iter().sum();
    assert_eq!(after, MAX.saturating_sub(3 + total));
}
