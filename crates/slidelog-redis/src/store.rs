//! [`ScriptStore`]: the [`Store`] that decides with the Lua scripts, generic
//! over the redis-rs async connection, so one implementation serves a single
//! Redis ([`RedisStore`], a `ConnectionManager`) and, with another connection
//! type, Redis Cluster and Sentinel.

use crate::engine::EngineSelect;
use crate::errors::bounded;
use crate::options::RedisOptions;
use crate::script::{MAX_NOW_MS, Outcome};
use crate::skew::{ClockWatch, Skew};
use crate::usage::{Usage, UsageOutcome};
use crate::watched::{Call, CallError, Counters, UsageCall};
use redis::aio::{ConnectionLike, ConnectionManager};
use slidelog_core::{
    Checks, Clock, Decision, Detailed, JointDecision, Mode, Now, Receipt, Request, Settled, Store,
    StoreError, StoreStats, SystemClock,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A store whose every decision is one atomic run of a decision script on
/// one Redis key (`prefix + key`), over the connection `C`; or, with the
/// module engine ([`crate::engine`], chosen by the store URL's `engine=`),
/// one `SLIDELOG.CHECK` of the module on that key.
///
/// Each call is bounded by the per-call timeout ([`StoreError::Timeout`]);
/// Redis errors become [`StoreError::Unavailable`] (transient) or
/// [`StoreError::Backend`]. Cloning is cheap and clones share the connection.
///
/// A check that timed out is not recorded later: it carries a deadline
/// (start + timeout - skew margin, [`RedisOptions::skew_margin`]) and the
/// script refuses it once Redis `TIME` is past it, so a stalled Redis that
/// runs its backlog, or a reply stuck in a frozen link, records nothing for
/// callers that gave up. A check refused by its deadline is a timeout
/// ([`StoreError::Timeout`]): it is never sent again. What stays possible (a
/// check that started in time but answered too late, a Redis clock behind by
/// more than the margin) is counted per store, in [`Store::stats`]:
/// late records (the reply came, within [`LATE_WINDOW`] after the timeout,
/// and it recorded) and unknown outcomes (no reply even then). Clock skew
/// is found by comparing Redis `TIME` with this host's clock
/// ([`crate::skew`]), never from a refusal.
#[derive(Clone)]
pub struct ScriptStore<C> {
    conn: C,
    prefix: Arc<str>,
    timeout: Duration,
    kind: &'static str,
    skew_margin: Duration,
    counters: Arc<Counters>,
    clock_watch: Arc<ClockWatch>,
    /// The scripts or the module (docs/design.md §4.4; [`crate::engine`]).
    engine: Arc<EngineSelect<C>>,
    /// The cap on blocks and overrides held under this prefix.
    max_controls: usize,
}

pub use crate::watched::LATE_WINDOW;

mod all;
mod control;
mod cross;
mod cross_module;

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
            kind,
            skew_margin: options.skew_margin,
            counters: Arc::default(),
            clock_watch: Arc::new(ClockWatch::new(options.skew_margin, kind)),
            // The scripts, unless told otherwise ([`Self::with_engine`]).
            engine: Arc::new(EngineSelect::scripts_by_default(
                kind,
                options.connect_timeout,
            )),
            max_controls: options.max_controls.max(1),
        }
    }

    /// The engine choice (shared by clones).
    pub(crate) fn engine_select(&self) -> &Arc<EngineSelect<C>> {
        &self.engine
    }

    /// This store with another engine choice.
    pub(crate) fn set_engine_select(mut self, select: EngineSelect<C>) -> Self {
        self.engine = Arc::new(select);
        self
    }

    /// Compares Redis `TIME` with this host's clock now (bounded by the
    /// per-call timeout), warning once when they differ by more than the
    /// skew margin. The connect functions call it; `None` when the clocks
    /// agree or Redis did not answer.
    pub async fn check_clock(&self) -> Option<Skew> {
        let mut conn = self.conn.clone();
        self.clock_watch.measure(&mut conn, self.timeout).await
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
        self.run_decision(request, mode, now, false).await
    }

    /// [`Self::decide_timed`], asking for every limit's state when `each`
    /// ([`crate::script::Check::each`]).
    async fn run_decision(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
        each: bool,
    ) -> Result<Outcome, StoreError> {
        let now_ms = explicit_ms(now)?;
        // Only a check records, and only a decision on the current time can
        // be late (an explicit time is a replay).
        let deadline_ms = (mode == Mode::Record && now == Now::Server)
            .then(|| self.deadline_ms())
            .flatten();
        let engine = self.engine.select(&self.conn)?;
        let call = Call {
            engine,
            key: self.redis_key(request.key()),
            request: request.clone(),
            mode,
            now_ms,
            deadline_ms,
            each,
        };
        let sent_ms = SystemClock.now_ms();
        let result =
            crate::watched::run(self.conn.clone(), call, self.timeout, self.counters.clone()).await;
        let used = result.as_ref().map(|o| o.now_ms);
        self.watch_clock(now_ms.is_none(), sent_ms, used);
        result.map_err(|e| self.store_error(e))
    }

    /// Compares the store's clock with this host's after a call on the
    /// store's clock (`server_time`): `used` is the time the reply says it
    /// used, or the call's error.
    fn watch_clock(&self, server_time: bool, sent_ms: u64, used: Result<u64, &CallError>) {
        match used {
            // The reply carries the Redis TIME the script used: compare.
            Ok(ms) if server_time => {
                self.clock_watch.observe(sent_ms, ms, SystemClock.now_ms());
            }
            // Not skew by itself (a check queued past its deadline is
            // refused on one clock too): read the clocks to find out.
            Err(CallError::DeadlinePassed) => {
                self.clock_watch
                    .measure_soon(self.conn.clone(), self.timeout);
            }
            _ => {}
        }
    }

    /// One settle or charge (docs/design.md §4.5), with the time, deadline
    /// and timeout semantics of [`Self::decide_timed`]'s check.
    pub async fn usage_timed(
        &self,
        request: &Request,
        usage: Usage,
        now: Now,
    ) -> Result<UsageOutcome, StoreError> {
        let now_ms = explicit_ms(now)?;
        let deadline_ms = (now == Now::Server).then(|| self.deadline_ms()).flatten();
        let operation = usage.name();
        let engine = self.engine.select(&self.conn)?;
        let call = UsageCall {
            engine,
            key: self.redis_key(request.key()),
            request: request.clone(),
            usage,
            now_ms,
            deadline_ms,
        };
        let result =
            crate::watched::run_usage(self.conn.clone(), call, self.timeout, self.counters.clone())
                .await;
        result.map_err(|e| match e {
            CallError::Redis(e) if crate::usage::is_module_key(&e) => self.unsupported(operation),
            e => self.store_error(e),
        })
    }

    /// The deadline (Unix ms, this host's clock) of a call starting now: the
    /// timeout less the skew margin (`None` when the margin eats it all),
    /// or the caller's own deadline when that comes first
    /// ([`crate::caller_deadline`]). The caller's is taken as it is: a
    /// margin taken from it too would refuse every call of a client whose
    /// deadline is as short as the margin (Envoy's default is 20 ms); a
    /// record the skew lets through is counted as a late record.
    fn deadline_ms(&self) -> Option<u64> {
        let now = SystemClock.now_ms();
        let own = self
            .timeout
            .checked_sub(self.skew_margin)
            .map(|budget| now + budget.as_millis() as u64);
        let caller = crate::caller_deadline::remaining().map(|left| now + left.as_millis() as u64);
        match (own, caller) {
            (Some(own), Some(caller)) => Some(own.min(caller)),
            (own, caller) => own.or(caller),
        }
    }

    /// The deadline of a call in `mode`: none for a peek (it records
    /// nothing, so nothing can be late), else [`deadline_ms`](Self::deadline_ms),
    /// and a timeout when no time is left for the call.
    pub(crate) fn record_deadline(&self, mode: Mode) -> Result<Option<u64>, StoreError> {
        match mode {
            Mode::Peek => Ok(None),
            Mode::Record => self
                .deadline_ms()
                .map(Some)
                .ok_or(StoreError::Timeout(self.timeout)),
        }
    }

    /// A settle or charge the module engine (or a key it holds) cannot take yet.
    fn unsupported(&self, operation: &'static str) -> StoreError {
        StoreError::Unsupported {
            store: self.kind,
            operation,
        }
    }

    /// The one mapping of a watched call's failure to the store's error.
    fn store_error(&self, error: CallError) -> StoreError {
        match error {
            CallError::Redis(e) => crate::errors::to_store_error(e),
            CallError::DeadlinePassed | CallError::Timeout => StoreError::Timeout(self.timeout),
            CallError::Vanished => {
                StoreError::Backend("the decision task ended without an answer".into())
            }
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

/// The explicit time of `now` (`None`: Redis `TIME`, the store's clock),
/// refused beyond what a Redis score holds exactly.
fn explicit_ms(now: Now) -> Result<Option<u64>, StoreError> {
    match now {
        Now::Server => Ok(None),
        Now::At(ms) if ms > MAX_NOW_MS => Err(StoreError::Backend(format!(
            "now_ms {ms} is beyond {MAX_NOW_MS} (2^53 - 1), the largest time Redis scores hold exactly"
        ))),
        Now::At(ms) => Ok(Some(ms)),
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

    /// Every limit's state in the same script run (docs/design.md §2): the
    /// scripts answer 4 numbers per limit beside the decision when asked
    /// (a plain [`decide`](Store::decide) does not ask, so its cost is
    /// unchanged); the module engine answers the same with
    /// `SLIDELOG.CHECK ... EACH`.
    async fn decide_each(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, StoreError> {
        let outcome = self.run_decision(request, mode, now, true).await?;
        Ok(outcome.detailed(request))
    }

    /// One atomic call over every check's key (docs/design.md §4.7):
    /// `check_all.lua` or `SLIDELOG.CHECKALL`; on a Cluster the keys must
    /// share one slot.
    async fn decide_all(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, StoreError> {
        self.decide_joint(checks, mode, now).await
    }

    async fn settle(
        &self,
        request: &Request,
        receipt: &Receipt,
        now: Now,
    ) -> Result<Settled, StoreError> {
        let usage = Usage::Settle(receipt.clone());
        let answer = self.usage_timed(request, usage, now).await?;
        let each = answer.outcome.detailed(request);
        // The module refuses a spent receipt itself (docs/design.md §4.6):
        // its answer says so; the scripts rename the record on every settle,
        // so an earlier receipt names nothing there.
        Ok(Settled {
            settled: answer.done,
            decision: each.decision,
            limits: each.limits,
            refused: answer.refused,
        })
    }

    async fn charge(&self, request: &Request, now: Now) -> Result<Detailed, StoreError> {
        let answer = self.usage_timed(request, Usage::Charge, now).await?;
        Ok(answer.outcome.detailed(request))
    }

    /// One run of `usage.lua` (or the module's `SLIDELOG.CHARGE ... ONCE`)
    /// with the once key in the log's slot: checked, charged and marked
    /// atomically (docs/design.md §6, "Local answers").
    async fn charge_once(
        &self,
        request: &Request,
        now: Now,
        once: &slidelog_core::OnceMark,
    ) -> Result<bool, StoreError> {
        let usage = Usage::ChargeOnce(once.clone());
        let answer = self.usage_timed(request, usage, now).await?;
        Ok(!answer.already)
    }

    async fn receipt_secret(&self, fresh: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        // One command, atomic: the stored secret, or `fresh` stored now
        // (SET NX GET, Redis >= 7.0 and Valkey). Outside the key prefix, and
        // without a TTL: instances that outlive it would disagree.
        let cmd = redis::cmd("SET")
            .arg(crate::keys::RECEIPT_SECRET_KEY)
            .arg(fresh)
            .arg("NX")
            .arg("GET")
            .clone();
        let mut conn = self.conn.clone();
        let stored: Option<Vec<u8>> = self.bounded(cmd.query_async(&mut conn)).await?;
        Ok(Some(stored.unwrap_or_else(|| fresh.to_vec())))
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        // The log, its weights hash and its pending reservations (same
        // slot): a reset forgets them all.
        let log_key = self.redis_key(key);
        let cmd = redis::cmd("DEL")
            .arg(&log_key)
            .arg(crate::keys::weights_key(&log_key))
            .arg(crate::keys::pending_key(&log_key))
            .clone();
        let deleted: i64 = self.bounded(cmd.query_async(&mut conn)).await?;
        Ok(deleted > 0)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        crate::errors::ping(&mut self.conn.clone(), self.timeout).await
    }

    async fn put_block(
        &self,
        key: &str,
        block: &slidelog_core::Block,
        only_new: bool,
    ) -> Result<bool, StoreError> {
        self.put_block_now(key, block, only_new).await
    }

    async fn delete_block(&self, key: &str) -> Result<bool, StoreError> {
        self.delete_block_now(key).await
    }

    async fn get_block(&self, key: &str) -> Result<Option<slidelog_core::Block>, StoreError> {
        self.get_block_now(key).await
    }

    async fn put_override(
        &self,
        key: &str,
        entry: &slidelog_core::Override,
    ) -> Result<(), StoreError> {
        self.put_override_now(key, entry).await
    }

    async fn delete_override(&self, key: &str) -> Result<bool, StoreError> {
        self.delete_override_now(key).await
    }

    async fn get_override(&self, key: &str) -> Result<Option<slidelog_core::Override>, StoreError> {
        self.get_override_now(key).await
    }

    async fn control_count(&self) -> Result<Option<(usize, usize)>, StoreError> {
        self.control_count_now().await.map(Some)
    }

    fn kind(&self) -> &'static str {
        self.kind
    }

    fn stats(&self) -> StoreStats {
        let mut stats = self.counters.stats();
        // A cluster store adds its masters' health ([`crate::cluster`]).
        crate::cluster::add_node_stats(&self.conn, &mut stats);
        stats
    }
}
