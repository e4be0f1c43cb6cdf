//! Per-node health of a Redis Cluster store: the outage mode of one master
//! (docs/design.md §6).
//!
//! When one master is down, redis-rs keeps trying it inside every call for
//! its slots (reconnecting, redirected by the masters that are up, sleeping
//! between retries), so each such call waits the whole per-call timeout,
//! while the cluster as a whole still answers a `PING`. This part makes
//! those calls answer at once, and keeps every other master's keys exact:
//!
//! - The store keeps its own map of which master serves which slot
//!   (`CLUSTER SLOTS` from a master that is up), read when a call fails and
//!   in every probe round, so a failover or a resharding is followed.
//! - A decision (or reset) for a key whose call failed with a connection
//!   error, or got no answer within half the per-call timeout, makes the
//!   key's master *suspect*: ONE background probe per master asks it. First
//!   a `PING` on a fresh TCP connection (refused or reset: the node is down,
//!   *refused*; no answer: down, *silent*, a frozen process), then `CLUSTER
//!   INFO` over the cluster connection (`cluster_state:ok`: up; no answer
//!   while the fresh connection got one: our connection is black-holed, so
//!   the whole cluster connection is replaced, once, [`crate::heal`]).
//! - While a master is known down, a call for one of its slots fails at once
//!   with a transient error naming it (the limiter's policy then answers:
//!   fail-open degraded, fail-closed an error), never reaching redis-rs.
//! - The probe retries with backoff (50 ms doubling to 500 ms), re-reading
//!   the slot map each round: when the master answers again (or its slots
//!   moved to a promoted replica) its slots are decided exactly again, after
//!   the probe's `CLUSTER INFO` has made redis-rs reconnect to it.
//! - A `PING` without a key (the limiter's health probe, readiness) asks
//!   every master that is not known down: the store as a whole is down only
//!   when every master is (then the limiter's own outage mode takes over).
//!   While some master is down, a `PING` answered less than
//!   [`PING_REUSE`] ago is answered again without asking.

use crate::heal::Healing;
use parking_lot::{Mutex, RwLock};
use redis::cluster_async::ClusterConnection as RawClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{ErrorKind, RedisError, RedisResult, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The number of hash slots of a Redis Cluster.
const SLOTS: usize = 16_384;
/// No master serves the slot (in this store's map).
const NO_NODE: u16 = u16::MAX;
/// The probe's first wait after a failed round.
pub const FIRST_RETRY: Duration = Duration::from_millis(50);
/// The probe's longest wait between two rounds: with the probe's own bound
/// it keeps "exact again" under a second after the master returns.
pub const LAST_RETRY: Duration = Duration::from_millis(500);
/// How often a call that made its master suspect looks whether the probe
/// found it down (then it ends at once with that error).
pub const RECHECK: Duration = Duration::from_millis(2);
/// While some master is down, how long an answered keyless `PING` is
/// answered again without asking the masters (every call for a down
/// master's slot makes the limiter probe the store).
pub const PING_REUSE: Duration = Duration::from_millis(50);

/// Why a master is known down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownCause {
    /// It refused or reset a connection (the process is gone, or not
    /// listening): the error's text.
    Refused(String),
    /// It accepts connections but cannot serve now (`LOADING`,
    /// `cluster_state:fail`, …): what it answered.
    Unavailable(String),
    /// It did not answer within the probe timeout.
    Silent,
}

impl std::fmt::Display for DownCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(e) => write!(f, "refused: {e}"),
            Self::Unavailable(e) => write!(f, "cannot serve: {e}"),
            Self::Silent => f.write_str("silent: no answer within the probe timeout"),
        }
    }
}

/// A master the cluster store knows down
/// ([`ClusterConnection::nodes_down`](super::ClusterConnection::nodes_down)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDown {
    /// Its address, `host:port`, as the cluster announces it.
    pub addr: String,
    /// How many slots it serves (all answered by policy meanwhile).
    pub slots: usize,
    /// How long it has been known down.
    pub for_: Duration,
    /// Why.
    pub cause: DownCause,
}

/// The health of every master of one cluster store. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Nodes {
    shared: Arc<Shared>,
}

struct Shared {
    /// Read on every call: true while some master is known down.
    any_down: AtomicBool,
    /// True while a suspect call's task reads the slot map.
    refreshing: AtomicBool,
    map: RwLock<Topology>,
    /// A call unanswered this long makes its master suspect.
    suspect_after: Duration,
    probe_timeout: Duration,
    /// When every master that is up last answered a keyless `PING`.
    pinged: Mutex<Option<Instant>>,
    kind: &'static str,
}

/// This store's view of the slot map, and each master's health.
#[derive(Default)]
struct Topology {
    /// Slot -> index in `nodes` ([`NO_NODE`]); empty until first read.
    owner: Vec<u16>,
    nodes: Vec<Node>,
}

struct Node {
    host: String,
    port: u16,
    /// One slot it serves (to route a probe to it through redis-rs).
    slot: u16,
    slots: usize,
    down: Option<(Instant, DownCause)>,
    probing: bool,
}

impl Node {
    fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl Topology {
    fn owner_of(&self, slot: u16) -> Option<&Node> {
        let i = *self.owner.get(usize::from(slot))?;
        self.nodes.get(usize::from(i))
    }

    fn node_mut(&mut self, host: &str, port: u16) -> Option<&mut Node> {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port && n.host == host)
    }
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nodes")
            .field("down", &self.down())
            .finish_non_exhaustive()
    }
}

impl Nodes {
    /// Every master up, the slot map not read yet.
    pub(crate) fn new(timeout: Duration, probe_timeout: Duration, kind: &'static str) -> Self {
        Self {
            shared: Arc::new(Shared {
                any_down: AtomicBool::new(false),
                refreshing: AtomicBool::new(false),
                map: RwLock::new(Topology::default()),
                suspect_after: timeout / 2,
                probe_timeout,
                pinged: Mutex::new(None),
                kind,
            }),
        }
    }

    /// How long a call may go unanswered before its master is suspect.
    pub(crate) fn suspect_after(&self) -> Duration {
        self.shared.suspect_after
    }

    /// The masters known down now.
    pub(crate) fn down(&self) -> Vec<NodeDown> {
        let map = self.shared.map.read();
        map.nodes
            .iter()
            .filter_map(|n| {
                let (since, cause) = n.down.as_ref()?;
                Some(NodeDown {
                    addr: n.addr(),
                    slots: n.slots,
                    for_: since.elapsed(),
                    cause: cause.clone(),
                })
            })
            .collect()
    }

    /// Fills the node fields of `stats`: the masters in the slot map, how
    /// many are known down, and the longest time one has been.
    pub(crate) fn fill(&self, stats: &mut slidelog_core::StoreStats) {
        let map = self.shared.map.read();
        let masters = map.nodes.iter().filter(|n| n.slots > 0);
        stats.nodes = u32::try_from(masters.count()).unwrap_or(u32::MAX);
        let down = map.nodes.iter().filter_map(|n| n.down.as_ref());
        let (mut count, mut longest) = (0u32, Duration::ZERO);
        for (since, _) in down {
            count = count.saturating_add(1);
            longest = longest.max(since.elapsed());
        }
        stats.nodes_down = count;
        stats.longest_node_down_ms = u64::try_from(longest.as_millis()).unwrap_or(u64::MAX);
    }

    /// The error a call for `slot` fails with at once, when its master is
    /// known down; `None` when the call should go to the cluster.
    pub(crate) fn refuse(&self, slot: u16) -> Option<RedisError> {
        if !self.shared.any_down.load(Ordering::Acquire) {
            return None;
        }
        let map = self.shared.map.read();
        let node = map.owner_of(slot)?;
        let (since, cause) = node.down.as_ref()?;
        let kind = match cause {
            DownCause::Refused(_) => std::io::ErrorKind::ConnectionRefused,
            _ => std::io::ErrorKind::NotConnected,
        };
        Some(RedisError::from(std::io::Error::new(
            kind,
            format!(
                "cluster master {} of slot {slot} known down for {} ms ({cause}); \
                 answered without calling it while a background probe retries it",
                node.addr(),
                since.elapsed().as_millis()
            ),
        )))
    }

    /// The call for `slot` failed with a connection error or went
    /// unanswered: probe its master (one probe per master), which marks it
    /// down or finds it fine.
    pub(crate) fn suspect(&self, slot: u16, healing: &Healing<RawClusterConnection>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            // One probe per master: nothing to do while it runs.
            let map = self.shared.map.read();
            if map.owner_of(slot).is_some_and(|n| n.probing) {
                return;
            }
        }
        let (weak, healing) = (Arc::downgrade(&self.shared), healing.clone());
        runtime.spawn(async move {
            let Some(shared) = weak.upgrade() else { return };
            // The map may be stale (a failover, a resharding): read it
            // first, once for a burst of failing calls.
            if !shared.refreshing.swap(true, Ordering::AcqRel) {
                refresh(&shared, &mut healing.current()).await;
                shared.refreshing.store(false, Ordering::Release);
            }
            let target = {
                let mut map = shared.map.write();
                let Some(&i) = map.owner.get(usize::from(slot)) else {
                    return;
                };
                match map.nodes.get_mut(usize::from(i)) {
                    Some(node) if !node.probing => {
                        node.probing = true;
                        (node.host.clone(), node.port)
                    }
                    _ => return,
                }
            };
            drop(shared);
            probe(weak, healing, target).await;
        });
    }

    /// A keyless `PING`: every master not known down (nor being probed) is
    /// asked, each within half the timeout, and must answer; one that does
    /// not is made suspect (so a master down since before any call is found
    /// too). An error when no master is known up. `None` when the slot map
    /// cannot be read (the caller sends the `PING` as it is).
    pub(crate) async fn ping(
        &self,
        healing: &Healing<RawClusterConnection>,
    ) -> Option<RedisResult<Value>> {
        let shared = &self.shared;
        let conn = healing.current();
        if shared.map.read().nodes.is_empty() {
            let mut first = conn.clone();
            let read = tokio::time::timeout(shared.suspect_after, refresh(shared, &mut first));
            if !matches!(read.await, Ok(true)) {
                return None;
            }
        }
        let targets = self.ping_targets();
        if targets.is_empty() {
            return Some(Err(self.none_up()));
        }
        let some_down = shared.any_down.load(Ordering::Acquire);
        if some_down
            && shared
                .pinged
                .lock()
                .is_some_and(|at| at.elapsed() < PING_REUSE)
        {
            return Some(Ok(Value::SimpleString("PONG".into())));
        }
        if let Err(e) = self.ping_each(&conn, &targets, healing).await {
            return Some(Err(e));
        }
        *shared.pinged.lock() = Some(Instant::now());
        Some(Ok(Value::SimpleString("PONG".into())))
    }

    /// The masters a keyless `PING` asks: every one not known down, not
    /// being probed, serving slots (by one of its slots and its address).
    fn ping_targets(&self) -> Vec<(u16, String)> {
        let map = self.shared.map.read();
        map.nodes
            .iter()
            .filter(|n| n.down.is_none() && !n.probing && n.slots > 0)
            .map(|n| (n.slot, n.addr()))
            .collect()
    }

    /// The error of a `PING` when no master is known up, naming those down.
    fn none_up(&self) -> RedisError {
        let down: Vec<String> = self
            .down()
            .iter()
            .map(|d| format!("{} ({})", d.addr, d.cause))
            .collect();
        RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            format!(
                "no cluster master is known up (down: {}; the others are being probed)",
                down.join(", ")
            ),
        ))
    }

    /// Pings every target within the suspect bound, at once; a master that
    /// does not answer is made suspect, and the last failure returned.
    async fn ping_each(
        &self,
        conn: &RawClusterConnection,
        targets: &[(u16, String)],
        healing: &Healing<RawClusterConnection>,
    ) -> RedisResult<()> {
        let bound = self.shared.suspect_after;
        let pings = targets.iter().map(|(slot, _)| {
            let mut conn = conn.clone();
            async move {
                let ping = conn.route_command(redis::cmd("PING"), route_to(*slot));
                match tokio::time::timeout(bound, ping).await {
                    Ok(answer) => answer,
                    Err(_) => Err(RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("no answer within {bound:?}"),
                    ))),
                }
            }
        });
        let mut failed = Ok(());
        let answers = futures::future::join_all(pings).await;
        for (result, (slot, addr)) in answers.into_iter().zip(targets) {
            if let Err(e) = result {
                self.suspect(*slot, healing);
                failed = Err(RedisError::from((
                    e.kind(),
                    "cluster master did not answer PING",
                    format!("{addr}: {e}"),
                )));
            }
        }
        failed
    }

    /// Reads the slot map now (the connect functions call it).
    pub(crate) async fn refresh(&self, conn: &mut RawClusterConnection) -> bool {
        refresh(&self.shared, conn).await
    }

    /// The masters up (by the slot map) that a connection probe should ask:
    /// one slot of each. `None` when the map is not known.
    pub(crate) fn up_slots(&self) -> Option<Vec<u16>> {
        let map = self.shared.map.read();
        if map.nodes.is_empty() {
            return None;
        }
        Some(
            map.nodes
                .iter()
                .filter(|n| n.down.is_none() && !n.probing && n.slots > 0)
                .map(|n| n.slot)
                .collect(),
        )
    }
}

/// Routes a command to the master serving `slot` (in redis-rs's map).
fn route_to(slot: u16) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
        slot,
        SlotAddr::Master,
    )))
}

/// True when `err` says the connection to a node failed (refused, reset,
/// dropped, unreachable) rather than that the node answered with an error.
pub(crate) fn is_connection_error(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || err.kind() == ErrorKind::ClusterConnectionNotFound
}

/// Reads `CLUSTER SLOTS` from a master that is up (any node when none is
/// known) and replaces the slot map, keeping what is known of each master
/// still in it. False when no node answered.
async fn refresh(shared: &Shared, conn: &mut RawClusterConnection) -> bool {
    let mut routes: Vec<RoutingInfo> = {
        let map = shared.map.read();
        map.nodes
            .iter()
            .filter(|n| n.down.is_none() && n.slots > 0)
            .map(|n| route_to(n.slot))
            .collect()
    };
    routes.push(RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random));
    for route in routes {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SLOTS");
        let read = tokio::time::timeout(shared.probe_timeout, conn.route_command(cmd, route));
        if let Ok(Ok(value)) = read.await
            && let Some(ranges) = parse_slots(&value)
        {
            install(shared, ranges);
            return true;
        }
    }
    false
}

/// `CLUSTER SLOTS` as (first, last, host, port) of each range's master.
fn parse_slots(value: &Value) -> Option<Vec<(u16, u16, String, u16)>> {
    let Value::Array(ranges) = value else {
        return None;
    };
    let mut out = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(fields) = range else {
            return None;
        };
        let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            return None;
        };
        let host = match master.first() {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => return None,
        };
        let Some(Value::Int(port)) = master.get(1) else {
            return None;
        };
        let (Ok(first), Ok(last), Ok(port)) = (
            u16::try_from(*first),
            u16::try_from(*last),
            u16::try_from(*port),
        ) else {
            return None;
        };
        if host.is_empty() || first > last || usize::from(last) >= SLOTS {
            continue;
        }
        out.push((first, last, host, port));
    }
    Some(out)
}

/// Installs a freshly read slot map. A master that serves no slot any more
/// (its replica was promoted) is dropped with its down state: its slots go
/// to the cluster again.
fn install(shared: &Shared, ranges: Vec<(u16, u16, String, u16)>) {
    let mut map = shared.map.write();
    let mut nodes: Vec<Node> = Vec::new();
    let mut owner = vec![NO_NODE; SLOTS];
    for (first, last, host, port) in ranges {
        let i = match nodes.iter().position(|n| n.port == port && n.host == host) {
            Some(i) => i,
            None => {
                let known = map.node_mut(&host, port);
                let (down, probing) = known
                    .map(|n| (n.down.take(), n.probing))
                    .unwrap_or((None, false));
                nodes.push(Node {
                    host,
                    port,
                    slot: first,
                    slots: 0,
                    down,
                    probing,
                });
                nodes.len() - 1
            }
        };
        nodes[i].slots += usize::from(last - first) + 1;
        let index = u16::try_from(i).unwrap_or(NO_NODE);
        owner[usize::from(first)..=usize::from(last)].fill(index);
    }
    for gone in map.nodes.iter().filter(|n| n.down.is_some()) {
        tracing::warn!(
            store = shared.kind,
            node = %gone.addr(),
            "cluster master serves no slot any more (failover or resharding): its slots are decided by their new master"
        );
    }
    let any_down = nodes.iter().any(|n| n.down.is_some());
    *map = Topology { owner, nodes };
    shared.any_down.store(any_down, Ordering::Release);
}

/// The one probe of one master (`target`): rounds with backoff until it is
/// up or serves no slot; stops when the store is gone.
async fn probe(
    weak: Weak<Shared>,
    healing: Healing<RawClusterConnection>,
    (host, port): (String, u16),
) {
    let mut wait = FIRST_RETRY;
    let mut rounds = 0u32;
    // A black-holed connection is replaced once: a master still silent on
    // a fresh one is frozen, and replacing again would only disturb the
    // masters that answer.
    let mut replaced = false;
    loop {
        let Some(shared) = weak.upgrade() else { return };
        let (epoch, mut conn) = healing.current_with_epoch();
        if rounds > 0 {
            refresh(&shared, &mut conn).await;
        }
        rounds += 1;
        let slot = shared
            .map
            .read()
            .nodes
            .iter()
            .find(|n| n.port == port && n.host == host)
            .map(|n| n.slot);
        let Some(slot) = slot else {
            // Its slots moved (install logged it): nothing left to probe.
            return;
        };
        match check(&host, port, slot, &mut conn, shared.probe_timeout).await {
            Ok(()) => {
                mark_up(&shared, &host, port);
                return;
            }
            Err((cause, black_holed)) => {
                if black_holed && !replaced && healing.replace(epoch) {
                    replaced = true;
                    tracing::warn!(
                        store = shared.kind,
                        node = %format!("{host}:{port}"),
                        "cluster master accepts connections but ours got no answer: replaced the cluster connection"
                    );
                }
                mark_down(&shared, &host, port, cause);
            }
        }
        drop(shared);
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(LAST_RETRY);
    }
}

/// One probe round on one master: a TCP connect, then `CLUSTER INFO` over
/// the cluster connection. The error says why it is down, and whether our
/// connection to it is black-holed (it accepts new connections).
async fn check(
    host: &str,
    port: u16,
    slot: u16,
    conn: &mut RawClusterConnection,
    bound: Duration,
) -> Result<(), (DownCause, bool)> {
    answers_fresh(host, port, bound).await?;
    let by_address = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
        host: host.to_owned(),
        port,
    });
    let info = async {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("INFO");
        match conn.route_command(cmd.clone(), by_address).await {
            // redis-rs has no connection to it (yet): route by its slot,
            // which connects.
            Err(e) if e.kind() == ErrorKind::Client => {
                conn.route_command(cmd, route_to(slot)).await
            }
            other => other,
        }
    };
    match tokio::time::timeout(bound, info).await {
        Err(_) => Err((DownCause::Silent, true)),
        Ok(Err(e)) if is_connection_error(&e) => Err((DownCause::Refused(e.to_string()), false)),
        Ok(Err(e)) => Err((DownCause::Unavailable(e.to_string()), false)),
        Ok(Ok(value)) if text_of(&value).contains("cluster_state:ok") => Ok(()),
        Ok(Ok(_)) => Err((
            DownCause::Unavailable("cluster_state is not ok".into()),
            false,
        )),
    }
}

/// A TCP connect and a `PING` on a fresh connection, each within `bound`.
/// Any answer (PONG, NOAUTH, a TLS port closing on a plain PING) says the
/// process runs; none says it is frozen, and a fresh cluster connection
/// would not help.
async fn answers_fresh(host: &str, port: u16, bound: Duration) -> Result<(), (DownCause, bool)> {
    let mut fresh =
        match tokio::time::timeout(bound, tokio::net::TcpStream::connect((host, port))).await {
            Err(_) => return Err((DownCause::Silent, false)),
            Ok(Err(e)) => return Err((DownCause::Refused(e.to_string()), false)),
            Ok(Ok(stream)) => stream,
        };
    let asked = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        fresh.write_all(b"PING\r\n").await?;
        let mut reply = [0u8; 64];
        fresh.read(&mut reply).await
    };
    match tokio::time::timeout(bound, asked).await {
        Err(_) => Err((DownCause::Silent, false)),
        Ok(_) => Ok(()),
    }
}

/// The text of a `CLUSTER INFO` reply, whatever its RESP type.
fn text_of(value: &Value) -> String {
    match value {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// Marks a master down (logged once per outage, saying refused or silent).
fn mark_down(shared: &Shared, host: &str, port: u16, cause: DownCause) {
    let mut map = shared.map.write();
    let Some(node) = map.node_mut(host, port) else {
        return;
    };
    if let Some((_, known)) = node.down.as_mut() {
        *known = cause;
        return;
    }
    let addr = node.addr();
    let slots = node.slots;
    match &cause {
        DownCause::Silent => tracing::error!(
            store = shared.kind,
            node = %addr,
            slots,
            probe_timeout_ms = shared.probe_timeout.as_millis() as u64,
            "cluster master down: silent (a call and a probe got no answer); its slots are answered by policy without it until a probe answers; the other masters decide as usual"
        ),
        other => tracing::error!(
            store = shared.kind,
            node = %addr,
            slots,
            cause = %other,
            "cluster master down: it refused or dropped the connection, or cannot serve; its slots are answered by policy without it until a probe answers; the other masters decide as usual"
        ),
    }
    node.down = Some((Instant::now(), cause));
    shared.any_down.store(true, Ordering::Release);
}

/// Marks a master up (logged when it was down) and ends its probe.
fn mark_up(shared: &Shared, host: &str, port: u16) {
    let mut map = shared.map.write();
    if let Some(node) = map.node_mut(host, port) {
        node.probing = false;
        if let Some((since, _)) = node.down.take() {
            tracing::warn!(
                store = shared.kind,
                node = %node.addr(),
                down_ms = since.elapsed().as_millis() as u64,
                "cluster master up: it answered a probe; its slots are decided by it again"
            );
        }
    }
    let any_down = map.nodes.iter().any(|n| n.down.is_some());
    shared.any_down.store(any_down, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn range(first: i64, last: i64, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(first),
            Value::Int(last),
            Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")]),
        ])
    }

    #[test]
    fn a_slot_map_is_read_and_a_down_master_refuses_only_its_slots() {
        let reply = Value::Array(vec![
            range(0, 5460, 7000),
            range(5461, 10922, 7001),
            range(10923, 16383, 7002),
        ]);
        let ranges = parse_slots(&reply).expect("parsed");
        assert_eq!(ranges.len(), 3);
        let nodes = Nodes::new(Duration::from_millis(100), Duration::from_millis(300), "t");
        install(&nodes.shared, ranges.clone());
        assert!(nodes.refuse(0).is_none());
        mark_down(
            &nodes.shared,
            "127.0.0.1",
            7001,
            DownCause::Refused("Connection refused".into()),
        );
        let err = nodes.refuse(6000).expect("refused");
        assert!(err.is_io_error(), "{err}");
        assert!(err.to_string().contains("127.0.0.1:7001"), "{err}");
        assert!(nodes.refuse(100).is_none() && nodes.refuse(16383).is_none());
        let down = nodes.down();
        assert_eq!(down.len(), 1);
        assert_eq!(down[0].slots, 5462);
        let mut stats = slidelog_core::StoreStats::default();
        nodes.fill(&mut stats);
        assert_eq!((stats.nodes, stats.nodes_down), (3, 1));
        // A fresh map keeps the down state of a master still in it.
        install(&nodes.shared, ranges);
        assert!(nodes.refuse(6000).is_some());
        // A failover: its slots now belong to another master.
        let moved = Value::Array(vec![
            range(0, 5460, 7000),
            range(5461, 10922, 7004),
            range(10923, 16383, 7002),
        ]);
        install(&nodes.shared, parse_slots(&moved).unwrap());
        assert!(nodes.refuse(6000).is_none());
        assert!(nodes.down().is_empty());
        mark_down(&nodes.shared, "127.0.0.1", 7000, DownCause::Silent);
        mark_up(&nodes.shared, "127.0.0.1", 7000);
        assert!(nodes.refuse(0).is_none());
        assert!(!nodes.shared.any_down.load(Ordering::Relaxed));
        let mut stats = slidelog_core::StoreStats::default();
        nodes.fill(&mut stats);
        assert_eq!((stats.nodes, stats.nodes_down), (3, 0));
        assert_eq!(stats.longest_node_down_ms, 0);
    }

    #[test]
    fn malformed_slot_maps_are_ignored() {
        assert!(parse_slots(&Value::Nil).is_none());
        assert!(parse_slots(&Value::Array(vec![Value::Int(1)])).is_none());
        let out_of_range = Value::Array(vec![range(0, 70_000, 7000)]);
        assert!(parse_slots(&out_of_range).is_none());
        let inverted = Value::Array(vec![range(10, 5, 7000)]);
        assert_eq!(parse_slots(&inverted), Some(vec![]));
    }
}
