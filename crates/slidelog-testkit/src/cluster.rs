//! A local Redis Cluster for tests: 3 masters with 1 replica each (by
//! default), six `redis-server` (or `valkey-server`) child processes on free loopback ports, each
//! with its own temp dir, joined as `redis-cli --cluster create` would
//! (slots, config epochs, `CLUSTER MEET`, `CLUSTER REPLICATE`) and waited on until every node says `cluster_state:ok`, agrees on the slot
//! map, and every replica's link is up. Helpers trigger a manual failover
//! (`CLUSTER FAILOVER` on a replica), kill and restart a node. Everything is
//! killed (and waited on) on drop.
//!
//! Timeouts are short (node timeout 1 s) so that a killed master is replaced
//! in a few seconds; the diskless sync delay is 0 so replicas sync at once.

use crate::admin::{self, info_field, is_master, query, replica_link_up, wait_until};
use crate::fleet::Fleet;
use crate::{RedisServer, ServerKind, free_port};
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

/// The cluster node timeout the harness sets, in ms: how long a master must
/// be unreachable before the cluster marks it failed.
pub const CLUSTER_NODE_TIMEOUT_MS: u64 = 1_000;

/// How long the harness waits for the cluster to settle before panicking.
const SETTLE: Duration = Duration::from_secs(30);

/// One node as `CLUSTER NODES` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node id (40 hex chars).
    pub id: String,
    /// Its client port on 127.0.0.1.
    pub port: u16,
    /// True for a master.
    pub is_master: bool,
    /// True when the viewing node flags it `fail` or `fail?`.
    pub failed: bool,
    /// The id of its master, for a replica.
    pub master_id: Option<String>,
    /// The slot ranges it serves (masters).
    pub slots: Vec<RangeInclusive<u16>>,
}

/// A running local Redis Cluster that this test started.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Fleet,
    // Each node's nodes.conf lives here (see `start_node`); dropped after
    // the nodes.
    _conf_dirs: Vec<tempfile::TempDir>,
    masters: usize,
    password: Option<String>,
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        if self.password.is_some() {
            for port in self.ports() {
                admin::forget_password(port);
            }
        }
    }
}

impl RedisCluster {
    /// Starts 3 masters with 1 replica each and waits until the cluster is
    /// healthy (a few seconds).
    pub fn start() -> Self {
        Self::start_with(3, 1)
    }

    /// Starts `masters` masters with `replicas` replicas each.
    pub fn start_with(masters: usize, replicas: usize) -> Self {
        Self::start_kind_with(ServerKind::from_env(), masters, replicas)
    }

    /// Starts 3 masters with 1 replica each, every node a server of `kind`
    /// (a Valkey cluster with [`ServerKind::Valkey`]).
    pub fn start_kind(kind: ServerKind) -> Self {
        Self::start_kind_with(kind, 3, 1)
    }

    /// Starts `masters` masters with `replicas` replicas each, of `kind`.
    pub fn start_kind_with(kind: ServerKind, masters: usize, replicas: usize) -> Self {
        Self::start_inner(kind, masters, replicas, None, &|| Vec::new())
    }

    /// Starts `masters` masters with `replicas` replicas each, every node
    /// with the extra arguments `node_args()` returns for it (called once
    /// per node: e.g. TLS options with a port of its own).
    pub fn start_with_node_args(
        masters: usize,
        replicas: usize,
        node_args: &(dyn Fn() -> Vec<String> + Sync),
    ) -> Self {
        Self::start_inner(ServerKind::from_env(), masters, replicas, None, node_args)
    }

    /// Starts 3 masters with 1 replica each that require `password`
    /// (`requirepass`, and `masterauth` for the replicas).
    pub fn start_with_password(password: &str) -> Self {
        Self::start_inner(ServerKind::from_env(), 3, 1, Some(password), &|| Vec::new())
    }

    fn start_inner(
        kind: ServerKind,
        masters: usize,
        replicas: usize,
        password: Option<&str>,
        node_args: &(dyn Fn() -> Vec<String> + Sync),
    ) -> Self {
        assert!(masters >= 1, "a cluster needs at least one master");
        let count = masters * (1 + replicas);
        // Fresh nodes on fresh ports when joining them fails: a node whose
        // ports a parallel test's killed node held a moment ago can hear
        // from that node's cluster before it joins ours (seen once as "Node
        // config epoch is already non-zero").
        let mut attempt = 0;
        let (nodes, conf_dirs) = loop {
            attempt += 1;
            let (nodes, conf_dirs): (Vec<RedisServer>, Vec<tempfile::TempDir>) =
                std::thread::scope(|s| {
                    let handles: Vec<_> = (0..count)
                        .map(|_| s.spawn(move || start_node(kind, password, node_args())))
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().expect("start cluster node"))
                        .unzip()
                });
            if let Some(pw) = password {
                for node in &nodes {
                    admin::register_password(node.port(), pw);
                }
            }
            match create_cluster(&nodes, masters) {
                Ok(()) => break (nodes, conf_dirs),
                Err(e) if attempt < 3 => {
                    eprintln!("joining the cluster nodes failed ({e}); starting fresh nodes");
                }
                Err(e) => panic!("joining the cluster nodes failed 3 times; last: {e}"),
            }
        };
        let cluster = Self {
            password: password.map(str::to_owned),
            _conf_dirs: conf_dirs,
            nodes: Fleet::new(nodes, "cluster node"),
            masters,
        };
        cluster.wait_healthy();
        cluster
    }

    /// Which server every node is.
    pub fn kind(&self) -> ServerKind {
        self.nodes.all()[0].kind()
    }

    /// The seed addresses, `127.0.0.1:PORT`, of every node (dead ones too).
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.all().iter().map(RedisServer::addr).collect()
    }

    /// `redis+cluster://[:password@]127.0.0.1:P1,127.0.0.1:P2,…` naming
    /// every node.
    pub fn url(&self) -> String {
        let auth = admin::url_auth(self.password.as_deref());
        format!("redis+cluster://{auth}{}", self.seeds().join(","))
    }

    /// The ports of every node.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.all().iter().map(RedisServer::port).collect()
    }

    /// The node on `port`.
    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes.server(port)
    }

    /// The topology as a live node sees it.
    pub fn topology(&self) -> Vec<ClusterNode> {
        for port in self.live_ports() {
            if let Some(nodes) = cluster_nodes(port) {
                return nodes;
            }
        }
        panic!("no live cluster node answers CLUSTER NODES");
    }

    /// The ports of the current masters that serve slots.
    pub fn master_ports(&self) -> Vec<u16> {
        self.topology()
            .into_iter()
            .filter(|n| n.is_master && !n.failed && !n.slots.is_empty())
            .map(|n| n.port)
            .collect()
    }

    /// A live replica of the master on `master_port`.
    pub fn replica_of(&self, master_port: u16) -> Option<u16> {
        let topology = self.topology();
        let master = topology.iter().find(|n| n.port == master_port)?;
        topology
            .iter()
            .filter(|n| n.master_id.as_deref() == Some(master.id.as_str()) && !n.failed)
            .map(|n| n.port)
            .find(|p| self.nodes.is_alive(*p))
    }

    /// The hash slot of `key` (asked of the cluster: `CLUSTER KEYSLOT`).
    pub fn key_slot(&self, key: &str) -> u16 {
        let port = self.live_ports()[0];
        query(port, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key)).expect("CLUSTER KEYSLOT")
    }

    /// The port of the master serving `slot`.
    pub fn master_of_slot(&self, slot: u16) -> u16 {
        self.topology()
            .into_iter()
            .find(|n| n.is_master && !n.failed && n.slots.iter().any(|r| r.contains(&slot)))
            .map(|n| n.port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// A manual failover: `CLUSTER FAILOVER` on the replica on
    /// `replica_port`, then waits until it is the master everyone agrees on
    /// and the old master replicates from it. Returns how long that took.
    pub fn failover(&self, replica_port: u16) -> Duration {
        let started = Instant::now();
        let _: String =
            query(replica_port, redis::cmd("CLUSTER").arg("FAILOVER")).expect("CLUSTER FAILOVER");
        wait_until("the replica to become master", SETTLE, || {
            is_master(replica_port)
        });
        self.wait_healthy();
        started.elapsed()
    }

    /// Kills (SIGKILL) the node on `port` and waits for the process to exit.
    pub fn kill(&mut self, port: u16) {
        self.nodes.kill(port);
    }

    /// Waits until the node on `port` is a master serving slots in the view
    /// of every live node (after a failover) and the cluster is healthy.
    pub fn wait_promoted(&self, port: u16) -> Duration {
        let started = Instant::now();
        wait_until("the replica to be promoted", SETTLE, || is_master(port));
        self.wait_healthy();
        started.elapsed()
    }

    /// Restarts a killed node on the same port and dir (it keeps its
    /// `nodes.conf`, so it rejoins; its data is gone) and waits until the
    /// cluster is healthy again.
    pub fn restart(&mut self, port: u16) {
        self.nodes.restart(port);
        self.wait_healthy();
    }

    /// Waits until every live node says `cluster_state:ok`, all live nodes
    /// agree on which master serves which slots, every slot is served by a
    /// live master, and every live replica's link is up.
    pub fn wait_healthy(&self) {
        let live = self.live_ports();
        wait_until("the cluster to be healthy", SETTLE, || self.healthy(&live));
    }

    fn healthy(&self, live: &[u16]) -> bool {
        let mut first_map: Option<BTreeMap<u16, u16>> = None;
        for &port in live {
            let Some(ci) = query::<String>(port, redis::cmd("CLUSTER").arg("INFO")).ok() else {
                return false;
            };
            if info_field(&ci, "cluster_state").as_deref() != Some("ok") {
                return false;
            }
            let Some(nodes) = cluster_nodes(port) else {
                return false;
            };
            let me_is_master = is_master(port);
            if !me_is_master && !replica_link_up(port) {
                return false;
            }
            // Slot range start -> master port; every master serving slots
            // must be live and not failed.
            let mut map = BTreeMap::new();
            let mut served = 0usize;
            let mut masters = 0usize;
            for n in nodes.iter().filter(|n| n.is_master && !n.slots.is_empty()) {
                if n.failed || !live.contains(&n.port) {
                    return false;
                }
                masters += 1;
                for r in &n.slots {
                    map.insert(*r.start(), n.port);
                    served += r.len();
                }
            }
            if served != 16384 || masters != self.masters {
                return false;
            }
            match &first_map {
                None => first_map = Some(map),
                Some(m) if *m != map => return false,
                Some(_) => {}
            }
        }
        true
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes.live().map(RedisServer::port).collect()
    }
}

/// Joins the nodes into one cluster, as `redis-cli --cluster create` does,
/// but by hand: redis-cli 7.0 sends `CLUSTER MEET` without the bus port,
/// and the default bus port (port + 10000) can exceed 65535 for an
/// ephemeral port. Nodes `0..masters` get the slots in equal ranges; the
/// rest replicate them in turn.
fn create_cluster(nodes: &[RedisServer], masters: usize) -> Result<(), String> {
    let cmd = |port: u16, c: &mut redis::Cmd| -> Result<(), String> {
        query::<redis::Value>(port, c)
            .map(|_| ())
            .map_err(|e| format!("{c:?} on {port}: {e}"))
    };
    for (i, node) in nodes.iter().take(masters).enumerate() {
        let first = 16384 * i / masters;
        let last = 16384 * (i + 1) / masters - 1;
        cmd(
            node.port(),
            redis::cmd("CLUSTER")
                .arg("ADDSLOTSRANGE")
                .arg(first)
                .arg(last),
        )?;
    }
    // Distinct config epochs, as redis-cli assigns, so no collision has to
    // be resolved before the slot map is stable.
    for (i, node) in nodes.iter().enumerate() {
        cmd(
            node.port(),
            redis::cmd("CLUSTER").arg("SET-CONFIG-EPOCH").arg(i + 1),
        )?;
    }
    let first = nodes[0].port();
    for node in &nodes[1..] {
        let bus: u16 = query(
            node.port(),
            redis::cmd("CONFIG").arg("GET").arg("cluster-port"),
        )
        .map(|(_, v): (String, String)| v.parse().expect("cluster-port"))
        .expect("CONFIG GET cluster-port");
        cmd(
            first,
            redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(node.port())
                .arg(bus),
        )?;
    }
    let ids: Vec<String> = nodes
        .iter()
        .map(|n| query(n.port(), redis::cmd("CLUSTER").arg("MYID")).expect("CLUSTER MYID"))
        .collect();
    // A replica can only follow a master it knows: wait for full mesh.
    wait_full_mesh(nodes, &ids)?;
    for (k, node) in nodes.iter().enumerate().skip(masters) {
        let master = (k - masters) % masters;
        cmd(
            node.port(),
            redis::cmd("CLUSTER").arg("REPLICATE").arg(&ids[master]),
        )?;
    }
    Ok(())
}

/// Waits until every node knows exactly the nodes of `ids`. An error (the
/// caller starts fresh nodes) when that does not happen within [`SETTLE`]:
/// a node on ports that a parallel test's killed node held a moment ago can
/// be met by that node's cluster and then knows more nodes than ours.
fn wait_full_mesh(nodes: &[RedisServer], ids: &[String]) -> Result<(), String> {
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let sizes: Vec<Option<usize>> = nodes
            .iter()
            .map(|n| {
                cluster_nodes(n.port())
                    .filter(|view| ids.iter().all(|id| view.iter().any(|v| &v.id == id)))
                    .map(|view| view.len())
            })
            .collect();
        if sizes.iter().all(|n| *n == Some(nodes.len())) {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "no full mesh after {SETTLE:?}: nodes known by each (None: not all of ours) {sizes:?}"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Starts one cluster-enabled node: its own cluster bus port (the default,
/// port + 10000, can exceed 65535 for an ephemeral port), and its
/// working dir (with `nodes.conf`) in a temp dir of ours, which outlives a
/// kill so a restarted node rejoins as itself.
fn start_node(
    kind: ServerKind,
    password: Option<&str>,
    extra: Vec<String>,
) -> (RedisServer, tempfile::TempDir) {
    // The bus port, like the client port, was free a moment ago and can be
    // taken by a parallel test: every attempt gets fresh ports and a fresh
    // nodes.conf.
    let mut last_error = String::new();
    for _ in 0..10 {
        match try_start_node(kind, password, &extra) {
            Ok(node) => return node,
            Err(e) => last_error = e,
        }
    }
    panic!("could not start a cluster node: {last_error}");
}

fn try_start_node(
    kind: ServerKind,
    password: Option<&str>,
    extra: &[String],
) -> Result<(RedisServer, tempfile::TempDir), String> {
    let conf_dir = tempfile::tempdir().expect("temp dir for nodes.conf");
    let dir = conf_dir.path().to_str().expect("utf-8 temp path");
    let conf = format!("{dir}/nodes.conf");
    let bus = free_port().to_string();
    let timeout = CLUSTER_NODE_TIMEOUT_MS.to_string();
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        // Our own dir (it overrides the one RedisServer passes first): a
        // replica writes the RDB it receives there.
        "--dir",
        dir,
        "--cluster-config-file",
        &conf,
        "--cluster-port",
        &bus,
        "--cluster-node-timeout",
        &timeout,
        // Promote a replica however stale it is: a test kills masters.
        "--cluster-replica-validity-factor",
        "0",
        "--repl-diskless-sync-delay",
        "0",
    ];
    if let Some(pw) = password {
        args.extend(["--requirepass", pw, "--masterauth", pw]);
    }
    args.extend(extra.iter().map(String::as_str));
    let server = RedisServer::try_start_kind_with_args(kind, &args, 1)?;
    Ok((server, conf_dir))
}

/// `CLUSTER NODES` of the node on `port`, parsed; `None` when it does not
/// answer.
pub fn cluster_nodes(port: u16) -> Option<Vec<ClusterNode>> {
    let text: String = query(port, redis::cmd("CLUSTER").arg("NODES")).ok()?;
    Some(text.lines().filter_map(parse_node_line).collect())
}

fn parse_node_line(line: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    let addr = fields[1].split(['@', ',']).next()?;
    let port = addr.rsplit_once(':')?.1.parse().ok()?;
    let flags: Vec<&str> = fields[2].split(',').collect();
    let slots = fields[8..]
        .iter()
        // Importing/migrating markers look like `[slot->-id]`: not served.
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some(a.parse().ok()?..=b.parse().ok()?),
            None => {
                let one: u16 = s.parse().ok()?;
                Some(one..=one)
            }
        })
        .collect();
    Some(ClusterNode {
        id: fields[0].to_owned(),
        port,
        is_master: flags.contains(&"master"),
        failed: flags.contains(&"fail") || flags.contains(&"fail?"),
        master_id: (fields[3] != "-").then(|| fields[3].to_owned()),
        slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cluster_nodes_lines() {
        let n = parse_node_line(
            "71be5fe 127.0.0.1:17001@27001 myself,master - 0 1795981355000 1 connected 0-5460 7000",
        )
        .unwrap();
        assert_eq!(n.port, 17001);
        assert!(n.is_master && !n.failed);
        assert_eq!(n.slots, vec![0..=5460, 7000..=7000]);
        let r = parse_node_line(
            "588469e 127.0.0.1:17004@27004 slave,fail 71be5fe 0 1795981356381 1 disconnected",
        )
        .unwrap();
        assert!(!r.is_master && r.failed);
        assert_eq!(r.master_id.as_deref(), Some("71be5fe"));
    }
}
