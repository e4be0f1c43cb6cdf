//! A local Redis Sentinel group for tests: 1 master, 1 replica and 3
//! sentinels (`redis-server <conf> --sentinel`, quorum 2) on free loopback
//! ports, each with its own temp dir. Down-after is 1 s and the failover
//! timeout 2 s, so a failover completes in a few seconds. Helpers force a
//! failover (`SENTINEL FAILOVER`), kill the master and restart a server.
//! Everything is killed (and waited on) on drop.

use crate::admin::{info, info_field, is_master, query, replica_link_up, wait_until};
use crate::fleet::Fleet;
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
    fn start(master_port: u16, password: Option<&str>) -> Self {
        let mut last_error = String::new();
        for _ in 0..10 {
            match Self::try_start(master_port, password) {
                Ok(s) => return s,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start a sentinel: {last_error}");
    }

    fn try_start(master_port: u16, password: Option<&str>) -> Result<Self, String> {
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
        let text = match password {
            Some(pw) => format!("{text}sentinel auth-pass {MASTER_NAME} {pw}\n"),
            None => text,
        };
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
            // Its own process, not another test's server on a port taken
            // between free_port and this bind.
            let info = query::<String>(port, redis::cmd("INFO").arg("server"));
            if info.is_ok_and(|info| crate::redis_server::is_process(&info, child.id())) {
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
    servers: Fleet,
    _dirs: [tempfile::TempDir; 2],
    password: Option<String>,
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        if self.password.is_some() {
            for port in self.server_ports() {
                crate::admin::forget_password(port);
            }
        }
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir for redis-server")
}

impl SentinelGroup {
    /// Starts 1 master, 1 replica and 3 sentinels, and waits until the
    /// replica is in sync and every sentinel knows the replica and the two
    /// other sentinels (so a failover can be agreed on).
    pub fn start() -> Self {
        Self::start_inner(None, [&[], &[]])
    }

    /// The same group with data servers that require `password`
    /// (`requirepass`, `masterauth`, and `auth-pass` in the sentinels).
    pub fn start_with_password(password: &str) -> Self {
        Self::start_inner(Some(password), [&[], &[]])
    }

    /// The same group with extra arguments for the first master and for the
    /// replica (e.g. `--loadmodule` on one or both).
    pub fn start_with_server_args(master: &[&str], replica: &[&str]) -> Self {
        Self::start_inner(None, [master, replica])
    }

    fn start_inner(password: Option<&str>, extra: [&[&str]; 2]) -> Self {
        let auth: Vec<&str> = match password {
            Some(pw) => vec!["--requirepass", pw, "--masterauth", pw],
            None => vec![],
        };
        // Working dirs of our own (they override the one RedisServer passes
        // first): a replica writes the RDB it receives there.
        let dirs = [tempdir(), tempdir()];
        let dir = |i: usize| dirs[i].path().to_str().expect("utf-8 temp path").to_owned();
        let (d0, d1) = (dir(0), dir(1));
        let mut args = vec!["--repl-diskless-sync-delay", "0", "--dir", &d0];
        args.extend(&auth);
        args.extend(extra[0]);
        let master = RedisServer::start_with_args(&args);
        let mport = master.port().to_string();
        let mut args = vec!["--repl-diskless-sync-delay", "0", "--dir", &d1];
        args.extend(&auth);
        args.extend(extra[1]);
        args.extend(["--replicaof", "127.0.0.1", &mport]);
        let replica = RedisServer::start_with_args(&args);
        if let Some(pw) = password {
            crate::admin::register_password(master.port(), pw);
            crate::admin::register_password(replica.port(), pw);
        }
        // Sentinels that first see the replica before it has synced think
        // its link is down and refuse to promote it (NOGOODSLAVE) until
        // their next INFO, 10 s later: start them once it is in sync.
        wait_until("the replica to sync", SETTLE, || {
            replica_link_up(replica.port())
        });
        let sentinels = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| s.spawn(|| SentinelProcess::start(master.port(), password)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("start sentinel"))
                .collect()
        });
        let group = Self {
            sentinels,
            servers: Fleet::new(vec![master, replica], "server"),
            _dirs: dirs,
            password: password.map(str::to_owned),
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

    /// `redis+sentinel://[:password@]127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`
    /// (the password is the data servers'; the sentinels need none).
    pub fn url(&self) -> String {
        let auth = crate::admin::url_auth(self.password.as_deref());
        format!(
            "redis+sentinel://{auth}{}/{MASTER_NAME}",
            self.sentinel_addrs().join(",")
        )
    }

    /// The data servers' ports (initial master first).
    pub fn server_ports(&self) -> Vec<u16> {
        self.servers.all().iter().map(RedisServer::port).collect()
    }

    /// The data server on `port`.
    pub fn server(&self, port: u16) -> &RedisServer {
        self.servers.server(port)
    }

    /// The master's port as the first answering sentinel reports it.
    pub fn master_port(&self) -> u16 {
        self.sentinels
            .iter()
            .find_map(|s| master_addr(s.port))
            .expect("no sentinel reports the master")
    }

    /// Forces a failover (`SENTINEL FAILOVER`, retried while the sentinel
    /// has no fresh view of a good replica, and asked again when the
    /// failover aborts) and waits until every sentinel reports the new
    /// master and it says it is a master. Returns the new master's port.
    pub fn failover(&self) -> u16 {
        let old = self.master_port();
        let deadline = Instant::now() + SETTLE;
        loop {
            self.request_failover(deadline);
            // A failover that overran the 2 s failover timeout on a loaded
            // host is aborted by the sentinel, and the master stays.
            if let Some(new) = self.wait_failover(old, deadline) {
                return new;
            }
        }
    }

    /// `SENTINEL FAILOVER` on the first sentinel, until it is accepted.
    fn request_failover(&self, deadline: Instant) {
        let sentinel = self.sentinels[0].port;
        let mut last = String::new();
        loop {
            match query::<String>(
                sentinel,
                redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME),
            ) {
                Ok(_) => return,
                // NOGOODSLAVE: the sentinel's INFO of the replica is stale
                // (refreshed every 10 s); INPROG: one is running already.
                Err(e) if Instant::now() < deadline => last = e.to_string(),
                Err(e) => panic!("SENTINEL FAILOVER kept failing: {e} (before: {last})"),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The new master once every sentinel reports one other than `old` and
    /// it says it is a master ([`SentinelGroup::wait_master_change`]);
    /// `None` when the first sentinel has run no failover for a second and
    /// still names `old` (the failover aborted). Not `wait_settled`: the
    /// sentinels turn the old master into a replica only at their next INFO
    /// of it, up to 10 s later. Call `wait_settled` before a second failover.
    fn wait_failover(&self, old: u16, deadline: Instant) -> Option<u16> {
        let sentinel = self.sentinels[0].port;
        let mut idle_since: Option<Instant> = None;
        while Instant::now() < deadline {
            if let Some(new) = self.new_master(old) {
                return Some(new);
            }
            let running = sentinel_master(sentinel).is_none_or(|m| {
                m.get("flags")
                    .is_some_and(|f| f.contains("failover_in_progress"))
            });
            if running || master_addr(sentinel) != Some(old) {
                idle_since = None;
            } else if idle_since.get_or_insert_with(Instant::now).elapsed() > Duration::from_secs(1)
            {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("timed out after {SETTLE:?} waiting for the sentinels to elect a new master");
    }

    /// The master every sentinel reports, when it is not `old` and it says
    /// it is a master.
    fn new_master(&self, old: u16) -> Option<u16> {
        let views: Vec<Option<u16>> = self.sentinels.iter().map(|s| master_addr(s.port)).collect();
        match views[0] {
            Some(p) if p != old && views.iter().all(|v| *v == Some(p)) && is_master(p) => Some(p),
            _ => None,
        }
    }

    /// Kills (SIGKILL) the current master. Returns its port.
    pub fn kill_master(&mut self) -> u16 {
        let port = self.master_port();
        self.servers.kill(port);
        port
    }

    /// Waits until every sentinel reports a master other than `old` and that
    /// server says it is a master. Returns its port.
    pub fn wait_master_change(&self, old: u16) -> u16 {
        let mut new = None;
        wait_until("the sentinels to elect a new master", SETTLE, || {
            new = self.new_master(old);
            new.is_some()
        });
        new.expect("wait_until returns once it holds")
    }

    /// Restarts a killed server on the same port (its data is gone; the
    /// sentinels turn it into a replica of the current master) and waits
    /// until it replicates.
    pub fn restart(&mut self, port: u16) {
        self.servers.restart(port);
        self.wait_settled();
    }

    /// Waits until there is one master, every other live server replicates
    /// from it with its link up, and every sentinel agrees on the master and
    /// knows the two other sentinels.
    pub fn wait_settled(&self) {
        let deadline = Instant::now() + SETTLE;
        while let Some(problem) = self.unsettled() {
            assert!(
                Instant::now() < deadline,
                "timed out after {SETTLE:?} waiting for the sentinel group to settle: {problem}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What keeps the group from being settled, if anything.
    fn unsettled(&self) -> Option<String> {
        let Some(master) = self.sentinels.first().and_then(|s| master_addr(s.port)) else {
            return Some("the first sentinel names no master".into());
        };
        if !is_master(master) {
            return Some(format!(
                "{master}, which the first sentinel names, is no master"
            ));
        }
        for s in self.servers.live().filter(|s| s.port() != master) {
            let replicates = info(s.port(), "replication")
                .and_then(|i| info_field(&i, "master_port"))
                .is_some_and(|p| p == master.to_string());
            if !replica_link_up(s.port()) || !replicates {
                return Some(format!(
                    "{} does not replicate {master} with its link up",
                    s.port()
                ));
            }
        }
        let live_replicas = self.servers.live().count() - 1;
        self.sentinels.iter().find_map(|s| {
            let Some(m) = sentinel_master(s.port) else {
                return Some(format!("sentinel {} does not answer", s.port));
            };
            let slaves = m.get("num-slaves").and_then(|n| n.parse::<usize>().ok());
            let settled = master_addr(s.port) == Some(master)
                && m.get("num-other-sentinels").map(String::as_str) == Some("2")
                && slaves.is_some_and(|n| n >= live_replicas);
            (!settled).then(|| format!("sentinel {} does not agree yet: {m:?}", s.port))
        })
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
