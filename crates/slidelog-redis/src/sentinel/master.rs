//! Finding the master: the sentinels name it, the named server must say
//! `ROLE` master (redis-rs checks), and a multiplexed connection is opened
//! to it. [`MasterLink`] is one such connection, resolved on first use; it
//! is the unit that [`crate::heal::Healing`] replaces, so a fresh link
//! resolves the master again. [`Master`] counts the switches between
//! masters.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How the master of one Sentinel group is found and connected to.
pub(crate) struct Master {
    pub name: String,
    pub db: i64,
    sentinel: tokio::sync::Mutex<Sentinel>,
    node_info: SentinelNodeConnectionInfo,
    config: AsyncConnectionConfig,
    connect_timeout: Duration,
    /// The last master connected to, for counting switches.
    last_addr: parking_lot::Mutex<Option<String>>,
    switches: AtomicU64,
}

/// A resolved master: its `host:port` and a connection to it.
#[derive(Clone)]
struct Resolved {
    addr: String,
    conn: MultiplexedConnection,
}

impl Master {
    /// Finds the master `name` through `sentinel`; each resolution is bounded
    /// by `connect_timeout`.
    pub fn new(
        name: String,
        db: i64,
        sentinel: Sentinel,
        node_info: SentinelNodeConnectionInfo,
        config: AsyncConnectionConfig,
        connect_timeout: Duration,
    ) -> Self {
        Self {
            name,
            db,
            sentinel: tokio::sync::Mutex::new(sentinel),
            node_info,
            config,
            connect_timeout,
            last_addr: parking_lot::Mutex::new(None),
            switches: AtomicU64::new(0),
        }
    }

    /// How many times a resolution found a different master than the last.
    pub fn switches(&self) -> u64 {
        self.switches.load(Ordering::Relaxed)
    }

    /// Asks the sentinels for the master and connects to it.
    async fn resolve(&self) -> RedisResult<Resolved> {
        let found = tokio::time::timeout(self.connect_timeout, async {
            let client = self
                .sentinel
                .lock()
                .await
                .async_master_for(&self.name, Some(&self.node_info))
                .await?;
            let addr = client.get_connection_info().addr().to_string();
            let conn = client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await?;
            RedisResult::Ok(Resolved { addr, conn })
        })
        .await;
        let resolved = found.map_err(|_| {
            RedisError::from((
                ErrorKind::Io,
                "no master found through the sentinels within the connect timeout",
            ))
        })??;
        let previous = self.last_addr.lock().replace(resolved.addr.clone());
        if previous.as_deref().is_some_and(|p| p != resolved.addr) {
            self.switches.fetch_add(1, Ordering::Relaxed);
            tracing::info!(master = %self.name, from = ?previous, to = %resolved.addr, "sentinel master changed");
        }
        Ok(resolved)
    }
}

/// A connection to the master, resolved on its first call (one resolution
/// for every caller waiting on it; a failed one is tried again by the next
/// call). Cheap to clone; clones share it.
#[derive(Clone)]
pub(crate) struct MasterLink {
    master: Arc<Master>,
    resolved: Arc<tokio::sync::OnceCell<Resolved>>,
}

impl MasterLink {
    /// A link not resolved yet.
    pub fn new(master: Arc<Master>) -> Self {
        Self {
            master,
            resolved: Arc::default(),
        }
    }

    /// `host:port` of the master, once resolved.
    pub fn addr(&self) -> Option<String> {
        self.resolved.get().map(|r| r.addr.clone())
    }

    /// The connection, resolving the master first if needed.
    pub async fn conn(&self) -> RedisResult<MultiplexedConnection> {
        let resolved = self
            .resolved
            .get_or_try_init(|| self.master.resolve())
            .await?;
        Ok(resolved.conn.clone())
    }
}

impl ConnectionLike for MasterLink {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move { self.conn().await?.req_packed_command(cmd).await })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut conn = self.conn().await?;
            conn.req_packed_commands(cmd, offset, count).await
        })
    }

    fn get_db(&self) -> i64 {
        self.master.db
    }
}
