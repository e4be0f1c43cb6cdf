//! A black-holed connection is replaced within about a second
//! (docs/design.md §6): a [`FreezingProxy`] between the store and a real
//! `redis-server` keeps the store's open connections open but drops their
//! bytes, while it still forwards new connections. Before the fix every
//! answer timed out for as long as the test ran and the proxy saw one
//! connection in all that time.

mod common;

use slidelog_core::{Limit, Request, Store};
use slidelog_redis::{RedisStore, SentinelStore};
use slidelog_testkit::{FreezingProxy, RedisServer, redis_server_binary};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bound the issue asks for, with room for a loaded 2-core CI machine.
/// The per-call timeout of these stores.
const TIMEOUT: Duration = Duration::from_millis(100);
const RECOVERY_BOUND: Duration = Duration::from_millis(1_500);

/// Decides every 20 ms from the moment of the freeze until a decision comes
/// from Redis again; returns how long that took.
async fn time_to_recover(store: &dyn Store, freeze: impl FnOnce() -> usize) -> Duration {
    let request = Request::single("k", Limit::new(1_000_000, 60_000).unwrap()).unwrap();
    // Warm: the connection is up and used.
    for _ in 0..5 {
        store
            .check(&request)
            .await
            .expect("decides before the freeze");
    }
    let frozen = freeze();
    assert!(frozen >= 1, "the proxy froze no connection");
    let start = Instant::now();
    let mut failures = 0;
    loop {
        match store.check(&request).await {
            Ok(_) if failures > 0 => return start.elapsed(),
            Ok(_) => {}
            Err(e) => {
                assert!(e.is_transient(), "a silent connection is transient: {e}");
                failures += 1;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no decision from Redis 20 s after the freeze ({failures} failures)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_frozen_standalone_connection_is_replaced_within_a_second() {
    let redis = RedisServer::start();
    let proxy = FreezingProxy::start(&redis.addr());
    let store = RedisStore::connect(
        &proxy.url(),
        common::options_with_timeout("bh_standalone", TIMEOUT),
    )
    .await
    .expect("connect through the proxy");
    let accepted_before = proxy.accepted();
    let took = time_to_recover(&store, || proxy.freeze()).await;
    println!(
        "standalone: decisions from Redis again {took:?} after the freeze; \
         proxy accepted {} connections",
        proxy.accepted()
    );
    assert!(took < RECOVERY_BOUND, "recovered only after {took:?}");
    assert!(proxy.accepted() > accepted_before, "no new connection");
    assert!(store.connection().replacements() >= 1);
}

#[tokio::test]
async fn a_store_that_froze_twice_recovers_twice() {
    let redis = RedisServer::start();
    let proxy = FreezingProxy::start(&redis.addr());
    let store = RedisStore::connect(
        &proxy.url(),
        common::options_with_timeout("bh_twice", TIMEOUT),
    )
    .await
    .unwrap();
    for round in 0..2 {
        let took = time_to_recover(&store, || proxy.freeze()).await;
        assert!(took < RECOVERY_BOUND, "round {round}: {took:?}");
    }
    // A slow but live Redis (a frozen proxy that thaws) keeps working too.
    proxy.unfreeze();
    assert!(store.ping().await.is_ok());
}

/// One sentinel (quorum 1, down-after 60 s: no failover can happen during
/// the test) that monitors the master *through the proxy*, so the address
/// it hands out is the proxy's.
struct LoneSentinel {
    port: u16,
    _dir: tempfile::TempDir,
    child: Child,
}

impl LoneSentinel {
    fn start(master_port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = slidelog_testkit::free_port();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {}\n\
                 sentinel monitor m 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds m 60000\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let child = Command::new(redis_server_binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a sentinel (redis-server --sentinel)");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
            if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200))
                && redis::cmd("PING").query::<String>(&mut c).is_ok()
            {
                break;
            }
            assert!(Instant::now() < deadline, "the sentinel did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            port,
            _dir: dir,
            child,
        }
    }
}

impl Drop for LoneSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_frozen_sentinel_master_connection_is_replaced_within_a_second() {
    let redis = RedisServer::start();
    let proxy = FreezingProxy::start(&redis.addr());
    let sentinel = LoneSentinel::start(proxy.port());
    let url = format!("redis+sentinel://127.0.0.1:{}/m", sentinel.port);
    let store =
        SentinelStore::connect_sentinel(&url, common::options_with_timeout("bh_sentinel", TIMEOUT))
            .await
            .expect("connect through the sentinel");
    let took = time_to_recover(&store, || proxy.freeze()).await;
    println!(
        "sentinel: decisions from Redis again {took:?} after the freeze; proxy accepted {}",
        proxy.accepted()
    );
    assert!(took < RECOVERY_BOUND, "recovered only after {took:?}");
}

/// A cluster whose masters announce a proxy's port, so every client
/// connection to a node goes through that node's [`FreezingProxy`].
#[tokio::test]
async fn a_frozen_cluster_node_connection_is_replaced_within_a_second() {
    use slidelog_redis::ClusterStore;
    let cluster = slidelog_testkit::RedisCluster::start_with(3, 0);
    let opts = common::options_with_timeout("bh_cluster", TIMEOUT);
    // The master of the decision's key, found before the ports change.
    let key_master = cluster.master_of_slot(cluster.key_slot(&format!("{}k", opts.key_prefix)));
    let mut proxies = Vec::new();
    for port in cluster.master_ports() {
        let proxy = FreezingProxy::start(&format!("127.0.0.1:{port}"));
        let mut c = cluster.node(port).client();
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-announce-port")
            .arg(proxy.port())
            .query::<()>(&mut c)
            .expect("CONFIG SET cluster-announce-port");
        proxies.push((port, proxy));
    }
    // Every node must hand out the proxies' ports before the store connects.
    let proxy_ports: Vec<u16> = proxies.iter().map(|(_, p)| p.port()).collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    for (port, _) in &proxies {
        loop {
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query(&mut cluster.node(*port).client())
                .unwrap();
            if proxy_ports
                .iter()
                .all(|p| nodes.contains(&format!("127.0.0.1:{p}@")))
            {
                break;
            }
            assert!(Instant::now() < deadline, "ports not announced: {nodes}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let seeds: Vec<String> = proxies.iter().map(|(_, p)| p.addr()).collect();
    let url = format!("redis+cluster://{}", seeds.join(","));
    let store = ClusterStore::connect_cluster(&url, opts)
        .await
        .expect("connect through the proxies");
    let proxy = &proxies.iter().find(|(p, _)| *p == key_master).unwrap().1;
    let took = time_to_recover(&store, || proxy.freeze()).await;
    println!(
        "cluster: decisions from Redis again {took:?} after the key's master froze; \
         its proxy accepted {}",
        proxy.accepted()
    );
    assert!(took < RECOVERY_BOUND, "recovered only after {took:?}");
    assert!(store.connection().replacements() >= 1);
}
