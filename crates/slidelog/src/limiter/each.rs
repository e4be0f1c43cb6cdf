//! Decisions with every limit's state ([`Limiter::decide_each`]): what the
//! HTTP answer's `limits` array, the RateLimit header fields of every limit
//! and the CLI print.
//!
//! A store in this process's memory reports every limit under the lock of
//! the decision (`Store::decide_each`). A store reached over the network
//! goes through the whole pipeline of [`Limiter::decide_at`] (rejection
//! cache, health, timeout, policy) with `Store::decide_each`: the Redis
//! scripts answer every limit in the same run; an engine that answers the
//! deciding limit only (or the failure policy) reports that one, never a
//! second round trip. A rejection answered from the rejection cache reports
//! the deciding limit and each other limit whose stored counts are provably
//! still the store's own ([`crate::rejection_cache`]), the others without
//! counts.

use super::{Limiter, LimiterError};
use crate::metrics::Op;
use slidelog_core::{Detailed, InputError, Mode, Now, Request};

impl Limiter {
    /// [`decide`](Self::decide) with every limit's state, in the request's
    /// order (a store that reports only the deciding limit leaves the
    /// others' counts empty: see [`Detailed`]).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limiter, Mode, Request};
    /// let limits = slidelog::limit::parse_list("requests=3/minute, tokens=1000/minute")?;
    /// let request = Request::with_costs("k", limits, vec![1, 400])?;
    /// let each = Limiter::memory().decide_each(&request, Mode::Record).await?;
    /// let tokens = each.limits[1];
    /// assert_eq!(tokens.limit.name(), Some("tokens"));
    /// assert_eq!(tokens.counts.unwrap().remaining, 600);
    /// assert_eq!(each.decision.remaining, 2); // the deciding limit: requests
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn decide_each(
        &self,
        request: &Request,
        mode: Mode,
    ) -> Result<Detailed, LimiterError> {
        self.decide_each_at(request, mode, self.inner.time.now())
            .await
    }

    /// [`decide_at`](Self::decide_at) with every limit's state.
    pub async fn decide_each_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, LimiterError> {
        self.controlled_each_at(request, mode, now).await
    }

    /// [`decide_each_at`](Self::decide_each_at) on the request as given
    /// (after the key's override).
    pub(super) async fn decide_each_store_at(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, LimiterError> {
        let Some(in_process) = self.inner.store.in_process() else {
            return self.decide_each_remote(request, mode, now).await;
        };
        // In process: no timer, no cache and no outage apply (decide_at
        // skips them for such a store too); bounds, policy and report do.
        self.bounds.check(request).map_err(InputError::from)?;
        let floored = self.floored(request);
        let request = floored.as_ref().unwrap_or(request);
        let op = Op::deciding(mode);
        let started = self.inner.report.start();
        // Synchronously: no boxed future (measured: BENCHMARKS.md).
        match in_process.decide_each_now(request, mode, now) {
            Ok(each) => {
                self.inner.report.answered(true);
                self.inner.report.decided(op, &each.decision, started);
                Ok(each)
            }
            Err(e) => {
                let answer = self.inner.policy.answer(request, e.clone());
                self.inner.report.failed(op, &e, answer.is_ok(), started);
                Ok(Detailed::deciding_only(request, answer?))
            }
        }
    }

    /// [`decide_each_at`](Self::decide_each_at) on a store reached over the
    /// network: [`decide_at`](Self::decide_at)'s steps, with the store's
    /// `decide_each`.
    async fn decide_each_remote(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
    ) -> Result<Detailed, LimiterError> {
        self.bounds.check(request).map_err(InputError::from)?;
        let floored = self.floored(request);
        let request = floored.as_ref().unwrap_or(request);
        let call = self.inner.store.decide_each(request, mode, now);
        self.through_store(request, mode, now, self.inner.bound.run(call))
            .await
    }
}
