//! A local Redis Sentinel group for tests: 1 master, 1 replica and 3
//! sentinels (`redis-server <conf> --sentinel`, quorum 2) on free loopback
//! ports, each with its own temp dir. Down-after is 1 s and the failover
//! timeout 2 s, so a failover completes in a few seconds. Helpers force a
//! failover (`SENTINEL FAILOVER`), kill the master and restart a server.
//! Everything is killed (and waited on) on drop.

use crate::admin::{info, info_field, is_master, query, replica_link_up, wait_until};
use crate::{RedisServer, free_port, redis_server_binary};
use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The master name the sentinels monitor.
pub const MASTER_NAME: &str = "mymaster";

/// `down-after-milliseconds` of the harness's sentinels.
pub const DOWN_AFTER_MS: u64 = 1_000;

const SETTLE: Duration = Duration::from_secs(30);

/// One sentinel process.
#[derive(Debug)]
struct SentinelProcess {
    port: u16,
    _dir: tempfile::TempDir,
    child: Child,
}

impl SentinelProcess {
    fn start(master_port: u16) -> Self {
        let mut last_error = String::new();
        for _ in 0..10 {
            match Self::try_start(master_port) {
                Ok(s) => return s,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start a sentinel: {last_error}");
    }

    fn try_start(master_port: u16) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let port = free_port();
        let conf = dir.path().join("sentinel.conf");
        // A sentinel rewrites its config file, so it must be a writable file.
        let text = format!(
            "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
             sentinel failover-timeout {MASTER_NAME} 2000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            dir = dir.path().display()
        );
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        let mut child = Command::new(redis_server_binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("sentinel exited with {status}"));
            }
            if query::<String>(port, &redis::cmd("PING")).is_ok() {
                return Ok(Self {
                    port,
                    _dir: dir,
                    child,
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err("sentinel did not answer PING within 10 s".into())
    }
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running Sentinel group that this test started.
#[derive(Debug)]
pub struct SentinelGroup {
    // Sentinels first, so they stop before the servers on drop and do not
    // start a failover while the group is torn down.
    sentinels: Vec<SentinelProcess>,
    servers: Vec<RedisServer>,
    _dirs: [tempfile::TempDir; 2],
    alive: Vec<bool>,
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir for redis-server")
}

impl SentinelGroup {
    /// Starts 1 master, 1 replica and 3 sentinels, and waits until the
    /// replica is in sync and every sentinel knows the replica and the two
    /// other sentinels (so a failover can be agreed on).
    pub fn start() -> Self {
        // Working dirs of our own (they override the one RedisServer passes
        // first): a replica writes the RDB it receives there.
        let dirs = [tempdir(), tempdir()];
        let dir = |i: usize| dirs[i].path().to_str().expect("utf-8 temp path").to_owned();
        let (d0, d1) = (dir(0), dir(1));
        let master =
            RedisServer::start_with_args(&["--repl-diskless-sync-delay", "0", "--dir", &d0]);
        let mport = master.port().to_string();
        let replica = RedisServer::start_with_args(&[
            "--repl-diskless-sync-delay",
            "0",
            "--dir",
            &d1,
            "--replicaof",
            "127.0.0.1",
            &mport,
        ]);
        // Sentinels that first see the replica before it has synced think
        // its link is down and refuse to promote it (NOGOODSLAVE) until
        // their next INFO, 10 s later: start them once it is in sync.
        wait_until("the replica to sync", SETTLE, || {
            replica_link_up(replica.port())
        });
        let sentinels = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| s.spawn(|| SentinelProcess::start(master.port())))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("start sentinel"))
                .collect()
        });
        let group = Self {
            sentinels,
            servers: vec![master, replica],
            _dirs: dirs,
            alive: vec![true, true],
        };
        group.wait_settled();
        group
    }

    /// The sentinels' addresses, `127.0.0.1:PORT`.
    pub fn sentinel_addrs(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect()
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`.
    pub fn url(&self) -> String {
        format!(
            "redis+sentinel://{}/{MASTER_NAME}",
            self.sentinel_addrs().join(",")
        )
    }

    /// The data servers' ports (initial master first).
    pub fn server_ports(&self) -> Vec<u16> {
        self.servers.iter().map(RedisServer::port).collect()
    }

    /// The data server on `port`.
    pub fn server(&self, port: u16) -> &RedisServer {
        &self.servers[self.index(port)]
    }

    /// The master's port as the first answering sentinel reports it.
    pub fn master_port(&self) -> u16 {
        self.sentinels
            .iter()
            .find_map(|s| master_addr(s.port))
            .expect("no sentinel reports the master")
    }

    /// Forces a failover (`SENTINEL FAILOVER`, retried while the sentinel
    /// has no fresh view of a good replica) and waits until every sentinel
    /// reports the new master and it says it is a master. Returns the new
    /// master's port.
    pub fn failover(&self) -> u16 {
        let old = self.master_port();
        let sentinel = self.sentinels[0].port;
        let mut last = String::new();
        let deadline = Instant::now() + SETTLE;
        loop {
            match query::<String>(
                sentinel,
                redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME),
            ) {
                Ok(_) => break,
                // NOGOODSLAVE: the sentinel's INFO of the replica is stale
                // (refreshed every 10 s); INPROG: one is running already.
                Err(e) if Instant::now() < deadline => last = e.to_string(),
                Err(e) => panic!("SENTINEL FAILOVER kept failing: {e} (before: {last})"),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        // Not `wait_settled`: the sentinels turn the old master into a
        // replica only at their next INFO of it, up to 10 s later. Call
        // `wait_settled` before a second failover.
        self.wait_master_change(old)
    }

    /// Kills (SIGKILL) the current master. Returns its port.
    pub fn kill_master(&mut self) -> u16 {
        let port = self.master_port();
        let i = self.index(port);
        self.servers[i].kill();
        self.alive[i] = false;
        port
    }

    /// Waits until every sentinel reports a master other than `old` and that
    /// server says it is a master. Returns its port.
    pub fn wait_master_change(&self, old: u16) -> u16 {
        let mut new = 0;
        wait_until("the sentinels to elect a new master", SETTLE, || {
            let views: Vec<Option<u16>> =
                self.sentinels.iter().map(|s| master_addr(s.port)).collect();
            match views[0] {
                Some(p) if p != old && views.iter().all(|v| *v == Some(p)) && is_master(p) => {
                    new = p;
                    true
                }
                _ => false,
            }
        });
        new
    }

    /// Restarts a killed server on the same port (its data is gone; the
    /// sentinels turn it into a replica of the current master) and waits
    /// until it replicates.
    pub fn restart(&mut self, port: u16) {
        let i = self.index(port);
        self.servers[i].restart();
        self.alive[i] = true;
        self.wait_settled();
    }

    /// Waits until there is one master, every other live server replicates
    /// from it with its link up, and every sentinel agrees on the master and
    /// knows the two other sentinels.
    pub fn wait_settled(&self) {
        wait_until("the sentinel group to settle", SETTLE, || {
            let Some(master) = self.sentinels.first().and_then(|s| master_addr(s.port)) else {
                return false;
            };
            if !is_master(master) {
                return false;
            }
            let replicas_ok = self
                .servers
                .iter()
                .zip(&self.alive)
                .filter(|(s, alive)| **alive && s.port() != master)
                .all(|(s, _)| {
                    replica_link_up(s.port())
                        && info(s.port(), "replication")
                            .and_then(|i| info_field(&i, "master_port"))
                            .is_some_and(|p| p == master.to_string())
                });
            let live_replicas = self.alive.iter().filter(|a| **a).count() - 1;
            replicas_ok
                && self.sentinels.iter().all(|s| {
                    let Some(m) = sentinel_master(s.port) else {
                        return false;
                    };
                    master_addr(s.port) == Some(master)
                        && m.get("num-other-sentinels").map(String::as_str) == Some("2")
                        && m.get("num-slaves")
                            .and_then(|n| n.parse::<usize>().ok())
                            .is_some_and(|n| n >= live_replicas)
                })
        });
    }

    fn index(&self, port: u16) -> usize {
        self.servers
            .iter()
            .position(|s| s.port() == port)
            .unwrap_or_else(|| panic!("no server on port {port}"))
    }
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME` on the sentinel on `port`.
fn master_addr(port: u16) -> Option<u16> {
    let addr: Option<(String, String)> = query(
        port,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME),
    )
    .ok()?;
    addr?.1.parse().ok()
}

/// `SENTINEL MASTER` on the sentinel on `port`, as a field map.
fn sentinel_master(port: u16) -> Option<HashMap<String, String>> {
    let flat: Vec<String> =
        query(port, redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME)).ok()?;
    Some(
        flat.chunks(2)
            .filter_map(|kv| Some((kv.first()?.clone(), kv.get(1)?.clone())))
            .collect(),
    )
}
