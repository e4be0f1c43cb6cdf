//! What the service answers when the store fails (docs/design.md §6).
//!
//! `fail-open` admits the request and marks the answer `degraded: true`:
//! the protected service stays up while the rate limiter is down, at the price
//! of not limiting for that time. `fail-closed` refuses (HTTP 503, gRPC
//! UNAVAILABLE): nothing passes unlimited, at the price of an outage of
//! everything behind the limiter. The default is fail-open (see README).

use std::fmt;
use std::str::FromStr;

/// The policy applied when a store call errors or exceeds its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum FailurePolicy {
    /// Admit and mark the decision `degraded: true`.
    #[default]
    FailOpen,
    /// Refuse with 503 (HTTP) / UNAVAILABLE (gRPC).
    FailClosed,
}

impl FailurePolicy {
    /// The flag value: `fail-open` or `fail-closed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::FailOpen => "fail-open",
            Self::FailClosed => "fail-closed",
        }
    }
}

impl fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is neither `fail-open` nor `fail-closed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown store-error policy {0:?}: use fail-open or fail-closed")]
pub struct UnknownPolicy(pub String);

impl FromStr for FailurePolicy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fail-open" => Ok(Self::FailOpen),
            "fail-closed" => Ok(Self::FailClosed),
            other => Err(UnknownPolicy(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in [FailurePolicy::FailOpen, FailurePolicy::FailClosed] {
            assert_eq!(p.as_str().parse::<FailurePolicy>(), Ok(p));
        }
        assert!("open".parse::<FailurePolicy>().is_err());
        assert_eq!(FailurePolicy::default(), FailurePolicy::FailOpen);
    }
}
