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

pub use parse::PolicyError;

use crate::FailurePolicy;
use slidelog_core::Limit;
use std::collections::BTreeMap;
use std::path::Path;

/// The most policies one file may define: a policy is looked up per
/// request, and a file is operator input, but a bound keeps a mistake (a
/// generated file gone wrong) from becoming a memory problem.
pub const MAX_POLICIES: usize = 10_000;

/// One limit of a policy: the [`Limit`] and what the limit adds to it.
/// Kept apart from [`Limit`] so the file can carry settings the decision
/// itself does not read (the block after a refusal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyLimit {
    /// The limit (`max` per `window`, its name).
    pub limit: Limit,
    /// `block=DURATION`: how long a key this limit refused stays refused.
    pub block_ms: Option<u64>,
    /// `granularity=DURATION`: records counted at this granule.
    pub granularity_ms: Option<u64>,
}

impl From<&PolicyLimit> for Limit {
    fn from(p: &PolicyLimit) -> Self {
        p.limit
    }
}

/// A named set of limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    name: String,
    limits: Vec<PolicyLimit>,
    on_store_error: Option<FailurePolicy>,
}

impl Policy {
    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its limits with their settings.
    pub fn policy_limits(&self) -> &[PolicyLimit] {
        &self.limits
    }

    /// Its limits, as a request, the layer's routes or the CLI take them.
    pub fn limits(&self) -> Vec<Limit> {
        self.limits.iter().map(Limit::from).collect()
    }

    /// Its `on-store-error`, when it sets one (the service's otherwise).
    pub fn on_store_error(&self) -> Option<FailurePolicy> {
        self.on_store_error
    }
}

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
        parse::parse(&path.display().to_string(), &text)
    }

    /// Parses `text`; errors name the file as `<policies>`.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str) -> Result<Self, PolicyError> {
        parse::parse("<policies>", text)
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
        parse::parse("<policies>", text)
    }
}
