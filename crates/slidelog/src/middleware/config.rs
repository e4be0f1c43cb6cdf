//! The configuration of a rate limit layer, built by [`RateLimitLayer`](super::RateLimitLayer)
//! and read by its service on every request: the limiter, the key
//! extractor, the route limits, what a missing key does, the namespace, how
//! a request is charged, how it is settled after the response, the hooks,
//! the keys decided with the first ([`super::keys`]), and how long a
//! refused request may wait for room.

use super::keyed::Keyed;
use super::namespace::Namespace;
use super::response::RejectionHook;
use super::routes::RouteLimits;
use super::settle::Settling;
use crate::{Decision, Limiter};
use http::request::Parts;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

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
pub(crate) struct Config<K, C, U> {
    pub(crate) limiter: Limiter,
    pub(crate) extractor: Arc<K>,
    pub(crate) routes: Arc<RouteLimits>,
    pub(crate) missing: MissingKey,
    pub(crate) namespace: Arc<Namespace>,
    pub(crate) charge: Arc<C>,
    /// Reads a real cost from a response body ([`super::settle::ReadUsage`]).
    pub(crate) usage: Arc<U>,
    /// The head sources of a real cost, the refund rule, the settle hook.
    pub(crate) settling: Settling,
    /// True when the layer settles at all (a source, a body reader or a
    /// refund rule): otherwise nothing of the settle path runs.
    pub(crate) settles: bool,
    pub(crate) on_rejection: Option<RejectionHook>,
    pub(crate) on_degraded: Option<DegradedHook>,
    /// The first key's name in the RateLimit fields when they list limits
    /// by key ([`RateLimitLayer::key_name`](super::RateLimitLayer::key_name)).
    pub(crate) key_name: Arc<str>,
    /// The keys decided with the first ([`RateLimitLayer::key`](super::RateLimitLayer::key)).
    pub(crate) keys: Arc<[Arc<Keyed>]>,
    /// Set once this layer met another rate limit layer on one request
    /// ([`super::stack`]): from then on its limits are listed by key, so
    /// they never share a name with the other layer's.
    pub(crate) stacked: Arc<AtomicBool>,
    /// How long a refused request may be held waiting for room
    /// ([`RateLimitLayer::delay_up_to`](super::RateLimitLayer::delay_up_to)).
    pub(crate) delay: Option<std::time::Duration>,
    /// The first key's limits per tier ([`super::tiers`]).
    pub(crate) tiers: Option<Arc<super::tiers::Tiers>>,
}

impl<K, C, U> Config<K, C, U> {
    /// Returns this configuration charging with `charge`.
    pub(crate) fn charging<C2>(self, charge: C2) -> Config<K, C2, U> {
        Config {
            limiter: self.limiter,
            extractor: self.extractor,
            routes: self.routes,
            missing: self.missing,
            namespace: self.namespace,
            charge: Arc::new(charge),
            usage: self.usage,
            settling: self.settling,
            settles: self.settles,
            on_rejection: self.on_rejection,
            on_degraded: self.on_degraded,
            key_name: self.key_name,
            keys: self.keys,
            stacked: self.stacked,
            delay: self.delay,
            tiers: self.tiers,
        }
    }

    /// Returns this configuration reading real costs from bodies with `usage`.
    pub(crate) fn reading<U2>(self, usage: U2) -> Config<K, C, U2> {
        Config {
            limiter: self.limiter,
            extractor: self.extractor,
            routes: self.routes,
            missing: self.missing,
            namespace: self.namespace,
            charge: self.charge,
            usage: Arc::new(usage),
            settling: self.settling,
            settles: true,
            on_rejection: self.on_rejection,
            on_degraded: self.on_degraded,
            key_name: self.key_name,
            keys: self.keys,
            stacked: self.stacked,
            delay: self.delay,
            tiers: self.tiers,
        }
    }
}

impl<K, C, U> std::fmt::Debug for Config<K, C, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("namespace", &self.namespace.as_str())
            .field("routes", &self.routes)
            .field("missing", &self.missing)
            .field("settles", &self.settles)
            .field("key_name", &self.key_name)
            .field("keys", &self.keys)
            .field("delay", &self.delay)
            .finish_non_exhaustive()
    }
}

impl<K, C, U> Clone for Config<K, C, U> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            extractor: self.extractor.clone(),
            routes: self.routes.clone(),
            missing: self.missing,
            namespace: self.namespace.clone(),
            charge: self.charge.clone(),
            usage: self.usage.clone(),
            settling: self.settling.clone(),
            settles: self.settles,
            on_rejection: self.on_rejection.clone(),
            on_degraded: self.on_degraded.clone(),
            key_name: self.key_name.clone(),
            keys: self.keys.clone(),
            stacked: self.stacked.clone(),
            delay: self.delay,
            tiers: self.tiers.clone(),
        }
    }
}

impl<K, C, U> Config<K, C, U> {
    /// Tells whether this layer lists its limits by key: it has several,
    /// or it met another rate limit layer on one request.
    pub(crate) fn by_key(&self) -> bool {
        !self.keys.is_empty() || self.stacked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The name of key `index` (0: the first key, `i`: the `i`-th added).
    pub(crate) fn name_of(&self, index: usize) -> &str {
        match index.checked_sub(1) {
            None => &self.key_name,
            Some(i) => self.keys.get(i).map_or("", |k| &k.name),
        }
    }
}
