//! What a Sentinel URL names: the sentinels (with their own credentials, if
//! any), the master's name, and how to reach the data nodes (their
//! credentials, db and TLS), `redis+sentinel://[user:pass@]h:p,h:p/master[/db]`.

use crate::multi_url::MultiHostUrl;
use redis::sentinel::SentinelNodeConnectionInfo;
use redis::{ConnectionInfo, IntoConnectionInfo, TlsMode};

/// A Sentinel URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SentinelUrlError {
    /// The hosts, credentials or parameters do not parse.
    #[error("{0}")]
    Url(String),
    /// Nothing follows the hosts.
    #[error("the master name is missing: redis+sentinel://host:port,host:port/master-name")]
    NoMasterName,
    /// The db after the master name is not 0 to 15.
    #[error("db {0:?} after the master name must be 0 to 15")]
    Db(String),
    /// More than `/master-name/db` follows the hosts.
    #[error("expected /master-name[/db] after the hosts")]
    ExtraPath,
    /// redis-rs refuses a sentinel's or the data nodes' address.
    #[error("{0}")]
    Address(String),
}

/// The parts of a Sentinel URL.
pub(crate) struct SentinelUrl {
    /// The master's name, as the sentinels monitor it.
    pub master_name: String,
    /// The db index on the data nodes.
    pub db: i64,
    /// How to reach each sentinel.
    pub sentinels: Vec<ConnectionInfo>,
    /// How to reach the data nodes.
    pub node_info: SentinelNodeConnectionInfo,
    /// True for `rediss+sentinel://`.
    pub tls: bool,
}

impl SentinelUrl {
    /// Parses `url` (`redis+sentinel://` or `rediss+sentinel://`).
    pub fn parse(url: &str) -> Result<Self, SentinelUrlError> {
        let parsed = MultiHostUrl::parse(url, "redis+sentinel", "rediss+sentinel")
            .map_err(SentinelUrlError::Url)?;
        let (master_name, db) = master_and_db(&parsed)?;
        Ok(Self {
            sentinels: sentinels(&parsed)?,
            node_info: data_node_info(&parsed, db)?,
            tls: parsed.tls,
            master_name,
            db,
        })
    }
}

/// The master name and db index after the hosts: `/master-name[/db]`.
fn master_and_db(parsed: &MultiHostUrl) -> Result<(String, i64), SentinelUrlError> {
    let master_name = parsed
        .path
        .first()
        .cloned()
        .ok_or(SentinelUrlError::NoMasterName)?;
    let db: i64 = match parsed.path.get(1) {
        None => 0,
        Some(d) => d
            .parse()
            .ok()
            .filter(|d| (0..=15).contains(d))
            .ok_or_else(|| SentinelUrlError::Db(d.clone()))?,
    };
    if parsed.path.len() > 2 {
        return Err(SentinelUrlError::ExtraPath);
    }
    Ok((master_name, db))
}

/// How to reach each sentinel, with the sentinels' own credentials, if any.
fn sentinels(parsed: &MultiHostUrl) -> Result<Vec<ConnectionInfo>, SentinelUrlError> {
    let user = parsed.param("sentinel_username");
    let pass = parsed.param("sentinel_password");
    parsed
        .hosts
        .iter()
        .map(|(h, p)| {
            parsed
                .single_url(h, *p, user, pass)
                .as_str()
                .into_connection_info()
                .map_err(|e| SentinelUrlError::Address(e.to_string()))
        })
        .collect()
}

/// How to reach the data nodes: their credentials and db, taken from a URL
/// of the same shape so redis-rs parses them as it does for redis://.
fn data_node_info(
    parsed: &MultiHostUrl,
    db: i64,
) -> Result<SentinelNodeConnectionInfo, SentinelUrlError> {
    let (user, pass) = (parsed.username.as_deref(), parsed.password.as_deref());
    let data_url = format!("{}/{db}", parsed.single_url("localhost", 1, user, pass));
    let data_info = data_url
        .as_str()
        .into_connection_info()
        .map_err(|e| SentinelUrlError::Address(e.to_string()))?;
    let mut node_info = SentinelNodeConnectionInfo::default()
        .set_redis_connection_info(data_info.redis_settings().clone());
    if parsed.tls {
        node_info = node_info.set_tls_mode(TlsMode::Secure);
    }
    Ok(node_info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_master_name_and_db_follow_the_hosts() {
        let url =
            SentinelUrl::parse("redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster/3").unwrap();
        assert_eq!((url.master_name.as_str(), url.db), ("mymaster", 3));
        assert_eq!(url.sentinels.len(), 2);
        let err = |u: &str| SentinelUrl::parse(u).err().unwrap();
        assert_eq!(
            err("redis+sentinel://127.0.0.1:1"),
            SentinelUrlError::NoMasterName
        );
        assert_eq!(
            err("redis+sentinel://127.0.0.1:1/m/16"),
            SentinelUrlError::Db("16".into())
        );
        assert_eq!(
            err("redis+sentinel://127.0.0.1:1/m/1/x"),
            SentinelUrlError::ExtraPath
        );
    }
}
