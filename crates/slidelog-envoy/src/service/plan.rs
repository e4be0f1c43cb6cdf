//! The plan of each descriptor before the store is asked: the rule that
//! applies (the config's, or a client's override in a configured domain,
//! counted under a name from the domain's bounded budget),
//! whether another matched rule `replaces` it, and the request to decide.

use super::{RateLimiter, ServiceError};
use crate::config::{Domain, RateLimitConfig, Rule, RuleLimitError, Unit};
use crate::proto::rate_limit_descriptor::{Entry, RateLimitOverride};
use crate::proto::{RateLimitDescriptor, RateLimitRequest};
use slidelog_core::{Limit, Request};
use smallvec::SmallVec;
use std::sync::Arc;

/// The plans of one request, on the stack for up to 2 descriptors (Envoy's
/// usual request carries one or two).
pub(super) type Plans = SmallVec<[Plan; 2]>;

/// The plan for one descriptor before the store is asked.
// Most plans are `Decide`, held in a `SmallVec` on the stack for the
// request's life: boxing its `Request` would add an allocation per
// descriptor to a path kept allocation-free (BENCHMARKS.md, the service's
// cost), to shrink variants that are rarely built.
#[allow(clippy::large_enum_variant)]
pub(super) enum Plan {
    /// No rule applies (or a replaced one): `OK`, nothing reported.
    NotLimited,
    /// `unlimited: true`: `OK` with all remaining.
    Unlimited,
    /// `requests_per_unit: 0`: over the limit without asking the store.
    Blocked(Arc<Rule>),
    /// A cost above the rule's `requests_per_unit` (within `--max-cost`) on
    /// a rule that does not charge: it could never be admitted, so it is
    /// over the limit, as in the reference, without asking the store (and,
    /// a rejection, it records nothing).
    TooCostly(Arc<Rule>),
    /// A limit the store decides on.
    Decide {
        /// The rule that applies.
        rule: Arc<Rule>,
        /// The validated request on the rule's store key.
        request: Request,
        /// What is asked of the store.
        ask: Ask,
    },
}

/// What the store is asked about one descriptor, by its cost (the
/// reference service's semantics, docs/design.md's Envoy section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ask {
    /// A check: admitted and recorded when the cost fits, else rejected
    /// and nothing recorded.
    Check,
    /// Cost 0: look without recording. `OK` while the log is not over the
    /// limit (a full log is still `OK`, as the reference's `INCRBY 0` is).
    /// Asked as a peek of cost 1 (every store takes one).
    Look,
    /// A positive cost on a `charge: true` rule: recorded without checking,
    /// even over the limit; `OVER_LIMIT` when the log is then over.
    Charge,
}

impl RateLimiter {
    /// Plans every descriptor of `req`, in order, into `plans` (empty).
    pub(super) fn plan(
        &self,
        config: &RateLimitConfig,
        req: &RateLimitRequest,
        plans: &mut Plans,
    ) -> Result<(), ServiceError> {
        // Looked up once for every descriptor (measured: BENCHMARKS.md).
        let domain = config.domain(&req.domain);
        let request_cost = u64::from(req.hits_addend.max(1));
        if let [d] = req.descriptors.as_slice() {
            // Envoy's usual request: the same steps in the same order as
            // below (rule, unmatched count, cost), without the lists. A
            // lone rule is never replaced: no rule `replaces` its own name
            // (the config refuses it) and an override has no name.
            let rule = self.rule_for(domain, &req.domain, d)?;
            if rule.is_none() {
                self.count_unmatched(domain, &req.domain, d);
            }
            let cost = self.cost_of(0, d, request_cost)?;
            let plan = match rule {
                Some(rule) => plan_rule(rule, &req.domain, d, cost)?,
                None => Plan::NotLimited,
            };
            plans.push(plan);
            return Ok(());
        }
        let matched = req
            .descriptors
            .iter()
            .map(|d| self.rule_for(domain, &req.domain, d))
            .collect::<Result<SmallVec<[_; 4]>, _>>()?;
        let applies = applying(&matched);
        for (d, _) in req
            .descriptors
            .iter()
            .zip(&matched)
            .filter(|(_, r)| r.is_none())
        {
            self.count_unmatched(domain, &req.domain, d);
        }
        for (i, ((d, rule), applies)) in
            req.descriptors.iter().zip(matched).zip(applies).enumerate()
        {
            // Every descriptor's cost is bounded, limited or not.
            let cost = self.cost_of(i, d, request_cost)?;
            plans.push(match rule {
                Some(rule) if applies => plan_rule(rule, &req.domain, d, cost)?,
                _ => Plan::NotLimited,
            });
        }
        Ok(())
    }

    /// Returns the cost of descriptor `i`, as the reference service reads it:
    /// its own `hits_addend` when set (0 included: a look that adds
    /// nothing), else the request's `hits_addend`, 0 meaning 1. Bounded by
    /// `--max-cost` whatever the rule, so no client number goes unchecked.
    fn cost_of(
        &self,
        i: usize,
        d: &RateLimitDescriptor,
        request_cost: u64,
    ) -> Result<u64, ServiceError> {
        let (cost, field) = match d.hits_addend {
            Some(n) => (n, "hits_addend"),
            None => (request_cost, "request hits_addend"),
        };
        self.limiter.bounds().check_cost(cost).map_err(|e| {
            ServiceError::InvalidArgument(format!("descriptors[{i}]: {field}: {e}"))
        })?;
        Ok(cost)
    }

    /// Finds the rule for one descriptor: a limit sent by the client applies when
    /// the domain is configured, as in the reference service; otherwise the
    /// config's match, if any.
    fn rule_for(
        &self,
        domain: Option<&Domain>,
        name: &str,
        d: &RateLimitDescriptor,
    ) -> Result<Option<Arc<Rule>>, ServiceError> {
        let Some(domain) = domain else {
            return Ok(None);
        };
        match &d.limit {
            Some(o) => {
                let (limit, unit) = override_limit(o)?;
                self.limiter
                    .bounds()
                    .check_limits(&[limit])
                    .map_err(|e| override_error(e.into()))?;
                // Named only once valid, so a refused override takes no
                // name of the domain's bounded budget.
                let (path, counters) =
                    domain.override_metric(name, override_name(name, &d.entries));
                Ok(Some(Arc::new(Rule::from_override(
                    limit, unit, path, counters,
                ))))
            }
            None => Ok(domain.lookup(name, &d.entries)),
        }
    }
}

/// A key buffer grown past this (a key longer than the store's bound, about
/// to be hashed) is let go after use.
const KEPT_KEY_BUFFER: usize = 1024;

thread_local! {
    /// The store key of the descriptor being planned on this thread.
    /// Taken out while in use (a `Cell`: no borrow flag), put back after.
    static STORE_KEY: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// Plans a descriptor that a rule applies to.
fn plan_rule(
    rule: Arc<Rule>,
    domain: &str,
    d: &RateLimitDescriptor,
    cost: u64,
) -> Result<Plan, ServiceError> {
    if rule.blocks_all() {
        return Ok(Plan::Blocked(rule));
    }
    let Some(limit) = rule.limit() else {
        return Ok(Plan::Unlimited);
    };
    let ask = match cost {
        0 => Ask::Look,
        _ if rule.charge() => Ask::Charge,
        c if c > limit.max() => return Ok(Plan::TooCostly(rule)),
        _ => Ask::Check,
    };
    // The key is written into this thread's buffer and copied into the
    // request (inline up to 24 bytes), the limit from the stack: no
    // `String` and `Vec` allocated and freed per descriptor (measured: BENCHMARKS.md).
    let mut key = STORE_KEY.take();
    rule.write_store_key(&mut key, domain, &d.entries);
    let request = match ask {
        Ask::Check => Request::from_slices(&key, &[limit], cost),
        Ask::Look => Request::from_slices(&key, &[limit], 1),
        Ask::Charge => Request::usage(key.as_str(), [limit], [cost]),
    };
    if key.capacity() <= KEPT_KEY_BUFFER {
        STORE_KEY.set(key);
    }
    let request = request
        .map_err(|e| ServiceError::InvalidArgument(format!("descriptor {}: {e}", rule.path())))?;
    Ok(Plan::Decide { rule, request, ask })
}

/// Reads a client's limit override: its limit and the unit reported back.
fn override_limit(o: &RateLimitOverride) -> Result<(Limit, Unit), ServiceError> {
    use crate::proto::RateLimitUnit as U;
    let unit = match U::try_from(o.unit).unwrap_or(U::Unknown) {
        U::Second => Unit::Second,
        U::Minute => Unit::Minute,
        U::Hour => Unit::Hour,
        U::Day => Unit::Day,
        U::Month => Unit::Month,
        U::Year => Unit::Year,
        U::Unknown => {
            return Err(ServiceError::InvalidArgument(
                "descriptor limit override: unit must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR"
                    .into(),
            ));
        }
    };
    let limit = Limit::new(u64::from(o.requests_per_unit), unit.millis())
        .map_err(|e| override_error(e.into()))?;
    Ok((limit, unit))
}

/// The metric name the reference gives a client's limit override: the
/// domain and the descriptor's entries, `<domain>.<key>_<value>...`
/// (bounded per domain by `Domain::override_metric`).
fn override_name(domain: &str, entries: &[Entry]) -> String {
    std::iter::once(domain.to_owned())
        .chain(entries.iter().map(|e| format!("{}_{}", e.key, e.value)))
        .collect::<Vec<_>>()
        .join(".")
}

/// Refuses a client's override whose limit breaks a bound.
fn override_error(e: RuleLimitError) -> ServiceError {
    ServiceError::InvalidArgument(format!("descriptor limit override: {e}"))
}

/// Whether each matched rule applies: a rule whose name another matched
/// rule `replaces` does not. Few names, if any: a list on the stack, no
/// hashing.
fn applying(matched: &[Option<Arc<Rule>>]) -> SmallVec<[bool; 4]> {
    let replaced: SmallVec<[&str; 4]> = matched
        .iter()
        .flatten()
        .flat_map(|r| r.replaces().iter().map(String::as_str))
        .collect();
    matched
        .iter()
        .map(|r| {
            r.as_ref()
                .is_some_and(|r| !r.name().is_some_and(|n| replaced.contains(&n)))
        })
        .collect()
}
