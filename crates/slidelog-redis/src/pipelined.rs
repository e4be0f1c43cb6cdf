//! **UNSAFE, for comparison only.** The original design's "lightweight"
//! variant without Lua: one pipeline reads (ZREMRANGEBYSCORE, then the live
//! records), the client decides, a second pipeline writes (ZADD, PEXPIRE).
//!
//! A pipeline is not atomic: between one caller's read and its write, other
//! callers read the same count and all of them admit, so under concurrency
//! this admits **more than `max`** (the original note's "A reads 99, B writes
//! the 100th, A writes the 101st"). It exists only so that tests and
//! `slidelog bench --unsafe-pipelined` can show why every decision is one
//! atomic script. It is never a default and no URL opens it.

use crate::errors::bounded;
use crate::members::{costs_of, member};
use crate::options::RedisOptions;
use redis::aio::ConnectionLike;
use slidelog_core::{
    Clock, Decision, Log, Mode, Now, Request, Store, StoreError, SystemClock, engine,
};
use std::sync::Arc;
use std::time::Duration;

/// The non-atomic, pipelined sliding log. **Admits more than `max` under
/// concurrency**; see the module documentation. Always decides on the
/// caller's clock (as the original did), never on Redis `TIME`.
#[derive(Clone)]
pub struct UnsafePipelinedStore<C> {
    conn: C,
    prefix: Arc<str>,
    timeout: Duration,
    clock: Arc<dyn Clock>,
}

impl<C> std::fmt::Debug for UnsafePipelinedStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnsafePipelinedStore")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<C> UnsafePipelinedStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// The unsafe variant over `conn` (same key layout as the script store).
    pub fn with_connection(conn: C, options: &RedisOptions) -> Self {
        Self {
            conn,
            prefix: options.key_prefix.as_str().into(),
            timeout: options.timeout,
            clock: Arc::new(SystemClock),
        }
    }

    async fn decide_inner(
        &self,
        request: &Request,
        mode: Mode,
        now_ms: u64,
    ) -> redis::RedisResult<Decision> {
        let key = format!("{}{}", self.prefix, request.key());
        let mut conn = self.conn.clone();
        // Read: drop the expired records and fetch the live ones.
        let cutoff = now_ms as i64 - request.longest_window_ms() as i64;
        let (_, scores): (i64, Vec<(String, f64)>) = redis::pipe()
            .cmd("ZREMRANGEBYSCORE")
            .arg(&key)
            .arg("-inf")
            .arg(cutoff)
            .cmd("ZRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await?;
        // The records with the costs their members carry, oldest first.
        let mut log = Log::new();
        for (member, score) in &scores {
            log.append(*score as u64, &costs_of(member));
        }
        // Decide in the client: the gap before the write is the race.
        let decision = engine::evaluate(&log, now_ms, request);
        if decision.allowed && mode == Mode::Record {
            let mut add = redis::cmd("ZADD");
            add.arg(&key).arg(now_ms).arg(member(request));
            let _: () = redis::pipe()
                .add_command(add)
                .ignore()
                .cmd("PEXPIRE")
                .arg(&key)
                .arg(request.longest_window_ms())
                .ignore()
                .query_async(&mut conn)
                .await?;
        }
        Ok(decision)
    }
}

#[async_trait::async_trait]
impl<C> Store for UnsafePipelinedStore<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn decide(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, StoreError> {
        let now_ms = now.or_clock(&*self.clock);
        bounded(self.timeout, self.decide_inner(request, mode, now_ms)).await
    }

    async fn reset(&self, key: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("DEL")
            .arg(format!("{}{key}", self.prefix))
            .clone();
        let deleted: i64 = bounded(self.timeout, cmd.query_async(&mut conn)).await?;
        Ok(deleted > 0)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        crate::errors::ping(&mut self.conn.clone(), self.timeout).await
    }

    fn kind(&self) -> &'static str {
        "redis-unsafe-pipelined"
    }
}
