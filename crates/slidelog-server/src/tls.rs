//! TLS on serve's own ports (docs/design.md §5.2):
//! `--tls-cert` and `--tls-key` (PEM) put both the HTTP and the gRPC port
//! behind TLS (rustls, ring provider); `--tls-client-ca` also requires and
//! verifies a client certificate (mutual TLS).
//!
//! The HTTP port offers h2 and http/1.1 by ALPN, the gRPC port h2 only (a
//! client that offers neither is refused). The files are read again every
//! [`RELOAD_POLL`] and a changed content is served from the next handshake
//! on, without a restart; a renewal that does not load (a key that does not
//! match, a half-written file) is logged once and the previous certificate
//! kept. A refused handshake (plain HTTP to the port, no or a wrong client
//! certificate, a client that rejects the certificate or stalls) ends that
//! connection only (a client that just closes is not counted): it is
//! counted in `slidelog_tls_handshake_failures_total{port}` and logged once
//! per episode, not once per connection.

use crate::flag_file::{self, FlagFileError, MAX_FLAG_FILE_BYTES};
use arc_swap::ArcSwap;
use metrics::Counter;
use parking_lot::Mutex;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::server::TlsStream;

/// How often the certificate files are read again to see a renewal.
pub const RELOAD_POLL: Duration = Duration::from_secs(2);
/// Time a client gets to finish its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A refused handshake this long after the previous one starts a new
/// episode, which is logged again.
pub const EPISODE_QUIET: Duration = Duration::from_secs(60);
/// The counter of refused handshakes.
pub const HANDSHAKE_FAILURES: &str = "slidelog_tls_handshake_failures_total";

/// The TLS flags of `serve`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsArgs {
    /// Serve the HTTP and gRPC ports over TLS with this PEM certificate
    /// chain (with --tls-key). Read again every 2 s: a renewed file is
    /// served without a restart. A regular file of at most 1 MiB.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Mutual TLS: require a client certificate signed by a CA of this PEM
    /// bundle on both ports (reloaded as --tls-cert is).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

/// Why the TLS configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error(transparent)]
    File(#[from] FlagFileError),
    /// A file's PEM does not hold what the flag needs.
    #[error("{flag} {}: {what}", path.display())]
    Pem {
        /// The flag that names the file.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// rustls refused the certificate and key (e.g. a key of another certificate).
    #[error("--tls-cert and --tls-key: {0}")]
    Config(rustls::Error),
    /// rustls refused the client CA bundle.
    #[error("--tls-client-ca: {0}")]
    ClientCa(rustls::server::VerifierBuilderError),
}

/// The files the flags name.
#[derive(Debug, Clone)]
struct Paths {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

/// The files' content last loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

/// Which port a handshake was for.
#[derive(Debug, Clone, Copy)]
pub enum Port {
    /// The HTTP JSON API.
    Http,
    /// The Envoy gRPC API.
    Grpc,
}

impl Port {
    fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Grpc => "grpc",
        }
    }
}

/// TLS of both ports: the configurations served now, reloaded from the
/// files, and the count of refused handshakes. Cheap to clone.
#[derive(Clone)]
pub struct Tls(Arc<Inner>);

struct Inner {
    paths: Paths,
    http: ArcSwap<ServerConfig>,
    grpc: ArcSwap<ServerConfig>,
    loaded: Mutex<Material>,
    /// The reload error last logged, so that a bad file is logged once.
    reload_error: Mutex<Option<String>>,
    failures: [Counter; 2],
    /// When the last handshake was refused (an episode is open until
    /// [`EPISODE_QUIET`] passes without one), and how many were.
    episode: Mutex<Option<(Instant, u64)>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("paths", &self.0.paths).finish()
    }
}

impl Tls {
    /// Loads the flags' files; `None` without `--tls-cert`. The failure
    /// counters are registered with `recorder` (the server's own).
    pub fn from_flags(
        args: &TlsArgs,
        recorder: &(dyn metrics::Recorder + Send + Sync),
    ) -> Result<Option<Self>, TlsError> {
        let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) else {
            return Ok(None);
        };
        let paths = Paths {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: args.tls_client_ca.clone(),
        };
        let material = read_material(&paths)?;
        let (http, grpc) = configs(&paths, &material)?;
        let failures = metrics::with_local_recorder(recorder, || {
            metrics::describe_counter!(
                HANDSHAKE_FAILURES,
                "TLS handshakes refused (plain HTTP, no or a wrong client certificate, a stalled client), by port"
            );
            [Port::Http, Port::Grpc].map(|p| {
                let c = metrics::counter!(HANDSHAKE_FAILURES, "port" => p.as_str());
                c.increment(0);
                c
            })
        });
        Ok(Some(Self(Arc::new(Inner {
            paths,
            http: ArcSwap::from_pointee(http),
            grpc: ArcSwap::from_pointee(grpc),
            loaded: Mutex::new(material),
            reload_error: Mutex::new(None),
            failures,
            episode: Mutex::new(None),
        }))))
    }

    /// Reads the files again every [`RELOAD_POLL`] until `shutdown`.
    pub fn spawn_reload(&self, shutdown: crate::shutdown::Shutdown) {
        let tls = self.clone();
        flag_file::spawn_poll(shutdown, RELOAD_POLL, move || tls.reload());
    }

    /// Serves the files' new content, if it changed and loads; else keeps
    /// the configuration served now (logging a new error once).
    pub fn reload(&self) {
        let outcome = read_material(&self.0.paths).and_then(|material| {
            if *self.0.loaded.lock() == material {
                return Ok(false);
            }
            let (http, grpc) = configs(&self.0.paths, &material)?;
            self.0.http.store(Arc::new(http));
            self.0.grpc.store(Arc::new(grpc));
            *self.0.loaded.lock() = material;
            Ok(true)
        });
        let mut last = self.0.reload_error.lock();
        match outcome {
            Ok(true) => {
                *last = None;
                tracing::info!("TLS certificate reloaded: new handshakes get the new files");
            }
            Ok(false) => *last = None,
            Err(e) => {
                let text = e.to_string();
                if last.as_deref() != Some(&text) {
                    tracing::warn!(error = %text, "TLS files changed but do not load: still serving the previous certificate");
                    *last = Some(text);
                }
            }
        }
    }

    /// The handshake of a connection to `port`; `None` (counted, logged
    /// once per episode) when it fails or takes over [`HANDSHAKE_TIMEOUT`].
    pub async fn accept<IO>(&self, io: IO, port: Port) -> Option<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let config = match port {
            Port::Http => self.0.http.load_full(),
            Port::Grpc => self.0.grpc.load_full(),
        };
        let handshake = tokio_rustls::TlsAcceptor::from(config).accept(io);
        let error = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
            Ok(Ok(stream)) => return Some(stream),
            // Closed by the client before the handshake ended (a load
            // balancer's TCP probe, a client that gave up): nothing was
            // refused. A client that rejects the certificate says so with
            // an alert, which is counted below.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                tracing::debug!(
                    port = port.as_str(),
                    "connection closed during the TLS handshake"
                );
                return None;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no handshake within {HANDSHAKE_TIMEOUT:?}"),
        };
        self.refused(port, &error);
        None
    }

    /// Counts a refused handshake; logs it when it starts an episode.
    fn refused(&self, port: Port, error: &str) {
        self.0.failures[port as usize].increment(1);
        let now = Instant::now();
        let mut episode = self.0.episode.lock();
        match episode.as_mut() {
            Some((last, count)) if now.duration_since(*last) < EPISODE_QUIET => {
                *last = now;
                *count += 1;
                tracing::debug!(port = port.as_str(), error, "TLS handshake refused");
            }
            _ => {
                *episode = Some((now, 1));
                tracing::warn!(
                    port = port.as_str(),
                    error,
                    "TLS handshake refused (further refusals are counted in {HANDSHAKE_FAILURES} and not logged until {EPISODE_QUIET:?} pass without one)"
                );
            }
        }
    }
}

/// Reads the three files.
fn read_material(paths: &Paths) -> Result<Material, TlsError> {
    let read = |path: &Path, flag| flag_file::read(path, flag, MAX_FLAG_FILE_BYTES);
    Ok(Material {
        cert: read(&paths.cert, "--tls-cert")?,
        key: read(&paths.key, "--tls-key")?,
        client_ca: (paths.client_ca.as_deref())
            .map(|ca| read(ca, "--tls-client-ca"))
            .transpose()?,
    })
}

/// The configurations of the HTTP port (h2 and http/1.1) and the gRPC port (h2).
fn configs(paths: &Paths, material: &Material) -> Result<(ServerConfig, ServerConfig), TlsError> {
    let pem_error = |flag, path: &Path, what: String| TlsError::Pem {
        flag,
        path: path.to_owned(),
        what,
    };
    let certs = CertificateDer::pem_slice_iter(&material.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error("--tls-cert", &paths.cert, e.to_string()))?;
    if certs.is_empty() {
        let what = "no PEM CERTIFICATE block".to_owned();
        return Err(pem_error("--tls-cert", &paths.cert, what));
    }
    // The key's error never quotes the file.
    let key = PrivateKeyDer::from_pem_slice(&material.key).map_err(|_| {
        let what = "no PEM private key (PKCS#8, PKCS#1 or SEC1)".to_owned();
        pem_error("--tls-key", &paths.key, what)
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let builder = match &material.client_ca {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let roots = client_roots(pem, paths.client_ca.as_deref())?;
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(TlsError::ClientCa)?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut http = builder
        .with_single_cert(certs, key)
        .map_err(TlsError::Config)?;
    let mut grpc = http.clone();
    http.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    grpc.alpn_protocols = vec![b"h2".to_vec()];
    Ok((http, grpc))
}

/// The CAs of `--tls-client-ca`.
fn client_roots(pem: &[u8], path: Option<&Path>) -> Result<Arc<rustls::RootCertStore>, TlsError> {
    let error = |what: String| TlsError::Pem {
        flag: "--tls-client-ca",
        path: path.map(Path::to_owned).unwrap_or_default(),
        what,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| error(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| error(format!("not a CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(error("no PEM CERTIFICATE block".to_owned()));
    }
    Ok(Arc::new(roots))
}

#[cfg(test)]
mod tests;
