//! Reservations, the cross-slot joint decision's phase 1 (docs/design.md
//! §4.7): a reservation counts like a record until its deadline and then
//! vanishes by itself, its weights with it; confirm makes it a normal
//! record, cancel takes it back. On a Cluster whose master is killed
//! (SIGKILL) in the middle of joint calls, no request that was not answered
//! admitted stays recorded once the deadlines have passed, and nothing is
//! admitted beyond a limit.

mod common;

use slidelog_core::{Checks, Limit, Mode, Now, Request, Store};
use slidelog_redis::joint::{JointCall, reserved_member, run_script, settle_reservations};
use slidelog_redis::keys::pending_key;
use slidelog_redis::{ClusterStore, RedisOptions, RedisStore};
use slidelog_testkit::{RedisCluster, RedisServer, unique_prefix};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn req(key: &str, max: u64, cost: u64) -> Request {
    Request::new(key, vec![Limit::new(max, 60_000).unwrap()], cost).unwrap()
}

/// The server's clock, Unix ms.
fn server_ms(c: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    s * 1_000 + us / 1_000
}

/// Reserves `checks` (one slot: a standalone server) until `until`; the
/// members recorded.
async fn reserve(store: &RedisStore, checks: &Checks, until: u64) -> Vec<String> {
    let keys: Vec<Vec<u8>> = checks
        .into_iter()
        .map(|r| store.redis_key(r.key()))
        .collect();
    let call = JointCall {
        keys: &keys,
        checks,
        mode: Mode::Record,
        now_ms: None,
        deadline_ms: Some(until),
        reserve: true,
    };
    let outcomes = run_script(&mut store.connection(), call).await.unwrap();
    assert!(outcomes.iter().all(|o| o.decision.allowed));
    outcomes
        .iter()
        .zip(checks)
        .map(|(o, r)| reserved_member(r, o.decision.record.unwrap().id.unwrap()))
        .collect()
}

#[tokio::test]
async fn an_unconfirmed_reservation_counts_until_its_deadline_then_vanishes() {
    let server = RedisServer::start();
    let store = common::store(&server, "reserve-expiry").await;
    let mut c = server.client();
    // A weighted reservation (cost 3 of 5) and a plain one (cost 1 of 1).
    let checks = Checks::new([req("w", 5, 3), req("p", 1, 1)]).unwrap();
    let until = server_ms(&mut c) + 400;
    let members = reserve(&store, &checks, until).await;
    assert!(members.iter().all(|m| m.contains('#')), "{members:?}");
    assert!(!store.check(&req("p", 1, 1)).await.unwrap().allowed);
    assert_eq!(store.peek(&req("w", 5, 1)).await.unwrap().count, 4);
    while server_ms(&mut c) <= until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Gone for every decision, its extra units with it.
    assert_eq!(store.peek(&req("w", 5, 5)).await.unwrap().count, 5);
    assert!(store.check(&req("w", 5, 5)).await.unwrap().allowed);
    assert!(store.check(&req("p", 1, 1)).await.unwrap().allowed);
    for (key, member) in ["w", "p"].iter().zip(&members) {
        let log = store.redis_key(key);
        let score: Option<f64> = redis::cmd("ZSCORE")
            .arg(&log)
            .arg(member)
            .query(&mut c)
            .unwrap();
        assert_eq!(score, None, "{key}: the reservation left the log");
        let pending: i64 = redis::cmd("ZCARD")
            .arg(pending_key(&log))
            .query(&mut c)
            .unwrap();
        assert_eq!(pending, 0);
    }
}

#[tokio::test]
async fn a_confirmed_reservation_stays_and_a_cancelled_one_goes() {
    let server = RedisServer::start();
    let store = common::store(&server, "reserve-settle").await;
    let mut c = server.client();
    let checks = Checks::new([req("a", 5, 2), req("b", 3, 1)]).unwrap();
    let keys: Vec<Vec<u8>> = ["a", "b"].iter().map(|k| store.redis_key(k)).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let until = server_ms(&mut c) + 300;
    let members = reserve(&store, &checks, until).await;
    let mut conn = store.connection();
    assert!(
        settle_reservations(&mut conn, &refs, &members, true)
            .await
            .unwrap()
    );
    while server_ms(&mut c) <= until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Confirmed: normal records, past the deadline too.
    assert_eq!(store.peek(&req("a", 5, 1)).await.unwrap().count, 3);
    assert_eq!(store.peek(&req("b", 3, 1)).await.unwrap().count, 2);
    // A confirm after the deadline changes nothing; a cancel takes back.
    let until = server_ms(&mut c) + 60_000;
    let members = reserve(&store, &checks, until).await;
    assert!(
        settle_reservations(&mut conn, &refs, &members, false)
            .await
            .unwrap()
    );
    assert!(
        !settle_reservations(&mut conn, &refs, &members, true)
            .await
            .unwrap()
    );
    assert_eq!(store.peek(&req("a", 5, 1)).await.unwrap().count, 3);
    assert_eq!(store.peek(&req("b", 3, 1)).await.unwrap().count, 2);
}

/// About what 8 tasks pacing 40 ms admit in 4 s less the failover's errors:
/// the route fills around the end, so both its refusals and the kill count.
const ROUTE_MAX: u64 = 220;

/// Keys served by the master `port`, and one served by another master.
fn keys_of(cluster: &RedisCluster, prefix: &str, port: u16) -> Vec<String> {
    (0..)
        .map(|i| format!("user{i}"))
        .filter(|k| cluster.master_of_slot(cluster.key_slot(&format!("{prefix}{k}"))) == port)
        .take(5)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_killed_mid_call_leaves_only_admitted_requests_recorded() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let prefix = unique_prefix("joint-kill");
    let timeout = Duration::from_millis(500);
    let options = RedisOptions::default()
        .with_prefix(&prefix)
        .with_timeout(timeout);
    let store = Arc::new(
        ClusterStore::connect_cluster(&cluster.url(), options)
            .await
            .unwrap(),
    );
    let route_slot = cluster.key_slot(&format!("{prefix}route"));
    let route_master = cluster.master_of_slot(route_slot);
    let victim = *cluster
        .master_ports()
        .iter()
        .find(|&&p| p != route_master)
        .unwrap();
    let users = keys_of(&cluster, &prefix, victim);
    let admitted = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + Duration::from_secs(4);
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let (store, users) = (store.clone(), users.clone());
            let (admitted, errors) = (admitted.clone(), errors.clone());
            tokio::spawn(async move {
                let mut i = t;
                while Instant::now() < until {
                    let user = &users[i % users.len()];
                    let checks = Checks::new([req(user, 10_000, 1), req("route", ROUTE_MAX, 1)]);
                    match store
                        .decide_all(&checks.unwrap(), Mode::Record, Now::Server)
                        .await
                    {
                        Ok(j) if j.allowed => admitted.fetch_add(1, Ordering::Relaxed),
                        Ok(_) => 0,
                        Err(_) => errors.fetch_add(1, Ordering::Relaxed),
                    };
                    i += 1;
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let replica = cluster.replica_of(victim).unwrap();
    let cluster = tokio::task::spawn_blocking(move || {
        let mut cluster = cluster;
        cluster.kill(victim);
        cluster.wait_promoted(replica);
        cluster
    })
    .await
    .unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    // Every deadline has passed: a peek drops what was never confirmed.
    tokio::time::sleep(timeout + Duration::from_millis(200)).await;
    let admitted = admitted.load(Ordering::Relaxed);
    let peek = store.peek(&req("route", ROUTE_MAX, 1)).await.unwrap();
    // A peek counts itself when it would admit.
    let live = peek.count - u64::from(peek.allowed);
    eprintln!(
        "admitted {admitted}, errors {}, route live {live}",
        errors.load(Ordering::Relaxed),
    );
    assert!(errors.load(Ordering::Relaxed) > 0, "the kill was seen");
    assert!(admitted <= ROUTE_MAX, "no over-admission: {admitted}");
    assert_eq!(live, admitted, "the route holds exactly the admitted");
    let mut c = cluster.node(cluster.master_of_slot(route_slot)).client();
    let route = format!("{prefix}route");
    let held: u64 = redis::cmd("ZCARD").arg(&route).query(&mut c).unwrap();
    let pending: u64 = redis::cmd("ZCARD")
        .arg(pending_key(route.as_bytes()))
        .query(&mut c)
        .unwrap();
    assert_eq!((held, pending), (admitted, 0));
}
