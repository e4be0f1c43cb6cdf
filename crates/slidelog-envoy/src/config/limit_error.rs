//! [`RuleLimitError`]: a rule's limit (from the config, or a client's
//! override of it) that breaks a bound, said in the config's own words: the
//! core's `max` is `requests_per_unit` there.

use slidelog_core::{BoundError, InputError};

/// A rule's limit that breaks a bound of docs/design.md §1 or the
/// operator's `--max-limit`, naming `requests_per_unit` where the core
/// names `max`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleLimitError {
    /// `requests_per_unit` outside 1 ..= 10,000,000.
    #[error(
        "requests_per_unit must be between 1 and {}, got {got}",
        slidelog_core::MAX_MAX
    )]
    RequestsPerUnit {
        /// The value given.
        got: u64,
    },
    /// `requests_per_unit` above the largest `max` a client may send.
    #[error(
        "requests_per_unit {got} is above the largest max allowed, {bound} (set by --max-limit / SLIDELOG_MAX_LIMIT)"
    )]
    AboveMaxLimit {
        /// The value given.
        got: u64,
        /// The bound.
        bound: u64,
    },
    /// Any other bound (the window), as the core says it.
    #[error(transparent)]
    Other(InputError),
}

impl From<InputError> for RuleLimitError {
    fn from(e: InputError) -> Self {
        match e {
            InputError::Max { got } => Self::RequestsPerUnit { got },
            InputError::Bound(BoundError::Max { got, bound }) => Self::AboveMaxLimit { got, bound },
            other => Self::Other(other),
        }
    }
}

impl From<BoundError> for RuleLimitError {
    fn from(e: BoundError) -> Self {
        InputError::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_the_core_says_with_requests_per_unit_for_max() {
        let core = [
            InputError::Max { got: 0 },
            InputError::Bound(BoundError::Max {
                got: 200_000,
                bound: 100_000,
            }),
        ];
        for e in core {
            let expected = e.to_string().replacen("max", "requests_per_unit", 1);
            assert_eq!(RuleLimitError::from(e).to_string(), expected);
        }
        let window = InputError::Window { got_ms: 0 };
        assert_eq!(
            RuleLimitError::from(window.clone()).to_string(),
            window.to_string()
        );
    }
}
