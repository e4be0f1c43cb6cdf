//! Opening a [`RedisStore`] from a URL: `redis://[user:pass@]host:port[/db]`
//! or `rediss://…` (TLS with rustls). The connection is a redis-rs
//! `ConnectionManager`: one multiplexed connection shared by every caller,
//! replaced in the background when it drops, so decisions recover by
//! themselves when Redis comes back. Passwords never reach a log or an error.

use crate::options::RedisOptions;
use crate::store::{RedisStore, ScriptStore};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, IntoConnectionInfo, TlsCertificates};
use std::sync::Once;
use std::time::Duration;

/// A Redis store URL that cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The URL does not parse, or names no Redis.
    #[error("invalid Redis URL {url}: {reason}")]
    InvalidUrl {
        /// The URL with its password masked.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Redis did not answer (refused, unreachable, bad credentials, TLS
    /// failure) within the connect timeout.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The URL with its password masked.
        url: String,
        /// What went wrong.
        reason: String,
        /// True when trying again later may work (refused, timed out).
        transient: bool,
    },
}

impl RedisStore {
    /// Connects to the Redis that `url` names and checks it answers `PING`,
    /// within `options.connect_timeout`: it never hangs.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, ConnectError> {
        let store = Self::connect_lazy(url, options.clone())?;
        let ping = async {
            let mut conn = store.connection();
            redis::cmd("PING").query_async::<String>(&mut conn).await
        };
        match tokio::time::timeout(options.connect_timeout, ping).await {
            Ok(Ok(_)) => {
                store.check_clock().await;
                store.settle_engine(url).await
            }
            Ok(Err(e)) => Err(ConnectError::Connect {
                url: mask_password(url),
                transient: crate::errors::is_transient(&e),
                reason: crate::errors::describe(&e),
            }),
            Err(_) => Err(ConnectError::Connect {
                url: mask_password(url),
                reason: format!("no answer within {:?}", options.connect_timeout),
                transient: true,
            }),
        }
    }

    /// A store that connects in the background and never fails for a Redis
    /// that is down: until it answers, decisions return transient errors,
    /// and they succeed once it does. Must be called inside a Tokio runtime.
    pub fn connect_lazy(url: &str, options: RedisOptions) -> Result<Self, ConnectError> {
        let client = client(url, &options)?;
        let config = manager_config(&options);
        let manager =
            lazy_manager(client.clone(), config.clone()).map_err(|e| ConnectError::InvalidUrl {
                url: mask_password(url),
                reason: e.to_string(),
            })?;
        // A silent connection is replaced by a new manager on the same client.
        let make: crate::heal::Maker<ConnectionManager> =
            std::sync::Arc::new(move || lazy_manager(client.clone(), config.clone()).ok());
        let conn = crate::heal::Healing::new(
            manager,
            make,
            crate::heal::ping_probe(),
            options.probe_timeout,
            "redis",
        );
        let engine = crate::engine::select_for(url, "redis", &options)?;
        Ok(ScriptStore::with_connection(conn, &options, "redis").set_engine_select(engine))
    }
}

/// A manager that connects in the background: it starts connecting now
/// rather than on the first decision, so a reachable Redis is ready before
/// the first call's timeout starts.
fn lazy_manager(
    client: Client,
    config: ConnectionManagerConfig,
) -> redis::RedisResult<ConnectionManager> {
    let manager = ConnectionManager::new_lazy_with_config(client, config)?;
    let mut warm = manager.clone();
    tokio::spawn(async move {
        let _ = redis::cmd("PING").query_async::<String>(&mut warm).await;
    });
    Ok(manager)
}

/// How the connection manager reconnects: one attempt per call that finds
/// the connection gone, bounded by the connect timeout. No retries inside a
/// call: a refused connection then fails the call at once with the refusal
/// (a transient [`StoreError::Unavailable`](slidelog_core::StoreError)),
/// rather than waiting through retries until the per-call timeout and
/// looking silent. Finding the store again is the job of the limiter's one
/// background probe (`slidelog::Limiter`'s outage mode, docs/design.md §6).
fn manager_config(options: &RedisOptions) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(options.connect_timeout))
        // The store bounds each call itself; this only unblocks a response
        // that never comes on a connection nobody is waiting on any more.
        .set_response_timeout(Some(options.timeout.max(Duration::from_secs(1))))
        .set_number_of_retries(0)
        .set_min_delay(Duration::from_millis(20))
        .set_max_delay(Duration::from_millis(500))
        .set_exponent_base(2.0)
}

/// The redis-rs client for `url`, with TLS set up for `rediss://`.
pub fn client(url: &str, options: &RedisOptions) -> Result<Client, ConnectError> {
    let invalid = |reason: String| ConnectError::InvalidUrl {
        url: mask_password(url),
        reason,
    };
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    if scheme != "redis" && scheme != "rediss" {
        return Err(invalid("the scheme must be redis:// or rediss://".into()));
    }
    let info = url
        .into_connection_info()
        .map_err(|e| invalid(e.to_string()))?;
    if scheme == "rediss" {
        install_crypto_provider();
        if let Some(pem) = &options.tls_root_cert_pem {
            let certs = TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            };
            return Client::build_with_tls(info, certs).map_err(|e| invalid(e.to_string()));
        }
    }
    Client::open(info).map_err(|e| invalid(e.to_string()))
}

/// rustls needs one process-wide crypto provider; install ring's once
/// (harmless when the application installed one already).
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

pub use slidelog_core::redact::mask_password;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_an_error() {
        let e = client("redis://user:s3cret@[bad", &RedisOptions::default()).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert_eq!(mask_password("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(mask_password("rediss://pw@h:1"), "rediss://***@h:1");
    }

    #[test]
    fn only_redis_schemes_are_accepted() {
        let e = client("http://h:1", &RedisOptions::default()).unwrap_err();
        assert!(e.to_string().contains("redis://"), "{e}");
        assert!(client("redis://127.0.0.1:1/2", &RedisOptions::default()).is_ok());
        assert!(client("rediss://localhost:1", &RedisOptions::default()).is_ok());
    }
}
