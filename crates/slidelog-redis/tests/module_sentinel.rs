//! The module engine on a Sentinel group (docs/design.md §4.4): the master
//! is asked whether it has the module, and asked again after a failover.
//!
//! - The module on both servers, `engine=module`: a killed master fails over
//!   and the replica, which holds the replicated module log, goes on
//!   deciding it exactly through the module.
//! - The module on the replica only, `engine=auto`: the scripts decide on
//!   the first master; after the failover the new master has the module, the
//!   store moves to it, and the module adopts the scripts' sorted set, so the
//!   limit holds across the move.

use slidelog_core::{Limit, Mode, Now, Request, Store};
use slidelog_redis::{Engine, RedisOptions, SentinelStore};
use slidelog_testkit::{SentinelGroup, module_path, unique_prefix};
use std::time::{Duration, Instant};

async fn group(on_master: bool, on_replica: bool) -> SentinelGroup {
    let path = module_path().display().to_string();
    tokio::task::spawn_blocking(move || {
        let load = ["--loadmodule", path.as_str()];
        let pick = |on: bool| if on { &load[..] } else { &[][..] };
        SentinelGroup::start_with_server_args(pick(on_master), pick(on_replica))
    })
    .await
    .unwrap()
}

async fn connect(group: &SentinelGroup, engine: &str, prefix: &str) -> SentinelStore {
    let options = RedisOptions::default()
        .with_prefix(prefix)
        .with_timeout(Duration::from_secs(2));
    let url = format!("{}?engine={engine}", group.url());
    SentinelStore::connect_sentinel(&url, options)
        .await
        .expect("connect")
}

/// Waits until `WAIT 1` says the replica has every write so far.
fn replicated(group: &SentinelGroup) {
    let master = group.server(group.master_port());
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5_000)
        .query(&mut master.client())
        .unwrap();
    assert_eq!(acked, 1, "the replica acknowledged the writes");
}

/// Kills the master and waits for the replica's promotion.
async fn fail_over(group: SentinelGroup) -> SentinelGroup {
    tokio::task::spawn_blocking(move || {
        let mut group = group;
        let old = group.kill_master();
        group.wait_master_change(old);
        group
    })
    .await
    .unwrap()
}

/// Checks `r` at `at` until the store answers (through a failover).
async fn check_through(store: &SentinelStore, r: &Request, at: u64) -> bool {
    let started = Instant::now();
    loop {
        match store.decide(r, Mode::Record, Now::At(at)).await {
            Ok(d) => return d.allowed,
            Err(e) if started.elapsed() < Duration::from_secs(30) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no decision after the failover: {e}"),
        }
    }
}

const T: u64 = 1_767_225_600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_keeps_the_module_log_and_its_limit() {
    let group = group(true, true).await;
    let prefix = unique_prefix("mod-sentinel");
    let store = connect(&group, "module", &prefix).await;
    assert_eq!(store.engine_in_use(), Some(Engine::Module));
    let r = Request::single("k", Limit::new(5, 600_000).unwrap()).unwrap();
    for i in 0..3 {
        assert!(check_through(&store, &r, T + i).await);
    }
    replicated(&group);
    let group = fail_over(group).await;
    let mut admitted = 0;
    for i in 0..4 {
        admitted += usize::from(check_through(&store, &r, T + 10 + i).await);
    }
    assert_eq!(admitted, 2, "5 per window: 3 before the failover, 2 after");
    assert_eq!(store.engine_in_use(), Some(Engine::Module));
    let t: String = redis::cmd("TYPE")
        .arg(store.redis_key("k"))
        .query(&mut group.server(group.master_port()).client())
        .unwrap();
    assert_eq!(t, "slide-log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_moves_to_the_module_when_a_failover_brings_it() {
    let group = group(false, true).await;
    let prefix = unique_prefix("mod-sentinel-auto");
    let store = connect(&group, "auto", &prefix).await;
    assert_eq!(store.engine_in_use(), Some(Engine::Script));
    let r = Request::single("k", Limit::new(5, 600_000).unwrap()).unwrap();
    for i in 0..3 {
        assert!(check_through(&store, &r, T + i).await);
    }
    replicated(&group);
    let group = fail_over(group).await;
    // The new master is asked once the store has moved to it.
    let started = Instant::now();
    let mut admitted = 0;
    while store.engine_in_use() != Some(Engine::Module) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still {:?} after the failover",
            store.engine_in_use()
        );
        // A decision is what makes the store look at its connection again;
        // each may still go through the scripts: the limit holds either way.
        let _ = store.decide(&r, Mode::Peek, Now::At(T + 10)).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..4 {
        admitted += usize::from(check_through(&store, &r, T + 10 + i).await);
    }
    assert_eq!(admitted, 2, "5 per window across the move to the module");
    let t: String = redis::cmd("TYPE")
        .arg(store.redis_key("k"))
        .query(&mut group.server(group.master_port()).client())
        .unwrap();
    assert_eq!(t, "slide-log", "the module adopted the scripts' sorted set");
}
