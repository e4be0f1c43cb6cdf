//! Clients of serve's TLS ports and client tokens (tests/tls.rs,
//! tests/client_tokens.rs): test certificates from the `openssl` command
//! (slidelog-testkit), reqwest trusting a test CA, a rustls client whose
//! ALPN the test chooses, and one gRPC `ShouldRateLimit` call over a raw
//! HTTP/2 connection (plain or TLS), with or without a token.
#![allow(dead_code)]

use axum::body::Bytes;
use axum::http::Request;
use prost::Message as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The gRPC method Envoy calls.
pub const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
/// One Envoy rule, for `--config`.
pub const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n";

/// A test CA and a server certificate for localhost and 127.0.0.1 (also
/// valid as a client certificate), in a directory of their own.
pub struct Certs {
    /// The directory (removed on drop).
    pub dir: tempfile::TempDir,
}

impl Certs {
    /// Makes them with `openssl`.
    pub fn make() -> Self {
        let dir = tempfile::tempdir().unwrap();
        slidelog_testkit::tls::make_test_certs(dir.path());
        Self { dir }
    }

    /// A file of the directory (`ca.crt`, `server.crt`, `server.key`).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A reqwest client (rustls) that trusts only `ca`, presenting the
/// certificate and key of `identity` when given.
pub fn https_client(ca: &Path, identity: Option<&Certs>) -> reqwest::Client {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca)
        .timeout(Duration::from_secs(10));
    if let Some(certs) = identity {
        let mut pem = std::fs::read(certs.path("server.crt")).unwrap();
        pem.extend(std::fs::read(certs.path("server.key")).unwrap());
        builder = builder.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    builder.build().unwrap()
}

/// A TLS connection to `addr` trusting only `ca`, offering `alpn`.
pub async fn tls_connect(
    addr: &str,
    ca: &Path,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// One `ShouldRateLimit` call (domain `api`, `user` = `value`) over `io`
/// with `authorization: Bearer <token>` when given: the `grpc-status` and
/// `grpc-message` of its answer.
pub async fn grpc_call<IO>(io: IO, token: Option<&str>, value: &str) -> (String, String)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (client, connection) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let mut request = Request::post(format!("https://localhost{PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let message = envoy_request(value).encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    body.extend_from_slice(&message);
    let (response, mut send) = client
        .send_request(request.body(()).unwrap(), false)
        .unwrap();
    send.send_data(Bytes::from(body), true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 200);
    let header = |h: &axum::http::HeaderMap, name: &str| {
        h.get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    if response.headers().contains_key("grpc-status") {
        let h = response.headers();
        return (header(h, "grpc-status"), header(h, "grpc-message"));
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.unwrap().expect("trailers");
    (
        header(&trailers, "grpc-status"),
        header(&trailers, "grpc-message"),
    )
}

fn envoy_request(value: &str) -> slidelog_envoy::proto::RateLimitRequest {
    use slidelog_envoy::proto::{
        RateLimitDescriptor, RateLimitRequest, rate_limit_descriptor::Entry,
    };
    RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: value.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// The log lines `serve` writes within `within` (read from its log channel).
pub fn log_lines(log: &std::sync::mpsc::Receiver<String>, within: Duration) -> Vec<String> {
    let deadline = std::time::Instant::now() + within;
    let mut lines = Vec::new();
    while let Ok(line) =
        log.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        lines.push(line);
    }
    lines
}
