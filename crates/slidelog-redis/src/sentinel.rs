//! Redis Sentinel: `redis+sentinel://[user:pass@]host:port,host:port/master-name[/db]`
//! (`rediss+sentinel://` for TLS).
//!
//! redis-rs resolves the master through the sentinels but does not follow a
//! failover, so [`SentinelConnection`] does it:
//!
//! - it resolves the master (the sentinels name it, and the named server must
//!   say `ROLE` master) and keeps one multiplexed connection to it;
//! - on a connection error it drops that connection, so the next call
//!   resolves again (the failing call is not retried: the script may have
//!   run, and running it twice would record twice);
//! - on `READONLY` (the server it talks to was demoted) it resolves again and
//!   retries once: a replica refuses the script before it writes anything;
//! - a background task asks the sentinels every [`DEFAULT_POLL_INTERVAL`]
//!   who the master is and switches when the answer changes, because after
//!   a failover that an operator forced, the old master keeps accepting
//!   writes until the sentinels demote it, up to 10 s later; writes made
//!   there after the replica's promotion are lost;
//! - while a sentinel reports a failover in progress for the master, calls
//!   fail at once (a transient error) instead of writing to a master that is
//!   being replaced: a failover costs errors rather than silently lost
//!   records (extra admissions later).
//!
//! - a call that got no answer (abandoned by the per-call timeout, or timed
//!   out) makes the connection suspect: a `PING` checks it, and when that
//!   gets no answer within the probe timeout the connection is dropped and
//!   the next call resolves and connects again — a black-holed connection
//!   is replaced within about half a second ([`crate::heal`]).
//!
//! Every resolution is bounded by the connect timeout; every store call by
//! the per-call timeout of [`ScriptStore`].

use crate::multi_url::MultiHostUrl;
use crate::options::RedisOptions;
use crate::store::ScriptStore;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, IntoConnectionInfo, Pipeline, RedisError,
    RedisFuture, RedisResult, ServerErrorKind, TlsMode, Value,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often the background task asks a sentinel who the master is.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The store on a Sentinel-managed master that follows failovers.
pub type SentinelStore = ScriptStore<SentinelConnection>;

/// A connection to the current master of a Sentinel group, which follows a
/// failover (see the module docs). Cheap to clone; clones share it.
#[derive(Clone)]
pub struct SentinelConnection {
    inner: Arc<Inner>,
}

struct Inner {
    master_name: String,
    db: i64,
    sentinel: tokio::sync::Mutex<Sentinel>,
    node_info: SentinelNodeConnectionInfo,
    /// Clients of each sentinel, for the background poll.
    sentinel_clients: Vec<Client>,
    /// The poll's connection to each sentinel, made on first use.
    sentinel_conns: tokio::sync::Mutex<Vec<Option<MultiplexedConnection>>>,
    /// True while a sentinel reports a failover in progress.
    fenced: std::sync::atomic::AtomicBool,
    /// The last master connected to, for counting switches.
    last_addr: Mutex<Option<String>>,
    current: Mutex<Option<Current>>,
    resolving: tokio::sync::Mutex<()>,
    config: AsyncConnectionConfig,
    connect_timeout: Duration,
    /// Bound on the `PING` that checks a connection after a call got no answer.
    probe_timeout: Duration,
    /// True while such a `PING` runs.
    probing: std::sync::atomic::AtomicBool,
    epoch: AtomicU64,
    switches: AtomicU64,
}

#[derive(Clone)]
struct Current {
    conn: MultiplexedConnection,
    /// `host:port` of the master.
    addr: String,
    epoch: u64,
}

impl std::fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("master_name", &self.inner.master_name)
            .field("master", &self.master_addr())
            .finish_non_exhaustive()
    }
}

/// The master name and db index after the hosts: `/master-name[/db]`.
fn master_and_db(parsed: &MultiHostUrl) -> Result<(String, i64), String> {
    let master_name =
        parsed.path.first().cloned().ok_or(
            "the master name is missing: redis+sentinel://host:port,host:port/master-name",
        )?;
    let db: i64 = match parsed.path.get(1) {
        None => 0,
        Some(d) => d
            .parse()
            .ok()
            .filter(|d| (0..=15).contains(d))
            .ok_or_else(|| format!("db {d:?} after the master name must be 0 to 15"))?,
    };
    if parsed.path.len() > 2 {
        return Err("expected /master-name[/db] after the hosts".into());
    }
    Ok((master_name, db))
}

/// A client per sentinel (with the sentinels' own credentials, if any) and
/// the redis-rs `Sentinel` over all of them.
fn sentinels(parsed: &MultiHostUrl) -> Result<(Vec<Client>, Sentinel), String> {
    let sentinel_user = parsed.param("sentinel_username");
    let sentinel_pass = parsed.param("sentinel_password");
    let sentinel_urls: Vec<String> = parsed
        .hosts
        .iter()
        .map(|(h, p)| parsed.single_url(h, *p, sentinel_user, sentinel_pass))
        .collect();
    let sentinel_infos = sentinel_urls
        .iter()
        .map(|u| u.as_str().into_connection_info())
        .collect::<RedisResult<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let sentinel_clients = sentinel_infos
        .iter()
        .map(|i| Client::open(i.clone()))
        .collect::<RedisResult<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let sentinel = Sentinel::build(sentinel_infos).map_err(|e| e.to_string())?;
    Ok((sentinel_clients, sentinel))
}

/// How to reach the data nodes: their credentials and db, taken from a URL
/// of the same shape so redis-rs parses them as it does for redis://.
fn data_node_info(parsed: &MultiHostUrl, db: i64) -> Result<SentinelNodeConnectionInfo, String> {
    let data_url = format!(
        "{}/{db}",
        parsed.single_url(
            "localhost",
            1,
            parsed.username.as_deref(),
            parsed.password.as_deref()
        )
    );
    let data_info = data_url
        .as_str()
        .into_connection_info()
        .map_err(|e| e.to_string())?;
    let mut node_info = SentinelNodeConnectionInfo::default()
        .set_redis_connection_info(data_info.redis_settings().clone());
    if parsed.tls {
        node_info = node_info.set_tls_mode(TlsMode::Secure);
    }
    Ok(node_info)
}

impl SentinelConnection {
    /// A connection for the master named in `url`. Resolves lazily (on the
    /// first call, or at once by the poll task); never fails for a group
    /// that is down. Must be called inside a Tokio runtime.
    pub fn open(url: &str, options: &RedisOptions) -> Result<Self, String> {
        let parsed = MultiHostUrl::parse(url, "redis+sentinel", "rediss+sentinel")?;
        let (master_name, db) = master_and_db(&parsed)?;
        if parsed.tls {
            crate::install_crypto_provider();
        }
        let (sentinel_clients, sentinel) = sentinels(&parsed)?;
        let node_info = data_node_info(&parsed, db)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            // The store bounds each call; this only frees a request that no
            // one waits on any more.
            .set_response_timeout(Some(options.timeout.max(Duration::from_secs(1))));
        let conn = Self {
            inner: Arc::new(Inner {
                master_name,
                db,
                sentinel: tokio::sync::Mutex::new(sentinel),
                node_info,
                sentinel_conns: tokio::sync::Mutex::new(vec![None; sentinel_clients.len()]),
                sentinel_clients,
                fenced: std::sync::atomic::AtomicBool::new(false),
                last_addr: Mutex::new(None),
                current: Mutex::new(None),
                resolving: tokio::sync::Mutex::new(()),
                config,
                connect_timeout: options.connect_timeout,
                probe_timeout: options.probe_timeout,
                probing: std::sync::atomic::AtomicBool::new(false),
                epoch: AtomicU64::new(0),
                switches: AtomicU64::new(0),
            }),
        };
        tokio::spawn(poll(Arc::downgrade(&conn.inner), DEFAULT_POLL_INTERVAL));
        Ok(conn)
    }

    /// `host:port` of the master in use, if connected.
    pub fn master_addr(&self) -> Option<String> {
        lock(&self.inner.current).as_ref().map(|c| c.addr.clone())
    }

    /// How many times the connection moved to a different master.
    pub fn switches(&self) -> u64 {
        self.inner.switches.load(Ordering::Relaxed)
    }

    /// Resolves the master now and connects to it (bounded by the connect
    /// timeout).
    pub async fn connect(&self) -> RedisResult<()> {
        self.current().await.map(|_| ())
    }

    /// True while calls are refused because a failover is in progress.
    pub fn fenced(&self) -> bool {
        self.inner.fenced.load(Ordering::Relaxed)
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

    async fn current(&self) -> RedisResult<Current> {
        if let Some(c) = lock(&self.inner.current).clone() {
            return Ok(c);
        }
        self.inner.resolve(None).await
    }
}

impl Inner {
    /// Resolves the master and connects to it, unless another caller has
    /// already replaced the connection of epoch `stale` (or any connection
    /// exists, for `None`).
    async fn resolve(&self, stale: Option<u64>) -> RedisResult<Current> {
        let _one_at_a_time = self.resolving.lock().await;
        if let Some(c) = lock(&self.current).clone()
            && stale != Some(c.epoch)
        {
            return Ok(c);
        }
        let found = tokio::time::timeout(self.connect_timeout, async {
            let client = self
                .sentinel
                .lock()
                .await
                .async_master_for(&self.master_name, Some(&self.node_info))
                .await?;
            let addr = client.get_connection_info().addr().to_string();
            let conn = client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await?;
            RedisResult::Ok((addr, conn))
        })
        .await;
        let (addr, conn) = match found {
            Ok(result) => result?,
            Err(_) => {
                return Err(RedisError::from((
                    ErrorKind::Io,
                    "no master found through the sentinels within the connect timeout",
                )));
            }
        };
        let mut current = lock(&self.current);
        let previous = lock(&self.last_addr).replace(addr.clone());
        if previous.as_deref().is_some_and(|p| p != addr) {
            self.switches.fetch_add(1, Ordering::Relaxed);
            tracing::info!(master = %self.master_name, from = ?previous, to = %addr, "sentinel master changed");
        }
        let c = Current {
            conn,
            addr,
            epoch: self.epoch.fetch_add(1, Ordering::Relaxed) + 1,
        };
        *current = Some(c.clone());
        Ok(c)
    }

    /// A call on `current` got no answer: unless a check already runs, `PING`
    /// it in the background and forget it when that gets no answer either.
    fn suspect(self: &Arc<Self>, current: &Current) {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.probing.store(false, Ordering::Release);
            return;
        };
        let (inner, current) = (self.clone(), current.clone());
        runtime.spawn(async move {
            let mut conn = current.conn.clone();
            let cmd = redis::cmd("PING");
            let ping = cmd.query_async::<String>(&mut conn);
            if !matches!(
                tokio::time::timeout(inner.probe_timeout, ping).await,
                Ok(Ok(_))
            ) {
                tracing::warn!(master = %inner.master_name, addr = %current.addr, "Redis connection silent (a call got no answer and neither did a PING): replacing it");
                inner.invalidate(current.epoch);
            }
            inner.probing.store(false, Ordering::Release);
        });
    }

    /// Forgets the connection of `epoch` (a newer one is kept).
    fn invalidate(&self, epoch: u64) {
        let mut current = lock(&self.current);
        if current.as_ref().is_some_and(|c| c.epoch == epoch) {
            *current = None;
        }
    }

    /// What the sentinels report now: the master's `host:port` (from the
    /// first that answers) and whether any of them is running a failover of
    /// it. Each query is bounded by the connect timeout.
    async fn sentinel_view(&self) -> (Option<String>, bool) {
        let mut conns = self.sentinel_conns.lock().await;
        let mut master = None;
        let mut in_progress = false;
        for (client, slot) in self.sentinel_clients.iter().zip(conns.iter_mut()) {
            let ask = async {
                let mut conn = match slot.clone() {
                    Some(c) => c,
                    None => {
                        let c = client
                            .get_multiplexed_async_connection_with_config(&self.config)
                            .await?;
                        *slot = Some(c.clone());
                        c
                    }
                };
                redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(&self.master_name)
                    .query_async::<Vec<String>>(&mut conn)
                    .await
            };
            match tokio::time::timeout(self.connect_timeout, ask).await {
                Ok(Ok(fields)) => {
                    let field = |name: &str| {
                        fields
                            .chunks(2)
                            .find(|kv| kv[0] == name)
                            .and_then(|kv| kv.get(1).cloned())
                    };
                    if master.is_none()
                        && let (Some(ip), Some(port)) = (field("ip"), field("port"))
                    {
                        master = Some(format!("{ip}:{port}"));
                    }
                    if field("flags").is_some_and(|f| f.contains("failover_in_progress")) {
                        in_progress = true;
                    }
                }
                // Reconnect to this sentinel next time.
                _ => *slot = None,
            }
        }
        (master, in_progress)
    }
}

/// Every `interval`, asks a sentinel who the master is and re-resolves when
/// it is not the one in use. Ends when the last connection handle is gone.
async fn poll(inner: Weak<Inner>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let current = lock(&inner.current).clone();
        let (reported, in_progress) = inner.sentinel_view().await;
        if in_progress && !inner.fenced.swap(true, Ordering::Relaxed) {
            tracing::warn!(master = %inner.master_name, "sentinel failover in progress: decisions fail until it ends");
        }
        let Some(reported) = reported else {
            inner.fenced.store(in_progress, Ordering::Relaxed);
            continue;
        };
        match current {
            Some(c) if c.addr != reported => {
                let _ = inner.resolve(Some(c.epoch)).await;
            }
            // Connect ahead of the first call.
            None => {
                let _ = inner.resolve(None).await;
            }
            Some(_) => {}
        }
        // Unfence only once the new master (if any) is in use.
        if !in_progress {
            inner.fenced.store(false, Ordering::Relaxed);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_readonly(value: &RedisResult<Value>) -> bool {
    match value {
        Ok(Value::ServerError(e)) => {
            e.kind() == Some(ServerErrorKind::ReadOnly) || e.code() == "READONLY"
        }
        Err(e) => e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly),
        Ok(_) => false,
    }
}

fn is_connection_error(value: &RedisResult<Value>) -> bool {
    matches!(value, Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout())
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            self.check_fence()?;
            let current = self.current().await?;
            let mut conn = current.conn.clone();
            let watch = crate::heal::Watch::new(|| self.inner.suspect(&current));
            let result = conn.req_packed_command(cmd).await;
            watch.done();
            if crate::heal::timed_out(&result) {
                self.inner.suspect(&current);
            }
            if is_readonly(&result) {
                // Demoted: nothing was written. Find the new master, once.
                self.inner.invalidate(current.epoch);
                let mut conn = self.inner.resolve(Some(current.epoch)).await?.conn;
                return conn.req_packed_command(cmd).await;
            }
            if is_connection_error(&result) {
                self.inner.invalidate(current.epoch);
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
            let current = self.current().await?;
            let mut conn = current.conn.clone();
            let result = conn.req_packed_commands(cmd, offset, count).await;
            let failed = match &result {
                Err(e) => {
                    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
                        || e.is_io_error()
                        || e.is_connection_dropped()
                }
                Ok(values) => values
                    .iter()
                    .any(|v| matches!(v, Value::ServerError(e) if e.code() == "READONLY")),
            };
            if failed {
                // A pipeline may be partly applied: never retried here.
                self.inner.invalidate(current.epoch);
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.inner.db
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
        let conn = SentinelConnection::open(url, &options).map_err(|reason| {
            crate::ConnectError::InvalidUrl {
                url: masked.clone(),
                reason,
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
        let conn = SentinelConnection::open(url, &options).map_err(|reason| {
            crate::ConnectError::InvalidUrl {
                url: crate::mask_password(url),
                reason,
            }
        })?;
        Ok(
            ScriptStore::with_connection(conn, &options, "redis-sentinel")
                .set_engine_select(crate::engine::sentinel_select_for(url, &options)?),
        )
    }
}
