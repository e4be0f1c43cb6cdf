//! Who a request is counted against: the [`KeyExtractor`] trait and the
//! ready extractors (peer IP, a header, the route, a constant, a closure, and
//! pairs of them).

use http::request::Parts;
use std::net::{IpAddr, SocketAddr};

/// Picks the identity (the key of the log) that a request counts against.
///
/// `None` means the request carries no usable identity (a missing API key
/// header, no peer address): the layer then rejects it with 400 or passes it
/// through, as [`MissingKey`](super::MissingKey) says.
///
/// Any `Fn(&Parts) -> Option<String>` closure is an extractor:
///
/// ```
/// use slidelog::middleware::KeyExtractor;
/// let by_tenant = |parts: &http::request::Parts| {
///     parts.uri.path().split('/').nth(1).map(str::to_owned)
/// };
/// let (parts, ()) = http::Request::get("/acme/orders").body(()).unwrap().into_parts();
/// assert_eq!(by_tenant.extract(&parts).as_deref(), Some("acme"));
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// Returns the key for the request whose head is `parts`, or `None`.
    fn extract(&self, parts: &Parts) -> Option<String>;

    /// Returns what the keys are (`ip`, `header-x-api-key`): the base of the layer's
    /// derived key namespace when it is not given a name (`auto-ip`).
    fn kind(&self) -> String {
        "key".to_owned()
    }

    /// Returns why the request `parts` has no key, when this extractor can
    /// tell more than "no key" (the layer's 400 says it): [`PeerIp`] names
    /// the server setting that gives it the peer address.
    fn why_missing(&self, parts: &Parts) -> Option<String> {
        let _ = parts;
        None
    }
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<String> {
        self(parts)
    }
}

/// Two extractors joined: the key is `"{a}|{b}"`, and missing if either is
/// (e.g. `(Header::named("x-api-key").unwrap(), Route)` limits each key on each route).
impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for (A, B) {
    fn extract(&self, parts: &Parts) -> Option<String> {
        Some(format!(
            "{}|{}",
            self.0.extract(parts)?,
            self.1.extract(parts)?
        ))
    }

    fn kind(&self) -> String {
        format!("{}-{}", self.0.kind(), self.1.kind())
    }

    fn why_missing(&self, parts: &Parts) -> Option<String> {
        self.0
            .why_missing(parts)
            .or_else(|| self.1.why_missing(parts))
    }
}

/// One key for every request: a global limit.
///
/// ```
/// use slidelog::middleware::{Constant, KeyExtractor};
/// let (parts, ()) = http::Request::get("/").body(()).unwrap().into_parts();
/// assert_eq!(Constant::new("global").extract(&parts).as_deref(), Some("global"));
/// ```
#[derive(Debug, Clone)]
pub struct Constant(String);

impl Constant {
    /// Every request counts against `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }
}

impl KeyExtractor for Constant {
    fn extract(&self, _: &Parts) -> Option<String> {
        Some(self.0.clone())
    }

    fn kind(&self) -> String {
        "constant".to_owned()
    }
}

/// The value of a request header, e.g. an API key. Missing, empty or
/// non-UTF-8 values are no key.
///
/// ```
/// use slidelog::middleware::{Header, KeyExtractor};
/// let request = http::Request::get("/").header("x-api-key", "k-123").body(()).unwrap();
/// let (parts, ()) = request.into_parts();
/// assert_eq!(Header::named("x-api-key").unwrap().extract(&parts).as_deref(), Some("k-123"));
/// ```
#[derive(Debug, Clone)]
pub struct Header(http::HeaderName);

impl Header {
    /// Keys by the header `name`.
    pub fn new(name: http::HeaderName) -> Self {
        Self(name)
    }

    /// Keys by the header called `name`; an invalid name is an error.
    pub fn named(name: &str) -> Result<Self, http::header::InvalidHeaderName> {
        http::HeaderName::try_from(name).map(Self)
    }
}

impl KeyExtractor for Header {
    fn extract(&self, parts: &Parts) -> Option<String> {
        let value = parts.headers.get(&self.0)?.to_str().ok()?.trim();
        (!value.is_empty()).then(|| value.to_owned())
    }

    fn kind(&self) -> String {
        format!("header-{}", self.0)
    }
}

/// The route: `"{METHOD} {path}"`, where the path is axum's matched route
/// (`/users/{id}`) when there is one (feature `axum`), else the request path.
/// With it, each route has its own shared log (a per-route global limit).
///
/// ```
/// use slidelog::middleware::{KeyExtractor, Route};
/// let (parts, ()) = http::Request::post("/login").body(()).unwrap().into_parts();
/// assert_eq!(Route.extract(&parts).as_deref(), Some("POST /login"));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Route;

impl KeyExtractor for Route {
    fn extract(&self, parts: &Parts) -> Option<String> {
        Some(format!("{} {}", parts.method, route_path(parts)))
    }

    fn kind(&self) -> String {
        "route".to_owned()
    }
}

/// Returns the path a request is routed by: axum's `MatchedPath` when present.
pub(crate) fn route_path(parts: &Parts) -> &str {
    #[cfg(feature = "axum")]
    if let Some(matched) = parts.extensions.get::<axum::extract::MatchedPath>() {
        return matched.as_str();
    }
    parts.uri.path()
}

/// The client's IP address: the TCP peer (axum's `ConnectInfo<SocketAddr>`,
/// tonic's `TcpConnectInfo`, or a plain `SocketAddr` extension), or, when the
/// peer is a trusted proxy, the client that `X-Forwarded-For` names.
///
/// `X-Forwarded-For` is read only behind trusted proxies: anyone else could
/// send any value and pick their own key. Walking the header from the right,
/// the first address that is not a trusted proxy is the client.
///
/// ```
/// use slidelog::middleware::{KeyExtractor, PeerIp};
/// use std::net::SocketAddr;
/// let proxy: SocketAddr = "10.0.0.1:40000".parse().unwrap();
/// let mut request = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.7, 10.0.0.2")
///     .body(())
///     .unwrap();
/// request.extensions_mut().insert(proxy);
/// let (parts, ()) = request.into_parts();
/// assert_eq!(PeerIp::new().extract(&parts).as_deref(), Some("10.0.0.1"));
/// let behind = PeerIp::new().trust_proxies(["10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()]);
/// assert_eq!(behind.extract(&parts).as_deref(), Some("203.0.113.7"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct PeerIp {
    trusted: Vec<IpAddr>,
}

impl PeerIp {
    /// Keys by the TCP peer's IP; `X-Forwarded-For` is ignored.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads `X-Forwarded-For` when the peer is one of `proxies`.
    pub fn trust_proxies(mut self, proxies: impl IntoIterator<Item = IpAddr>) -> Self {
        self.trusted.extend(proxies);
        self
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.contains(&canonical(ip))
    }

    /// Returns the client behind trusted proxies: walk `X-Forwarded-For` from the
    /// right while the hops are trusted; stop at an unparsable hop (keep the
    /// last good one).
    fn behind_proxies(&self, peer: IpAddr, parts: &Parts) -> IpAddr {
        // Several X-Forwarded-For fields are one list, in order (RFC 9110 §5.3).
        let mut hops = Vec::new();
        for value in parts.headers.get_all("x-forwarded-for") {
            match value.to_str() {
                Ok(value) => hops.extend(value.split(',').map(str::trim)),
                // An unreadable field: only the hops after it could be read.
                Err(_) => hops.clear(),
            }
        }
        let mut client = peer;
        for hop in hops.into_iter().rev() {
            if !self.is_trusted(client) {
                break;
            }
            match hop.parse::<IpAddr>() {
                Ok(ip) => client = canonical(ip),
                Err(_) => break,
            }
        }
        client
    }
}

impl KeyExtractor for PeerIp {
    fn extract(&self, parts: &Parts) -> Option<String> {
        let peer = canonical(peer_addr(parts)?.ip());
        let client = if self.trusted.is_empty() {
            peer
        } else {
            self.behind_proxies(peer, parts)
        };
        Some(client.to_string())
    }

    fn kind(&self) -> String {
        "ip".to_owned()
    }

    fn why_missing(&self, parts: &Parts) -> Option<String> {
        // The usual cause: an axum app served without connect info, so no
        // request carries its peer and every one would be refused.
        peer_addr(parts).is_none().then(|| NO_PEER.to_owned())
    }
}

/// The reason [`PeerIp`] gives for a request without a peer address.
pub(crate) const NO_PEER: &str = "no peer address in the request: serve an axum app with \
`app.into_make_service_with_connect_info::<SocketAddr>()` (axum::serve), or put the \
peer's `SocketAddr` in the request's extensions";

/// IPv4-mapped IPv6 (`::ffff:1.2.3.4`) as IPv4, so one client has one key
/// on a dual-stack listener.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Returns the TCP peer from whichever extension the server put in.
pub(crate) fn peer_addr(parts: &Parts) -> Option<SocketAddr> {
    #[cfg(feature = "axum")]
    if let Some(info) = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(info.0);
    }
    #[cfg(feature = "tonic")]
    if let Some(info) = parts
        .extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
    {
        return info.remote_addr();
    }
    parts.extensions.get::<SocketAddr>().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts_from(peer: &str, xff: &[&str]) -> Parts {
        let mut builder = http::Request::get("/");
        for v in xff {
            builder = builder.header("x-forwarded-for", *v);
        }
        let mut request = builder.body(()).unwrap();
        request
            .extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
        request.into_parts().0
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn forwarded_for_is_ignored_from_untrusted_peers() {
        let parts = parts_from("192.0.2.9:1", &["1.1.1.1"]);
        let trusting = PeerIp::new().trust_proxies([ip("10.0.0.1")]);
        assert_eq!(trusting.extract(&parts).as_deref(), Some("192.0.2.9"));
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        // A client that forges a leftmost entry does not pick its key; the
        // fields are read as one list, the last field last.
        let parts = parts_from("10.0.0.1:1", &["6.6.6.6, 198.51.100.4", "10.0.0.2"]);
        let trusting = PeerIp::new().trust_proxies([ip("10.0.0.1"), ip("10.0.0.2")]);
        assert_eq!(trusting.extract(&parts).as_deref(), Some("198.51.100.4"));
        // Only 10.0.0.1 trusted: 10.0.0.2 is the client it saw.
        let one = PeerIp::new().trust_proxies([ip("10.0.0.1")]);
        assert_eq!(one.extract(&parts).as_deref(), Some("10.0.0.2"));
        // Every hop trusted: the leftmost is the client.
        let all = PeerIp::new().trust_proxies([
            ip("10.0.0.1"),
            ip("10.0.0.2"),
            ip("198.51.100.4"),
            ip("6.6.6.6"),
        ]);
        assert_eq!(all.extract(&parts).as_deref(), Some("6.6.6.6"));
    }

    #[test]
    fn a_garbled_hop_stops_the_walk() {
        let parts = parts_from("10.0.0.1:1", &["1.2.3.4, not-an-ip"]);
        let trusting = PeerIp::new().trust_proxies([ip("10.0.0.1")]);
        assert_eq!(trusting.extract(&parts).as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn ipv4_mapped_peers_are_keyed_as_ipv4() {
        let parts = parts_from("[::ffff:192.0.2.1]:80", &[]);
        assert_eq!(PeerIp::new().extract(&parts).as_deref(), Some("192.0.2.1"));
    }

    #[test]
    fn no_peer_is_no_key_and_pairs_need_both() {
        let (parts, ()) = http::Request::get("/x").body(()).unwrap().into_parts();
        assert_eq!(PeerIp::new().extract(&parts), None);
        assert_eq!((PeerIp::new(), Route).extract(&parts), None);
        assert_eq!(
            (Constant::new("a"), Route).extract(&parts).as_deref(),
            Some("a|GET /x")
        );
    }

    #[test]
    fn empty_headers_are_no_key() {
        let (parts, ()) = http::Request::get("/")
            .header("x-api-key", "  ")
            .body(())
            .unwrap()
            .into_parts();
        assert_eq!(Header::named("x-api-key").unwrap().extract(&parts), None);
    }
}
