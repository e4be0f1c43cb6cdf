//! Why a limiter call, or opening a limiter, failed.

use crate::url::OpenError;
use slidelog_core::{InputError, StoreError};

/// Why a limiter call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LimiterError {
    /// The request breaks a bound of docs/design.md §1 (the message names the field).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The store failed and the policy is fail-closed (or the call was a
    /// reset or ping, to which no policy applies).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a limiter could not be built from a URL.
pub type BuildError = OpenError;
