//! The failure policy: what a decision answers when the store fails
//! (docs/design.md §6). Fail-open admits, marked `degraded`; fail-closed
//! returns the error; local decides each limit at a share of its max in this
//! instance's memory and charges what it admitted back to the store when it
//! returns ([`crate::limiter`]'s `local` part). A full store is not an
//! outage: no policy admits past it.

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
    /// While the store is known down or a call fails transiently, decide
    /// every limit at `ceil(max × share)` in this instance's own memory
    /// store (exact there), marked `degraded`; when the store returns,
    /// charge every record admitted so back to it at its own time, once,
    /// and answer locally until that is done (docs/design.md §6, "Local
    /// answers"). Other failures return the error, as fail-closed does.
    /// Make it with [`FailurePolicy::local`].
    Local {
        /// The share of each limit's `max` one instance admits alone, in
        /// parts per million (1 ..= 1,000,000).
        share_ppm: u32,
    },
}

/// Parts per million in a share of 1.
pub const PPM: u32 = 1_000_000;

/// A local share outside (0, 1], or too small to count in parts per million.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--local-share must be greater than 0 and at most 1 (at least 0.000001), got {0}")]
pub struct BadShare(pub f64);

impl FailurePolicy {
    /// Returns the local policy at `share` of every limit (0 < share <= 1,
    /// kept to parts per million, rounded to the nearest).
    ///
    /// ```
    /// use slidelog::FailurePolicy;
    /// let p = FailurePolicy::local(0.34)?;
    /// assert_eq!(p, FailurePolicy::Local { share_ppm: 340_000 });
    /// assert_eq!(p.local_max(30), Some(11)); // ceil(30 × 0.34)
    /// assert!(FailurePolicy::local(0.0).is_err());
    /// assert!(FailurePolicy::local(1.5).is_err());
    /// # Ok::<(), slidelog::BadShare>(())
    /// ```
    pub fn local(share: f64) -> Result<Self, BadShare> {
        if !(share > 0.0 && share <= 1.0) {
            return Err(BadShare(share));
        }
        let share_ppm = (share * f64::from(PPM)).round() as u32;
        if share_ppm == 0 {
            return Err(BadShare(share));
        }
        Ok(Self::Local { share_ppm })
    }

    /// Under the local policy, the `max` one instance admits alone for a
    /// limit of `max`: `ceil(max × share)`, at least 1. `None` otherwise.
    pub fn local_max(&self, max: u64) -> Option<u64> {
        match *self {
            Self::Local { share_ppm } => {
                let scaled = u128::from(max) * u128::from(share_ppm);
                Some(scaled.div_ceil(u128::from(PPM)).max(1) as u64)
            }
            _ => None,
        }
    }

    /// Returns the flag value: `fail-open`, `fail-closed` or `local`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::FailOpen => "fail-open",
            Self::FailClosed => "fail-closed",
            Self::Local { .. } => "local",
        }
    }

    /// Returns the answer to `request` when the store failed with `error`:
    /// the degraded admission under fail-open, the error otherwise (and
    /// always for a full store, which is not an outage). The local policy's
    /// answers need the limiter's own memory store: the limiter answers
    /// them itself, so here local returns the error.
    pub fn answer(self, request: &Request, error: StoreError) -> Result<Decision, StoreError> {
        if self == Self::FailOpen && !error.is_full() {
            Ok(degraded_allow(request))
        } else {
            Err(error)
        }
    }

    /// [`answer`](Self::answer) for a joint decision: the policy answers the
    /// whole request (every check degraded and admitted under fail-open; the
    /// error otherwise), never one key apart from the others. Under the
    /// local policy the limiter decides a transient failure's joint request
    /// locally, as a whole, before asking this (which then answers the
    /// error, as for one key).
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
        match self {
            Self::Local { share_ppm } => {
                write!(
                    f,
                    "local (share {})",
                    f64::from(*share_ppm) / f64::from(PPM)
                )
            }
            other => f.write_str(other.as_str()),
        }
    }
}

/// A policy name that is neither `fail-open` nor `fail-closed`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown store-error policy {0:?}: use fail-open or fail-closed (local needs a share: FailurePolicy::local)"
)]
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
    fn a_local_share_is_refused_outside_0_to_1_and_scales_by_ceiling() {
        for bad in [0.0, -0.1, 1.000_001, f64::NAN, f64::INFINITY, 1e-9] {
            let e = FailurePolicy::local(bad).unwrap_err().to_string();
            assert!(
                e.contains("--local-share") && e.contains("at most 1"),
                "{e}"
            );
        }
        let whole = FailurePolicy::local(1.0).unwrap();
        assert_eq!(whole.local_max(10_000_000), Some(10_000_000));
        let p = FailurePolicy::local(0.000_001).unwrap();
        assert_eq!(p.local_max(1), Some(1));
        assert_eq!(FailurePolicy::local(0.34).unwrap().local_max(30), Some(11));
        assert_eq!(FailurePolicy::FailOpen.local_max(30), None);
        assert_eq!(whole.to_string(), "local (share 1)");
        // Local answers a failure by the limiter, never here: an error.
        let outage = StoreError::Unavailable("down".into());
        assert!(whole.answer(&request(), outage).is_err());
    }

    #[test]
    fn the_flag_values_round_trip() {
        for p in [FailurePolicy::FailOpen, FailurePolicy::FailClosed] {
            assert_eq!(p.as_str().parse::<FailurePolicy>(), Ok(p));
        }
        assert!("open".parse::<FailurePolicy>().is_err());
    }
}
