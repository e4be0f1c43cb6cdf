//! The pipeline of a decision on a store reached over the network, written
//! once for the two answers a caller may ask for (the deciding limit's
//! [`Decision`], or every limit's state, [`Detailed`]): the rejection cache,
//! keys held locally, a known outage, the bounded store call, health, the
//! failure policy and the report, in that order (docs/design.md §6).

use super::{Limiter, LimiterError};
use crate::metrics::Op;
use crate::rejection_cache::{RejectionCache, Ticket};
use slidelog_core::{Decision, Detailed, Mode, Now, Request, StoreError};
use std::future::Future;

/// What a decision answers: how the rejection cache serves and learns it,
/// the decision in it, and how the local and policy answers (every limit's
/// state) become it.
pub(super) trait Answer: Sized {
    /// The cache's local answer, or the ticket to observe the store's with.
    fn cached(cache: &RejectionCache, request: &Request) -> Result<Self, Ticket>;
    /// Tells the cache the store's answer.
    fn observe(&self, cache: &RejectionCache, request: &Request, ticket: Ticket);
    /// The deciding limit's decision.
    fn decision(&self) -> &Decision;
    /// The answer of a local or policy decision.
    fn from_each(each: Detailed) -> Self;
}

impl Answer for Decision {
    fn cached(cache: &RejectionCache, request: &Request) -> Result<Self, Ticket> {
        cache.answer(request)
    }

    fn observe(&self, cache: &RejectionCache, request: &Request, ticket: Ticket) {
        cache.observe(request, self, ticket);
    }

    fn decision(&self) -> &Decision {
        self
    }

    fn from_each(each: Detailed) -> Self {
        each.decision
    }
}

impl Answer for Detailed {
    fn cached(cache: &RejectionCache, request: &Request) -> Result<Self, Ticket> {
        cache.answer_each(request)
    }

    fn observe(&self, cache: &RejectionCache, request: &Request, ticket: Ticket) {
        cache.observe_each(request, self, ticket);
    }

    fn decision(&self) -> &Decision {
        &self.decision
    }

    fn from_each(each: Detailed) -> Self {
        each
    }
}

impl Limiter {
    /// Decides `request` (bounded and floored already) through the
    /// pipeline, `call` being the store's bounded answer (not yet polled:
    /// it runs only when no earlier step answers).
    pub(super) async fn through_store<A: Answer>(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
        call: impl Future<Output = Result<A, StoreError>>,
    ) -> Result<A, LimiterError> {
        let op = Op::deciding(mode);
        let started = self.inner.report.start();
        // Only on the store's clock is a cached rejection exact.
        let cache = self
            .inner
            .rejections
            .as_deref()
            .filter(|_| now == Now::Server);
        let ticket = match cache.map(|c| A::cached(c, request)) {
            Some(Ok(local)) => {
                self.inner.report.decided(op, local.decision(), started);
                return Ok(local);
            }
            Some(Err(ticket)) => Some(ticket),
            None => None,
        };
        if self.held_locally(std::iter::once(request.key())) {
            let local = self.locally_each(request, mode, now, op, started, None);
            return local.map(A::from_each);
        }
        if let Some(outage) = self.inner.health.outage() {
            let answer = self.by_policy(request, mode, now, op, outage, started);
            return answer.map(A::from_each);
        }
        match call.await {
            Ok(answer) => {
                if let (Some(cache), Some(ticket)) = (cache, ticket)
                    && !answer.decision().blocked
                {
                    answer.observe(cache, request, ticket);
                }
                self.inner.health.answered();
                self.inner.report.answered(true);
                self.inner.report.decided(op, answer.decision(), started);
                Ok(answer)
            }
            Err(e) => {
                let (health, inner) = (&self.inner.health, &self.inner);
                health.failed(&e, &inner.store, inner.bound);
                let answer = self.by_policy(request, mode, now, op, e, started);
                answer.map(A::from_each)
            }
        }
    }
}
