//! The one model of a store URL, shared by the library, the server and
//! `slidelog inspect` (docs/design.md §5):
//!
//! - `memory://` — the in-process store;
//! - `redis://[user:pass@]host:port[/db]`, `rediss://…` (TLS) — one Redis;
//! - `redis+cluster://[user:pass@]host:port,host:port[,…]` (`rediss+cluster://`
//!   for TLS) — Redis Cluster, through seed nodes;
//! - `redis+sentinel://[user:pass@]host:port,host:port[,…]/master-name[/db]`
//!   (`rediss+sentinel://` for TLS) — the master of a Sentinel group, with
//!   optional query parameters `sentinel_username` and `sentinel_password`
//!   for sentinels that require their own credentials.
//!
//! [`StoreUrl::parse`] tells them apart; [`MultiHostUrl`] holds the parts of
//! the multi-host forms (the user and password, percent-decoded, are those of
//! the data nodes). Errors name the part at fault and never contain the
//! password.

use crate::redact::mask_password;

/// A store URL, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `memory://`: the in-process store.
    Memory,
    /// `redis://…` or `rediss://…`: one Redis server (the rest of the URL is
    /// redis-rs's to read).
    Redis {
        /// The URL as given.
        url: String,
        /// `rediss://`: connect with TLS.
        tls: bool,
    },
    /// `redis+cluster://…` / `rediss+cluster://…`.
    Cluster(MultiHostUrl),
    /// `redis+sentinel://…` / `rediss+sentinel://…`.
    Sentinel(MultiHostUrl),
}

/// A store URL that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The scheme is not one slidelog knows.
    #[error(
        "unknown store URL scheme in {url:?}: use memory://, redis://, rediss://, redis+cluster:// or redis+sentinel://"
    )]
    UnknownScheme {
        /// The URL with its password masked.
        url: String,
    },
    /// The scheme is known but the rest of the URL is not valid for it.
    #[error("invalid store URL {url}: {reason}")]
    Invalid {
        /// The URL with its password masked.
        url: String,
        /// What is wrong, naming the part at fault.
        reason: String,
    },
}

impl StoreUrl {
    /// Parses `url`. The multi-host forms are parsed in full here; a
    /// single-server URL is checked for its scheme only.
    ///
    /// ```
    /// use slidelog_core::url::StoreUrl;
    /// assert_eq!(StoreUrl::parse("memory://").unwrap(), StoreUrl::Memory);
    /// assert!(matches!(StoreUrl::parse("rediss://h:1").unwrap(), StoreUrl::Redis { tls: true, .. }));
    /// match StoreUrl::parse("redis+cluster://a:1,b:2").unwrap() {
    ///     StoreUrl::Cluster(u) => assert_eq!(u.hosts.len(), 2),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert!(StoreUrl::parse("mongo://x").is_err());
    /// ```
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
        let invalid = |reason: String| UrlError::Invalid {
            url: mask_password(url),
            reason,
        };
        let parsed = match scheme {
            "memory" => return Ok(Self::Memory),
            "redis" | "rediss" => Ok(Self::Redis {
                url: url.to_owned(),
                tls: scheme == "rediss",
            }),
            "redis+cluster" | "rediss+cluster" => {
                MultiHostUrl::parse(url, "redis+cluster", "rediss+cluster")
                    .map(Self::Cluster)
                    .map_err(invalid)
            }
            "redis+sentinel" | "rediss+sentinel" => {
                MultiHostUrl::parse(url, "redis+sentinel", "rediss+sentinel")
                    .map(Self::Sentinel)
                    .map_err(invalid)
            }
            _ => Err(UrlError::UnknownScheme {
                url: mask_password(url),
            }),
        }?;
        // Every Redis form takes `engine=`: a bad value fails here, at parse.
        RedisEngine::of_url(url)?;
        Ok(parsed)
    }

    /// Whether the store lives inside this process.
    pub fn is_memory(&self) -> bool {
        matches!(self, Self::Memory)
    }
}

/// The query parameter of a Redis store URL that picks its engine.
pub const ENGINE_PARAM: &str = "engine";

/// Which engine decides on a Redis store (docs/design.md §4.4), from the
/// store URL's `engine` parameter (`redis://h:6379?engine=module`, and the
/// same on `rediss://`, Cluster and Sentinel URLs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum RedisEngine {
    /// The module where every node has it, else the scripts (the default).
    #[default]
    Auto,
    /// The module's `SLIDELOG.CHECK`: a server without it refuses to start.
    Module,
    /// The Lua scripts, whatever the server has loaded.
    Script,
}

impl RedisEngine {
    /// `auto`, `module` or `script`, as the URL spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Module => "module",
            Self::Script => "script",
        }
    }

    /// The engine a parameter value names; the error names the parameter.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "auto" => Ok(Self::Auto),
            "module" => Ok(Self::Module),
            "script" => Ok(Self::Script),
            other => Err(format!(
                "{ENGINE_PARAM}={other:?} is not a known engine: use {ENGINE_PARAM}=auto, module or script"
            )),
        }
    }

    /// The engine that `url` asks for with its `engine` parameter, `None`
    /// when it has none.
    ///
    /// ```
    /// use slidelog_core::url::RedisEngine;
    /// assert_eq!(RedisEngine::of_url("redis://h:1?engine=module").unwrap(), Some(RedisEngine::Module));
    /// assert_eq!(RedisEngine::of_url("redis+cluster://a:1,b:2").unwrap(), None);
    /// assert!(RedisEngine::of_url("redis://h:1?engine=lua").is_err());
    /// ```
    pub fn of_url(url: &str) -> Result<Option<Self>, UrlError> {
        let invalid = |reason: String| UrlError::Invalid {
            url: mask_password(url),
            reason,
        };
        let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
        let (_, suffix) = split_suffix(rest);
        let query = parse_query(suffix).map_err(invalid)?;
        query
            .iter()
            .find(|(k, _)| k == ENGINE_PARAM)
            .map(|(_, v)| Self::parse(v).map_err(invalid))
            .transpose()
    }
}

impl std::fmt::Display for RedisEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The parts of a multi-host URL.
#[derive(Clone, PartialEq, Eq)]
pub struct MultiHostUrl {
    /// `rediss+…`: connect with TLS.
    pub tls: bool,
    /// User of the data nodes (ACL), if any.
    pub username: Option<String>,
    /// Password of the data nodes, if any.
    pub password: Option<String>,
    /// `(host, port)` of every listed node (cluster seeds or sentinels).
    pub hosts: Vec<(String, u16)>,
    /// Path segments after the hosts (sentinel: master name, then db).
    pub path: Vec<String>,
    /// Query parameters, decoded.
    pub query: Vec<(String, String)>,
    /// The `?query` and `#fragment` as given (empty when none): redis-rs
    /// options such as `#insecure` that a caller may pass on to every node.
    pub suffix: String,
}

impl std::fmt::Debug for MultiHostUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiHostUrl")
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("hosts", &self.hosts)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl MultiHostUrl {
    /// Parses `url`, whose scheme must be `<base>` or `<base with s>`, e.g.
    /// `redis+cluster` / `rediss+cluster`.
    pub fn parse(url: &str, plain: &str, tls: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("expected {plain}://host:port,host:port"))?;
        let tls = match scheme {
            s if s == plain => false,
            s if s == tls => true,
            other => return Err(format!("scheme {other}:// is not {plain}:// or {tls}://")),
        };
        let (rest, suffix) = split_suffix(rest);
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (userinfo, hostlist) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (username, password) = parse_userinfo(userinfo)?;
        Ok(Self {
            tls,
            username,
            password,
            hosts: parse_hosts(hostlist)?,
            path: parse_path(path)?,
            query: parse_query(suffix)?,
            suffix: suffix.to_owned(),
        })
    }

    /// The value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `redis[s]://[user:pass@]host:port` for each host, credentials of the
    /// data nodes included (percent-encoded again).
    pub fn node_urls(&self) -> Vec<String> {
        self.hosts
            .iter()
            .map(|(h, p)| {
                self.single_url(h, *p, self.username.as_deref(), self.password.as_deref())
            })
            .collect()
    }

    /// `redis[s]://[user:pass@]host:port` for one host with given credentials.
    pub fn single_url(
        &self,
        host: &str,
        port: u16,
        user: Option<&str>,
        pass: Option<&str>,
    ) -> String {
        let auth = userinfo(user, pass);
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        format!("{}://{auth}{host}:{port}", self.node_scheme())
    }

    /// `redis` or `rediss` (TLS): the scheme of a single node's URL.
    pub fn node_scheme(&self) -> &'static str {
        if self.tls { "rediss" } else { "redis" }
    }

    /// `user:pass@` of the data nodes, percent-encoded (empty when none).
    pub fn userinfo(&self) -> String {
        userinfo(self.username.as_deref(), self.password.as_deref())
    }
}

/// `user:pass@`, `:pass@`, `user@` or nothing, percent-encoded.
fn userinfo(user: Option<&str>, pass: Option<&str>) -> String {
    match (user, pass) {
        (Some(u), Some(p)) => format!("{}:{}@", encode(u), encode(p)),
        (None, Some(p)) => format!(":{}@", encode(p)),
        (Some(u), None) => format!("{}@", encode(u)),
        (None, None) => String::new(),
    }
}

/// Splits `rest` (what follows `://`) before its `?query` or `#fragment`:
/// the suffix is kept as given, for callers that pass it on to every node.
fn split_suffix(rest: &str) -> (&str, &str) {
    match rest.find(['?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    }
}

/// Decodes the query parameters of a URL suffix (`?a=1&b=2#fragment`), in
/// order; a parameter without `=` has an empty value. The one place a URL's
/// query parameters are read.
fn parse_query(suffix: &str) -> Result<Vec<(String, String)>, String> {
    let query = suffix
        .strip_prefix('?')
        .map_or("", |q| q.split('#').next().unwrap_or(""));
    query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

/// Decodes `user:pass` (or `pass` alone) into the data nodes' user and
/// password; an empty user is none.
fn parse_userinfo(userinfo: Option<&str>) -> Result<(Option<String>, Option<String>), String> {
    let Some(u) = userinfo else {
        return Ok((None, None));
    };
    Ok(match u.split_once(':') {
        Some((user, pass)) => (
            Some(decode(user)?).filter(|s| !s.is_empty()),
            Some(decode(pass)?),
        ),
        // `redis://secret@host` means a password, as redis-rs reads it.
        None => (None, Some(decode(u)?)),
    })
}

/// Parses the comma-separated `host:port` list; at least one is required.
fn parse_hosts(hostlist: &str) -> Result<Vec<(String, u16)>, String> {
    let hosts = hostlist
        .split(',')
        .map(parse_host)
        .collect::<Result<Vec<_>, _>>()?;
    if hosts.is_empty() {
        return Err("no host:port given".into());
    }
    Ok(hosts)
}

/// Decodes the non-empty path segments after the hosts.
fn parse_path(path: &str) -> Result<Vec<String>, String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect()
}

fn parse_host(s: &str) -> Result<(String, u16), String> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| format!("{s:?} is not host:port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(format!("{s:?} has no host"));
    }
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("port in {s:?} must be 1 to 65535"))?;
    Ok((host.to_owned(), port))
}

fn decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("bad percent-encoding in the URL")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the URL does not decode to UTF-8".into())
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_told_apart() {
        assert!(StoreUrl::parse("memory://").unwrap().is_memory());
        assert!(matches!(
            StoreUrl::parse("redis+sentinel://a:1/m").unwrap(),
            StoreUrl::Sentinel(_)
        ));
        let e = StoreUrl::parse("redis+cluster://u:secret@h:0").unwrap_err();
        assert!(e.to_string().contains("1 to 65535"), "{e}");
        assert!(!e.to_string().contains("secret"), "{e}");
        let e = StoreUrl::parse("mongo://u:secret@x")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown store URL scheme") && !e.contains("secret"),
            "{e}"
        );
    }

    #[test]
    fn parses_cluster_and_sentinel_urls() {
        let u = MultiHostUrl::parse(
            "rediss+cluster://app:p%40ss@10.0.0.1:7000,10.0.0.2:7001",
            "redis+cluster",
            "rediss+cluster",
        )
        .unwrap();
        assert!(u.tls);
        assert_eq!(u.username.as_deref(), Some("app"));
        assert_eq!(u.password.as_deref(), Some("p@ss"));
        assert_eq!(u.hosts.len(), 2);
        assert_eq!(u.node_urls()[0], "rediss://app:p%40ss@10.0.0.1:7000");
        let s = MultiHostUrl::parse(
            "redis+sentinel://h1:26379,h2:26380/mymaster/2?sentinel_password=x",
            "redis+sentinel",
            "rediss+sentinel",
        )
        .unwrap();
        assert_eq!(s.path, vec!["mymaster", "2"]);
        assert_eq!(s.param("sentinel_password"), Some("x"));
        assert!(!format!("{u:?}").contains("p@ss"));
    }

    #[test]
    fn every_redis_form_takes_an_engine() {
        for url in [
            "redis://h:1?engine=module",
            "rediss://u:pw@h:1/2?engine=script",
            "redis+cluster://a:1,b:2?engine=auto",
            "redis+sentinel://a:1/m?engine=module&sentinel_password=x",
        ] {
            assert!(StoreUrl::parse(url).is_ok(), "{url}");
            assert!(RedisEngine::of_url(url).unwrap().is_some(), "{url}");
        }
        assert_eq!(RedisEngine::of_url("redis://h:1").unwrap(), None);
        assert_eq!(RedisEngine::default(), RedisEngine::Auto);
        let e = StoreUrl::parse("redis://u:secret@h:1?engine=lua").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("engine=") && text.contains("module"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        assert!(StoreUrl::parse("redis+cluster://a:1?engine=").is_err());
    }

    #[test]
    fn bad_urls_name_the_fault() {
        let e = MultiHostUrl::parse("redis+cluster://h:0", "redis+cluster", "rediss+cluster");
        assert!(e.unwrap_err().contains("1 to 65535"));
        let e = MultiHostUrl::parse("redis+cluster://h", "redis+cluster", "rediss+cluster");
        assert!(e.unwrap_err().contains("host:port"));
        let e = MultiHostUrl::parse("redis://h:1", "redis+cluster", "rediss+cluster");
        assert!(e.unwrap_err().contains("scheme"));
    }
}
