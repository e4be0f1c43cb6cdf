//! Usage-based limits through a [`Limiter`] (docs/design.md §4.6): settle a
//! reserved record to its actual costs, charge usage known after the fact.
//! They run through the same parts as a decision (bounds, clock, the
//! store's health, the bounded call, the report), with two differences:
//!
//! - no failure policy answers for them: fail-open admits *decisions* when
//!   the store fails, but a settle or a charge that did not happen must not
//!   pretend it did. A failed one returns [`LimiterError::Store`]; a
//!   reservation left unsettled keeps its estimate until it slides out (a
//!   timed-out charge may or may not have been recorded: retrying it may
//!   count it twice). The exception is a charge under the local policy
//!   ([`FailurePolicy::Local`](crate::FailurePolicy::Local)): it is
//!   recorded in the limiter's own memory and journaled, and charged back
//!   to the store with the local decisions (docs/design.md §6, "Local
//!   answers"), answered `degraded`;
//! - the rejection cache forgets the key, before the call and again after
//!   it (a settle can free units, so a rejection cached before it may no
//!   longer hold; the second bump also voids checks in flight meanwhile).

use super::{Limiter, LimiterError};
use crate::Cost;
use crate::metrics::Op;
use slidelog_core::{Detailed, InputError, Limit, Now, Request, Settled, StoreError};

impl Cost {
    /// Returns the request of a settle or a charge of `key` under `limits`
    /// at this cost ([`Request::usage`]: 0 allowed, above a limit's max
    /// allowed, at most 10,000,000).
    pub fn usage(self, key: impl Into<String>, limits: Vec<Limit>) -> Result<Request, InputError> {
        match self {
            Self::All(cost) => Request::usage(key, limits, vec![cost]),
            Self::PerLimit(costs) => Request::usage(key, limits, costs),
        }
    }
}

impl Limiter {
    /// Settles the record `receipt` names (the receipt an admitted check
    /// answered for `key` under `limits`) to its actual `cost`: one for every
    /// limit or one per limit, up or down; 0 in a limit counts it nowhere
    /// there, 0 everywhere refunds it. Answers [`Settled`]: `settled` false
    /// when the record is gone (expired, reset), and the limits after the
    /// change (the deciding limit, and every limit in [`Settled::limits`]).
    /// A receipt of another key or other limits, a forged, expired or
    /// already settled one (a receipt settles once: use the one the settle
    /// answers) is [`InputError::Receipt`].
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter, Mode, Request};
    /// let limiter = Limiter::memory();
    /// let limits = [Limit::new(60, 60_000)?, Limit::new(20_000, 60_000)?];
    /// // Reserve an estimate of 4,000 tokens; the answer names its record.
    /// let request = Request::with_costs("user-7", limits.to_vec(), vec![1, 4_000])?;
    /// let reserved = limiter.decide(&request, Mode::Record).await?;
    /// let receipt = limiter.receipt(&request, reserved.record).unwrap();
    /// // The response used 1,250 tokens: settle to that.
    /// let settled = limiter.settle("user-7", &limits, &receipt, [1, 1_250]).await?;
    /// assert!(settled.settled);
    /// assert_eq!(settled.decision.count, 1); // the request limit decides: 59 left
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn settle(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        receipt: &str,
        cost: impl Into<Cost>,
    ) -> Result<Settled, LimiterError> {
        let request = cost.into().usage(key, limits.to_vec())?;
        self.settle_at(&request, receipt, self.inner.time.now())
            .await
    }

    /// [`settle`](Self::settle) of a [`Request::usage`] at an explicit time.
    pub async fn settle_at(
        &self,
        request: &Request,
        receipt: &str,
        now: Now,
    ) -> Result<Settled, LimiterError> {
        self.bounds.check(request).map_err(InputError::from)?;
        let floored = self.floored(request);
        let request = floored.as_ref().unwrap_or(request);
        let receipt = self
            .inner
            .receipts
            .open(receipt, request)
            .map_err(InputError::from)?;
        let call = self.inner.store.settle(request, &receipt, now);
        let settled = self.usage_call(Op::Settle, request.key(), call).await?;
        // A receipt the store refused (settled once already; a key holding
        // its most settled receipts) is the caller's error, named.
        match settled.refused {
            Some(refused) => Err(InputError::from(refused).into()),
            None => Ok(settled),
        }
    }

    /// Records `cost` for `key` under `limits` without deciding: usage
    /// reported after the fact, when nothing was reserved. The record counts
    /// even when it takes a limit over its max (later checks wait until it
    /// slides out). Answers the limits after recording, as a settle does:
    /// the deciding limit ([`Detailed::decision`]) and every limit's state.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use slidelog::{Limit, Limiter};
    /// let limiter = Limiter::memory();
    /// let tokens = [Limit::new(1_000, 60_000)?];
    /// let after = limiter.charge("user-7", &tokens, 1_500).await?.decision;
    /// assert_eq!((after.allowed, after.count, after.remaining), (false, 1_500, 0));
    /// assert!(!limiter.check("user-7", &tokens, 1).await?.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn charge(
        &self,
        key: impl Into<String>,
        limits: &[Limit],
        cost: impl Into<Cost>,
    ) -> Result<Detailed, LimiterError> {
        let request = cost.into().usage(key, limits.to_vec())?;
        self.charge_at(&request, self.inner.time.now()).await
    }

    /// [`charge`](Self::charge) of a [`Request::usage`] at an explicit time.
    pub async fn charge_at(&self, request: &Request, now: Now) -> Result<Detailed, LimiterError> {
        self.bounds.check(request).map_err(InputError::from)?;
        let floored = self.floored(request);
        let request = floored.as_ref().unwrap_or(request);
        let local = self.inner.local.is_some();
        let down = local && self.inner.health.is_down();
        if down || self.held_locally(std::iter::once(request.key())) {
            return self.charge_locally(request, now);
        }
        let call = self.inner.store.charge(request, now);
        match self.usage_call(Op::Charge, request.key(), call).await {
            Err(LimiterError::Store(e)) if local && e.is_transient() => {
                self.charge_locally(request, now)
            }
            answered => answered,
        }
    }

    /// Runs a settle or charge `call` on the store: known down, it fails at
    /// once; otherwise bounded, reported, and never answered by policy.
    async fn usage_call<T>(
        &self,
        op: Op,
        key: &str,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, LimiterError> {
        let started = self.inner.report.start();
        let forget = || {
            if let Some(cache) = &self.inner.rejections {
                cache.forget(key);
            }
        };
        forget();
        if let Some(outage) = self.inner.health.outage() {
            self.inner.report.failed(op, &outage, false, started);
            return Err(outage.into());
        }
        let result = self.inner.bound.run(call).await;
        forget();
        match &result {
            Ok(_) => {
                self.inner.health.answered();
                self.inner.report.answered(false);
            }
            Err(e) => {
                let (health, inner) = (&self.inner.health, &self.inner);
                health.failed(e, &inner.store, inner.bound);
                inner.report.failed(op, e, false, started);
            }
        }
        Ok(result?)
    }
}
