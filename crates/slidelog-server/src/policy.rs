//! What the service answers when the store fails (docs/design.md §6): the
//! library's [`FailurePolicy`], applied by its `Limiter`, read from
//! `--on-store-error`.
//!
//! `fail-open` admits the request and marks the answer `degraded: true`:
//! the protected service stays up while the rate limiter is down, at the price
//! of not limiting for that time. `fail-closed` refuses (HTTP 503, gRPC
//! UNAVAILABLE): nothing passes unlimited, at the price of an outage of
//! everything behind the limiter. The default is fail-open (see README).

pub use slidelog::{FailurePolicy, UnknownPolicy};

/// The `--on-store-error` value parser: lists both names in `--help` and in
/// the error for any other value.
pub fn parser() -> impl clap::builder::TypedValueParser<Value = FailurePolicy> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(
        [FailurePolicy::FailOpen, FailurePolicy::FailClosed].map(|p| p.as_str()),
    )
    .try_map(|name| name.parse::<FailurePolicy>())
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
