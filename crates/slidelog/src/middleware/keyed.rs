//! What a layer keeps of each key it decides besides its first one
//! ([`Keyed`]), the rules of a key's name, and the errors of a key the layer
//! cannot take. Apart from `keys.rs` (the builder methods on the layer) so
//! that the layer's configuration does not import the layer.

use super::extract::KeyExtractor;
use super::routes::RouteLimits;
use slidelog_core::limit::LimitName;
use std::sync::Arc;

/// A key name or a key that a layer cannot take: refused by the builder
/// method that was given it, never by a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Not 1 to 32 bytes of letters, digits, `_`, `-`, `.` starting with a
    /// letter (a name is written into the RateLimit header fields as is).
    #[error(
        "key name {0:?} must be 1 to 32 bytes of ASCII letters, digits, '_', '-' and '.', starting with a letter"
    )]
    Name(String),
    /// A name another key of the layer already has: the RateLimit fields
    /// would list two limits under one name.
    #[error(
        "key name {0:?} is already a key of this layer; each key's limits are reported under its own name"
    )]
    Duplicate(String),
    /// More keys than one decision may touch.
    #[error("a layer decides at most {max} keys together, got {got}")]
    Count {
        /// How many keys the layer would have.
        got: usize,
        /// The bound ([`MAX_CHECKS`](slidelog_core::MAX_CHECKS)).
        max: usize,
    },
}

/// A key added with [`RateLimitLayer::key`]: its name, who a request counts
/// against, and its limits per route.
pub(crate) struct Keyed {
    pub(crate) name: Arc<str>,
    pub(crate) extractor: Arc<dyn KeyExtractor>,
    pub(crate) routes: Arc<RouteLimits>,
}

impl std::fmt::Debug for Keyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyed")
            .field("name", &self.name)
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

/// Returns `name` when it can name a key (the rules of a limit's name).
pub(crate) fn valid(name: &str) -> Result<Arc<str>, KeyError> {
    LimitName::new(name).map_err(|_| KeyError::Name(name.to_owned()))?;
    Ok(name.into())
}

/// The name of the first key when none is given: its extractor's kind
/// (`ip`, `header-x-api-key`) made a valid name.
pub(crate) fn derived_name(kind: &str) -> Arc<str> {
    let mut name: String = kind
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' | '.' => c,
            _ => '-',
        })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert(0, 'k');
    }
    name.truncate(slidelog_core::limit::MAX_NAME_BYTES);
    name.into()
}
