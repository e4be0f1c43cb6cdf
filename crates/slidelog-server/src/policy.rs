//! What the service answers when the store fails (docs/design.md §6): the
//! library's [`FailurePolicy`], applied by its `Limiter`, read from
//! `--on-store-error` (and `--local-share` for `local`).
//!
//! `fail-open` admits the request and marks the answer `degraded: true`:
//! the protected service stays up while the rate limiter is down, at the price
//! of not limiting for that time. `fail-closed` refuses (HTTP 503, gRPC
//! UNAVAILABLE): nothing passes unlimited, at the price of an outage of
//! everything behind the limiter. `local` is between the two: each instance
//! decides every limit at `ceil(max × --local-share)` in its own memory
//! (degraded), and charges what it admitted back to the store when it
//! returns. The default is fail-open (docs/guide/operations.md).

pub use slidelog::{FailurePolicy, UnknownPolicy};

/// The `--on-store-error` value: the policy's name (its share comes from
/// `--local-share`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyName {
    /// `fail-open`.
    FailOpen,
    /// `fail-closed`.
    FailClosed,
    /// `local`: needs `--local-share`.
    Local,
}

impl PolicyName {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FailOpen => "fail-open",
            Self::FailClosed => "fail-closed",
            Self::Local => "local",
        }
    }

    /// The policy of this name and `--local-share`: the share is required
    /// with `local` and refused without it; out of (0, 1] it is refused
    /// naming the flag and the bound.
    pub fn policy(self, local_share: Option<f64>) -> anyhow::Result<FailurePolicy> {
        match (self, local_share) {
            (Self::FailOpen, None) => Ok(FailurePolicy::FailOpen),
            (Self::FailClosed, None) => Ok(FailurePolicy::FailClosed),
            (Self::Local, Some(share)) => Ok(FailurePolicy::local(share)?),
            (Self::Local, None) => anyhow::bail!(
                "--on-store-error local requires --local-share F (0 < F <= 1: the share of each limit one instance admits while the store is down; about 1/N for N instances)"
            ),
            (other, Some(_)) => anyhow::bail!(
                "--local-share applies only to --on-store-error local, not {}",
                other.as_str()
            ),
        }
    }
}

impl std::fmt::Display for PolicyName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `--on-store-error` value parser: lists every name in `--help` and in
/// the error for any other value.
pub fn parser() -> impl clap::builder::TypedValueParser<Value = PolicyName> {
    use clap::builder::TypedValueParser;
    let names = [
        PolicyName::FailOpen,
        PolicyName::FailClosed,
        PolicyName::Local,
    ];
    clap::builder::PossibleValuesParser::new(names.map(PolicyName::as_str)).map(|name| {
        match name.as_str() {
            "fail-closed" => PolicyName::FailClosed,
            "local" => PolicyName::Local,
            _ => PolicyName::FailOpen,
        }
    })
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

    #[test]
    fn local_needs_a_share_in_0_to_1_and_only_local_takes_one() {
        let local = PolicyName::Local;
        assert_eq!(
            local.policy(Some(0.34)).unwrap(),
            FailurePolicy::Local { share_ppm: 340_000 }
        );
        let missing = local.policy(None).unwrap_err().to_string();
        assert!(missing.contains("requires --local-share"), "{missing}");
        for bad in [0.0, 1.5, -1.0, f64::NAN] {
            let e = local.policy(Some(bad)).unwrap_err().to_string();
            assert!(
                e.contains("--local-share must be greater than 0 and at most 1"),
                "{e}"
            );
        }
        let stray = PolicyName::FailOpen
            .policy(Some(0.5))
            .unwrap_err()
            .to_string();
        assert!(stray.contains("--local-share applies only"), "{stray}");
    }
}
