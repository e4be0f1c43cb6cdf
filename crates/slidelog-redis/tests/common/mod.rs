//! Helpers shared by the Redis store's integration tests.
#![allow(dead_code)]

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

/// Starts a [`TlsServer`] with the extra arguments `extra`.
pub fn tls_server(extra: &[&str]) -> TlsServer {
    let certs = tempfile::tempdir().unwrap();
    slidelog_testkit::tls::make_test_certs(certs.path());
    let path = |f: &str| certs.path().join(f).to_string_lossy().into_owned();
    let tls_port = slidelog_testkit::free_port();
    let port = tls_port.to_string();
    let (cert, key, ca) = (path("server.crt"), path("server.key"), path("ca.crt"));
    let mut args = vec![
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ];
    args.extend_from_slice(extra);
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

/// A peek one time in `one_in` (at random), a check otherwise.
pub fn random_mode(rng: &mut impl rand::Rng, one_in: u32) -> slidelog_core::Mode {
    if rng.random_ratio(1, one_in) {
        slidelog_core::Mode::Peek
    } else {
        slidelog_core::Mode::Record
    }
}
