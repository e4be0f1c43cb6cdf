//! Several keyed limits in one layer, decided together: the keys a layer
//! adds with [`RateLimitLayer::key`] beside the one it was built with, and
//! the names its limits are reported under
//! ([`RateLimitLayer::key_name`]).
//!
//! Every key a request carries becomes one check of one
//! [`Limiter::decide_all`](crate::Limiter::decide_all) (docs/design.md §1:
//! admitted only if every key admits, recorded in every key or in none), so
//! a request the IP limit refuses never counts against the API key. A key
//! added here counts in `{namespace}+{key name}:{route}:{key}`: its own
//! logs, apart from the first key's (`{namespace}:{route}:{key}`) and from
//! every other layer's, whatever values the extractors return.

use super::extract::KeyExtractor;
use super::keyed::{KeyError, Keyed, valid};
use super::layer::RateLimitLayer;
use super::routes::RouteLimits;
use slidelog_core::MAX_CHECKS;
use std::sync::Arc;

impl<K: KeyExtractor, C, U> RateLimitLayer<K, C, U> {
    /// Adds the limits `routes` on the key `extractor` picks, decided
    /// together with the layer's other keys: "100 a minute per API key and
    /// 20 a second per IP" is one layer with two keys. Each request is one
    /// [`Limiter::decide_all`](crate::Limiter::decide_all) over every key
    /// its route limits: admitted only if every key admits, and recorded in
    /// every key; refused (by any key), and recorded in none.
    ///
    /// The key counts 1 per request in each of its limits (the layer's
    /// [`cost`](Self::cost) prices the first key); a route `routes` leaves
    /// unlimited is not checked on it; a request without the key is
    /// answered as [`on_missing_key`](Self::on_missing_key) says
    /// (`PassThrough`: decided on its other keys). The RateLimit fields list
    /// every limit under its key's `name` (`"ip"`, `"api-key.requests"`,
    /// the first key's from [`key_name`](Self::key_name)), and
    /// `Retry-After` is the longest wait of the refusing keys.
    ///
    /// ```
    /// use slidelog::middleware::{Header, PeerIp};
    /// use slidelog::{Limiter, RateLimitLayer};
    /// let layer = RateLimitLayer::new(Limiter::memory(), Header::named("x-api-key")?, "100/minute".parse()?)
    ///     .key_name("api-key")?
    ///     .key("ip", PeerIp::new(), "20/second".parse()?)?;
    /// // RateLimit-Policy: "api-key";q=100;w=60, "ip";q=20;w=1
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key(
        mut self,
        name: &str,
        extractor: impl KeyExtractor,
        routes: RouteLimits,
    ) -> Result<Self, KeyError> {
        let name = valid(name)?;
        let config = &mut self.config;
        let taken = std::iter::once(&config.key_name).chain(config.keys.iter().map(|k| &k.name));
        if taken.into_iter().any(|n| **n == *name) {
            return Err(KeyError::Duplicate(name.to_string()));
        }
        let got = config.keys.len() + 2;
        if got > MAX_CHECKS {
            return Err(KeyError::Count {
                got,
                max: MAX_CHECKS,
            });
        }
        let mut keys = config.keys.to_vec();
        keys.push(Arc::new(Keyed {
            name,
            extractor: Arc::new(extractor),
            routes: Arc::new(routes),
        }));
        config.keys = keys.into();
        Ok(self)
    }

    /// Names the layer's first key (the one given to
    /// [`new`](Self::new)) in the RateLimit fields when they list limits by
    /// key: with [`key`](Self::key), or when stacked under or over another
    /// rate limit layer. Default: its extractor's kind (`ip`,
    /// `header-x-api-key`). Naming only: the logs stay where they are.
    pub fn key_name(mut self, name: &str) -> Result<Self, KeyError> {
        let name = valid(name)?;
        if self.config.keys.iter().any(|k| *k.name == *name) {
            return Err(KeyError::Duplicate(name.to_string()));
        }
        self.config.key_name = name;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limiter;
    use crate::middleware::keyed::derived_name;
    use crate::middleware::{Constant, Header, PeerIp};
    use slidelog_core::limit::LimitName;

    #[test]
    fn derived_names_are_valid_names() {
        assert_eq!(&*derived_name("ip"), "ip");
        assert_eq!(&*derived_name("header-x-api-key"), "header-x-api-key");
        assert_eq!(&*derived_name("1:x y"), "k1-x-y");
        let long = derived_name(&"a".repeat(80));
        assert!(LimitName::new(&long).is_ok(), "{long}");
    }

    #[test]
    fn bad_and_repeated_names_are_refused_by_the_builder() {
        let layer = || {
            RateLimitLayer::new(
                Limiter::memory(),
                Header::named("x-api-key").unwrap(),
                "10/minute".parse().unwrap(),
            )
        };
        let per_second = || "1/second".parse().unwrap();
        let err = layer().key("9ip", PeerIp::new(), per_second()).unwrap_err();
        assert_eq!(err, KeyError::Name("9ip".into()));
        // The first key's derived name is taken.
        let err = layer()
            .key("header-x-api-key", PeerIp::new(), per_second())
            .unwrap_err();
        assert_eq!(err, KeyError::Duplicate("header-x-api-key".into()));
        let two = layer().key("ip", PeerIp::new(), per_second()).unwrap();
        assert_eq!(
            two.clone().key_name("ip").unwrap_err(),
            KeyError::Duplicate("ip".into())
        );
        let err = two
            .key("ip", Constant::new("all"), per_second())
            .unwrap_err();
        assert!(err.to_string().contains("already a key"), "{err}");
    }
}
