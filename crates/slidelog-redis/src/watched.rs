//! One decision on its own task: the caller waits at most the per-call
//! timeout; the task waits [`LATE_WINDOW`] more, so that a check whose reply
//! came after its caller gave up is counted (a late record), and one whose
//! reply never came is counted too (an unknown outcome). The counters belong
//! to one store ([`Counters`]): stores never mix their counts.

use crate::script::{self, Outcome};
use crate::usage::{Usage, UsageOutcome};
use redis::RedisError;
use redis::aio::ConnectionLike;
use slidelog_core::{Mode, Request, StoreStats};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long after its caller timed out a check's reply is still awaited,
/// to count a late record; then the call is dropped (and the connection
/// becomes suspect, [`crate::heal`]).
pub const LATE_WINDOW: Duration = Duration::from_millis(250);

/// The late records and unknown outcomes of one store.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    late_records: AtomicU64,
    unknown_outcomes: AtomicU64,
}

impl Counters {
    /// Returns the counts so far.
    pub(crate) fn stats(&self) -> StoreStats {
        StoreStats {
            late_records: self.late_records.load(Ordering::Relaxed),
            unknown_outcomes: self.unknown_outcomes.load(Ordering::Relaxed),
            ..StoreStats::default()
        }
    }
}

/// Why a watched call gave no decision.
#[derive(Debug)]
pub(crate) enum CallError {
    /// Redis answered with an error (or the connection failed).
    Redis(RedisError),
    /// The script refused the check: Redis `TIME` was past its deadline, so
    /// nothing was recorded. The caller's time budget is spent: a timeout.
    DeadlinePassed,
    /// No answer within the per-call timeout.
    Timeout,
    /// The task ended without sending an answer (it panicked).
    Vanished,
}

/// One decision to run: the Redis key (prefix applied), the request, and
/// the time and deadline the script gets (`None`: Redis `TIME`, no deadline).
pub(crate) struct Call {
    /// The engine that decides (the one dispatch: [`crate::engine::Engine::run`]).
    pub engine: crate::engine::Engine,
    pub key: Vec<u8>,
    pub request: Request,
    pub mode: Mode,
    pub now_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
    /// Every limit's state too ([`crate::script::Check::each`]).
    pub each: bool,
}

/// Runs `call` on its own task over `conn`, waiting at most `timeout` for
/// it; the task keeps waiting [`LATE_WINDOW`] more and counts into
/// `counters` (see the module docs).
pub(crate) async fn run<C>(
    mut conn: C,
    call: Call,
    timeout: Duration,
    counters: Arc<Counters>,
) -> Result<Outcome, CallError>
where
    C: ConnectionLike + Send + 'static,
{
    let mode = call.mode;
    let work = async move {
        let check = crate::engine::Check {
            redis_key: &call.key,
            request: &call.request,
            mode: call.mode,
            now_ms: call.now_ms,
            deadline_ms: call.deadline_ms,
            each: call.each,
        };
        call.engine.run(&mut conn, check).await
    };
    let recorded = move |o: &Outcome| mode == Mode::Record && o.decision.allowed;
    watch(work, recorded, mode == Mode::Record, timeout, counters).await
}

/// One joint decision to run (docs/design.md §4.7), watched as a check is:
/// late when it recorded (every check admitted) after its caller gave up.
pub(crate) struct AllCall {
    /// The engine that decides ([`crate::engine::Engine::run_all`]).
    pub engine: crate::engine::Engine,
    /// Each check's Redis key, in the checks' order.
    pub keys: Vec<Vec<u8>>,
    pub checks: slidelog_core::Checks,
    pub mode: Mode,
    pub now_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
}

/// [`run`] for a joint decision.
pub(crate) async fn run_all<C>(
    mut conn: C,
    call: AllCall,
    timeout: Duration,
    counters: Arc<Counters>,
) -> Result<Vec<Outcome>, CallError>
where
    C: ConnectionLike + Send + 'static,
{
    let mode = call.mode;
    let work = async move {
        let joint = crate::joint::JointCall {
            keys: &call.keys,
            checks: &call.checks,
            mode: call.mode,
            now_ms: call.now_ms,
            deadline_ms: call.deadline_ms,
            reserve: false,
        };
        call.engine.run_all(&mut conn, joint).await
    };
    // All or nothing: the first check admitted means every one recorded.
    let recorded =
        move |o: &Vec<Outcome>| mode == Mode::Record && o.iter().all(|o| o.decision.allowed);
    watch(work, recorded, mode == Mode::Record, timeout, counters).await
}

/// One settle or charge to run (docs/design.md §4.5), watched as a check is.
pub(crate) struct UsageCall {
    /// The engine that runs it ([`crate::engine::Engine::run_usage`]).
    pub engine: crate::engine::Engine,
    pub key: Vec<u8>,
    pub request: Request,
    pub usage: Usage,
    pub now_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
}

/// [`run`] for a settle or a charge: a late one that changed the log is a
/// late record, one never answered an unknown outcome.
pub(crate) async fn run_usage<C>(
    mut conn: C,
    call: UsageCall,
    timeout: Duration,
    counters: Arc<Counters>,
) -> Result<UsageOutcome, CallError>
where
    C: ConnectionLike + Send + 'static,
{
    let work = async move {
        let run = call.engine.run_usage(
            &mut conn,
            &call.key,
            &call.request,
            &call.usage,
            call.now_ms,
            call.deadline_ms,
        );
        run.await
    };
    watch(work, |o: &UsageOutcome| o.done, true, timeout, counters).await
}

/// Runs `work` on its own task, waiting at most `timeout`; the task waits
/// [`LATE_WINDOW`] more: a late answer for which `recorded` holds is a late
/// record, no answer at all (when `records`) an unknown outcome.
async fn watch<T, W, R>(
    work: W,
    recorded: R,
    records: bool,
    timeout: Duration,
    counters: Arc<Counters>,
) -> Result<T, CallError>
where
    T: Send + 'static,
    W: Future<Output = redis::RedisResult<T>> + Send + 'static,
    R: Fn(&T) -> bool + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        match tokio::time::timeout(timeout + LATE_WINDOW, work).await {
            Ok(result) => {
                if let Err(Ok(outcome)) = tx.send(result)
                    && recorded(&outcome)
                {
                    counters.late_records.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(_) if records => {
                counters.unknown_outcomes.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
        }
    });
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(Ok(outcome))) => Ok(outcome),
        Ok(Ok(Err(e))) if script::is_deadline(&e) => Err(CallError::DeadlinePassed),
        Ok(Ok(Err(e))) => Err(CallError::Redis(e)),
        Ok(Err(_)) => Err(CallError::Vanished),
        Err(_) => Err(CallError::Timeout),
    }
}
