//! Redis Cluster: `redis+cluster://[user:pass@]host:port,host:port[,…]`
//! (`rediss+cluster://` for TLS).
//!
//! A decision touches one key, so it goes to the one master that owns the
//! key's slot and Redis never answers CROSSSLOT. The redis-rs async cluster
//! client routes it there, follows MOVED and ASK, and refreshes the slot map
//! after a failover or resharding.
//!
//! The script reaches a master that has never seen it (a new node, a
//! replica promoted by a failover, a `SCRIPT FLUSH`) through
//! [`ClusterConnection`]: `EVALSHA` that answers NOSCRIPT is sent again as
//! `EVAL` with the same key and arguments, to the same key's master, which
//! also caches the script there. redis-rs would instead send `SCRIPT LOAD`
//! to *every* master, which fails while any master is down — exactly when a
//! failover is under way.
//!
//! After a failover the demoted master still accepts the script on the
//! connection redis-rs opened to it, because redis-rs puts every node
//! connection in `READONLY` mode and Redis does not count a script without
//! flags as a write: the script fails with READONLY instead of being
//! redirected with MOVED, and redis-rs would never refresh its slot map.
//! [`ClusterConnection`] answers READONLY by sending `READWRITE` to that
//! node and retrying once (safe: a replica refuses the script's first write,
//! so nothing was recorded); the retry gets MOVED, which redis-rs follows
//! and learns the new master from.
//!
//! Getting a cluster connection can hang (an upstream issue), so it is
//! bounded by the connect timeout (`cluster_store.rs`); each call by the
//! per-call timeout of [`ScriptStore`](crate::store::ScriptStore).
//!
//! A node connection that falls silent (black-holed) never errors, and
//! redis-rs retries a timed-out call on the same connection. So a call that
//! got no answer makes the cluster connection suspect ([`crate::heal`]): a
//! `PING` goes to every primary not known down, and when one of them does
//! not answer within the probe timeout the whole cluster connection is
//! replaced by a fresh one (new connections to every node, a fresh slot map).
//!
//! One master down (killed, refused, silent) is the outage mode of its
//! slots only (`cluster/nodes.rs`): calls for them fail at once with a transient
//! error while one background probe per master retries it, and the other
//! masters' keys are decided exactly as usual.

mod nodes;

pub use nodes::{DownCause, NodeDown};

use crate::heal::{Healing, Maker, Probe, Watch};
use nodes::Nodes;
use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection as RawClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, ServerErrorKind, Value};
use std::sync::Arc;
use std::time::Duration;

/// A redis-rs async cluster connection that answers NOSCRIPT by running the
/// script with `EVAL` on the key's own master (see the module docs).
#[derive(Clone)]
pub struct ClusterConnection {
    inner: Healing<RawClusterConnection>,
    /// Each master's health ([`nodes`]).
    nodes: Nodes,
    /// Measurement only: true sends keyed calls straight to redis-rs,
    /// without the per-master outage mode's slot check and timer (as before
    /// it), so its cost can be measured side by side in one process
    /// (`examples/cluster_outage_cost.rs`, BENCHMARKS.md). Shared by the
    /// clones of one connection; never set otherwise.
    bypass_node_health: Arc<std::sync::atomic::AtomicBool>,
}

impl ClusterConnection {
    /// Wraps a redis-rs cluster connection; a silent one is replaced by
    /// `make`'s (see the module docs). `timeout` is the store's per-call
    /// timeout: a call unanswered for half of it makes its master suspect.
    pub fn new(
        inner: RawClusterConnection,
        make: Maker<RawClusterConnection>,
        timeout: Duration,
        probe_timeout: Duration,
    ) -> Self {
        let nodes = Nodes::new(timeout, probe_timeout, "redis-cluster");
        let known = nodes.clone();
        let probe: Probe<RawClusterConnection> = Arc::new(move |mut conn: RawClusterConnection| {
            let up = known.up_slots();
            Box::pin(async move {
                // Every master not known down (a down one has its own
                // probe); every primary redis-rs knows when the map is not
                // read yet.
                let Some(slots) = up else {
                    let every_primary = RoutingInfo::MultiNode((
                        MultipleNodeRoutingInfo::AllMasters,
                        Some(ResponsePolicy::AllSucceeded),
                    ));
                    return conn
                        .route_command(redis::cmd("PING"), every_primary)
                        .await
                        .map(|_| ());
                };
                let pings = slots.into_iter().map(|slot| {
                    let mut conn = conn.clone();
                    async move {
                        conn.route_command(redis::cmd("PING"), master_of(slot))
                            .await
                    }
                });
                for answer in futures::future::join_all(pings).await {
                    answer?;
                }
                Ok(())
            })
        });
        Self {
            inner: Healing::new(inner, make, probe, probe_timeout, "redis-cluster"),
            nodes,
            bypass_node_health: Arc::default(),
        }
    }

    /// Measurement only: `true` turns the per-master outage mode off for
    /// this connection and its clones (a store's calls).
    #[doc(hidden)]
    pub fn bypass_node_health_for_measurement(&self, bypass: bool) {
        self.bypass_node_health
            .store(bypass, std::sync::atomic::Ordering::Relaxed);
    }

    /// The masters known down now: calls for their slots fail at once
    /// (answered by the limiter's policy) until a probe finds them up.
    pub fn nodes_down(&self) -> Vec<NodeDown> {
        self.nodes.down()
    }

    /// How many times a silent cluster connection was replaced.
    pub fn replacements(&self) -> u64 {
        self.inner.replacements()
    }

    /// The redis-rs connection in use now, for commands routed to several
    /// nodes (asking every primary for the module, [`crate::engine`]).
    /// Reads which master serves which slots (at connect): false when the
    /// cluster did not answer.
    pub(crate) async fn refresh_nodes(&self) -> bool {
        self.nodes.refresh(&mut self.raw()).await
    }

    pub(crate) fn raw(&self) -> RawClusterConnection {
        self.inner.current()
    }
}

/// Adds the masters' health to `stats` when `conn` is a
/// [`ClusterConnection`] (the metrics export: `slidelog_store_nodes_down`);
/// other connections have one node and add nothing.
pub(crate) fn add_node_stats<C: 'static>(conn: &C, stats: &mut slidelog_core::StoreStats) {
    let conn: &dyn std::any::Any = conn;
    if let Some(cluster) = conn.downcast_ref::<ClusterConnection>() {
        cluster.nodes.fill(stats);
    }
}

/// True when `conn` is a [`ClusterConnection`]: keys of several slots
/// cannot meet in one script there (docs/design.md §4.7).
pub(crate) fn is_cluster<C: 'static>(conn: &C) -> bool {
    let conn: &dyn std::any::Any = conn;
    conn.is::<ClusterConnection>()
}

/// Routes a command to the master serving `slot`.
fn master_of(slot: u16) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
        slot,
        SlotAddr::Master,
    )))
}

/// The slot of the key a decision, settle, charge or reset sends (the
/// scripts, the module's keyed commands, `DEL`); `None` for every other
/// command.
fn decision_slot(cmd: &Cmd) -> Option<u16> {
    if let Some(slot) = script_key_slot(cmd) {
        return Some(slot);
    }
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(bytes) => bytes,
        _ => &[][..],
    });
    let name = args.next()?;
    // The joint command's first key follows its mode, time and deadline
    // (all its keys share one slot).
    if name.eq_ignore_ascii_case(crate::joint::CHECKALL.as_bytes()) {
        return Some(key_slot(args.nth(3)?));
    }
    let keyed = [
        &b"DEL"[..],
        b"UNLINK",
        crate::module::CHECK.as_bytes(),
        crate::module::SETTLE.as_bytes(),
        crate::module::CHARGE.as_bytes(),
        crate::module::RESET.as_bytes(),
    ];
    if !keyed.iter().any(|k| name.eq_ignore_ascii_case(k)) {
        return None;
    }
    Some(key_slot(args.next()?))
}

/// True for a `PING` without an argument.
fn is_plain_ping(cmd: &Cmd) -> bool {
    let mut args = cmd.args_iter();
    matches!(args.next(), Some(redis::Arg::Simple(name)) if name.eq_ignore_ascii_case(b"PING"))
        && args.next().is_none()
}

/// `EVAL <source> <the rest of the EVALSHA arguments>` when `cmd` is an
/// `EVALSHA` of one of the decision scripts; `None` otherwise.
fn as_eval(cmd: &Cmd) -> Option<Cmd> {
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(bytes) => bytes,
        _ => &[][..],
    });
    if !args.next()?.eq_ignore_ascii_case(b"EVALSHA") {
        return None;
    }
    let source = crate::catalogue::source_for_sha(args.next()?)?;
    let mut eval = redis::cmd("EVAL");
    eval.arg(source);
    for a in args {
        eval.arg(a);
    }
    Some(eval)
}

/// The slot of the first key of an `EVAL`/`EVALSHA` (`numkeys` ≥ 1).
fn script_key_slot(cmd: &Cmd) -> Option<u16> {
    let mut args = cmd.args_iter().map(|a| match a {
        redis::Arg::Simple(bytes) => bytes,
        _ => &[][..],
    });
    let name = args.next()?;
    if !name.eq_ignore_ascii_case(b"EVALSHA") && !name.eq_ignore_ascii_case(b"EVAL") {
        return None;
    }
    let _script = args.next()?;
    let numkeys: u64 = std::str::from_utf8(args.next()?).ok()?.parse().ok()?;
    if numkeys == 0 {
        return None;
    }
    Some(key_slot(args.next()?))
}

/// Redis Cluster's hash slot of `key`: CRC16 (XMODEM) of the key, or of its
/// `{hash tag}` when it has a non-empty one, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

fn is_noscript(value: &redis::RedisResult<Value>) -> bool {
    match value {
        Ok(Value::ServerError(e)) => {
            e.kind() == Some(ServerErrorKind::NoScript) || e.code() == "NOSCRIPT"
        }
        Err(e) => e.kind() == ErrorKind::Server(ServerErrorKind::NoScript),
        Ok(_) => false,
    }
}

impl ClusterConnection {
    /// Sends `cmd`, answering READONLY and NOSCRIPT (see the module docs).
    async fn send(&self, cmd: &Cmd) -> redis::RedisResult<Value> {
        let mut result = self.inner.call(cmd).await.1;
        if crate::errors::is_readonly(&result)
            && let Some(slot) = script_key_slot(cmd)
        {
            // A demoted master ran the script on a READONLY connection:
            // make that connection READWRITE so it answers MOVED.
            self.inner
                .current()
                .route_command(redis::cmd("READWRITE"), master_of(slot))
                .await?;
            result = self.inner.call(cmd).await.1;
        }
        if is_noscript(&result)
            && let Some(eval) = as_eval(cmd)
        {
            return self.inner.call(&eval).await.1;
        }
        result
    }

    /// Sends a decision or reset for `slot`: at once an error while its
    /// master is known down; otherwise a call that fails with a connection
    /// error, goes unanswered for half the timeout, or is abandoned makes
    /// that master suspect ([`nodes`]), and a call still waiting when the
    /// probe finds it down ends with that error.
    async fn send_to_slot(&self, cmd: &Cmd, slot: u16) -> redis::RedisResult<Value> {
        if let Some(refused) = self.nodes.refuse(slot) {
            return Err(refused);
        }
        let watch = Watch::new(|| self.nodes.suspect(slot, &self.inner));
        let call = self.send(cmd);
        tokio::pin!(call);
        let result = match tokio::time::timeout(self.nodes.suspect_after(), &mut call).await {
            Ok(result) => result,
            Err(_) => {
                self.nodes.suspect(slot, &self.inner);
                // Answer as soon as the probe finds the master refusing.
                loop {
                    match tokio::time::timeout(nodes::RECHECK, &mut call).await {
                        Ok(result) => break result,
                        Err(_) => {
                            if let Some(refused) = self.nodes.refuse(slot) {
                                break Err(refused);
                            }
                        }
                    }
                }
            }
        };
        watch.done();
        if let Err(e) = &result
            && nodes::is_connection_error(e)
        {
            self.nodes.suspect(slot, &self.inner);
        }
        result
    }
}

impl ConnectionLike for ClusterConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            if self
                .bypass_node_health
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                return self.send(cmd).await;
            }
            if let Some(slot) = decision_slot(cmd) {
                return self.send_to_slot(cmd, slot).await;
            }
            if is_plain_ping(cmd)
                && let Some(answer) = self.nodes.ping(&self.inner).await
            {
                return answer;
            }
            self.send(cmd).await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.inner.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_match_redis_cluster() {
        // Values from CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg("abc").arg(1).arg("foo").arg(5);
        assert_eq!(script_key_slot(&evalsha), Some(12182));
    }

    #[test]
    fn keyed_commands_have_a_slot_and_others_none() {
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg("abc").arg(1).arg("foo").arg(5);
        assert_eq!(decision_slot(&evalsha), Some(12182));
        for name in [
            "DEL",
            "SLIDELOG.CHECK",
            "SLIDELOG.SETTLE",
            "SLIDELOG.CHARGE",
        ] {
            assert_eq!(
                decision_slot(redis::cmd(name).arg("foo")),
                Some(12182),
                "{name}"
            );
        }
        // A sealed receipt's settle (its nonce and validity last) goes to
        // its key's master too.
        let limits = vec![slidelog_core::Limit::new(10, 1_000).unwrap()];
        let check = slidelog_core::Request::new("k", limits.clone(), 1).unwrap();
        let record = slidelog_core::RecordRef { ts: 5, id: None };
        let sealed =
            slidelog_core::Receipt::new(&check, record).with_spend(Some(slidelog_core::Spend {
                nonce: 7,
                until_ms: 9,
            }));
        let usage = slidelog_core::Request::usage("k", limits, vec![0]).unwrap();
        let settle = crate::module::usage_command(
            b"foo",
            &usage,
            &crate::usage::Usage::Settle(sealed),
            None,
            None,
        );
        assert_eq!(decision_slot(&settle), Some(12182));
        assert_eq!(decision_slot(redis::cmd("CLUSTER").arg("SLOTS")), None);
        assert_eq!(decision_slot(&redis::cmd("PING")), None);
        assert!(is_plain_ping(&redis::cmd("PING")));
        assert!(!is_plain_ping(redis::cmd("PING").arg("x")));
        assert!(!is_plain_ping(redis::cmd("CLUSTER").arg("INFO")));
    }

    #[test]
    fn only_the_decision_scripts_evalsha_becomes_eval() {
        let sha = crate::script::SCRIPT.get_hash();
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(sha).arg(1).arg("k").arg(5);
        let eval = as_eval(&evalsha).expect("rewritten");
        let args: Vec<Vec<u8>> = eval
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.to_vec(),
                _ => vec![],
            })
            .collect();
        assert_eq!(args[0], b"EVAL");
        assert_eq!(args[1], crate::script::SOURCE.as_bytes());
        assert_eq!(&args[2..], &[b"1".to_vec(), b"k".to_vec(), b"5".to_vec()]);
        // The single-limit script is sent as its own source.
        let mut single = redis::cmd("EVALSHA");
        single.arg(crate::script::SINGLE.get_hash()).arg(1).arg("k");
        let eval = as_eval(&single).expect("rewritten");
        let source = eval.args_iter().nth(1).map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => vec![],
        });
        assert_eq!(
            source.as_deref(),
            Some(crate::script::SINGLE_SOURCE.as_bytes())
        );
        let mut other = redis::cmd("EVALSHA");
        other.arg("0000").arg(0);
        assert!(as_eval(&other).is_none());
        assert!(as_eval(redis::cmd("GET").arg("k")).is_none());
    }
}
