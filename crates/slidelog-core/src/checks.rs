//! Several keys decided as one request, all or nothing (docs/design.md §1,
//! "One request, several keys"): admitted only if every key admits, and then
//! recorded in every key; refused, and recorded in none.
//!
//! [`Checks`] is the validated list (one [`Request`] per distinct key, the
//! same key given twice merged into one check with its costs added) and
//! [`JointDecision`] the answer: every key's state, in order, and which key
//! and limit refused.

use crate::{Detailed, InputError, Limit, Request};

/// The most keys one joint decision may touch (the library's bound; a
/// service may set a lower one, e.g. `serve --max-descriptors`). Each key is
/// one more log locked (memory store) or touched (one Redis script).
pub const MAX_CHECKS: usize = 64;

/// One request over several keys, each key with its own limits and costs:
/// 1 ..= [`MAX_CHECKS`] checks on distinct keys, in the caller's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checks {
    checks: Vec<Request>,
    /// For each request given to [`Checks::new`], the check it became (the
    /// same key twice is one check).
    origin: Vec<usize>,
}

impl Checks {
    /// Validates and merges `requests`: 1 ..= [`MAX_CHECKS`] of them, and a
    /// key given more than once is one check whose limits are the union of
    /// its requests' limits, a limit present in several (same name, `max`
    /// and window) costing the sum of their costs — never two checks on one
    /// log, which would let the first record before the second decides.
    pub fn new(requests: impl IntoIterator<Item = Request>) -> Result<Self, InputError> {
        let mut checks: Vec<Request> = Vec::new();
        let mut origin = Vec::new();
        for request in requests {
            if origin.len() >= MAX_CHECKS {
                return Err(InputError::CheckCount {
                    got: origin.len() + 1,
                    max: MAX_CHECKS,
                });
            }
            match checks.iter().position(|c| c.key() == request.key()) {
                Some(at) => {
                    checks[at] = merged(&checks[at], &request)?;
                    origin.push(at);
                }
                None => {
                    origin.push(checks.len());
                    checks.push(request);
                }
            }
        }
        if checks.is_empty() {
            return Err(InputError::CheckCount {
                got: 0,
                max: MAX_CHECKS,
            });
        }
        Ok(Self { checks, origin })
    }

    /// One check alone (always valid).
    pub fn single(request: Request) -> Self {
        Self {
            checks: vec![request],
            origin: vec![0],
        }
    }

    /// The checks, one per distinct key, in the order their keys first came.
    pub fn as_slice(&self) -> &[Request] {
        &self.checks
    }

    /// How many distinct keys.
    pub fn len(&self) -> usize {
        self.checks.len()
    }

    /// Never true: a [`Checks`] holds at least one check.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }

    /// The check that the `given`-th request of [`Checks::new`] became.
    pub fn check_of(&self, given: usize) -> Option<usize> {
        self.origin.get(given).copied()
    }

    /// How many requests were given to [`Checks::new`].
    pub fn given(&self) -> usize {
        self.origin.len()
    }
}

impl<'a> IntoIterator for &'a Checks {
    type Item = &'a Request;
    type IntoIter = std::slice::Iter<'a, Request>;
    fn into_iter(self) -> Self::IntoIter {
        self.checks.iter()
    }
}

/// Two requests on one key as one: the union of their limits, a limit in
/// both costing the sum. Built as a usage request, so that a summed cost
/// above a limit's `max` is a request that is refused, not an input error
/// (two descriptors of cost 1 on one log of max 1 can never both pass).
fn merged(a: &Request, b: &Request) -> Result<Request, InputError> {
    let mut limits: Vec<Limit> = a.limits().to_vec();
    let mut costs: Vec<u64> = (0..limits.len()).map(|i| a.cost_for(i)).collect();
    for (i, limit) in b.limits().iter().enumerate() {
        match limits.iter().position(|l| l == limit) {
            Some(at) => costs[at] = costs[at].saturating_add(b.cost_for(i)),
            None => {
                limits.push(*limit);
                costs.push(b.cost_for(i));
            }
        }
    }
    Request::usage(a.key(), limits, costs)
}

/// Where a refused joint decision was refused: the check (its position in
/// [`Checks::as_slice`]) and, within it, the deciding limit's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RefusedBy {
    /// Position of the refusing check.
    pub check: usize,
    /// Position of its deciding limit in that check's limits.
    pub limit: usize,
}

/// The answer of a joint decision: admitted only if every check admits.
///
/// Each check's [`Detailed`] is what that key alone answers at the same
/// instant: when the whole is admitted (and recorded, for a check), each is
/// its recorded decision; when refused, nothing is recorded anywhere and
/// each reports what its own check would answer without recording (as a
/// peek does: a key that would admit says `allowed` with its counts "as if
/// admitted"; the refusing keys report their refusal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JointDecision {
    /// True only when every check admits.
    pub allowed: bool,
    /// One answer per check, in order.
    pub checks: Vec<Detailed>,
    /// The first refusing check and its deciding limit; `None` when admitted.
    pub refused_by: Option<RefusedBy>,
}

impl JointDecision {
    /// The joint answer over `checks`' answers: refused by the first check
    /// (in order) that refuses.
    pub fn of(checks: Vec<Detailed>) -> Self {
        let refused_by = checks.iter().enumerate().find_map(|(check, d)| {
            (!d.decision.allowed).then(|| RefusedBy {
                check,
                limit: deciding_position(d),
            })
        });
        Self {
            allowed: refused_by.is_none(),
            checks,
            refused_by,
        }
    }

    /// The deciding check's answer: the refusing one, or when admitted the
    /// one with the least remaining relative to its max (the one whose
    /// RateLimit headers a client should see first; ties: the first).
    pub fn deciding(&self) -> &Detailed {
        match self.refused_by {
            Some(r) => &self.checks[r.check],
            None => self
                .checks
                .iter()
                .min_by(|a, b| {
                    let (a, b) = (&a.decision, &b.decision);
                    // remaining/max compared without division.
                    (u128::from(a.remaining) * u128::from(b.limit))
                        .cmp(&(u128::from(b.remaining) * u128::from(a.limit)))
                })
                .expect("a joint decision holds at least one check"),
        }
    }

    /// True when any check's answer came from the failure policy.
    pub fn degraded(&self) -> bool {
        self.checks.iter().any(|d| d.decision.degraded)
    }
}

/// The position of `detailed`'s deciding limit among its limits (0 when no
/// limit matches, as for a degraded answer).
pub fn deciding_position(detailed: &Detailed) -> usize {
    let d = &detailed.decision;
    detailed
        .limits
        .iter()
        .position(|s| s.limit.max() == d.limit && s.limit.window_ms() == d.window_ms)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, max: u64, cost: u64) -> Request {
        Request::new(key, vec![Limit::new(max, 1_000).unwrap()], cost).unwrap()
    }

    #[test]
    fn the_same_key_twice_is_one_check_with_its_costs_added() {
        let checks = Checks::new([req("a", 5, 2), req("b", 5, 1), req("a", 5, 3)]).unwrap();
        assert_eq!(checks.len(), 2);
        assert_eq!(checks.as_slice()[0].costs(), [5]);
        assert_eq!(checks.check_of(2), Some(0));
        assert_eq!(checks.check_of(1), Some(1));
        // Summed past max: still a request, one that can never pass.
        let over = Checks::new([req("a", 1, 1), req("a", 1, 1)]).unwrap();
        assert_eq!(over.as_slice()[0].costs(), [2]);
    }

    #[test]
    fn distinct_limits_on_one_key_are_joined() {
        let other = Request::new("a", vec![Limit::new(9, 60_000).unwrap()], 4).unwrap();
        let checks = Checks::new([req("a", 5, 2), other]).unwrap();
        assert_eq!(checks.as_slice()[0].limits().len(), 2);
        assert_eq!(checks.as_slice()[0].costs(), [2, 4]);
    }

    #[test]
    fn none_and_too_many_are_refused_naming_the_bound() {
        let none = Checks::new(Vec::new()).unwrap_err();
        assert!(none.to_string().contains("checks"), "{none}");
        let many = (0..=MAX_CHECKS).map(|i| req(&format!("k{i}"), 5, 1));
        let err = Checks::new(many).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "checks must hold between 1 and {MAX_CHECKS} keys, got {}",
                MAX_CHECKS + 1
            )
        );
    }
}
