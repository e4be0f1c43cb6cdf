//! Every limited descriptor of one request decided together, all or nothing
//! (docs/design.md §5.1, "One request, one decision"): a refused request
//! records nothing in any descriptor's log.
//!
//! The plans of a request take part by kind:
//!
//! 1. a rule that refuses without the store (`requests_per_unit: 0`, a cost
//!    above the limit) refuses the whole request before any store call;
//! 2. looks (cost 0) and charges (`charge: true`) are asked first, as
//!    today: a look records nothing, and a charge is usage already spent,
//!    recorded even when the request is refused. A look or a charge over
//!    the limit refuses the whole request;
//! 3. every other limited descriptor is one check of one
//!    [`Limiter::decide_all`](slidelog::Limiter::decide_all) call, recorded
//!    only when every check admits and nothing above refused (otherwise the
//!    same call as a peek, so each descriptor still reports its own state);
//! 4. shadow-mode checks come last, each decided on its own: recorded when
//!    the request was admitted, peeked when it was refused. So a shadow rule
//!    never refuses the request (it is not enforced), never records for a
//!    refused one, and its log counts the traffic it would have admitted.
//!
//! Two descriptors on one store key are one check with their costs added
//! ([`Checks`]). The common request (only checks) is one store call.

use super::plan::{Ask, Plan};
use super::{Answers, RateLimiter, ServiceError, answered};
use slidelog_core::{Checks, Decision, Detailed, InputError, Limit, Mode, Request};

impl RateLimiter {
    /// Decides `plans` together; one answer per plan, `None` where the store
    /// was not asked (as [`RateLimiter::decide`] answers).
    pub(super) async fn decide_jointly(&self, plans: &[Plan]) -> Result<Answers, ServiceError> {
        let mut answers: Answers = plans.iter().map(|_| None).collect();
        let mut refused = plans.iter().any(refuses_without_store);
        if plans.iter().any(is_look_or_charge) {
            refused |= self.looks_and_charges(plans, &mut answers).await?;
        }
        if plans.iter().any(is_enforced_check) {
            let mode = if refused { Mode::Peek } else { Mode::Record };
            let (at, requests): (Vec<usize>, Vec<Request>) = plans
                .iter()
                .enumerate()
                .filter(|(_, p)| is_enforced_check(p))
                .filter_map(|(i, p)| Some((i, plan_request(p)?.clone())))
                .unzip();
            let checks = Checks::new(requests).map_err(too_many_keys)?;
            let joint = self.configured.decide_all(&checks, mode).await?;
            refused |= !joint.allowed;
            for (given, &i) in at.iter().enumerate() {
                let check = checks.check_of(given).expect("one check per given request");
                let limit = plan_request(&plans[i]).map(|r| r.limits()[0]);
                answers[i] = Some(Ok(of_descriptor(&joint.checks[check], limit)));
            }
        }
        if plans.iter().any(is_shadow_check) {
            let mode = if refused { Mode::Peek } else { Mode::Record };
            self.shadow_checks(plans, mode, &mut answers).await;
        }
        Ok(answers)
    }

    /// Asks every look and charge, concurrently; true when one that is
    /// enforced (not shadow mode) is over the limit. A failure (fail-closed,
    /// or a store without charges) is the whole request's answer, returned
    /// before the checks are asked: they must not record for a request that
    /// is then answered with an error.
    async fn looks_and_charges(
        &self,
        plans: &[Plan],
        answers: &mut Answers,
    ) -> Result<bool, ServiceError> {
        let asked = plans
            .iter()
            .enumerate()
            .filter(|(_, p)| is_look_or_charge(p));
        let futures = asked.map(|(i, p)| async move { (i, self.ask(p).await) });
        let mut refused = false;
        for (i, answer) in futures::future::join_all(futures).await {
            let d = match answer {
                Some(Ok(d)) => d,
                Some(Err(e)) => return Err(e.into()),
                None => continue,
            };
            if let Plan::Decide { rule, ask, .. } = &plans[i] {
                refused |= !rule.shadow_mode() && !answered(*ask, d).allowed;
            }
            answers[i] = Some(Ok(d));
        }
        Ok(refused)
    }

    /// Decides every shadow-mode check on its own, concurrently, in `mode`.
    async fn shadow_checks(&self, plans: &[Plan], mode: Mode, answers: &mut Answers) {
        let asked = plans.iter().enumerate().filter(|(_, p)| is_shadow_check(p));
        let futures = asked.filter_map(|(i, p)| {
            let request = plan_request(p)?;
            Some(async move { (i, self.configured.decide(request, mode).await) })
        });
        for (i, answer) in futures::future::join_all(futures).await {
            answers[i] = Some(answer);
        }
    }
}

/// The request of a plan the store decides on.
fn plan_request(plan: &Plan) -> Option<&Request> {
    match plan {
        Plan::Decide { request, .. } => Some(request),
        _ => None,
    }
}

/// An enforced rule that refuses without the store.
fn refuses_without_store(plan: &Plan) -> bool {
    match plan {
        Plan::Blocked(rule) | Plan::TooCostly(rule) => !rule.shadow_mode(),
        _ => false,
    }
}

/// A look (cost 0) or a charge (`charge: true`), asked before the checks.
fn is_look_or_charge(plan: &Plan) -> bool {
    matches!(
        plan,
        Plan::Decide {
            ask: Ask::Look | Ask::Charge,
            ..
        }
    )
}

/// A check the request's admission depends on (not in shadow mode).
fn is_enforced_check(plan: &Plan) -> bool {
    matches!(plan, Plan::Decide { rule, ask: Ask::Check, .. } if !rule.shadow_mode())
}

/// A check in shadow mode: decided, never refusing.
fn is_shadow_check(plan: &Plan) -> bool {
    matches!(plan, Plan::Decide { rule, ask: Ask::Check, .. } if rule.shadow_mode())
}

/// One descriptor's decision from its check's answer. A check is one key;
/// two descriptors on that key with different limits (a client's override
/// beside a rule) make it a check of several limits, and each descriptor
/// then reports its own limit: admitted where that limit admits.
fn of_descriptor(check: &Detailed, limit: Option<Limit>) -> Decision {
    let d = check.decision;
    if check.limits.len() <= 1 {
        return d;
    }
    let own = check
        .limits
        .iter()
        .find(|s| Some(s.limit) == limit)
        .and_then(|s| Some((s.limit, s.counts?)));
    match own {
        Some((limit, c)) => Decision {
            allowed: d.allowed || c.retry_after_ms == 0,
            limit: limit.max(),
            window_ms: limit.window_ms(),
            count: c.count,
            remaining: c.remaining,
            retry_after_ms: c.retry_after_ms,
            reset_after_ms: c.reset_after_ms,
            ..d
        },
        None => d,
    }
}

/// The answer to more distinct limited keys than one joint decision takes
/// ([`slidelog_core::MAX_CHECKS`]; `--max-descriptors` may be set above it).
fn too_many_keys(e: InputError) -> ServiceError {
    match e {
        InputError::CheckCount { got, max } if got > max => ServiceError::InvalidArgument(format!(
            "descriptors: more than {max} limited descriptors on distinct keys, the most one \
             joint decision takes: lower --max-descriptors (SLIDELOG_MAX_DESCRIPTORS) to {max}, \
             or decide each descriptor alone with --envoy-independent-descriptors"
        )),
        e => ServiceError::InvalidArgument(e.to_string()),
    }
}
