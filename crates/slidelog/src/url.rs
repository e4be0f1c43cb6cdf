//! Opening a store from its URL, the same in every subcommand and in the
//! library: `memory://` (default), `redis://…`, `rediss://…`,
//! `redis+cluster://…` / `rediss+cluster://…` (Redis Cluster) and
//! `redis+sentinel://…/master-name` / `rediss+sentinel://…` (Sentinel).

use slidelog_core::Store;
use slidelog_memory::MemoryStore;
use std::sync::Arc;
use std::time::Duration;

/// Options shared by every store opened from a URL.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Upper bound on one store call (Redis stores). Default 100 ms.
    pub timeout: Duration,
    /// Key cap of the memory store. Default 1,000,000.
    pub memory_key_cap: usize,
    /// Prefix of Redis keys. Default `rate:sliding:`.
    pub key_prefix: String,
    /// Redis stores: decide on the caller's clock instead of Redis `TIME`
    /// (docs/design.md §3). Default false (server time).
    pub client_time: bool,
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
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(100),
            memory_key_cap: slidelog_memory::DEFAULT_KEY_CAP,
            key_prefix: "rate:sliding:".to_owned(),
            client_time: false,
            connect_timeout: Duration::from_secs(2),
            lazy_connect: false,
            tls_root_cert_pem: None,
        }
    }
}

/// A store URL that cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The scheme is not one slidelog knows.
    #[error(
        "unknown store URL scheme in {0:?}: use memory://, redis://, rediss://, redis+cluster:// or redis+sentinel://"
    )]
    UnknownScheme(String),
    /// The store could not be reached or configured.
    #[error("cannot open store {url}: {reason}")]
    Open {
        /// The URL with any password masked.
        url: String,
        /// What went wrong.
        reason: String,
    },
}

/// Opens the store that `url` names.
pub async fn open_store(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, OpenError> {
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    match scheme {
        "memory" => Ok(Arc::new(
            MemoryStore::new().with_key_cap(options.memory_key_cap),
        )),
        #[cfg(feature = "redis")]
        "redis" | "rediss" => open_redis(url, options).await,
        #[cfg(feature = "redis")]
        "redis+cluster" | "rediss+cluster" | "redis+sentinel" | "rediss+sentinel" => {
            open_redis_ha(url, scheme, options).await
        }
        _ => Err(OpenError::UnknownScheme(mask_password(url))),
    }
}

/// The Redis options that `options` asks for.
#[cfg(feature = "redis")]
pub fn redis_options(options: &StoreOptions) -> slidelog_redis::RedisOptions {
    slidelog_redis::RedisOptions {
        key_prefix: options.key_prefix.clone(),
        timeout: options.timeout,
        connect_timeout: options.connect_timeout,
        time: if options.client_time {
            slidelog_redis::TimeMode::Client
        } else {
            slidelog_redis::TimeMode::Server
        },
        tls_root_cert_pem: options.tls_root_cert_pem.clone(),
        ..slidelog_redis::RedisOptions::default()
    }
}

/// `redis://[user:pass@]host:port[/db]` and `rediss://…` (TLS): one Redis.
#[cfg(feature = "redis")]
async fn open_redis(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, OpenError> {
    use slidelog_redis::{ConnectError, RedisStore};
    let redis_options = redis_options(options);
    let store = if options.lazy_connect {
        RedisStore::connect_lazy(url, redis_options)
    } else {
        RedisStore::connect(url, redis_options).await
    };
    store.map(|s| Arc::new(s) as Arc<dyn Store>).map_err(|e| {
        let reason = match &e {
            ConnectError::InvalidUrl { reason, .. } | ConnectError::Connect { reason, .. } => {
                reason.clone()
            }
        };
        OpenError::Open {
            url: mask_password(url),
            reason,
        }
    })
}

/// `redis+cluster://[user:pass@]host:port,host:port` (Redis Cluster) and
/// `redis+sentinel://[user:pass@]host:port,host:port/master-name[/db]`
/// (the master of a Sentinel group, followed across failovers); `rediss+…`
/// for TLS.
#[cfg(feature = "redis")]
async fn open_redis_ha(
    url: &str,
    scheme: &str,
    options: &StoreOptions,
) -> Result<Arc<dyn Store>, OpenError> {
    use slidelog_redis::{ClusterStore, ConnectError, SentinelStore};
    let o = redis_options(options);
    let cluster = scheme.ends_with("+cluster");
    let store: Result<Arc<dyn Store>, ConnectError> = match (cluster, options.lazy_connect) {
        (true, true) => ClusterStore::connect_cluster_lazy(url, o).map(|s| Arc::new(s) as _),
        (true, false) => ClusterStore::connect_cluster(url, o)
            .await
            .map(|s| Arc::new(s) as _),
        (false, true) => SentinelStore::connect_sentinel_lazy(url, o).map(|s| Arc::new(s) as _),
        (false, false) => SentinelStore::connect_sentinel(url, o)
            .await
            .map(|s| Arc::new(s) as _),
    };
    store.map_err(|e| {
        let reason = match &e {
            ConnectError::InvalidUrl { reason, .. } | ConnectError::Connect { reason, .. } => {
                reason.clone()
            }
        };
        OpenError::Open {
            url: mask_password(url),
            reason,
        }
    })
}

pub use slidelog_core::redact::mask_password;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            mask_password("redis://user:secret@127.0.0.1:6379/0"),
            "redis://user:***@127.0.0.1:6379/0"
        );
        assert_eq!(mask_password("rediss://secret@h:1"), "rediss://***@h:1");
        assert_eq!(mask_password("redis://h:1"), "redis://h:1");
    }
}
