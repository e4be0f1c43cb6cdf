//! Opening a store from its URL, the same in every subcommand and in the
//! library: `memory://` (default), `redis://…`, `rediss://…`,
//! `redis+cluster://…` / `rediss+cluster://…` (Redis Cluster) and
//! `redis+sentinel://…/master-name` / `rediss+sentinel://…` (Sentinel).
//! The URL model itself is [`StoreUrl`], one for every crate.

use crate::redact::mask_password;
pub use slidelog_core::url::{MultiHostUrl, StoreUrl, UrlError};
use slidelog_core::{DEFAULT_KEY_PREFIX, Store};
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::time::Duration;

/// The default upper bound on one store call: 100 ms.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

/// Options that only opening a store from its URL reads (the per-call
/// timeout is the caller's: [`open_store`]'s argument, the limiter's
/// [`timeout`](crate::LimiterBuilder::timeout)).
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Key cap of the memory store. Default 1,000,000.
    pub memory_key_cap: usize,
    /// Budget of bytes held by the memory store. Default 1 GiB.
    pub memory_limit: usize,
    /// Prefix of Redis keys. Default `rate:sliding:`.
    pub key_prefix: String,
    /// Redis stores: upper bound on establishing the first connection.
    /// Default 2 s.
    pub connect_timeout: Duration,
    /// Redis stores: do not wait for Redis at open; decisions return
    /// transient errors until it answers (for a service that must start
    /// while Redis is down). Default false: opening checks `PING`.
    pub lazy_connect: bool,
    /// Redis stores: a PEM root certificate to trust for `rediss://` (a
    /// private CA). Default none (the built-in web roots).
    pub tls_root_cert_pem: Option<Vec<u8>>,
    /// The cap on blocks and overrides the store holds (`--max-blocks`,
    /// docs/design.md §5.4).
    pub max_controls: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            memory_key_cap: slidelog_memory::DEFAULT_KEY_CAP,
            memory_limit: slidelog_memory::DEFAULT_MEMORY_LIMIT,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            connect_timeout: Duration::from_secs(2),
            lazy_connect: false,
            tls_root_cert_pem: None,
            max_controls: slidelog_core::control::DEFAULT_MAX_CONTROLS,
        }
    }
}

/// A store URL that cannot be opened.
///
/// Its message says what failed (`cannot open store`); its
/// [`source`](std::error::Error::source), the connect error, names the store
/// (its URL, password masked) and says why. An error-chain printer (anyhow's
/// `{:#}`) adds it once, so the URL and the cause are each said once.
/// [`OpenError::with_causes`] is both on one line, for a log or a message
/// that shows one string.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL does not parse (an unknown scheme, a bad host list).
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The store could not be reached or configured. The message leaves the
    /// URL to the source, which names it too.
    #[cfg(feature = "redis")]
    #[error("cannot open store")]
    Open {
        /// The URL with any password masked.
        url: String,
        /// What went wrong, with whether it may pass by itself.
        source: slidelog_redis::ConnectError,
    },
}

impl OpenError {
    /// Returns true when trying again later may work (Redis refused or did not answer
    /// in time); false for a URL or configuration that will not get better.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Url(_) => false,
            #[cfg(feature = "redis")]
            Self::Open { source, .. } => {
                matches!(
                    source,
                    slidelog_redis::ConnectError::Connect {
                        transient: true,
                        ..
                    }
                )
            }
        }
    }

    /// This error and its causes on one line, each said once: `cannot open
    /// store: cannot connect to redis://127.0.0.1:1: Connection refused (os
    /// error 111)`.
    pub fn with_causes(&self) -> String {
        slidelog_core::error::with_causes(self)
    }
}

impl StoreOptions {
    /// Sets the prefix of Redis keys.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Sets the upper bound on establishing the first Redis connection.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Opens Redis stores without waiting for Redis: decisions fail (and the
    /// limiter's policy answers) until it is reachable.
    pub fn lazy_connect(mut self) -> Self {
        self.lazy_connect = true;
        self
    }

    /// Returns the in-process memory store these options describe (its key
    /// cap and memory budget): the one place a memory store is made from
    /// options, by URL or by a service that keeps a handle on it.
    pub fn memory_store(&self) -> MemoryStore {
        MemoryStore::new()
            .with_key_cap(self.memory_key_cap)
            .with_memory_limit(self.memory_limit)
            .with_max_controls(self.max_controls)
    }
}

/// Opens the store that `url` names; a Redis store bounds each call by
/// `timeout` (the memory store answers without I/O).
pub async fn open_store(
    url: &str,
    options: &StoreOptions,
    timeout: Duration,
) -> Result<Arc<dyn Store>, OpenError> {
    match StoreUrl::parse(url)? {
        StoreUrl::Memory => Ok(Arc::new(options.memory_store())),
        #[cfg(feature = "redis")]
        // Boxed: the Redis connect futures nest deeply, and a caller's
        // future that holds them inline can overflow rustc's query depth.
        parsed => Box::pin(open_redis(url, &parsed, options, timeout)).await,
        #[cfg(not(feature = "redis"))]
        _ => Err({
            let _ = timeout;
            OpenError::Url(UrlError::Invalid {
                url: mask_password(url),
                reason: "this build of slidelog has no Redis support (feature `redis`)".into(),
            })
        }),
    }
}

/// Returns the Redis options that `options` and the per-call `timeout` ask for.
#[cfg(feature = "redis")]
pub fn redis_options(options: &StoreOptions, timeout: Duration) -> slidelog_redis::RedisOptions {
    slidelog_redis::RedisOptions {
        key_prefix: options.key_prefix.clone(),
        timeout,
        connect_timeout: options.connect_timeout,
        tls_root_cert_pem: options.tls_root_cert_pem.clone(),
        max_controls: options.max_controls,
        ..slidelog_redis::RedisOptions::default()
    }
}

/// One Redis (`redis://`, `rediss://`), a Redis Cluster, or the master of a
/// Sentinel group (followed across failovers); lazily or checked at open.
#[cfg(feature = "redis")]
async fn open_redis(
    url: &str,
    parsed: &StoreUrl,
    options: &StoreOptions,
    timeout: Duration,
) -> Result<Arc<dyn Store>, OpenError> {
    use slidelog_redis::{ClusterStore, RedisStore, SentinelStore};
    let o = redis_options(options, timeout);
    let lazy = options.lazy_connect;
    let store: Result<Arc<dyn Store>, _> = match parsed {
        StoreUrl::Memory => unreachable!("open_store opens the memory store"),
        StoreUrl::Redis { .. } if lazy => {
            RedisStore::connect_lazy(url, o).map(|s| Arc::new(s) as _)
        }
        StoreUrl::Redis { .. } => RedisStore::connect(url, o).await.map(|s| Arc::new(s) as _),
        StoreUrl::Cluster(_) if lazy => {
            ClusterStore::connect_cluster_lazy(url, o).map(|s| Arc::new(s) as _)
        }
        StoreUrl::Cluster(_) => ClusterStore::connect_cluster(url, o)
            .await
            .map(|s| Arc::new(s) as _),
        StoreUrl::Sentinel(_) if lazy => {
            SentinelStore::connect_sentinel_lazy(url, o).map(|s| Arc::new(s) as _)
        }
        StoreUrl::Sentinel(_) => SentinelStore::connect_sentinel(url, o)
            .await
            .map(|s| Arc::new(s) as _),
    };
    store.map_err(|source| OpenError::Open {
        url: mask_password(url),
        source,
    })
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[tokio::test]
    async fn a_refused_store_says_its_cause_once_in_the_chain() {
        // Nothing listens on port 1: the connection is refused at once.
        let url = "redis://user:secret@127.0.0.1:1";
        let options = StoreOptions::default().connect_timeout(Duration::from_secs(2));
        let Err(e) = open_store(url, &options, DEFAULT_TIMEOUT).await else {
            panic!("opened a store on port 1");
        };
        assert!(e.is_transient(), "{e}");
        // The message says what failed; the source names the store and
        // says why.
        assert_eq!(e.to_string(), "cannot open store");
        let source = e
            .source()
            .expect("the connect error is the source")
            .to_string();
        assert!(source.contains("refused"), "{source}");
        let line = e.with_causes();
        assert_eq!(line, format!("{e}: {source}"));
        assert_eq!(line.matches("refused").count(), 1, "{line}");
        assert!(!line.contains("secret"), "{line}");
        // The URL once, masked (it was said by both layers).
        assert_eq!(line.matches("127.0.0.1:1").count(), 1, "{line}");
        assert!(line.contains("redis://user:***@127.0.0.1:1"), "{line}");
    }
}
