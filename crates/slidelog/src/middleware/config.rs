//! The configuration of a rate limit layer, built by [`RateLimitLayer`](super::RateLimitLayer)
//! and read by its service on every request: the limiter, the key
//! extractor, the route limits, what a missing key does, the namespace, how
//! a request is charged, and the hooks.

use super::namespace::Namespace;
use super::response::RejectionHook;
use super::routes::RouteLimits;
use crate::{Decision, Limiter};
use http::request::Parts;
use std::sync::Arc;

/// What to do with a request whose key cannot be extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Answer 400 (gRPC INVALID_ARGUMENT). The default: a client cannot
    /// escape its limit by leaving out its key.
    #[default]
    Reject,
    /// Call the inner service without deciding (e.g. anonymous requests that
    /// another layer limits).
    PassThrough,
}

/// Told of every degraded (fail-open) admission.
pub(crate) type DegradedHook = Arc<dyn Fn(&Parts, &Decision) + Send + Sync>;

/// What a layer decides with, shared by every service it made.
pub(crate) struct Config<K, C> {
    pub(crate) limiter: Limiter,
    pub(crate) extractor: Arc<K>,
    pub(crate) routes: Arc<RouteLimits>,
    pub(crate) missing: MissingKey,
    pub(crate) namespace: Arc<Namespace>,
    pub(crate) charge: Arc<C>,
    pub(crate) on_rejection: Option<RejectionHook>,
    pub(crate) on_degraded: Option<DegradedHook>,
}

impl<K, C> Config<K, C> {
    /// Returns this configuration charging with `charge`.
    pub(crate) fn charging<C2>(self, charge: C2) -> Config<K, C2> {
        Config {
            limiter: self.limiter,
            extractor: self.extractor,
            routes: self.routes,
            missing: self.missing,
            namespace: self.namespace,
            charge: Arc::new(charge),
            on_rejection: self.on_rejection,
            on_degraded: self.on_degraded,
        }
    }
}

impl<K, C> std::fmt::Debug for Config<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("namespace", &self.namespace.as_str())
            .field("routes", &self.routes)
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

impl<K, C> Clone for Config<K, C> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            extractor: self.extractor.clone(),
            routes: self.routes.clone(),
            missing: self.missing,
            namespace: self.namespace.clone(),
            charge: self.charge.clone(),
            on_rejection: self.on_rejection.clone(),
            on_degraded: self.on_degraded.clone(),
        }
    }
}
