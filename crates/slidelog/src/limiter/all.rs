//! Joint decisions ([`Limiter::decide_all`]): several keys decided as one
//! request, all or nothing (docs/design.md §1, "One request, several keys").
//!
//! The pipeline of [`Limiter::decide_at`] applies to the whole request: the
//! bounds to every check and to their number; a rejection still in force
//! for any one key refuses the whole without the store (each key's own
//! refusal is a refusal of the whole); while the store is known down, or
//! when its call fails, the failure policy answers the whole; one bounded
//! store call decides every key atomically ([`Store::decide_all`]).

use super::{Limiter, LimiterError};
use crate::metrics::Op;
use slidelog_core::{
    Checks, Detailed, InputError, JointDecision, Mode, Now, RefusedBy, StoreError,
};

impl Limiter {
    /// Decides `checks` as one request on the limiter's clock: admitted only
    /// if every key admits, and then (in [`Mode::Record`]) recorded in every
    /// key; refused, and recorded in none.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Checks, Limit, Limiter, Mode, Request};
    /// let limiter = Limiter::memory();
    /// let user = Request::single("user-1", Limit::new(10, 60_000)?)?;
    /// let login = Request::single("path=/login", Limit::new(3, 60_000)?)?;
    /// let both = Checks::new([user.clone(), login])?;
    /// let mut admitted = 0;
    /// for _ in 0..6 {
    ///     admitted += u32::from(limiter.decide_all(&both, Mode::Record).await?.allowed);
    /// }
    /// assert_eq!(admitted, 3);
    /// // The three refused requests were recorded nowhere: 7 more for the user.
    /// let alone = limiter.decide_each(&user, Mode::Peek).await?;
    /// assert_eq!(alone.decision.remaining, 6); // 10 - 3 recorded - 1 "as if admitted"
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn decide_all(
        &self,
        checks: &Checks,
        mode: Mode,
    ) -> Result<JointDecision, LimiterError> {
        self.decide_all_at(checks, mode, self.inner.time.now())
            .await
    }

    /// [`decide_all`](Self::decide_all) recording when admitted.
    pub async fn check_all(&self, checks: &Checks) -> Result<JointDecision, LimiterError> {
        self.decide_all(checks, Mode::Record).await
    }

    /// [`decide_all`](Self::decide_all) recording nothing.
    pub async fn peek_all(&self, checks: &Checks) -> Result<JointDecision, LimiterError> {
        self.decide_all(checks, Mode::Peek).await
    }

    /// [`decide_all`](Self::decide_all) at an explicit time.
    pub async fn decide_all_at(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, LimiterError> {
        self.controlled_all_at(checks, mode, now).await
    }

    /// [`decide_all_at`](Self::decide_all_at) on the checks as given (after
    /// every key's override).
    pub(super) async fn decide_all_store_at(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
    ) -> Result<JointDecision, LimiterError> {
        self.bounds.check_all(checks).map_err(InputError::from)?;
        let floored = self.floored_all(checks);
        let checks = floored.as_ref().unwrap_or(checks);
        if let [one] = checks.as_slice() {
            let each = self.decide_each_store_at(one, mode, now).await?;
            return Ok(JointDecision::of(vec![each]));
        }
        let op = Op::deciding(mode);
        let started = self.inner.report.start();
        if let Some(in_process) = self.inner.store.in_process() {
            let answer = in_process.decide_all_now(checks, mode, now);
            return self.reported_all(checks, (mode, now), op, answer, started);
        }
        if let Some(cached) = self.cached_refusal(checks, now) {
            self.inner
                .report
                .decided(op, &cached.deciding().decision, started);
            return Ok(cached);
        }
        if self.held_locally(checks.as_slice().iter().map(|r| r.key())) {
            return self.locally_all(checks, mode, now, op, started, None);
        }
        if let Some(outage) = self.inner.health.outage() {
            return self.all_by_policy(checks, mode, now, op, outage, started);
        }
        let call = self.inner.store.decide_all(checks, mode, now);
        let answer = self.inner.bound.run(call).await;
        if let Err(e) = &answer {
            let inner = &self.inner;
            inner.health.failed(e, &inner.store, inner.bound);
        } else {
            self.inner.health.answered();
        }
        if let (Ok(joint), Some(cache)) = (&answer, self.cache_at(now)) {
            for (request, each) in checks.as_slice().iter().zip(&joint.checks) {
                if each.decision.blocked {
                    continue;
                }
                if let Err(ticket) = cache.answer_each(request) {
                    cache.observe_each(request, each, ticket);
                }
            }
        }
        self.reported_all(checks, (mode, now), op, answer, started)
    }

    /// The rejection cache, where it is exact (on the store's clock).
    fn cache_at(&self, now: Now) -> Option<&crate::rejection_cache::RejectionCache> {
        self.inner
            .rejections
            .as_deref()
            .filter(|_| now == Now::Server)
    }

    /// The whole request refused by the first key whose rejection is still
    /// in force, answered without the store; the others unevaluated.
    fn cached_refusal(&self, checks: &Checks, now: Now) -> Option<JointDecision> {
        let cache = self.cache_at(now)?;
        let requests = checks.as_slice();
        let (at, local) = requests
            .iter()
            .enumerate()
            .find_map(|(i, r)| cache.answer_each(r).ok().map(|d| (i, d)))?;
        let checks: Vec<Detailed> = requests
            .iter()
            .enumerate()
            .map(|(i, r)| {
                if i == at {
                    local.clone()
                } else {
                    Detailed::unevaluated(r)
                }
            })
            .collect();
        let limit = slidelog_core::checks::deciding_position(&checks[at]);
        Some(JointDecision {
            allowed: false,
            checks,
            refused_by: Some(RefusedBy { check: at, limit }),
        })
    }

    /// Reports a store's joint answer, or answers its error by policy.
    fn reported_all(
        &self,
        checks: &Checks,
        (mode, now): (Mode, Now),
        op: Op,
        answer: Result<JointDecision, StoreError>,
        started: super::report::Started,
    ) -> Result<JointDecision, LimiterError> {
        match answer {
            Ok(joint) => {
                self.inner.report.answered(true);
                self.inner
                    .report
                    .decided(op, &joint.deciding().decision, started);
                Ok(joint)
            }
            Err(e) => self.all_by_policy(checks, mode, now, op, e, started),
        }
    }

    /// Answers the whole request by the failure policy for `error`: under
    /// the local policy a transient failure is answered locally, as a whole.
    fn all_by_policy(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
        op: Op,
        error: StoreError,
        started: super::report::Started,
    ) -> Result<JointDecision, LimiterError> {
        if self.inner.local.is_some() && error.is_transient() {
            return self.locally_all(checks, mode, now, op, started, Some(error));
        }
        let answer = self.inner.policy.answer_all(checks, error.clone());
        self.inner
            .report
            .failed(op, &error, answer.is_ok(), started);
        Ok(answer?)
    }
}
