//! Watching the sentinels: every [`POLL_INTERVAL`] each sentinel is asked
//! `SENTINEL MASTER <name>` (all at once, each bounded by the connect
//! timeout), for two things:
//!
//! - who the master is: the answer of the newest configuration (the highest
//!   `config-epoch`), since a sentinel that has not heard of a failover yet
//!   still names the old master;
//! - whether a failover of it is in progress: then the fence is up, and
//!   calls fail at once instead of writing to a master that is being
//!   replaced (after a forced failover the old master keeps taking writes
//!   until the sentinels demote it; writes made there are lost).
//!
//! A failover that has not chosen a replica yet counts only when the
//! sentinel running it knows a replica it could promote (one it sees up and
//! connected); from the promotion on it always counts. Right after a failover, a
//! sentinel whose fresh link to the new master has not had a `PING` answer
//! within down-after (a loaded host) takes the new master for down and
//! starts a failover of its own, which aborts at once: the only replica it
//! knows is the old, dead master. That attempt replaces nothing, and
//! fencing on it made decisions fail for a poll or two after the failover
//! had ended (the `killed_master_under_load` flake).

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often the sentinels are asked who the master is.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// What one sentinel answered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Report {
    /// `host:port` of the master in its configuration.
    addr: Option<String>,
    /// The epoch of that configuration.
    config_epoch: u64,
    /// Its flags name `failover_in_progress`.
    in_progress: bool,
}

/// What the sentinels that answered report, together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// The master of the newest configuration among the answers.
    pub master: Option<String>,
    /// True when a sentinel that answered runs a failover of the master.
    pub in_progress: bool,
}

/// The sentinels of one group and the fence their answers raise.
pub(crate) struct Watch {
    master_name: String,
    clients: Vec<Client>,
    /// A connection to each sentinel, made on first use and dropped when a
    /// query on it fails.
    conns: Vec<tokio::sync::Mutex<Option<MultiplexedConnection>>>,
    config: AsyncConnectionConfig,
    timeout: Duration,
    fenced: AtomicBool,
}

impl Watch {
    /// Watches `master_name` through `clients` (one per sentinel); each
    /// query is bounded by `timeout`.
    pub fn new(
        master_name: String,
        clients: Vec<Client>,
        config: AsyncConnectionConfig,
        timeout: Duration,
    ) -> Self {
        Self {
            master_name,
            conns: clients.iter().map(|_| Default::default()).collect(),
            clients,
            config,
            timeout,
            fenced: AtomicBool::new(false),
        }
    }

    /// True while calls are refused because a failover is in progress.
    pub fn fenced(&self) -> bool {
        self.fenced.load(Ordering::Relaxed)
    }

    /// Raises the fence (warning when it was down).
    pub fn raise(&self) {
        if !self.fenced.swap(true, Ordering::Relaxed) {
            tracing::warn!(master = %self.master_name, "sentinel failover in progress: decisions fail until it ends");
        }
    }

    /// Lowers the fence.
    pub fn lower(&self) {
        self.fenced.store(false, Ordering::Relaxed);
    }

    /// Asks every sentinel at once.
    pub async fn view(&self) -> View {
        let asks = (0..self.clients.len()).map(|i| self.ask(i));
        let reports = futures::future::join_all(asks).await;
        combine(reports.into_iter().flatten())
    }

    /// `SENTINEL MASTER <name>` on sentinel `i`; `None` when it does not
    /// answer in time (its connection is then made again next time).
    async fn ask(&self, i: usize) -> Option<Report> {
        let mut slot = self.conns[i].lock().await;
        let query = async {
            let mut conn = match slot.clone() {
                Some(c) => c,
                None => {
                    let c = self.clients[i]
                        .get_multiplexed_async_connection_with_config(&self.config)
                        .await?;
                    *slot = Some(c.clone());
                    c
                }
            };
            let fields: Vec<String> = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(&self.master_name)
                .query_async(&mut conn)
                .await?;
            let mut report = report(&fields);
            if report.in_progress && !promoting(&fields) {
                // A failover with no replica to promote replaces nothing.
                let replicas: Vec<Vec<String>> = redis::cmd("SENTINEL")
                    .arg("REPLICAS")
                    .arg(&self.master_name)
                    .query_async(&mut conn)
                    .await?;
                report.in_progress = replicas.iter().any(|r| promotable(r));
            }
            RedisResult::Ok(report)
        };
        match tokio::time::timeout(self.timeout, query).await {
            Ok(Ok(report)) => Some(report),
            _ => {
                *slot = None;
                None
            }
        }
    }
}

/// The report in a `SENTINEL MASTER` reply (a flat list of names and values).
fn report(fields: &[String]) -> Report {
    let field = |name: &str| {
        fields
            .chunks(2)
            .find(|kv| kv[0] == name)
            .and_then(|kv| kv.get(1))
    };
    Report {
        addr: field("ip")
            .zip(field("port"))
            .map(|(ip, port)| format!("{ip}:{port}")),
        config_epoch: field("config-epoch")
            .and_then(|e| e.parse().ok())
            .unwrap_or(0),
        in_progress: field("flags").is_some_and(|f| f.contains("failover_in_progress")),
    }
}

/// True when the failover in a `SENTINEL MASTER` reply has gone past
/// choosing a replica: one is being promoted (its link may be down a moment,
/// the promotion kills client connections), whatever the replicas look like.
fn promoting(fields: &[String]) -> bool {
    fields
        .chunks(2)
        .find(|kv| kv[0] == "failover-state")
        .and_then(|kv| kv.get(1))
        .is_some_and(|state| !matches!(state.as_str(), "none" | "wait_start" | "select_slave"))
}

/// True when a `SENTINEL REPLICAS` entry is a replica a failover could
/// promote: one the sentinel sees up and connected.
fn promotable(fields: &[String]) -> bool {
    fields
        .chunks(2)
        .find(|kv| kv[0] == "flags")
        .and_then(|kv| kv.get(1))
        .is_some_and(|flags| {
            !flags
                .split(',')
                .any(|f| matches!(f, "s_down" | "o_down" | "disconnected"))
        })
}

/// The master of the newest configuration; in progress if any says so.
fn combine(reports: impl Iterator<Item = Report>) -> View {
    let mut view = View::default();
    let mut newest = None;
    for r in reports {
        view.in_progress |= r.in_progress;
        if r.addr.is_some() && newest.is_none_or(|e| r.config_epoch > e) {
            newest = Some(r.config_epoch);
            view.master = r.addr;
        }
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(ip: &str, port: u16, epoch: u64, flags: &str) -> Vec<String> {
        [
            ("name", "m"),
            ("ip", ip),
            ("port", &port.to_string()),
            ("flags", flags),
            ("config-epoch", &epoch.to_string()),
        ]
        .iter()
        .flat_map(|(k, v)| [k.to_string(), v.to_string()])
        .collect()
    }

    #[test]
    fn a_failover_past_choosing_a_replica_is_promoting() {
        let state = |s: &str| vec!["failover-state".to_string(), s.to_string()];
        assert!(!promoting(&state("wait_start")));
        assert!(!promoting(&state("select_slave")));
        assert!(promoting(&state("send_slaveof_noone")));
        assert!(promoting(&state("wait_promotion")));
        assert!(promoting(&state("reconf_slaves")));
        assert!(!promoting(&[]));
    }

    #[test]
    fn only_a_replica_that_is_up_can_be_promoted() {
        let replica = |flags: &str| vec!["flags".to_string(), flags.to_string()];
        assert!(promotable(&replica("slave")));
        assert!(!promotable(&replica("s_down,slave,disconnected")));
        assert!(!promotable(&replica("slave,disconnected")));
        assert!(!promotable(&[]));
    }

    #[test]
    fn the_newest_configuration_names_the_master() {
        let old = report(&answer("127.0.0.1", 1, 0, "master"));
        let new = report(&answer("127.0.0.1", 2, 1, "master"));
        let view = combine([old.clone(), new.clone(), old.clone()].into_iter());
        assert_eq!(view.master.as_deref(), Some("127.0.0.1:2"));
        assert!(!view.in_progress);
        let failing = report(&answer("127.0.0.1", 1, 0, "master,failover_in_progress"));
        assert!(combine([new, failing].into_iter()).in_progress);
        assert_eq!(combine(std::iter::empty()), View::default());
    }
}
