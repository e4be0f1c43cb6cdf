//! What an operator lets clients ask for (docs/design.md §5). Every number a
//! client sends is an allocation it asks for: these bounds sit below the
//! absolute ones of [`crate::limit`] and are checked before a store is
//! touched. A request above one gets a [`BoundError`] that names the bound,
//! its value and how to raise it.

use crate::{Limit, MAX_COST, MAX_LIMITS, MAX_MAX, Request};

/// The bounds a service (or a library user) puts on client requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The largest `max` of a limit a client may send. A key holds at most
    /// this many records (each admitted request is one record and costs at
    /// least one unit), so it bounds a key's memory.
    pub max_limit: u64,
    /// The largest cost of one request (against any one limit).
    pub max_cost: u64,
    /// The most limits in one request.
    pub max_limits: usize,
    /// The most descriptors in one Envoy rate limit request.
    pub max_descriptors: usize,
}

impl Bounds {
    /// No bound beyond the absolute ones (10,000,000 max and cost, 16 limits,
    /// 1,000 descriptors): the library's default, where the caller, not a
    /// remote client, picks the limits.
    pub const ABSOLUTE: Self = Self {
        max_limit: MAX_MAX,
        max_cost: MAX_COST,
        max_limits: MAX_LIMITS,
        max_descriptors: 1_000,
    };

    /// The service's defaults: a key holds at most 100,000 records (about
    /// 0.5 MB in the memory store and 12 MB in Redis at the worst), a request
    /// carries at most 8 limits, and an Envoy request at most 64 descriptors.
    /// Token limits above 100,000 per window raise `max_limit` and `max_cost`.
    pub const SERVICE: Self = Self {
        max_limit: 100_000,
        max_cost: 100_000,
        max_limits: 8,
        max_descriptors: 64,
    };

    /// Checks a request's limits and costs.
    pub fn check(&self, request: &Request) -> Result<(), BoundError> {
        self.check_limits(request.limits())?;
        for &cost in request.costs() {
            self.check_cost(cost)?;
        }
        Ok(())
    }

    /// Checks a set of limits: their number and each `max`.
    pub fn check_limits(&self, limits: &[Limit]) -> Result<(), BoundError> {
        if limits.len() > self.max_limits {
            return Err(BoundError::Limits {
                got: limits.len(),
                bound: self.max_limits,
            });
        }
        match limits.iter().find(|l| l.max() > self.max_limit) {
            Some(l) => Err(BoundError::Max {
                got: l.max(),
                bound: self.max_limit,
            }),
            None => Ok(()),
        }
    }

    /// Checks one cost.
    pub fn check_cost(&self, cost: u64) -> Result<(), BoundError> {
        if cost > self.max_cost {
            return Err(BoundError::Cost {
                got: cost,
                bound: self.max_cost,
            });
        }
        Ok(())
    }

    /// Checks a joint decision: the number of its keys (bounded as an Envoy
    /// request's descriptors are: each is one more log to decide) and each
    /// check's limits and costs.
    pub fn check_all(&self, checks: &crate::Checks) -> Result<(), BoundError> {
        if checks.given() > self.max_descriptors {
            return Err(BoundError::Checks {
                got: checks.given(),
                bound: self.max_descriptors,
            });
        }
        checks.as_slice().iter().try_for_each(|r| self.check(r))
    }

    /// Checks the number of descriptors of an Envoy request.
    pub fn check_descriptors(&self, got: usize) -> Result<(), BoundError> {
        if got > self.max_descriptors {
            return Err(BoundError::Descriptors {
                got,
                bound: self.max_descriptors,
            });
        }
        Ok(())
    }
}

impl Default for Bounds {
    fn default() -> Self {
        Self::ABSOLUTE
    }
}

/// A request above an operator's bound. The message names the field, the
/// bound and the `slidelog serve` flag (and environment variable) that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BoundError {
    /// A limit's `max` above `max_limit`.
    #[error(
        "max {got} is above the largest max allowed, {bound} (set by --max-limit / SLIDELOG_MAX_LIMIT)"
    )]
    Max {
        /// The value given.
        got: u64,
        /// The bound.
        bound: u64,
    },
    /// A cost above `max_cost`.
    #[error(
        "cost {got} is above the largest cost allowed, {bound} (set by --max-cost / SLIDELOG_MAX_COST)"
    )]
    Cost {
        /// The value given.
        got: u64,
        /// The bound.
        bound: u64,
    },
    /// More limits than `max_limits`.
    #[error(
        "limits holds {got} limits, above the most allowed, {bound} (set by --max-limits / SLIDELOG_MAX_LIMITS)"
    )]
    Limits {
        /// How many were given.
        got: usize,
        /// The bound.
        bound: usize,
    },
    /// More keys in one joint decision than `max_descriptors`.
    #[error(
        "checks holds {got} keys, above the most allowed, {bound} (set by --max-descriptors / SLIDELOG_MAX_DESCRIPTORS)"
    )]
    Checks {
        /// How many were given.
        got: usize,
        /// The bound.
        bound: usize,
    },
    /// More descriptors than `max_descriptors`.
    #[error(
        "descriptors holds {got} descriptors, above the most allowed, {bound} (set by --max-descriptors / SLIDELOG_MAX_DESCRIPTORS)"
    )]
    Descriptors {
        /// How many were given.
        got: usize,
        /// The bound.
        bound: usize,
    },
}

impl BoundError {
    /// The request field at fault, as named in the HTTP API.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Max { .. } => "max",
            Self::Cost { .. } => "cost",
            Self::Limits { .. } => "limits",
            Self::Descriptors { .. } => "descriptors",
            Self::Checks { .. } => "checks",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_is_named_with_its_flag() {
        let b = Bounds::SERVICE;
        let big = Limit::new(1_000_000, 60_000).unwrap();
        let r = Request::new("k", vec![big], 1).unwrap();
        let e = b.check(&r).unwrap_err();
        assert_eq!(
            e,
            BoundError::Max {
                got: 1_000_000,
                bound: 100_000
            }
        );
        assert!(e.to_string().contains("--max-limit"), "{e}");
        let ok = Limit::new(100_000, 60_000).unwrap();
        let r = Request::new("k", vec![ok], 100_000).unwrap();
        assert_eq!(b.check(&r), Ok(()));
        let r = Request::with_costs("k", vec![ok, big], vec![1, 200_000]).unwrap();
        assert!(matches!(b.check(&r), Err(BoundError::Max { .. })));
        let loose = Bounds {
            max_limit: MAX_MAX,
            ..b
        };
        assert_eq!(
            loose.check(&r),
            Err(BoundError::Cost {
                got: 200_000,
                bound: 100_000
            })
        );
        assert!(
            b.check_limits(&[ok; 9])
                .unwrap_err()
                .to_string()
                .contains("--max-limits")
        );
        assert!(
            b.check_descriptors(65)
                .unwrap_err()
                .to_string()
                .contains("--max-descriptors")
        );
        assert_eq!(Bounds::default(), Bounds::ABSOLUTE);
    }
}
