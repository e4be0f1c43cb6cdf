//! The guard of every admin operation (docs/design.md §5, "Operators' API"):
//! reset, the key browser, blocks and overrides.
//!
//! With `--admin-token` set, a request needs `Authorization: Bearer <token>`
//! (401 JSON error with `WWW-Authenticate: Bearer` otherwise; compared in
//! constant time). Without a token, only loopback callers are answered
//! (403 for the others): an operator who exposes the port must choose a
//! token. A handler takes [`AdminGuard`] as its first extractor, so the
//! check runs before anything else of the request is read.

use crate::app::App;
use crate::http::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use std::net::{IpAddr, SocketAddr};

/// The address of the connection a request came on, put into the
/// request's extensions by the server (`crate::http::Api`). A request
/// without it (a router called in-process) counts as not loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

/// Proof that a request may run an admin operation: an extractor that
/// refuses the request (401 or 403, JSON) otherwise.
#[derive(Debug, Clone, Copy)]
pub struct AdminGuard;

impl FromRequestParts<App> for AdminGuard {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &App) -> Result<Self, ApiError> {
        let peer = parts.extensions.get::<Peer>().map(|p| p.0);
        admit(
            app.config().admin_token.as_ref().map(|t| t.expose()),
            &parts.headers,
            peer,
        )?;
        Ok(Self)
    }
}

/// The guard's rule: the token when one is set, else a loopback peer.
pub fn admit(
    token: Option<&str>,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<(), ApiError> {
    match token {
        Some(token) => authorize(headers, token),
        None if peer.is_some_and(|p| is_loopback(p.ip())) => Ok(()),
        None => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "admin operations answer loopback callers only when no admin token is set: \
             start serve with --admin-token (or --admin-token-file) to use them remotely",
        )),
    }
}

/// Loopback, also as an IPv4-mapped IPv6 address (a dual-stack listener).
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Checks `Authorization: Bearer <token>` in constant time.
fn authorize(headers: &HeaderMap, token: &str) -> Result<(), ApiError> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this endpoint needs the admin token: send `Authorization: Bearer <token>`",
        )
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .ok_or_else(unauthorized)?;
    if constant_time_eq(given.as_bytes(), token.as_bytes()) {
        Ok(())
    } else {
        Err(unauthorized())
    }
}

/// Compares without an early exit, so timing does not reveal how many
/// leading bytes of a guess were right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer tok"),
        );
        assert!(authorize(&h, "tok").is_ok());
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic tok"));
        assert!(authorize(&h, "tok").is_err());
        assert!(authorize(&HeaderMap::new(), "tok").is_err());
    }

    #[test]
    fn without_a_token_only_loopback_is_admitted() {
        let none = HeaderMap::new();
        let at = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
        assert!(admit(None, &none, at("127.0.0.1:9")).is_ok());
        assert!(admit(None, &none, at("[::1]:9")).is_ok());
        assert!(admit(None, &none, at("[::ffff:127.0.0.1]:9")).is_ok());
        let far = admit(None, &none, at("10.1.2.3:9")).unwrap_err();
        assert_eq!(far.status, StatusCode::FORBIDDEN);
        assert_eq!(
            admit(None, &none, None).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        // A token set: loopback alone is not enough.
        let local = admit(Some("t"), &none, at("127.0.0.1:9")).unwrap_err();
        assert_eq!(local.status, StatusCode::UNAUTHORIZED);
    }
}
