//! Helpers shared by the Redis store's integration tests.
#![allow(dead_code)]

pub mod children;

use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::Duration;

/// A per-call timeout for tests that check behaviour, not latency: generous,
/// because CI runs many test binaries and redis-servers on 2 cores at once.
pub const PATIENT: Duration = Duration::from_secs(5);

/// Default options with a key prefix unique to `test` and the [`PATIENT`] timeout.
pub fn options(test: &str) -> RedisOptions {
    options_with_timeout(test, PATIENT)
}

/// Default options with a key prefix unique to `test` and the per-call
/// `timeout` (tests about latency and outages).
pub fn options_with_timeout(test: &str, timeout: Duration) -> RedisOptions {
    RedisOptions::default()
        .with_prefix(unique_prefix(test))
        .with_timeout(timeout)
}

/// A store on `server` with a key prefix unique to `test`.
pub async fn store(server: &RedisServer, test: &str) -> RedisStore {
    store_with(server, options(test)).await
}

/// A store on `server` with `options`.
pub async fn store_with(server: &RedisServer, options: RedisOptions) -> RedisStore {
    RedisStore::connect(&server.url(), options)
        .await
        .expect("connect to the test redis")
}

/// A redis-server that also listens on a TLS port, with a certificate from
/// a test CA (`slidelog_testkit::tls::make_test_certs`).
pub struct TlsServer {
    /// The server (its plain port stays open too).
    pub server: RedisServer,
    /// The TLS port.
    pub tls_port: u16,
    /// The test CA's certificate (PEM), for `RedisOptions::tls_root_cert_pem`.
    pub ca_pem: Vec<u8>,
    _certs: tempfile::TempDir,
}

/// The arguments that make a redis-server listen on TLS `port` with the
/// test certificates in `certs` (clients need no certificate).
pub fn tls_args(certs: &std::path::Path, port: u16) -> Vec<String> {
    let path = |f: &str| certs.join(f).to_string_lossy().into_owned();
    vec![
        "--tls-port".into(),
        port.to_string(),
        "--tls-cert-file".into(),
        path("server.crt"),
        "--tls-key-file".into(),
        path("server.key"),
        "--tls-ca-cert-file".into(),
        path("ca.crt"),
        "--tls-auth-clients".into(),
        "no".into(),
    ]
}

/// Starts a [`TlsServer`] with the extra arguments `extra`.
pub fn tls_server(extra: &[&str]) -> TlsServer {
    let certs = tempfile::tempdir().unwrap();
    slidelog_testkit::tls::make_test_certs(certs.path());
    let tls_port = slidelog_testkit::free_port();
    let mut args = tls_args(certs.path(), tls_port);
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    TlsServer {
        server: RedisServer::start_with_args(&args),
        tls_port,
        ca_pem: std::fs::read(certs.path().join("ca.crt")).unwrap(),
        _certs: certs,
    }
}

/// Asserts that `error` shows none of `passwords` (and so masks them).
pub fn assert_hides(error: &dyn std::fmt::Display, passwords: &[&str]) {
    let text = error.to_string();
    for password in passwords {
        assert!(!text.contains(password), "{text}");
    }
}

/// Every record of the log `key` (member, score), oldest first.
pub fn records<S: redis::FromRedisValue>(c: &mut redis::Connection, key: &str) -> Vec<(String, S)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .unwrap()
}

/// A peek one time in `one_in` (at random), a check otherwise.
pub fn random_mode(rng: &mut impl rand::Rng, one_in: u32) -> slidelog_core::Mode {
    if rng.random_ratio(1, one_in) {
        slidelog_core::Mode::Peek
    } else {
        slidelog_core::Mode::Record
    }
}
