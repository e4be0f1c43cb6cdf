//! Policies: named limit sets an operator defines in one file
//! (docs/design.md §5, "Operators' API"), one policy a line:
//!
//! ```text
//! # comments and blank lines are ignored
//! api-key: requests=100/minute, tokens=20000/minute
//! login:   attempts=5/minute block=10m, on-store-error=fail-closed
//! ```
//!
//! A policy is `NAME: ITEM, ITEM, …`. An item is a limit as
//! [`Limit`]'s `FromStr` reads it (`[name=]MAX/WINDOW`), optionally followed
//! by `block=DURATION` (a key this limit refuses stays refused that long)
//! and `granularity=DURATION`, or an option, `on-store-error=fail-open` or
//! `fail-closed`. Errors name the file, line and column
//! ([`PolicyError`]). The service (`serve --policies FILE`), the library
//! and the layer read the same file: [`Policies::from_file`],
//! [`Policies::from_str`], then [`Policies::get`] and [`Policy::limits`],
//! or [`Policies::limits_of`] for a layer's routes:
//!
//! ```
//! use slidelog::policies::Policies;
//! let policies: Policies = "api-key: requests=100/minute, tokens=20000/minute".parse()?;
//! let limits = policies.limits_of("api-key")?;
//! assert_eq!(limits[1].name(), Some("tokens"));
//! assert!(policies.limits_of("nope").unwrap_err().to_string().contains("api-key"));
//! // In a tower layer: RouteLimits::new(policies.limits_of("api-key")?)
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod parse;

pub use parse::{Policy, PolicyError, PolicyLimit};

use slidelog_core::Limit;
use std::collections::BTreeMap;
use std::path::Path;

/// The most policies one file may define: a policy is looked up per
/// request, and a file is operator input, but a bound keeps a mistake (a
/// generated file gone wrong) from becoming a memory problem.
pub const MAX_POLICIES: usize = 10_000;

/// The policies of one file, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policies {
    by_name: BTreeMap<String, Policy>,
}

impl Policies {
    /// Reads and parses `path`; errors name it with the line and column.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| PolicyError::Read {
            file: path.display().to_string(),
            error: e.to_string(),
        })?;
        parse_text(&path.display().to_string(), &text)
    }

    /// Parses `text`; errors name the file as `<policies>`.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str) -> Result<Self, PolicyError> {
        parse_text("<policies>", text)
    }

    /// The policy named `name`.
    pub fn get(&self, name: &str) -> Option<&Policy> {
        self.by_name.get(name)
    }

    /// The limits of policy `name`, or an error naming it and the known
    /// ones (a layer's routes, a CLI: a name the file lacks is a mistake).
    pub fn limits_of(&self, name: &str) -> Result<Vec<Limit>, PolicyError> {
        match self.get(name) {
            Some(policy) => Ok(policy.limits()),
            None => Err(PolicyError::Unknown {
                name: name.to_owned(),
                known: self.names().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The policies' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// How many policies there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

impl std::str::FromStr for Policies {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, PolicyError> {
        parse_text("<policies>", text)
    }
}

/// Parses the whole file: every line, no name twice, at most
/// [`MAX_POLICIES`].
fn parse_text(file: &str, text: &str) -> Result<Policies, PolicyError> {
    let mut policies = Policies::default();
    for (index, raw) in text.lines().enumerate() {
        let Some(policy) = parse::parse_line(file, index + 1, raw)? else {
            continue;
        };
        if policies.by_name.contains_key(policy.name()) {
            let message = format!("policy {:?} is defined twice", policy.name());
            return Err(parse::line_error(file, index + 1, raw, message));
        }
        if policies.by_name.len() == MAX_POLICIES {
            let message = format!("more than {MAX_POLICIES} policies in one file");
            return Err(parse::line_error(file, index + 1, raw, message));
        }
        policies.by_name.insert(policy.name().to_owned(), policy);
    }
    Ok(policies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailurePolicy;

    #[test]
    fn a_file_of_policies_parses() {
        let text = "# the API\napi-key: requests=100/minute, tokens=20000/minute\n\n\
                    login: attempts=5/minute block=10m granularity=1s, on-store-error=fail-closed # strict\n";
        let p = Policies::from_str(text).unwrap();
        assert_eq!(p.len(), 2);
        let api = p.get("api-key").unwrap();
        assert_eq!(api.limits()[1].max(), 20_000);
        assert_eq!(api.limits()[1].name(), Some("tokens"));
        let login = p.get("login").unwrap();
        assert_eq!(login.policy_limits()[0].block_ms, Some(600_000));
        assert_eq!(login.policy_limits()[0].granularity_ms, Some(1_000));
        assert_eq!(login.on_store_error(), Some(FailurePolicy::FailClosed));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let cases = [
            ("a: 1/s\nb 1/s\n", "<policies>:2:1:"),
            ("a: 1/s, 0/s\n", "<policies>:1:9:"),
            (
                "a: 1/s\na: 2/s\n",
                "<policies>:2:1: policy \"a\" is defined twice",
            ),
            (
                "a: 1/s block=3x\n",
                "<policies>:1:4: block=3x: expected a duration",
            ),
            (
                "a: on-store-error=maybe\n",
                "<policies>:1:4: on-store-error=maybe",
            ),
            ("  é: 1/s\n", "<policies>:1:3: policy name"),
            ("a: x=1/s, x=2/s\n", "<policies>:1:1:"),
            ("a: 1/s,\n", "<policies>:1:8: empty item"),
            (
                "a: 1/s granularity=7ms\n",
                "<policies>:1:4: granularity=7ms must divide",
            ),
        ];
        for (text, expected) in cases {
            let error = Policies::from_str(text).unwrap_err().to_string();
            assert!(error.starts_with(expected), "{text:?}: {error}");
        }
    }
}
