//! The store on a Redis Cluster ([`ClusterStore`]): a [`ScriptStore`] over a
//! [`ClusterConnection`], and how it connects (seeds, credentials, TLS, a
//! bounded connect, or a lazy one that never fails for a cluster that is
//! down). Apart from `cluster.rs`, which is the connection alone, so that the
//! store and the connection do not import each other.

use crate::cluster::ClusterConnection;
use crate::heal::Maker;
use crate::multi_url::MultiHostUrl;
use crate::options::RedisOptions;
use crate::store::ScriptStore;
use crate::{ConnectError, mask_password};
use redis::TlsCertificates;
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection as RawClusterConnection;
use std::sync::Arc;
use std::time::Duration;

/// The store on a Redis Cluster.
pub type ClusterStore = ScriptStore<ClusterConnection>;

impl ClusterStore {
    /// Connects to the cluster whose seed nodes `url` lists, within
    /// `options.connect_timeout` (it never hangs), and checks it answers.
    pub async fn connect_cluster(url: &str, options: RedisOptions) -> Result<Self, ConnectError> {
        let client = cluster_client(url, &options)?;
        let connect = async {
            let raw = client.get_async_connection().await?;
            let make = maker(client.clone(), &options);
            let conn = ClusterConnection::new(raw, make, options.timeout, options.probe_timeout);
            let read = conn.refresh_nodes().await;
            match redis::cmd("PING")
                .query_async::<String>(&mut conn.clone())
                .await
            {
                Ok(_) => {}
                // The cluster answers but a master does not: its slots are
                // answered by policy while its probe runs (`cluster/nodes.rs`).
                Err(e) if read && crate::errors::is_transient(&e) => tracing::warn!(
                    store = "redis-cluster",
                    error = %e,
                    "a cluster master does not answer at connect; the others decide"
                ),
                Err(e) => return Err(e),
            }
            redis::RedisResult::Ok(conn)
        };
        let conn = match tokio::time::timeout(options.connect_timeout, connect).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                return Err(ConnectError::Connect {
                    url: mask_password(url),
                    transient: crate::errors::is_transient(&e),
                    reason: crate::errors::describe(&e),
                });
            }
            Err(_) => {
                return Err(ConnectError::Connect {
                    url: mask_password(url),
                    reason: format!("no cluster connection within {:?}", options.connect_timeout),
                    transient: true,
                });
            }
        };
        let store = ScriptStore::with_connection(conn, &options, "redis-cluster")
            .set_engine_select(crate::engine::cluster_select_for(url, &options)?);
        store.check_clock().await;
        store.settle_engine(url).await
    }

    /// A store that connects to the cluster in the background and never
    /// fails for a cluster that is down: until it answers, decisions return
    /// transient errors. Must be called inside a Tokio runtime.
    pub fn connect_cluster_lazy(url: &str, options: RedisOptions) -> Result<Self, ConnectError> {
        let client = cluster_client(url, &options)?;
        let make = maker(client, &options);
        let conn = make().expect("a pending cluster connection is always made");
        Ok(ScriptStore::with_connection(
            ClusterConnection::new(conn, make, options.timeout, options.probe_timeout),
            &options,
            "redis-cluster",
        )
        .set_engine_select(crate::engine::cluster_select_for(url, &options)?))
    }
}

/// Makes a fresh cluster connection that connects in the background.
fn maker(client: ClusterClient, options: &RedisOptions) -> Maker<RawClusterConnection> {
    let (connect, response) = (options.connect_timeout, response_timeout(options));
    Arc::new(move || {
        let config = ClusterConfig::new()
            .set_connection_timeout(connect)
            .set_response_timeout(response);
        Some(client.get_pending_async_connection_with_config(config))
    })
}

/// The store bounds each call; this only frees a request that nobody waits
/// on any more.
fn response_timeout(options: &RedisOptions) -> Duration {
    options.timeout.max(Duration::from_secs(1))
}

/// The redis-rs cluster client for `url`: seeds, credentials, TLS.
fn cluster_client(url: &str, options: &RedisOptions) -> Result<ClusterClient, ConnectError> {
    let invalid = |reason: String| ConnectError::InvalidUrl {
        url: mask_password(url),
        reason,
    };
    let parsed = MultiHostUrl::parse(url, "redis+cluster", "rediss+cluster").map_err(invalid)?;
    if !parsed.path.is_empty() {
        return Err(invalid(
            "Redis Cluster has only db 0: nothing may follow the hosts".into(),
        ));
    }
    let mut builder = ClusterClient::builder(parsed.node_urls())
        .connection_timeout(options.connect_timeout)
        .response_timeout(response_timeout(options));
    if parsed.tls {
        crate::install_crypto_provider();
        if let Some(pem) = &options.tls_root_cert_pem {
            builder = builder.certs(TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            });
        }
    }
    builder.build().map_err(|e| invalid(e.to_string()))
}
