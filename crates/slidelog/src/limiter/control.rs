//! An operator's control of keys through the limiter (docs/design.md §5.4):
//! [`Limiter::block`], [`Limiter::unblock`], [`Limiter::set_override`],
//! [`Limiter::remove_override`]; and the two steps every decision takes
//! around the store call: the key's override first (its limits replace the
//! request's, or allow / deny answers without the store), then a limit's
//! `block_ms` after a refusal (a block set only if none is in force, so
//! refusals during it never extend it).
//!
//! The block itself is checked by the store in the decision's own atomic
//! step (the memory store's table, the Redis scripts' block key). An
//! override is read from the store before the decision: at once on a
//! store in this process's memory, and kept at most
//! [`DEFAULT_OVERRIDE_CACHE`] (or [`LimiterBuilder::override_cache`]) on
//! a remote one.
//!
//! [`LimiterBuilder::override_cache`]: super::LimiterBuilder::override_cache

use super::{Limiter, LimiterError};
use parking_lot::Mutex;
use slidelog_core::{
    Block, Checks, Decision, Detailed, JointDecision, Mode, Now, Override, Request, Rule,
};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a remote store's override is reused by default.
pub const DEFAULT_OVERRIDE_CACHE: Duration = Duration::from_secs(1);

/// Most keys whose override (or its absence) is kept; past it the cache
/// starts again empty (it is a short-lived cache, not a store).
const CACHE_KEYS: usize = 100_000;

/// Overrides read from a remote store, each until a time.
#[derive(Debug)]
pub(crate) struct OverrideCache {
    ttl: Duration,
    held: Mutex<HashMap<String, (Instant, Option<Override>)>>,
}

impl OverrideCache {
    /// A cache keeping each read for `ttl` (zero: none kept).
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            held: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &str) -> Option<Option<Override>> {
        let held = self.held.lock();
        let (until, rule) = held.get(key)?;
        (*until > Instant::now()).then(|| rule.clone())
    }

    fn put(&self, key: &str, rule: Option<Override>) {
        if self.ttl.is_zero() {
            return;
        }
        let mut held = self.held.lock();
        if held.len() >= CACHE_KEYS && !held.contains_key(key) {
            held.clear();
        }
        held.insert(key.to_owned(), (Instant::now() + self.ttl, rule));
    }

    fn forget(&self, key: &str) {
        self.held.lock().remove(key);
    }
}

/// What a key's override makes of a request.
enum Overridden {
    /// No override: the request as given.
    Same,
    /// Decided under the override's limits.
    Limits(Request),
    /// Answered without the store (allow or deny).
    Answer(Detailed),
}

impl Limiter {
    /// Blocks `key` for `duration` (1 ms ..= 366 days) with `reason`, on
    /// every instance sharing the store: each decision on it is refused
    /// ([`Decision::blocked`], `retry_after_ms` the time left) until it
    /// expires or [`unblock`](Self::unblock). A block in force is replaced.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter};
    /// use std::time::Duration;
    /// let limiter = Limiter::memory();
    /// let limits = [Limit::new(100, 60_000)?];
    /// limiter.block("abuser", Duration::from_secs(600), "scraping").await?;
    /// let d = limiter.check("abuser", &limits, 1).await?;
    /// assert!(!d.allowed && d.blocked && d.retry_after_ms <= 600_000);
    /// assert_eq!(limiter.block_of("abuser").await?.unwrap().reason, "scraping");
    /// assert!(limiter.unblock("abuser").await?);
    /// assert!(limiter.check("abuser", &limits, 1).await?.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn block(
        &self,
        key: &str,
        duration: Duration,
        reason: &str,
    ) -> Result<(), LimiterError> {
        slidelog_core::limit::validate_key(key)?;
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let block = Block::new(ms, reason)?;
        self.forget_rejections(key);
        let call = self.inner.store.put_block(key, &block, false);
        self.inner.bound.run(call).await?;
        self.note_control("block", "put");
        Ok(())
    }

    /// Lifts `key`'s block; answers whether one was in force.
    pub async fn unblock(&self, key: &str) -> Result<bool, LimiterError> {
        slidelog_core::limit::validate_key(key)?;
        self.forget_rejections(key);
        let call = self.inner.store.delete_block(key);
        let had = self.inner.bound.run(call).await?;
        self.note_control("block", "delete");
        Ok(had)
    }

    /// `key`'s block in force (its time left and reason), if any.
    pub async fn block_of(&self, key: &str) -> Result<Option<Block>, LimiterError> {
        slidelog_core::limit::validate_key(key)?;
        Ok(self
            .inner
            .bound
            .run(self.inner.store.get_block(key))
            .await?)
    }

    /// Puts `key`'s override for `ttl` (1 ms ..= 366 days): decisions on the
    /// key use `rule`'s limits in place of the request's (by name where
    /// named), or admit ([`Rule::Allow`]) or refuse ([`Rule::Deny`]) it.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter, Rule};
    /// use std::time::Duration;
    /// let limiter = Limiter::memory();
    /// let ask = [Limit::new(100, 60_000)?];
    /// let two = Rule::Limits(vec![Limit::new(2, 60_000)?]);
    /// limiter.set_override("tenant", two, Duration::from_secs(60)).await?;
    /// let admitted = [(); 5].len() - {
    ///     let mut refused = 0;
    ///     for _ in 0..5 { refused += usize::from(!limiter.check("tenant", &ask, 1).await?.allowed); }
    ///     refused
    /// };
    /// assert_eq!(admitted, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn set_override(
        &self,
        key: &str,
        rule: Rule,
        ttl: Duration,
    ) -> Result<(), LimiterError> {
        slidelog_core::limit::validate_key(key)?;
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let entry = Override::new(rule, ms)?;
        self.forget_rejections(key);
        let call = self.inner.store.put_override(key, &entry);
        self.inner.bound.run(call).await?;
        self.inner.overrides.forget(key);
        self.note_control("override", "put");
        Ok(())
    }

    /// Removes `key`'s override; answers whether one was in force.
    pub async fn remove_override(&self, key: &str) -> Result<bool, LimiterError> {
        slidelog_core::limit::validate_key(key)?;
        self.forget_rejections(key);
        let call = self.inner.store.delete_override(key);
        let had = self.inner.bound.run(call).await?;
        self.inner.overrides.forget(key);
        self.note_control("override", "delete");
        Ok(had)
    }

    /// `key`'s override in force, read from the store now.
    pub async fn override_of(&self, key: &str) -> Result<Option<Override>, LimiterError> {
        slidelog_core::limit::validate_key(key)?;
        Ok(self
            .inner
            .bound
            .run(self.inner.store.get_override(key))
            .await?)
    }

    /// How many blocks and how many overrides the store holds, when it
    /// counts them.
    pub async fn control_count(&self) -> Result<Option<(usize, usize)>, LimiterError> {
        Ok(self
            .inner
            .bound
            .run(self.inner.store.control_count())
            .await?)
    }

    fn forget_rejections(&self, key: &str) {
        if let Some(cache) = &self.inner.rejections {
            cache.forget(key);
        }
    }

    fn note_control(&self, what: &'static str, op: &'static str) {
        if let Some(metrics) = self.inner.report.metrics() {
            metrics.control(what, op);
        }
    }

    /// The key's override, from the cache or the store. A store that fails
    /// to answer is taken to have none: the decision's own call then meets
    /// the failure and its policy.
    async fn override_for(&self, key: &str) -> Option<Override> {
        // In process: at once, without a boxed future per decision.
        if let Some(local) = self.inner.store.in_process() {
            return local.override_now(key);
        }
        if let Some(cached) = self.inner.overrides.get(key) {
            return cached;
        }
        let call = self.inner.store.get_override(key);
        let read = self.inner.bound.run(call).await.ok()?;
        self.inner.overrides.put(key, read.clone());
        read
    }

    /// What the key's override makes of `request`.
    async fn overridden(&self, request: &Request) -> Result<Overridden, LimiterError> {
        let Some(entry) = self.override_for(request.key()).await else {
            return Ok(Overridden::Same);
        };
        Ok(match entry.rule {
            Rule::Limits(limits) => Overridden::Limits(Override::apply(&limits, request)?),
            Rule::Allow => Overridden::Answer(Detailed::unevaluated(request)),
            Rule::Deny => {
                let mut refused = Detailed::blocked(request, entry.remaining_ms);
                refused.decision.blocked = false;
                Overridden::Answer(refused)
            }
        })
    }

    /// [`Limiter::decide_at`]: the override, the store, then `block_ms`.
    pub(super) async fn controlled_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Decision, LimiterError> {
        let replaced = match self.overridden(request).await? {
            Overridden::Same => None,
            Overridden::Limits(r) => Some(r),
            Overridden::Answer(d) => return Ok(d.decision),
        };
        let request = replaced.as_ref().unwrap_or(request);
        let mut decision = self.decide_store_at(request, mode, now).await?;
        let refusing = deciding_block_ms(request, &decision);
        self.penalize(request.key(), refusing, &mut decision).await;
        Ok(decision)
    }

    /// [`Limiter::decide_each_at`]: the override, the store, then `block_ms`.
    pub(super) async fn controlled_each_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, LimiterError> {
        let replaced = match self.overridden(request).await? {
            Overridden::Same => None,
            Overridden::Limits(r) => Some(r),
            Overridden::Answer(d) => return Ok(d),
        };
        let request = replaced.as_ref().unwrap_or(request);
        let mut each = self.decide_each_store_at(request, mode, now).await?;
        let refusing = each_block_ms(&each);
        self.penalize(request.key(), refusing, &mut each.decision)
            .await;
        Ok(each)
    }

    /// [`Limiter::decide_all_at`]: every key's override (a deny refuses
    /// the whole, an allowed key is left out of the store's decision), the
    /// store, then `block_ms` on the refusing key.
    pub(super) async fn controlled_all_at(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, LimiterError> {
        let mut fixed: Vec<Option<Detailed>> = Vec::with_capacity(checks.as_slice().len());
        let mut asked: Vec<Request> = Vec::with_capacity(checks.as_slice().len());
        for request in checks.as_slice() {
            match self.overridden(request).await? {
                Overridden::Same => asked.push(request.clone()),
                Overridden::Limits(r) => asked.push(r),
                Overridden::Answer(d) => {
                    fixed.push(Some(d));
                    continue;
                }
            }
            fixed.push(None);
        }
        if fixed.iter().all(Option::is_none) {
            let checks = Checks::new(asked)?;
            let mut joint = self.decide_all_store_at(&checks, mode, now).await?;
            self.penalize_joint(checks.as_slice(), &mut joint).await;
            return Ok(joint);
        }
        let denied = fixed.iter().flatten().any(|d| !d.decision.allowed);
        let decided = match (denied, asked.is_empty()) {
            (false, false) => {
                let checks = Checks::new(asked.clone())?;
                let mut joint = self.decide_all_store_at(&checks, mode, now).await?;
                self.penalize_joint(checks.as_slice(), &mut joint).await;
                joint.checks
            }
            // A deny refuses the whole: the others are not asked.
            _ => asked.iter().map(Detailed::unevaluated).collect(),
        };
        let mut decided = decided.into_iter();
        let each = fixed
            .into_iter()
            .map(|f| f.or_else(|| decided.next()))
            .collect::<Option<Vec<_>>>()
            .expect("one answer per check");
        Ok(JointDecision::of(each))
    }

    /// `block_ms` on the key that refused a joint request (`asked`: the
    /// requests the store decided, in the answer's order).
    async fn penalize_joint(&self, asked: &[Request], joint: &mut JointDecision) {
        let Some(refused) = joint.refused_by else {
            return;
        };
        let each = &mut joint.checks[refused.check];
        let refusing = each_block_ms(each);
        let key = asked[refused.check].key();
        self.penalize(key, refusing, &mut each.decision).await;
    }

    /// A limit's `block_ms` after a refusal by it (`refusing_ms`, 0: none):
    /// the key is blocked for it unless a block is in force (only-new, so
    /// refusals during a block never extend it), and the answer says so.
    async fn penalize(&self, key: &str, refusing_ms: u64, decision: &mut Decision) {
        if refusing_ms == 0 || decision.allowed || decision.blocked || decision.degraded {
            return;
        }
        let Ok(block) = Block::new(refusing_ms, "block_ms") else {
            return;
        };
        let call = self.inner.store.put_block(key, &block, true);
        if let Ok(true) = self.inner.bound.run(call).await {
            self.note_control("block", "penalty");
            decision.blocked = true;
            decision.retry_after_ms = decision.retry_after_ms.max(refusing_ms);
        }
    }
}

/// The `block_ms` of the limit a decision names as deciding, when refused.
fn deciding_block_ms(request: &Request, decision: &Decision) -> u64 {
    request
        .limits()
        .iter()
        .find(|l| l.max() == decision.limit && l.window_ms() == decision.window_ms)
        .map_or(0, |l| l.block_ms())
}

/// The largest `block_ms` among the limits that refused (those whose
/// counts show a wait; the deciding one when the store gave no counts).
fn each_block_ms(each: &Detailed) -> u64 {
    if each.decision.allowed {
        return 0;
    }
    let waiting = each
        .limits
        .iter()
        .filter(|s| s.counts.is_some_and(|c| c.retry_after_ms > 0))
        .map(|s| s.limit.block_ms())
        .max();
    waiting
        .or_else(|| each.deciding().map(|s| s.limit.block_ms()))
        .unwrap_or(0)
}
