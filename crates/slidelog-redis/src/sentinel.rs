//! Redis Sentinel: `redis+sentinel://[user:pass@]host:port,host:port/master-name[/db]`
//! (`rediss+sentinel://` for TLS).
//!
//! redis-rs resolves the master through the sentinels but does not follow a
//! failover, so [`SentinelConnection`] does it, from three parts with one
//! job each:
//!
//! - finding the master (`sentinel/master.rs`): the sentinels name it, the
//!   named server must say `ROLE` master, and one multiplexed connection is
//!   opened to it;
//! - keeping a working connection: the one healing mechanism of every store
//!   ([`crate::heal`]). A call that got no answer makes the connection
//!   suspect (a `PING` that gets no answer within the probe timeout replaces
//!   it: a black-holed connection is replaced within about half a second);
//!   a connection error replaces it at once, so the next call resolves the
//!   master again (the failing call is not retried: the script may have
//!   run, and running it twice would record twice); `READONLY` (the server
//!   was demoted) replaces it and retries once: a replica refuses the
//!   script before it writes anything;
//! - watching the sentinels (`sentinel/watch.rs`): every
//!   [`DEFAULT_POLL_INTERVAL`] the poll asks who the master is and moves to
//!   it when it is not the one in use, because after a failover that an
//!   operator forced, the old master keeps accepting writes until the
//!   sentinels demote it, up to 10 s later;
//!   and while a sentinel reports a failover in progress, calls fail at once
//!   (a transient error) instead of writing to a master that is being
//!   replaced: a failover costs errors rather than silently lost records.
//!
//! Every resolution is bounded by the connect timeout; every store call by
//! the per-call timeout of [`ScriptStore`].

mod master;
mod url;
mod watch;

pub use url::SentinelUrlError;
pub use watch::POLL_INTERVAL as DEFAULT_POLL_INTERVAL;

use crate::heal::{Healing, Maker, ping_probe};
use crate::options::RedisOptions;
use crate::store::ScriptStore;
use master::{Master, MasterLink};
use redis::aio::ConnectionLike;
use redis::sentinel::Sentinel;
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, Value,
};
use std::sync::{Arc, Weak};
use std::time::Duration;
use url::SentinelUrl;
use watch::Watch;

/// The store on a Sentinel-managed master that follows failovers.
pub type SentinelStore = ScriptStore<SentinelConnection>;

/// A connection to the current master of a Sentinel group, which follows a
/// failover (see the module docs). Cheap to clone; clones share it.
#[derive(Clone)]
pub struct SentinelConnection {
    parts: Arc<Parts>,
}

struct Parts {
    /// Finds the master and counts the switches.
    master: Arc<Master>,
    /// The link to the master in use, replaced when it fails.
    link: Healing<MasterLink>,
    /// The sentinels' view, and the fence it raises.
    watch: Watch,
}

impl std::fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("master_name", &self.parts.master.name)
            .field("master", &self.master_addr())
            .finish_non_exhaustive()
    }
}

impl SentinelConnection {
    /// A connection for the master named in `url`. Resolves lazily (on the
    /// first call, or at once by the poll task); never fails for a group
    /// that is down. Must be called inside a Tokio runtime.
    pub fn open(url: &str, options: &RedisOptions) -> Result<Self, SentinelUrlError> {
        let url = SentinelUrl::parse(url)?;
        if url.tls {
            crate::install_crypto_provider();
        }
        let address = |e: RedisError| SentinelUrlError::Address(e.to_string());
        let clients = url
            .sentinels
            .iter()
            .map(|i| Client::open(i.clone()))
            .collect::<RedisResult<Vec<_>>>()
            .map_err(address)?;
        let sentinel = Sentinel::build(url.sentinels).map_err(address)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            // The store bounds each call; this only frees a request that no
            // one waits on any more.
            .set_response_timeout(Some(options.timeout.max(Duration::from_secs(1))));
        let master = Arc::new(Master::new(
            url.master_name.clone(),
            url.db,
            sentinel,
            url.node_info,
            config.clone(),
            options.connect_timeout,
        ));
        let parts = Arc::new(Parts {
            link: healing_link(&master, options.probe_timeout),
            master,
            watch: Watch::new(url.master_name, clients, config, options.connect_timeout),
        });
        tokio::spawn(poll(Arc::downgrade(&parts), DEFAULT_POLL_INTERVAL));
        Ok(Self { parts })
    }

    /// `host:port` of the master in use, if connected.
    pub fn master_addr(&self) -> Option<String> {
        self.parts.link.current().addr()
    }

    /// How many times the connection moved to a different master.
    pub fn switches(&self) -> u64 {
        self.parts.master.switches()
    }

    /// Resolves the master now and connects to it (bounded by the connect
    /// timeout).
    pub async fn connect(&self) -> RedisResult<()> {
        self.parts.link.current().conn().await.map(|_| ())
    }

    /// True while calls are refused because a failover is in progress.
    pub fn fenced(&self) -> bool {
        self.parts.watch.fenced()
    }

    fn check_fence(&self) -> RedisResult<()> {
        if self.fenced() {
            return Err(RedisError::from((
                ErrorKind::Io,
                "a Sentinel failover of the master is in progress",
            )));
        }
        Ok(())
    }
}

/// A link to `master` that heals: a fresh (unresolved) link replaces it.
fn healing_link(master: &Arc<Master>, probe_timeout: Duration) -> Healing<MasterLink> {
    let fresh = master.clone();
    let make: Maker<MasterLink> = Arc::new(move || Some(MasterLink::new(fresh.clone())));
    Healing::new(
        MasterLink::new(master.clone()),
        make,
        ping_probe(),
        probe_timeout,
        "redis-sentinel",
    )
}

impl Parts {
    /// One look at the sentinels: fence while a failover runs, move to the
    /// master they name, and lower the fence only once that master is in
    /// use.
    async fn follow(&self) {
        let view = self.watch.view().await;
        if view.in_progress {
            self.watch.raise();
        }
        if let Some(reported) = view.master {
            let (epoch, link) = self.link.current_with_epoch();
            match link.addr() {
                Some(addr) if addr != reported => {
                    self.link.replace(epoch);
                    let _ = self.link.current().conn().await;
                }
                // Connect ahead of the first call.
                None => {
                    let _ = link.conn().await;
                }
                Some(_) => {}
            }
        }
        if !view.in_progress {
            self.watch.lower();
        }
    }
}

/// Every `interval`, follows the sentinels ([`Parts::follow`]). Ends when
/// the last connection handle is gone.
async fn poll(parts: Weak<Parts>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(parts) = parts.upgrade() else {
            return;
        };
        parts.follow().await;
    }
}

fn is_connection_error(e: &RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            self.check_fence()?;
            let (epoch, result) = self.parts.link.call(cmd).await;
            if crate::errors::is_readonly(&result) {
                // Demoted: nothing was written. Find the new master, once.
                self.parts.link.replace(epoch);
                return self.parts.link.call(cmd).await.1;
            }
            if result.as_ref().is_err_and(is_connection_error) {
                self.parts.link.replace(epoch);
            }
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            self.check_fence()?;
            let (epoch, result) = self.parts.link.call_pipeline(cmd, offset, count).await;
            let failed = match &result {
                Err(e) => {
                    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
                        || e.is_io_error()
                        || e.is_connection_dropped()
                }
                Ok(values) => values
                    .iter()
                    .any(|v| crate::errors::is_readonly(&Ok(v.clone()))),
            };
            if failed {
                // A pipeline may be partly applied: never retried here.
                self.parts.link.replace(epoch);
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.parts.master.db
    }
}

impl SentinelStore {
    /// Opens the store on the master that the sentinels in `url` name and
    /// checks that it answers, within `options.connect_timeout`.
    pub async fn connect_sentinel(
        url: &str,
        options: RedisOptions,
    ) -> Result<Self, crate::ConnectError> {
        let masked = crate::mask_password(url);
        let conn = SentinelConnection::open(url, &options).map_err(|e| {
            crate::ConnectError::InvalidUrl {
                url: masked.clone(),
                reason: e.to_string(),
            }
        })?;
        conn.connect()
            .await
            .map_err(|e| crate::ConnectError::Connect {
                url: masked,
                transient: crate::errors::is_transient(&e),
                reason: crate::errors::describe(&e),
            })?;
        let store = ScriptStore::with_connection(conn, &options, "redis-sentinel")
            .set_engine_select(crate::engine::sentinel_select_for(url, &options)?);
        store.check_clock().await;
        store.settle_engine(url).await
    }

    /// A store that resolves the master in the background and never fails
    /// for a group that is down: until it answers, decisions return
    /// transient errors. Must be called inside a Tokio runtime.
    pub fn connect_sentinel_lazy(
        url: &str,
        options: RedisOptions,
    ) -> Result<Self, crate::ConnectError> {
        let conn = SentinelConnection::open(url, &options).map_err(|e| {
            crate::ConnectError::InvalidUrl {
                url: crate::mask_password(url),
                reason: e.to_string(),
            }
        })?;
        Ok(
            ScriptStore::with_connection(conn, &options, "redis-sentinel")
                .set_engine_select(crate::engine::sentinel_select_for(url, &options)?),
        )
    }
}
