//! Which Redis nodes to scan: the one server of a `redis://`/`rediss://` URL,
//! or every master of a `redis+cluster://h:p,h:p` (`rediss+cluster://` for
//! TLS) cluster (read from
//! `CLUSTER NODES` of the first seed that answers; SCAN through one
//! connection sees one node only, so each master is scanned on its own).

use crate::error::InspectError;
use slidelog_core::url::{StoreUrl, UrlError};
use std::time::Duration;

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One server.
    Standalone {
        /// Its `redis://` or `rediss://` URL.
        url: String,
    },
    /// A Redis Cluster, reached through seed nodes.
    Cluster {
        /// `redis://[userinfo@]host:port[?query]` of each seed.
        seeds: Vec<String>,
        /// `redis` or `rediss` (TLS), to reach every node with.
        scheme: String,
        /// `user:pass@` (or empty) to reach every node with.
        userinfo: String,
        /// `?query` or `#fragment` (or empty) to reach every node with.
        query: String,
    },
}

/// One node to scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `host:port`, for reports.
    pub addr: String,
    /// The URL to connect with.
    pub url: String,
}

/// Parses a store URL (the one model, [`StoreUrl`]); only Redis URLs have a
/// key space to inspect.
pub fn parse_target(url: &str) -> Result<Target, InspectError> {
    let bad = |reason: &str| InspectError::BadUrl {
        url: mask_password(url),
        reason: reason.to_owned(),
    };
    if !url.contains("://") {
        return Err(bad(
            "not a URL: use redis://host:port or redis+cluster://h:p,h:p",
        ));
    }
    match StoreUrl::parse(url) {
        Ok(StoreUrl::Redis { .. }) => {
            redis::Client::open(url).map_err(|e| bad(&e.to_string()))?;
            Ok(Target::Standalone {
                url: url.to_owned(),
            })
        }
        Ok(StoreUrl::Cluster(parsed)) => {
            // `?query` or `#insecure` (redis-rs options) apply to every node.
            let (scheme, userinfo) = (parsed.node_scheme(), parsed.userinfo());
            let seeds: Vec<String> = parsed
                .hosts
                .iter()
                .map(|(host, port)| {
                    format!(
                        "{}{}",
                        parsed.single_url(
                            host,
                            *port,
                            parsed.username.as_deref(),
                            parsed.password.as_deref()
                        ),
                        parsed.suffix
                    )
                })
                .collect();
            for seed in &seeds {
                redis::Client::open(seed.as_str()).map_err(|e| bad(&e.to_string()))?;
            }
            Ok(Target::Cluster {
                seeds,
                scheme: scheme.to_owned(),
                userinfo,
                query: parsed.suffix,
            })
        }
        Ok(StoreUrl::Memory) => Err(bad(
            "the in-memory store lives inside a process and has no key space to scan; \
             inspect a Redis store (redis://…, rediss://…, redis+cluster://…)",
        )),
        Ok(StoreUrl::Sentinel(_)) => Err(bad(
            "point --store at the current master instead (redis://host:port): \
             `redis-cli -p 26379 SENTINEL get-master-addr-by-name <name>` prints it",
        )),
        Err(UrlError::Invalid { reason, .. }) => Err(bad(&reason)),
        Err(UrlError::UnknownScheme { .. }) => Err(bad(
            "unknown scheme: use redis://, rediss://, redis+cluster:// or rediss+cluster://",
        )),
    }
}

/// Returns the nodes to scan: the server itself, or every master of the cluster.
pub async fn discover(target: &Target, timeout: Duration) -> Result<Vec<Node>, InspectError> {
    match target {
        Target::Standalone { url } => Ok(vec![Node {
            addr: addr_of(url),
            url: url.clone(),
        }]),
        Target::Cluster {
            seeds,
            scheme,
            userinfo,
            query,
        } => {
            let mut last_error = String::from("no seed");
            for seed in seeds {
                match cluster_nodes(seed, timeout).await {
                    Ok(text) => {
                        let seed_host = host_of(&addr_of(seed));
                        let masters = parse_masters(&text, &seed_host);
                        if masters.is_empty() {
                            last_error =
                                format!("{}: CLUSTER NODES lists no master", addr_of(seed));
                            continue;
                        }
                        return Ok(masters
                            .into_iter()
                            .map(|addr| Node {
                                url: format!("{scheme}://{userinfo}{addr}{query}"),
                                addr,
                            })
                            .collect());
                    }
                    Err(e) => last_error = e.to_string(),
                }
            }
            Err(InspectError::Topology {
                seeds: seeds
                    .iter()
                    .map(|s| addr_of(s))
                    .collect::<Vec<_>>()
                    .join(","),
                reason: last_error,
            })
        }
    }
}

async fn cluster_nodes(seed: &str, timeout: Duration) -> Result<String, InspectError> {
    let node = addr_of(seed);
    let mut conn = crate::scan::connect(seed, &node, timeout).await?;
    redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async::<String>(&mut conn)
        .await
        .map_err(|source| InspectError::Redis {
            node,
            what: "CLUSTER NODES",
            error: source,
        })
}

/// Returns the `host:port` of every healthy master in a `CLUSTER NODES` reply. A node
/// that does not know its own IP lists itself as `:port`: `seed_host` fills in.
pub fn parse_masters(cluster_nodes: &str, seed_host: &str) -> Vec<String> {
    let mut masters: Vec<String> = cluster_nodes
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let _id = fields.next()?;
            let address = fields.next()?;
            let flags: Vec<&str> = fields.next()?.split(',').collect();
            let healthy = flags.contains(&"master")
                && !flags
                    .iter()
                    .any(|f| matches!(*f, "fail" | "fail?" | "noaddr" | "handshake"));
            if !healthy {
                return None;
            }
            // ip:port@cport[,hostname]
            let ip_port = address.split(['@', ',']).next()?;
            let (host, port) = ip_port.rsplit_once(':')?;
            let host = if host.is_empty() { seed_host } else { host };
            Some(format!("{host}:{port}"))
        })
        .collect();
    masters.sort();
    masters.dedup();
    masters
}

/// Returns the `host:port` of a redis URL, without credentials (for reports and errors).
pub fn addr_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.contains(':') && !host_port.ends_with(']') {
        host_port.to_owned()
    } else {
        format!("{host_port}:6379")
    }
}

fn host_of(addr: &str) -> String {
    addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_owned()
}

pub use slidelog_core::redact::mask_password;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_target("redis://127.0.0.1:7000/2").unwrap(),
            Target::Standalone {
                url: "redis://127.0.0.1:7000/2".into()
            }
        );
        assert_eq!(
            parse_target("redis+cluster://u:pw@a:1,b:2").unwrap(),
            Target::Cluster {
                seeds: vec!["redis://u:pw@a:1".into(), "redis://u:pw@b:2".into()],
                scheme: "redis".into(),
                userinfo: "u:pw@".into(),
                query: String::new(),
            }
        );
        for bad in [
            "memory://",
            "redis+sentinel://a:1/m",
            "http://x",
            "nope",
            "redis+cluster://",
        ] {
            let e = parse_target(bad).unwrap_err().to_string();
            assert!(e.contains("cannot inspect store"), "{bad}: {e}");
        }
        let e = parse_target("redis+cluster://u:secret@a:1").map(|_| ());
        assert!(e.is_ok());
        let e = parse_target("memory://u:secret@x").unwrap_err().to_string();
        assert!(!e.contains("secret"), "{e}");
        assert_eq!(addr_of("redis://:pw@h:1/0"), "h:1");
        assert_eq!(addr_of("redis://h"), "h:6379");
        assert_eq!(mask_password("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
    }

    #[test]
    fn tls_cluster_nodes_are_reached_over_tls() {
        assert!(matches!(
            parse_target("rediss+cluster://a:1/#insecure").unwrap(),
            Target::Cluster { ref seeds, .. } if seeds[0] == "rediss://a:1#insecure"
        ));
        match parse_target("rediss+cluster://:pw@a:1,b:2?insecure").unwrap() {
            Target::Cluster {
                seeds,
                scheme,
                query,
                ..
            } => {
                assert_eq!(seeds[1], "rediss://:pw@b:2?insecure");
                assert_eq!((scheme.as_str(), query.as_str()), ("rediss", "?insecure"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn masters_from_cluster_nodes() {
        let text = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460
a2 127.0.0.1:7002@17002,host2 master - 0 0 2 connected 5461-10922
a3 127.0.0.1:7003@17003 master,fail - 0 0 3 disconnected
a4 127.0.0.1:7004@17004 slave a1 0 0 1 connected
a5 :7005@17005 master - 0 0 4 connected 10923-16383
";
        assert_eq!(
            parse_masters(text, "10.0.0.9"),
            ["10.0.0.9:7005", "127.0.0.1:7001", "127.0.0.1:7002"]
        );
    }
}
