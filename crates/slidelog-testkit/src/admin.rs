//! Small synchronous admin helpers shared by the cluster and sentinel
//! harnesses: a bounded connection to one node, `INFO` field parsing, polling
//! with a deadline.

use std::time::{Duration, Instant};

/// Passwords of the servers that require one, by port (a harness registers
/// its nodes' password, so every helper here authenticates without
/// threading it through each call).
static PASSWORDS: parking_lot::Mutex<Vec<(u16, String)>> = parking_lot::const_mutex(Vec::new());

/// Helpers authenticate to the server on `port` with `password`.
pub(crate) fn register_password(port: u16, password: &str) {
    let mut p = PASSWORDS.lock();
    p.retain(|(q, _)| *q != port);
    p.push((port, password.to_owned()));
}

/// Forgets the password of the server on `port`.
pub(crate) fn forget_password(port: u16) {
    let mut p = PASSWORDS.lock();
    p.retain(|(q, _)| *q != port);
}

/// The userinfo part of a URL for `password`: `:password@`, or nothing.
pub(crate) fn url_auth(password: Option<&str>) -> String {
    password.map(|pw| format!(":{pw}@")).unwrap_or_default()
}

/// A synchronous connection to `127.0.0.1:port` whose connect, reads and
/// writes are bounded, so a harness never hangs on a dead or paused node.
pub(crate) fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let password = PASSWORDS
        .lock()
        .iter()
        .find(|(q, _)| *q == port)
        .map(|(_, pw)| pw.clone());
    let auth = url_auth(password.as_deref());
    let client = redis::Client::open(format!("redis://{auth}127.0.0.1:{port}"))?;
    let conn = client.get_connection_with_timeout(Duration::from_millis(500))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    Ok(conn)
}

/// Runs one command on `127.0.0.1:port`.
pub(crate) fn query<T: redis::FromRedisValue>(
    port: u16,
    cmd: &redis::Cmd,
) -> redis::RedisResult<T> {
    let mut conn = connect(port)?;
    cmd.query(&mut conn)
}

/// One `field:value` line of an `INFO` (or `CLUSTER INFO`) reply.
pub(crate) fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines().find_map(|line| {
        let (name, value) = line.trim_end().split_once(':')?;
        (name == field).then(|| value.to_owned())
    })
}

/// `INFO section` of a node, or `None` when it does not answer.
pub(crate) fn info(port: u16, section: &str) -> Option<String> {
    query(port, redis::cmd("INFO").arg(section)).ok()
}

/// Polls `ready` every 20 ms until it holds; panics with `what` after `limit`.
pub(crate) fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        if ready() {
            return;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when the node on `port` reports `role:master`.
pub(crate) fn is_master(port: u16) -> bool {
    info(port, "replication")
        .and_then(|i| info_field(&i, "role"))
        .is_some_and(|r| r == "master")
}

/// True when the replica on `port` has its link to a master up.
pub(crate) fn replica_link_up(port: u16) -> bool {
    info(port, "replication")
        .and_then(|i| info_field(&i, "master_link_status"))
        .is_some_and(|s| s == "up")
}
