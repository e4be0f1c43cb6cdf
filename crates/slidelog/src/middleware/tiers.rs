//! Limits chosen per key ("tiers"): free keys 100 a minute, paid keys
//! 10,000, in one layer ([`RateLimitLayer::tiers`](super::RateLimitLayer::tiers)).
//!
//! A [`TierLookup`] (a closure, or a type that asks a database) names the
//! tier of the layer's first key; [`Tiers`] holds each tier's limits
//! ([`RouteLimits`], so a tier may have its own per-route limits) and a
//! bounded cache of the answers, each kept for a TTL, so a lookup that
//! costs a query runs once per key per TTL, not once per request. A key no
//! tier holds (the lookup says `None`, or names no tier of the table) gets
//! the layer's own limits, the `"default"` tier.
//!
//! Each tier counts in its own logs (`{namespace}:tier-{name}:{route}:{key}`):
//! a key is used with one set of limits (docs/design.md §1), so a key that
//! moves to another tier starts that tier's count afresh. The RateLimit
//! fields list the tier's limits under their own names (name them
//! `free-requests=100/minute`), and the limiter's
//! [`MetricsHook::tier_decided`](crate::metrics::MetricsHook::tier_decided)
//! hears each decision with its tier's name.

use super::routes::RouteLimits;
use parking_lot::Mutex;
use slidelog_core::limit::LimitName;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What [`TierLookup::tier`] returns: the tier's name, or `None`.
pub type TierFuture<'a> = Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;

/// Names the tier of a key (the layer's first key, e.g. an API key).
///
/// Any `Fn(&str) -> Option<String>` is one; implement the trait to look
/// keys up asynchronously (a database, a billing API): answers are cached
/// by [`Tiers`].
pub trait TierLookup: Send + Sync + 'static {
    /// Returns the name of `key`'s tier, or `None` for the default.
    fn tier<'a>(&'a self, key: &'a str) -> TierFuture<'a>;
}

impl<F> TierLookup for F
where
    F: Fn(&str) -> Option<String> + Send + Sync + 'static,
{
    fn tier<'a>(&'a self, key: &'a str) -> TierFuture<'a> {
        Box::pin(std::future::ready(self(key)))
    }
}

/// A tier name [`Tiers::tier`] cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TierError {
    /// Not 1 to 32 bytes of letters, digits, `_`, `-`, `.` starting with a
    /// letter (it is part of log keys and a metric label).
    #[error(
        "tier name {0:?} must be 1 to 32 bytes of ASCII letters, digits, '_', '-' and '.', starting with a letter"
    )]
    Name(String),
    /// `default` names the layer's own limits.
    #[error("tier name \"default\" is the layer's own limits; give the tier another name")]
    Default,
}

/// One tier: its name and limits.
#[derive(Debug, Clone)]
pub(crate) struct Tier {
    pub(crate) name: Arc<str>,
    pub(crate) routes: RouteLimits,
}

/// The tiers of a layer: each tier's limits, the lookup, and its cache.
#[derive(Clone)]
pub struct Tiers {
    tiers: HashMap<Arc<str>, Tier>,
    lookup: Arc<dyn TierLookup>,
    cache: Cache,
}

impl std::fmt::Debug for Tiers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiers")
            .field("tiers", &self.tiers.keys().collect::<Vec<_>>())
            .field("cache", &(self.cache.capacity, self.cache.ttl))
            .finish_non_exhaustive()
    }
}

impl Tiers {
    /// Tiers named by `lookup`, with a cache of 10,000 keys for 60 s.
    ///
    /// ```
    /// use slidelog::middleware::{Header, Tiers};
    /// use slidelog::{Limiter, RateLimitLayer};
    /// let plan = |api_key: &str| Some(if api_key.starts_with("pk_") { "paid" } else { "free" }.to_owned());
    /// let tiers = Tiers::new(plan)
    ///     .tier("free", "free-requests=100/minute".parse()?)?
    ///     .tier("paid", "paid-requests=10000/minute".parse()?)?;
    /// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "10/minute".parse()?)
    ///     .tiers(tiers);
    /// // RateLimit-Policy: "paid-requests";q=10000;w=60 for a paid key
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(lookup: impl TierLookup) -> Self {
        Self {
            tiers: HashMap::new(),
            lookup: Arc::new(lookup),
            cache: Cache::new(10_000, Duration::from_secs(60)),
        }
    }

    /// Gives keys in tier `name` the limits `routes` (replacing an earlier
    /// tier of that name).
    pub fn tier(mut self, name: &str, routes: RouteLimits) -> Result<Self, TierError> {
        LimitName::new(name).map_err(|_| TierError::Name(name.to_owned()))?;
        if name == "default" {
            return Err(TierError::Default);
        }
        let name: Arc<str> = name.into();
        let tier = Tier {
            name: name.clone(),
            routes,
        };
        self.tiers.insert(name, tier);
        Ok(self)
    }

    /// Caches up to `capacity` keys' tiers, each for `ttl` (a key whose
    /// plan changes gets its new tier within `ttl`). `capacity` 0: no cache.
    pub fn cache(mut self, capacity: usize, ttl: Duration) -> Self {
        self.cache = Cache::new(capacity, ttl);
        self
    }

    /// Returns the tier of `key`: cached, or asked of the lookup. `None`:
    /// the layer's own limits.
    pub(crate) async fn of(&self, key: &str) -> Option<&Tier> {
        let name = match self.cache.get(key) {
            Some(name) => name,
            None => {
                let name = self.lookup.tier(key).await;
                self.cache.put(key, name.clone());
                name
            }
        };
        self.tiers.get(name?.as_str())
    }

    /// Every tier's limits, mutably (costs by name resolve against them).
    pub(crate) fn routes_mut(&mut self) -> impl Iterator<Item = &mut RouteLimits> {
        self.tiers.values_mut().map(|t| &mut t.routes)
    }

    /// Every tier's limits.
    pub(crate) fn routes(&self) -> impl Iterator<Item = &RouteLimits> {
        self.tiers.values().map(|t| &t.routes)
    }
}

/// Keys' tiers, each kept for `ttl`, at most `capacity` of them.
struct Cache {
    capacity: usize,
    ttl: Duration,
    entries: Mutex<HashMap<String, (Option<String>, Instant)>>,
}

/// A copy of a layer's tiers (a builder step) starts with an empty cache.
impl Clone for Cache {
    fn clone(&self) -> Self {
        Self::new(self.capacity, self.ttl)
    }
}

impl Cache {
    fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            capacity,
            ttl,
            entries: Mutex::default(),
        }
    }

    /// The cached tier of `key` (`Some(None)`: cached as no tier).
    fn get(&self, key: &str) -> Option<Option<String>> {
        let entries = self.entries.lock();
        let (name, at) = entries.get(key)?;
        (at.elapsed() < self.ttl).then(|| name.clone())
    }

    /// Caches `name` for `key`. Full: expired entries go first, then any
    /// one, so the cache never holds more than `capacity` keys.
    fn put(&self, key: &str, name: Option<String>) {
        if self.capacity == 0 {
            return;
        }
        let mut entries = self.entries.lock();
        if entries.len() >= self.capacity && !entries.contains_key(key) {
            let ttl = self.ttl;
            entries.retain(|_, (_, at)| at.elapsed() < ttl);
            if entries.len() >= self.capacity
                && let Some(any) = entries.keys().next().cloned()
            {
                entries.remove(&any);
            }
        }
        entries.insert(key.to_owned(), (name, Instant::now()));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn lookups_are_cached_bounded_and_unknown_tiers_are_the_default() {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = asked.clone();
        let lookup = move |key: &str| {
            counter.fetch_add(1, Ordering::Relaxed);
            key.strip_prefix("t-").map(str::to_owned)
        };
        let tiers = Tiers::new(lookup)
            .tier("paid", "5/minute".parse().unwrap())
            .unwrap()
            .cache(2, Duration::from_secs(60));
        assert_eq!(&*tiers.of("t-paid").await.unwrap().name, "paid");
        assert_eq!(&*tiers.of("t-paid").await.unwrap().name, "paid");
        assert_eq!(asked.load(Ordering::Relaxed), 1, "cached");
        assert!(tiers.of("t-gold").await.is_none(), "no such tier: default");
        assert!(tiers.of("anon").await.is_none());
        assert_eq!(tiers.cache.len(), 2, "bounded");
        assert_eq!(
            Tiers::new(lookup_none)
                .tier("default", "1/second".parse().unwrap())
                .unwrap_err(),
            TierError::Default
        );
    }

    fn lookup_none(_: &str) -> Option<String> {
        None
    }
}
