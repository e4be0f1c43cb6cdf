//! An operator's control of one key (docs/design.md §5.4): a [`Block`]
//! (refused until it expires, with a reason) and an [`Override`] (other
//! limits, or allow / deny, for a time), their bounds, and how an override
//! turns a request into the one decided.

use crate::{InputError, Limit, Request};

pub use crate::limit::MAX_BLOCK_MS;

/// Longest block reason, in bytes.
pub const MAX_REASON_BYTES: usize = 256;

/// Default cap on the blocks and overrides a store holds (`--max-blocks`).
pub const DEFAULT_MAX_CONTROLS: usize = 100_000;

/// A key's block: refused everywhere until it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Block {
    /// Time left, in ms (the whole duration when put).
    pub remaining_ms: u64,
    /// Why the key is blocked (shown to the refused caller).
    pub reason: String,
}

impl Block {
    /// A block of `duration_ms` (1 ..= [`MAX_BLOCK_MS`]) with `reason`
    /// (at most [`MAX_REASON_BYTES`] bytes, no control characters: it is
    /// answered in bodies and logs).
    pub fn new(duration_ms: u64, reason: impl Into<String>) -> Result<Self, InputError> {
        if !(1..=MAX_BLOCK_MS).contains(&duration_ms) {
            return Err(InputError::BlockDuration { got: duration_ms });
        }
        let reason = reason.into();
        if reason.len() > MAX_REASON_BYTES || reason.chars().any(char::is_control) {
            return Err(InputError::Reason { got: reason.len() });
        }
        Ok(Self {
            remaining_ms: duration_ms,
            reason,
        })
    }
}

/// What an override decides for its key instead of the request's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// These limits: by name where the request's limits are named (a
    /// request limit without a namesake keeps its own), else all replace
    /// the request's.
    Limits(Vec<Limit>),
    /// Never limited: admitted without asking the store, nothing recorded.
    Allow,
    /// Always refused.
    Deny,
}

/// A key's override: its rule and the time it has left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// What it decides.
    pub rule: Rule,
    /// Time left, in ms (the whole TTL when put).
    pub remaining_ms: u64,
}

impl Override {
    /// An override of `rule` for `ttl_ms` (1 ..= [`MAX_BLOCK_MS`]); its
    /// limits (1 ..= 16, unique names) are checked as a request's are.
    pub fn new(rule: Rule, ttl_ms: u64) -> Result<Self, InputError> {
        if !(1..=MAX_BLOCK_MS).contains(&ttl_ms) {
            return Err(InputError::OverrideTtl { got: ttl_ms });
        }
        if let Rule::Limits(limits) = &rule {
            if limits.is_empty() || limits.len() > crate::MAX_LIMITS {
                return Err(InputError::LimitCount { got: limits.len() });
            }
            crate::limit::check_names(limits)?;
        }
        Ok(Self {
            rule,
            remaining_ms: ttl_ms,
        })
    }

    /// The request decided in place of `request` under override limits:
    /// named limits replace their namesakes (the others stay), unnamed
    /// ones replace every limit. Costs follow: a request of one cost keeps
    /// it (bounded by the new smallest max: a cost above it is an error,
    /// as for any request), a request of a cost per limit keeps each
    /// named limit's cost and gives 1 to a limit it did not have.
    pub fn apply(limits: &[Limit], request: &Request) -> Result<Request, InputError> {
        let named = limits.iter().all(|l| l.name().is_some())
            && request.limits().iter().any(|l| l.name().is_some());
        if !named {
            return if request.has_one_cost() {
                Request::new(request.key(), limits.to_vec(), request.cost())
            } else {
                let cost = request.costs().iter().copied().max().unwrap_or(1);
                Request::new(request.key(), limits.to_vec(), cost)
            };
        }
        let mut out: Vec<Limit> = Vec::with_capacity(request.limits().len());
        let mut costs = Vec::with_capacity(request.limits().len());
        for (i, limit) in request.limits().iter().enumerate() {
            let twin = limits.iter().find(|l| l.name() == limit.name());
            out.push(*twin.unwrap_or(limit));
            costs.push(request.cost_for(i));
        }
        if request.has_one_cost() {
            Request::new(request.key(), out, request.cost())
        } else {
            Request::with_costs(request.key(), out, costs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_name_the_field() {
        assert!(Block::new(1, "x").is_ok());
        let e = Block::new(MAX_BLOCK_MS + 1, "x").unwrap_err();
        assert_eq!(e.field(), "duration_ms");
        assert!(e.to_string().contains("31622400000"));
        assert_eq!(Block::new(0, "").unwrap_err().field(), "duration_ms");
        assert_eq!(
            Block::new(5, "x".repeat(257)).unwrap_err().field(),
            "reason"
        );
        let e = Override::new(Rule::Allow, u64::MAX).unwrap_err();
        assert_eq!(e.field(), "ttl_ms");
        assert!(Override::new(Rule::Limits(vec![]), 5).is_err());
    }

    #[test]
    fn named_limits_replace_their_namesakes_unnamed_replace_all() {
        let requests = Limit::new(100, 1_000).unwrap().named("requests").unwrap();
        let tokens = Limit::new(1_000, 1_000).unwrap().named("tokens").unwrap();
        let request = Request::with_costs("k", vec![requests, tokens], vec![1, 400]).unwrap();
        let two = Limit::new(2, 1_000).unwrap().named("requests").unwrap();
        let out = Override::apply(&[two], &request).unwrap();
        assert_eq!(out.limits(), [two, tokens]);
        assert_eq!(out.costs(), [1, 400]);
        let plain = Request::single("k", Limit::new(100, 1_000).unwrap()).unwrap();
        let out = Override::apply(&[Limit::new(2, 5_000).unwrap()], &plain).unwrap();
        assert_eq!(out.limits(), [Limit::new(2, 5_000).unwrap()]);
    }
}
