//! Which engine decides (docs/design.md §4.4): the Lua scripts or the native
//! module, chosen by the store URL's `engine=auto|module|script`
//! ([`RedisEngine`]), and [`Engine::run`], the one place a decision is sent
//! to either.
//!
//! - `script`: the scripts, whatever the server has.
//! - `module`: `SLIDELOG.CHECK`. The connect functions ask every node first
//!   and refuse to open a store on a server without it (a misconfiguration,
//!   never transient, naming the module and how to load it). A store opened
//!   lazily asks in the background; once a node is known to lack the module
//!   (a Sentinel failover onto a server without it), decisions fail as
//!   misconfigured until it is loaded.
//! - `auto` (the default): the module where every node has it (every
//!   primary of a Cluster; the master of a Sentinel group, asked again after
//!   each failover), else the scripts. Until the answer is known it decides
//!   through the scripts.
//!
//! Mixing engines on one key is safe either way: the module adopts a sorted
//! set the scripts wrote, and the scripts hand a key the module converted to
//! `SLIDELOG.CHECK` (their first sorted-set call is a `redis.pcall` that
//! catches WRONGTYPE), so a deployment switching engines, or a decision made
//! through the scripts before `auto` has its answer, never over-admits.
//!
//! Each store logs the engine it uses once it is known (and again when a
//! failover changes it): one `info` line.

use crate::module;
use crate::options::RedisOptions;
use crate::script::{self, Outcome};
use crate::{ClusterConnection, ConnectError, ScriptStore, SentinelConnection, mask_password};
use futures::future::BoxFuture;
use redis::aio::ConnectionLike;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{RedisError, RedisResult, Value};
pub use slidelog_core::url::RedisEngine;
use slidelog_core::{Request, StoreError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use crate::script::Check;

/// The engine a decision goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// `single_limit.lua` / `sliding_log.lua` (`EVALSHA`).
    Script,
    /// The module's `SLIDELOG.CHECK`.
    Module,
}

impl Engine {
    /// `script` or `module`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Script => "script",
            Self::Module => "module",
        }
    }

    /// Runs one decision through this engine: the one dispatch point. Both
    /// answer the same reply, mapped by the same code, and refuse a check
    /// past its deadline with the same error code.
    pub async fn run<C: ConnectionLike>(
        self,
        conn: &mut C,
        check: Check<'_>,
    ) -> RedisResult<Outcome> {
        match self {
            Self::Script => script::run(conn, check).await,
            Self::Module => module::run(conn, check).await,
        }
    }

    /// Runs one settle or charge through this engine (docs/design.md §4.5),
    /// the one dispatch point for them: `usage.lua` or the module's
    /// `SLIDELOG.SETTLE` / `SLIDELOG.CHARGE`. A key the module holds
    /// answers the script `MODULEKEY` (having changed nothing): it is then
    /// sent to the module (`engine=auto` before it knew, or a key adopted
    /// while another store used the scripts).
    pub async fn run_usage<C: ConnectionLike>(
        self,
        conn: &mut C,
        redis_key: &[u8],
        request: &Request,
        usage: &crate::usage::Usage,
        now_ms: Option<u64>,
        deadline_ms: Option<u64>,
    ) -> RedisResult<crate::usage::UsageOutcome> {
        if self == Self::Script {
            match crate::usage::run(conn, redis_key, request, usage, now_ms, deadline_ms).await {
                Err(e) if crate::usage::is_module_key(&e) => {}
                answer => return answer,
            }
        }
        module::run_usage(conn, redis_key, request, usage, now_ms, deadline_ms).await
    }

    /// Runs one joint decision over keys of one slot through this engine
    /// (docs/design.md §4.7): `check_all.lua` or `SLIDELOG.CHECKALL`, every
    /// check's outcome in order. (The script hands a key the module holds
    /// to `SLIDELOG.CHECK` itself, within the same atomic run.)
    pub async fn run_all<C: ConnectionLike>(
        self,
        conn: &mut C,
        call: crate::joint::JointCall<'_>,
    ) -> RedisResult<Vec<Outcome>> {
        match self {
            Self::Script => crate::joint::run_script(conn, call).await,
            Self::Module => crate::joint::run_module(conn, call).await,
        }
    }
}

/// Asks the store's node(s) whether they have the module: the nodes that
/// lack it (empty: every node has it).
pub(crate) type Probe<C> =
    Arc<dyn Fn(C) -> BoxFuture<'static, RedisResult<Vec<String>>> + Send + Sync>;

/// A number that changes when the connection moves to another server (a
/// Sentinel failover), so the module is asked about again.
pub(crate) type Generation<C> = Arc<dyn Fn(&C) -> u64 + Send + Sync>;

/// Asks the one server the connection talks to.
pub(crate) fn single_probe<C: ConnectionLike + Send + 'static>() -> Probe<C> {
    Arc::new(|mut conn: C| {
        Box::pin(async move {
            Ok(if module::has_module(&mut conn).await? {
                Vec::new()
            } else {
                vec!["the server".to_owned()]
            })
        })
    })
}

const UNKNOWN: u8 = 0;
const SCRIPT: u8 = 1;
const MODULE: u8 = 2;
/// `module` was asked for and a node lacks it.
const MISSING: u8 = 3;

/// How often a store asks again while the module is missing or the
/// question went unanswered.
const RETRY_MISSING: Duration = Duration::from_secs(1);
/// `last_probe_ms` before the first probe.
const NEVER: u64 = u64::MAX;

/// Why the engine a store asked for cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveError {
    /// `engine=module` and a node lacks the module: the reason, for the
    /// operator.
    #[error("{0}")]
    Missing(String),
    /// The nodes could not be asked.
    #[error("could not ask whether the slidelog module is loaded: {0}")]
    Probe(RedisError),
    /// They did not answer in time.
    #[error("no answer within {0:?} to whether the slidelog module is loaded")]
    Timeout(Duration),
}

/// The engine choice of one store: what was asked for, what is known, and
/// how to ask (see the module docs).
pub(crate) struct EngineSelect<C> {
    requested: RedisEngine,
    kind: &'static str,
    state: AtomicU8,
    /// The generation the state was learnt at.
    seen: AtomicU64,
    probing: AtomicBool,
    /// When the last background probe started, in ms after `born`.
    last_probe_ms: AtomicU64,
    born: Instant,
    /// Nodes found without the module (for the error while `MISSING`).
    missing: parking_lot::Mutex<Vec<String>>,
    probe: Probe<C>,
    generation: Generation<C>,
    probe_timeout: Duration,
}

impl<C> std::fmt::Debug for EngineSelect<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineSelect")
            .field("requested", &self.requested)
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<C> EngineSelect<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The choice for `requested`, asking one server over the connection
    /// itself; each probe is bounded by `probe_timeout`.
    pub(crate) fn new(requested: RedisEngine, kind: &'static str, probe_timeout: Duration) -> Self {
        let select = Self {
            requested,
            kind,
            state: AtomicU8::new(UNKNOWN),
            seen: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            last_probe_ms: AtomicU64::new(NEVER),
            born: Instant::now(),
            missing: parking_lot::Mutex::new(Vec::new()),
            probe: single_probe(),
            generation: Arc::new(|_: &C| 0),
            probe_timeout,
        };
        if requested == RedisEngine::Script {
            select.learn(SCRIPT, Vec::new(), 0);
        }
        select
    }

    /// The scripts, as a store made without an engine choice decides until
    /// it is given one (its URL's, [`ScriptStore::with_engine`]): settled
    /// without the engine's log line, which is the replacing choice's to say
    /// (else every store opened from a URL logged the scripts once before
    /// its own answer, even while Redis was down).
    pub(crate) fn scripts_by_default(kind: &'static str, probe_timeout: Duration) -> Self {
        // `auto` logs nothing until it knows; then settled on the scripts.
        let mut select = Self::new(RedisEngine::Auto, kind, probe_timeout);
        select.requested = RedisEngine::Script;
        *select.state.get_mut() = SCRIPT;
        select
    }

    /// Asks with `probe` instead (every primary of a Cluster).
    pub(crate) fn with_probe(mut self, probe: Probe<C>) -> Self {
        self.probe = probe;
        self
    }

    /// Asks again whenever `generation` changes (a Sentinel failover).
    pub(crate) fn with_generation(mut self, generation: Generation<C>) -> Self {
        self.generation = generation;
        self
    }

    /// The engine asked for.
    pub(crate) fn requested(&self) -> RedisEngine {
        self.requested
    }

    /// The engine in use, once known.
    pub(crate) fn in_use(&self) -> Option<Engine> {
        match self.state.load(Ordering::Acquire) {
            SCRIPT => Some(Engine::Script),
            MODULE => Some(Engine::Module),
            _ => None,
        }
    }

    /// Asks the nodes now and settles the engine (the connect functions):
    /// an error when `module` was asked for and cannot be used.
    pub(crate) async fn resolve(&self, conn: C) -> Result<Engine, ResolveError> {
        if self.requested == RedisEngine::Script {
            return Ok(Engine::Script);
        }
        let generation = (self.generation)(&conn);
        let answer = tokio::time::timeout(self.probe_timeout, (self.probe)(conn)).await;
        match (answer, self.requested) {
            (Ok(Ok(missing)), _) => {
                let state = self.state_for(&missing);
                self.learn(state, missing, generation);
                match state {
                    MISSING => Err(ResolveError::Missing(self.missing_reason())),
                    MODULE => Ok(Engine::Module),
                    _ => Ok(Engine::Script),
                }
            }
            (Ok(Err(e)), RedisEngine::Module) => Err(ResolveError::Probe(e)),
            (Err(_), RedisEngine::Module) => Err(ResolveError::Timeout(self.probe_timeout)),
            // `auto` that cannot ask (an ACL without COMMAND): the scripts.
            (Ok(Err(e)), _) => {
                tracing::debug!(store = self.kind, error = %e, "could not ask for the slidelog module");
                self.learn(SCRIPT, vec![format!("unknown ({e})")], generation);
                Ok(Engine::Script)
            }
            // `auto` not answered in time: the scripts until a decision's
            // background probe gets the answer (never pinned to them).
            (Err(_), _) => Ok(Engine::Script),
        }
    }

    /// The engine of the next decision on `conn`, never waiting: while the
    /// answer is unknown (or stale after a failover) it is asked for in the
    /// background, and `auto` decides through the scripts meanwhile.
    pub(crate) fn select(self: &Arc<Self>, conn: &C) -> Result<Engine, StoreError> {
        if self.requested == RedisEngine::Script {
            return Ok(Engine::Script);
        }
        let state = self.state.load(Ordering::Acquire);
        // After a failover the answer is about another server: ask at once,
        // and decide as if it were unknown meanwhile.
        let stale = (self.generation)(conn) != self.seen.load(Ordering::Acquire);
        if state == UNKNOWN || stale || state == MISSING {
            self.probe_soon(conn.clone(), !stale);
        }
        match (state, self.requested, stale) {
            (MODULE, _, false) => Ok(Engine::Module),
            (MISSING, _, false) => Err(StoreError::Misconfigured(self.missing_reason())),
            (_, RedisEngine::Module, _) => Ok(Engine::Module),
            _ => Ok(Engine::Script),
        }
    }

    /// Starts a background probe unless one runs or, `throttled`, one
    /// started less than [`RETRY_MISSING`] ago (the first is never held).
    fn probe_soon(self: &Arc<Self>, conn: C, throttled: bool) {
        let now_ms = self.born.elapsed().as_millis() as u64;
        let last = self.last_probe_ms.load(Ordering::Relaxed);
        if throttled
            && last != NEVER
            && now_ms.saturating_sub(last) < RETRY_MISSING.as_millis() as u64
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        self.last_probe_ms.store(now_ms, Ordering::Relaxed);
        let this = self.clone();
        runtime.spawn(async move {
            let generation = (this.generation)(&conn);
            let answer = tokio::time::timeout(this.probe_timeout, (this.probe)(conn)).await;
            match answer {
                Ok(Ok(missing)) => this.learn(this.state_for(&missing), missing, generation),
                // `auto` that may not ask (an ACL without COMMAND): the scripts.
                Ok(Err(e)) if this.requested == RedisEngine::Auto => {
                    this.learn(SCRIPT, vec![format!("unknown ({e})")], generation)
                }
                // Asked again, at most once per RETRY_MISSING.
                _ => {}
            }
            this.probing.store(false, Ordering::Release);
        });
    }

    fn state_for(&self, missing: &[String]) -> u8 {
        match (missing.is_empty(), self.requested) {
            (true, _) => MODULE,
            (false, RedisEngine::Module) => MISSING,
            (false, _) => SCRIPT,
        }
    }

    /// Records what the nodes answered; logs the engine when it changes.
    fn learn(&self, state: u8, missing: Vec<String>, generation: u64) {
        let before = self.state.swap(state, Ordering::AcqRel);
        self.seen.store(generation, Ordering::Release);
        let changed = before != state;
        *self.missing.lock() = missing;
        if !changed {
            return;
        }
        let requested = self.requested.name();
        match state {
            MODULE => tracing::info!(
                store = self.kind,
                engine = "module",
                requested,
                "decisions go through the slidelog module ({})",
                module::CHECK
            ),
            SCRIPT => tracing::info!(
                store = self.kind,
                engine = "script",
                requested,
                without_module = ?*self.missing.lock(),
                "decisions go through the Lua scripts"
            ),
            _ => tracing::error!(store = self.kind, requested, "{}", self.missing_reason()),
        }
    }

    fn missing_reason(&self) -> String {
        let nodes = self.missing.lock().join(", ");
        format!(
            "the store URL asks for engine=module but the slidelog module ({}) is not loaded on {nodes}: {}",
            module::CHECK,
            module::how_to_load()
        )
    }
}

/// The choice a store URL asks for (`auto` when it names none), asking one
/// server; `kind` names the store in logs.
pub(crate) fn select_for<C>(
    url: &str,
    kind: &'static str,
    options: &RedisOptions,
) -> Result<EngineSelect<C>, ConnectError>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let requested = RedisEngine::of_url(url)
        .map_err(|e| ConnectError::InvalidUrl {
            url: mask_password(url),
            reason: e.to_string(),
        })?
        .unwrap_or_default();
    Ok(EngineSelect::new(requested, kind, options.connect_timeout))
}

/// [`select_for`] on a Cluster: every primary is asked.
pub(crate) fn cluster_select_for(
    url: &str,
    options: &RedisOptions,
) -> Result<EngineSelect<ClusterConnection>, ConnectError> {
    Ok(select_for(url, "redis-cluster", options)?.with_probe(every_primary_probe()))
}

/// [`select_for`] on a Sentinel group: asked again after each failover.
pub(crate) fn sentinel_select_for(
    url: &str,
    options: &RedisOptions,
) -> Result<EngineSelect<SentinelConnection>, ConnectError> {
    Ok(select_for(url, "redis-sentinel", options)?
        .with_generation(Arc::new(|conn: &SentinelConnection| conn.switches())))
}

/// Asks every primary of a Cluster (`COMMAND INFO` routed to all masters,
/// one answer per node).
fn every_primary_probe() -> Probe<ClusterConnection> {
    Arc::new(|conn: ClusterConnection| {
        Box::pin(async move {
            let mut raw = conn.raw();
            let route = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
            let mut cmd = redis::cmd("COMMAND");
            cmd.arg("INFO").arg(module::CHECK);
            let Value::Map(answers) = raw.route_command(cmd, route).await? else {
                return Err(RedisError::from((
                    redis::ErrorKind::UnexpectedReturnType,
                    "COMMAND INFO on every primary answered no per-node map",
                )));
            };
            let mut missing = Vec::new();
            for (node, answer) in answers {
                if let Value::ServerError(e) = answer {
                    return Err(e.into());
                }
                if !module::command_info_says_known(&answer) {
                    missing.push(redis::from_redis_value::<String>(node).unwrap_or_default());
                }
            }
            Ok(missing)
        })
    })
}

impl<C> ScriptStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// This store deciding through `engine` (a store made by
    /// [`ScriptStore::with_connection`] uses the scripts): `auto` and `module`
    /// are settled by asking the server in the background on the first
    /// decisions (see [`crate::engine`]).
    pub fn with_engine(self, engine: RedisEngine) -> Self {
        let probe_timeout = self.timeout().max(Duration::from_secs(1));
        let kind = slidelog_core::Store::kind(&self);
        self.set_engine_select(EngineSelect::new(engine, kind, probe_timeout))
    }

    /// The engine the store was asked to use.
    pub fn requested_engine(&self) -> RedisEngine {
        self.engine_select().requested()
    }

    /// The engine decisions go through, once known (`None` while `auto` or
    /// `module` has not asked the server yet).
    pub fn engine_in_use(&self) -> Option<Engine> {
        self.engine_select().in_use()
    }

    /// Asks the server(s) now which engine to use: the connect functions'
    /// last step. `engine=module` on a server without the module is a
    /// misconfiguration (never transient), naming the module and how to
    /// load it.
    pub(crate) async fn settle_engine(self, url: &str) -> Result<Self, ConnectError> {
        let error = match self.engine_select().resolve(self.connection()).await {
            Ok(_) => return Ok(self),
            Err(e) => e,
        };
        let transient = match &error {
            ResolveError::Missing(_) => false,
            ResolveError::Probe(e) => crate::errors::is_transient(e),
            ResolveError::Timeout(_) => true,
        };
        let reason = match &error {
            ResolveError::Probe(e) => format!(
                "could not ask whether the slidelog module is loaded: {}",
                crate::errors::describe(e)
            ),
            other => other.to_string(),
        };
        Err(ConnectError::Connect {
            url: mask_password(url),
            reason,
            transient,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::aio::MultiplexedConnection;

    type Select = EngineSelect<MultiplexedConnection>;

    #[test]
    fn script_is_known_at_once_and_the_others_are_not() {
        let s = Select::new(RedisEngine::Script, "t", Duration::from_secs(1));
        assert_eq!(s.in_use(), Some(Engine::Script));
        for requested in [RedisEngine::Auto, RedisEngine::Module] {
            let s = Select::new(requested, "t", Duration::from_secs(1));
            assert_eq!((s.in_use(), s.requested()), (None, requested));
        }
    }

    #[test]
    fn a_missing_module_is_module_only_when_asked_for() {
        let auto = Select::new(RedisEngine::Auto, "t", Duration::from_secs(1));
        assert_eq!(auto.state_for(&["n1".into()]), SCRIPT);
        assert_eq!(auto.state_for(&[]), MODULE);
        let module = Select::new(RedisEngine::Module, "t", Duration::from_secs(1));
        assert_eq!(module.state_for(&["n1".into()]), MISSING);
        module.learn(MISSING, vec!["127.0.0.1:7000".into()], 0);
        let reason = module.missing_reason();
        assert!(
            reason.contains("127.0.0.1:7000") && reason.contains("--loadmodule"),
            "{reason}"
        );
        assert_eq!(module.in_use(), None);
    }
}
