//! Where the [`Limiter`]'s pipeline hands a decision to its local part
//! (docs/design.md §6, "Local answers"): a key with records still to
//! charge back, or a transient store failure under the local policy, is
//! decided in the limiter's own memory store and reported as such.

use crate::limiter::report::Started;
use crate::limiter::{Limiter, LimiterError};
use crate::metrics::Op;
use slidelog_core::{Checks, Detailed, JointDecision, Mode, Now, Request, StoreError};

impl Limiter {
    /// Whether any of `keys` has local records awaiting charge-back (so
    /// its decision is answered locally until they are charged).
    pub(crate) fn held_locally<'a>(&self, keys: impl Iterator<Item = &'a str>) -> bool {
        self.inner.local.as_ref().is_some_and(|l| l.holds(keys))
    }

    /// Decides `request` locally; `failure` is the store's error that sent
    /// it here (none when its key awaits charge-back), counted as failures
    /// are.
    pub(crate) fn locally_each(
        &self,
        request: &Request,
        mode: Mode,
        now: Now,
        op: Op,
        started: Started,
        failure: Option<StoreError>,
    ) -> Result<Detailed, LimiterError> {
        let Some(local) = &self.inner.local else {
            return Err(failure.unwrap_or_else(not_local).into());
        };
        let answer = local.decide_each(&self.inner, request, mode, now);
        self.report_local(op, answer.as_ref().map(|d| &d.decision), started, failure);
        Ok(answer?)
    }

    /// Decides `checks` locally, as one request (see
    /// [`locally_each`](Self::locally_each)).
    pub(crate) fn locally_all(
        &self,
        checks: &Checks,
        mode: Mode,
        now: Now,
        op: Op,
        started: Started,
        failure: Option<StoreError>,
    ) -> Result<JointDecision, LimiterError> {
        let Some(local) = &self.inner.local else {
            return Err(failure.unwrap_or_else(not_local).into());
        };
        let answer = local.decide_all(&self.inner, checks, mode, now);
        let deciding = answer.as_ref().map(|j| &j.deciding().decision);
        self.report_local(op, deciding, started, failure);
        Ok(answer?)
    }

    /// Charges `request` locally: recorded in the limiter's own memory and
    /// journaled for charge-back (the store's failure, if any, was
    /// reported by the call that failed).
    pub(crate) fn charge_locally(
        &self,
        request: &Request,
        now: Now,
    ) -> Result<Detailed, LimiterError> {
        let Some(local) = &self.inner.local else {
            return Err(not_local().into());
        };
        Ok(local.charge(&self.inner, request, now)?)
    }

    /// Reports a local answer: the store's failure that caused it, if any
    /// (degraded when answered), and the answer by policy.
    fn report_local(
        &self,
        op: Op,
        answer: Result<&slidelog_core::Decision, &StoreError>,
        started: Started,
        failure: Option<StoreError>,
    ) {
        let report = &self.inner.report;
        match (&failure, answer) {
            (Some(e), answer) => report.failed(op, e, answer.is_ok(), started),
            (None, Ok(d)) => report.decided(op, d, started),
            (None, Err(_)) => {}
        }
        if let (Ok(d), Some(metrics)) = (answer, report.metrics()) {
            metrics.local_decided(op, d);
        }
    }
}

/// The error of a local answer asked of a limiter without the local
/// policy (never expected: callers check first).
fn not_local() -> StoreError {
    StoreError::Backend("no local policy on this limiter".into())
}
