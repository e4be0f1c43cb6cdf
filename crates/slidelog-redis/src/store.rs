//! [`ScriptStore`]: the [`Store`] that decides with the Lua scripts, generic
//! over the redis-rs async connection, so one implementation serves a single
//! Redis ([`RedisStore`], a `ConnectionManager`) and, with another connection
//! type, Redis Cluster and Sentinel.

use crate::errors::bounded;
use crate::options::{RedisOptions, TimeMode};
use crate::script::{self, MAX_NOW_MS, Outcome};
use redis::aio::{ConnectionLike, ConnectionManager};
use slidelog_core::{Clock, Decision, Mode, Now, Request, Store, StoreError, SystemClock};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A store whose every decision is one atomic run of a decision script on
/// one Redis key (`prefix + key`), over the connection `C`.
///
/// Each call is bounded by the per-call timeout ([`StoreError::Timeout`]);
/// Redis errors become [`StoreError::Unavailable`] (transient) or
/// [`StoreError::Backend`]. Cloning is cheap and clones share the connection.
///
/// A check that timed out is not recorded later: it carries a deadline
/// (start + timeout - skew margin, [`RedisOptions::skew_margin`]) and the
/// script refuses it once Redis `TIME` is past it, so a stalled Redis that
/// runs its backlog, or a reply stuck in a frozen link, records nothing for
/// callers that gave up. What stays possible (a check that started in time
/// but answered too late, a Redis clock behind by more than the margin) is
/// counted: [`late_records`] (the reply came, within [`LATE_WINDOW`] after
/// the timeout, and it recorded) and [`unknown_outcomes`] (no reply even
/// then).
#[derive(Clone)]
pub struct ScriptStore<C> {
    conn: C,
    prefix: Arc<str>,
    timeout: Duration,
    time: TimeMode,
    clock: Arc<dyn Clock>,
    kind: &'static str,
    skew_margin: Duration,
}

/// How long after its caller timed out a check's reply is still awaited,
/// to count a late record; then the call is dropped (and the connection
/// becomes suspect, [`crate::heal`]).
pub const LATE_WINDOW: Duration = Duration::from_millis(250);

static LATE_RECORDS: AtomicU64 = AtomicU64::new(0);
static UNKNOWN_OUTCOMES: AtomicU64 = AtomicU64::new(0);
static SKEW_WARNED: AtomicBool = AtomicBool::new(false);

/// Checks recorded after their caller had timed out (the reply came late),
/// in this process so far.
pub fn late_records() -> u64 {
    LATE_RECORDS.load(Ordering::Relaxed)
}

/// Checks whose caller timed out and whose reply never came (within
/// [`LATE_WINDOW`]): they may or may not have been recorded.
pub fn unknown_outcomes() -> u64 {
    UNKNOWN_OUTCOMES.load(Ordering::Relaxed)
}

/// The connection of [`RedisStore`]: a redis-rs `ConnectionManager` (one
/// multiplexed connection, reconnecting when it drops), replaced as a whole
/// when it falls silent ([`crate::heal`]).
pub type StandaloneConnection = crate::heal::Healing<ConnectionManager>;

/// The store on one Redis server (`redis://`, `rediss://`): a multiplexed
/// connection that reconnects by itself after Redis comes back, and is
/// replaced when it stops answering.
pub type RedisStore = ScriptStore<StandaloneConnection>;

impl<C> std::fmt::Debug for ScriptStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The connection is left out: its address is enough in logs, and it
        // may hold credentials.
        f.debug_struct("ScriptStore")
            .field("kind", &self.kind)
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("time", &self.time)
            .finish_non_exhaustive()
    }
}

impl<C> ScriptStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// A store over an established (or lazily connecting) connection.
    /// `kind` names it in logs and metrics ("redis", "redis-cluster", …).
    pub fn with_connection(conn: C, options: &RedisOptions, kind: &'static str) -> Self {
        Self {
            conn,
            prefix: options.key_prefix.as_str().into(),
            timeout: options.timeout,
            time: options.time,
            clock: Arc::new(SystemClock),
            kind,
            skew_margin: options.skew_margin,
        }
    }

    /// Uses `clock` for [`Now::Server`] decisions in [`TimeMode::Client`].
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The Redis key of `key`: the prefix followed by the key.
    pub fn redis_key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(self.prefix.as_bytes());
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Which clock decides for [`Now::Server`].
    pub fn time_mode(&self) -> TimeMode {
        self.time
    }

    /// A handle on the connection (shares it), for tools and tests.
    pub fn connection(&self) -> C {
        self.conn.clone()
    }

    /// The decision and the time (Unix ms) it was made at: Redis `TIME` or
    /// the explicit time. [`Store::decide`] is this without the time.
    pub async fn decide_timed(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Outcome, StoreError> {
        let now_ms = match (now, self.time) {
            (Now::At(ms), _) => Some(ms),
            (Now::Server, TimeMode::Client) => Some(self.clock.now_ms()),
            (Now::Server, TimeMode::Server) => None,
        };
        if let Some(ms) = now_ms.filter(|&ms| ms > MAX_NOW_MS) {
            return Err(StoreError::Backend(format!(
                "now_ms {ms} is beyond {MAX_NOW_MS} (2^53 - 1), the largest time Redis scores hold exactly"
            )));
        }
        let key = self.redis_key(request.key());
        // Only a check records, and only a decision on the current time can
        // be late (an explicit time is a replay).
        let deadline = (mode == Mode::Record && now == Now::Server)
            .then(|| {
                let budget = self.timeout.checked_sub(self.skew_margin)?;
                Some(SystemClock.now_ms() + budget.as_millis() as u64)
            })
            .flatten();
        match self
            .run_watched(key.clone(), request, mode, now_ms, deadline)
            .await
        {
            Err(StoreError::Backend(e)) if e.starts_with(script::DEADLINE_CODE) => {
                // Refused while we still wait: Redis's clock is ahead of
                // ours by more than the margin. Decide without a deadline.
                if !SKEW_WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        store = self.kind,
                        margin = ?self.skew_margin,
                        "Redis's clock is ahead of this host's by more than the skew margin: \
                         checks are sent without a deadline when refused (fix the clocks)"
                    );
                }
                self.run_watched(key, request, mode, now_ms, None).await
            }
            other => other,
        }
    }

    /// Runs the script on its own task, waiting at most the per-call
    /// timeout; the task keeps waiting [`LATE_WINDOW`] more to count a late
    /// record (see the type's docs).
    async fn run_watched(
        &self,
        key: Vec<u8>,
        request: &Request,
        mode: Mode,
        now_ms: Option<u64>,
        deadline: Option<u64>,
    ) -> Result<Outcome, StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let mut conn = self.conn.clone();
        let request = request.clone();
        let patience = self.timeout + LATE_WINDOW;
        tokio::spawn(async move {
            let run = script::run(&mut conn, &key, &request, mode, now_ms, deadline);
            match tokio::time::timeout(patience, run).await {
                Ok(result) => {
                    if let Err(Ok(outcome)) = tx.send(result)
                        && mode == Mode::Record
                        && outcome.decision.allowed
                    {
                        LATE_RECORDS.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(_) if mode == Mode::Record => {
                    UNKNOWN_OUTCOMES.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {}
            }
        });
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(result)) => result.map_err(|e| {
                if script::is_deadline(&e) {
                    StoreError::Backend(format!("{} {e}", script::DEADLINE_CODE))
                } else {
                    crate::errors::to_store_error(e)
                }
            }),
            Ok(Err(_)) => Err(StoreError::Backend(
                "the decision task ended without an answer".into(),
            )),
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        }
    }

    /// Runs `call` within the per-call timeout and maps its error.
    async fn bounded<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        bounded(self.timeout, call).await
    }
}

#[async_trait::async_trait]
impl<C> Store for ScriptStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, StoreError> {
        Ok(self.decide_timed(request, mode, now).await?.decision)
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        // The log and its weights hash (same slot): a reset forgets both.
        let log_key = self.redis_key(key);
        let cmd = redis::cmd("DEL")
            .arg(&log_key)
            .arg(crate::keys::weights_key(&log_key))
            .clone();
        let deleted: i64 = self.bounded(cmd.query_async(&mut conn)).await?;
        Ok(deleted > 0)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("PING");
        let _: String = self.bounded(cmd.query_async(&mut conn)).await?;
        Ok(())
    }

    fn kind(&self) -> &'static str {
        self.kind
    }
}
