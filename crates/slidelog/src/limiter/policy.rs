//! The failure policy: what a decision answers when the store fails
//! (docs/design.md §6). Fail-open admits, marked `degraded`; fail-closed
//! returns the error. A full store is not an outage: no policy admits past it.

use slidelog_core::{Decision, Request, StoreError};

/// What a decision does when the store fails (docs/design.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FailurePolicy {
    /// Admit the request and mark the decision `degraded` (the default, as
    /// Envoy's rate limit filter does: an outage of the limiter does not
    /// become an outage of the service).
    #[default]
    FailOpen,
    /// Return the store error ([`LimiterError::Store`](crate::LimiterError::Store);
    /// HTTP 503, gRPC `UNAVAILABLE`).
    FailClosed,
}

impl FailurePolicy {
    /// Returns the flag value: `fail-open` or `fail-closed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::FailOpen => "fail-open",
            Self::FailClosed => "fail-closed",
        }
    }

    /// Returns the answer to `request` when the store failed with `error`:
    /// the degraded admission under fail-open, the error otherwise (and
    /// always for a full store, which is not an outage).
    pub fn answer(self, request: &Request, error: StoreError) -> Result<Decision, StoreError> {
        if self == Self::FailOpen && !error.is_full() {
            Ok(degraded_allow(request))
        } else {
            Err(error)
        }
    }

    /// [`answer`](Self::answer) for a joint decision: the policy answers the
    /// whole request (every check degraded and admitted under fail-open; the
    /// error otherwise), never one key apart from the others.
    pub fn answer_all(
        self,
        checks: &slidelog_core::Checks,
        error: StoreError,
    ) -> Result<slidelog_core::JointDecision, StoreError> {
        let each = checks
            .as_slice()
            .iter()
            .map(|r| {
                let d = self.answer(r, error.clone())?;
                Ok(slidelog_core::Detailed::deciding_only(r, d))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(slidelog_core::JointDecision::of(each))
    }
}

impl std::fmt::Display for FailurePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy name that is neither `fail-open` nor `fail-closed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown store-error policy {0:?}: use fail-open or fail-closed")]
pub struct UnknownPolicy(pub String);

impl std::str::FromStr for FailurePolicy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fail-open" => Ok(Self::FailOpen),
            "fail-closed" => Ok(Self::FailClosed),
            other => Err(UnknownPolicy(other.to_owned())),
        }
    }
}

/// Returns the fail-open answer: admitted, degraded, reporting the tightest limit
/// (smallest max, then shortest window) with nothing counted.
fn degraded_allow(request: &Request) -> Decision {
    let tightest = request
        .limits()
        .iter()
        .min_by_key(|l| (l.max(), l.window_ms()))
        .expect("a validated request has at least one limit");
    Decision::degraded_allow(tightest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelog_core::{FullLimit, Limit};

    fn request() -> Request {
        let limits = vec![
            Limit::new(10, 1_000).unwrap(),
            Limit::new(5, 60_000).unwrap(),
        ];
        Request::new("k", limits, 1).unwrap()
    }

    #[test]
    fn fail_open_admits_degraded_on_the_tightest_limit_and_fail_closed_returns_the_error() {
        let outage = || StoreError::Unavailable("down".into());
        let d = FailurePolicy::FailOpen
            .answer(&request(), outage())
            .unwrap();
        assert!(d.allowed && d.degraded);
        assert_eq!((d.limit, d.window_ms), (5, 60_000));
        assert!(
            FailurePolicy::FailClosed
                .answer(&request(), outage())
                .is_err()
        );
    }

    #[test]
    fn no_policy_admits_past_a_full_store() {
        let full = StoreError::Full {
            limit: FullLimit::Keys(1),
            retry_after_ms: None,
        };
        assert!(FailurePolicy::FailOpen.answer(&request(), full).is_err());
    }

    #[test]
    fn the_flag_values_round_trip() {
        for p in [FailurePolicy::FailOpen, FailurePolicy::FailClosed] {
            assert_eq!(p.as_str().parse::<FailurePolicy>(), Ok(p));
        }
        assert!("open".parse::<FailurePolicy>().is_err());
    }
}
