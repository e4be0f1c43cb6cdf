//! TLS on serve's own ports (docs/design.md §5.2),
//! against the built binary with test certificates from `openssl`:
//! HTTPS and gRPC over TLS for a client that trusts the test CA, ALPN (h2
//! and http/1.1 on HTTP, h2 only on gRPC), plain HTTP to the TLS port
//! refused cleanly (counted, logged once, the service unharmed), a renewed
//! certificate served without a restart, mutual TLS refusing a client
//! without a certificate, and files that are not regular PEM files refused
//! at start naming their flag.

mod common;
mod tls_common;

use common::child;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tls_common::{CONFIG, Certs, grpc_call, https_client, log_lines, tls_connect};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Puts `certs`' server certificate and key at `cert` and `key`, each by
/// a rename (as a certificate manager renews them).
fn install(certs: &Certs, cert: &Path, key: &Path) {
    for (from, to) in [("server.key", key), ("server.crt", cert)] {
        let tmp = to.with_extension("tmp");
        std::fs::copy(certs.path(from), &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }
}

/// `slidelog serve` on free ports with a memory store and `args`.
fn serve(args: &[&std::ffi::OsStr]) -> child::Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(["--store", "memory://"])
        .args(args)
        .env_remove("SLIDELOG_STORE");
    child::spawn(command)
}

/// The value of the series `name{labels}` in a Prometheus exposition.
fn series(metrics: &str, name_and_labels: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name_and_labels} in\n{metrics}"))
}

/// `slidelog_tls_handshake_failures_total{port}` from `url` once it is at
/// least `at_least` (a refusal is counted on its connection's task, maybe
/// just after the client saw the close), or after 5 s.
async fn failures_reach(client: &reqwest::Client, url: &str, port: &str, at_least: u64) -> u64 {
    let name = format!("slidelog_tls_handshake_failures_total{{port=\"{port}\"}}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let metrics = client.get(url).send().await.unwrap().text().await.unwrap();
        let n = series(&metrics, &name);
        if n >= at_least || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a plain-text HTTP request to a TLS port gets back (within 5 s).
async fn plain_http_answer(addr: &str) -> Vec<u8> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut got)).await;
    assert!(
        read.is_ok(),
        "the TLS port kept a plain HTTP connection open"
    );
    got
}

/// HTTPS and gRPC over TLS for a client of `ca`, and the ALPN of each port.
async fn assert_served(client: &reqwest::Client, http: &str, grpc: &str, ca: &Path) {
    let healthz = client.get(format!("https://{http}/healthz")).send().await;
    assert_eq!(healthz.unwrap().status(), 200);
    let check = serde_json::json!({"key": "k", "max": 5, "window_ms": 60000});
    let answer = client
        .post(format!("https://{http}/v1/check"))
        .json(&check)
        .send();
    let answer = answer.await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["allowed"], true, "{body}");

    // ALPN: HTTP offers h2 and http/1.1, gRPC h2 only.
    let h2 = tls_connect(http, ca, &[b"h2", b"http/1.1"]).await.unwrap();
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut h2, connection) = h2::client::handshake(h2).await.unwrap();
    tokio::spawn(connection);
    let get = axum::http::Request::get("https://localhost/healthz").body(());
    let (answer, _) = h2.send_request(get.unwrap(), true).unwrap();
    assert_eq!(answer.await.unwrap().status(), 200, "HTTP/2 over TLS");
    let h1 = tls_connect(http, ca, &[b"http/1.1"]).await.unwrap();
    assert_eq!(h1.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let tls = tls_connect(grpc, ca, &[b"h2"]).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(grpc_call(tls, None, "a").await.0, "0", "gRPC over TLS: OK");
    assert!(tls_connect(grpc, ca, &[b"http/1.1"]).await.is_err());
}

/// Plain HTTP to the TLS port: no HTTP answer, the connection closed; the
/// service unharmed, the refusals counted and logged once for the episode
/// (with the gRPC port's ALPN refusal of [`assert_served`]).
async fn assert_plain_http_refused(service: &child::Serve, client: &reqwest::Client) {
    let http = &service.addr;
    for _ in 0..3 {
        let got = plain_http_answer(http).await;
        let text = String::from_utf8_lossy(&got);
        assert!(!got.starts_with(b"HTTP/"), "{text}");
    }
    let plain = common::client()
        .get(format!("http://{http}/healthz"))
        .send();
    let plain = plain.await;
    assert!(plain.is_err(), "{plain:?}");
    let url = format!("https://{http}/metrics");
    assert!(failures_reach(client, &url, "http", 4).await >= 4);
    assert_eq!(failures_reach(client, &url, "grpc", 1).await, 1);
    let log = log_lines(&service.log, Duration::from_millis(500));
    let refused = log.iter().filter(|l| l.contains("TLS handshake refused"));
    assert_eq!(refused.count(), 1, "{log:#?}");
}

/// Once `second`'s certificate is installed, new connections get it
/// within 20 s: a client of its CA is answered on both ports, a new
/// connection of a client of `first_ca` is refused.
async fn assert_renewed(service: &child::Serve, second: &Certs, first_ca: &Path) {
    let (http, grpc) = (&service.addr, service.grpc_addr());
    let renewed = https_client(&second.path("ca.crt"), None);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = renewed.get(format!("https://{http}/healthz")).send().await;
        if got.is_ok_and(|r| r.status() == 200) {
            break;
        }
        let waited = Instant::now() < deadline;
        assert!(waited, "the renewed certificate was not served in 20 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A new client: one kept alive from before keeps its session.
    let fresh = https_client(first_ca, None);
    let old = fresh.get(format!("https://{http}/healthz")).send().await;
    assert!(old.is_err(), "a client of the first CA got in: {old:?}");
    let tls = tls_connect(&grpc, &second.path("ca.crt"), &[b"h2"]).await;
    assert_eq!(grpc_call(tls.unwrap(), None, "b").await.0, "0");
    let log = log_lines(&service.log, Duration::from_millis(200));
    let reloaded = log.iter().any(|l| l.contains("TLS certificate reloaded"));
    assert!(reloaded, "{log:#?}");
}

#[tokio::test]
async fn https_and_grpc_over_tls_plain_http_refused_and_a_renewed_certificate_served() {
    let (first, second) = (Certs::make(), Certs::make());
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, config) = (
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("limits.yaml"),
    );
    install(&first, &cert, &key);
    std::fs::write(&config, CONFIG).unwrap();
    let service = serve(&[
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
    ]);
    assert!(service.early_log.last().unwrap().contains("tls=true"));
    let ca = first.path("ca.crt");
    let client = https_client(&ca, None);
    assert_served(&client, &service.addr, &service.grpc_addr(), &ca).await;
    assert_plain_http_refused(&service, &client).await;
    install(&second, &cert, &key);
    assert_renewed(&service, &second, &ca).await;
}

#[tokio::test]
async fn mutual_tls_refuses_a_client_without_a_certificate() {
    let certs = Certs::make();
    let (cert, key, ca) = (
        certs.path("server.crt"),
        certs.path("server.key"),
        certs.path("ca.crt"),
    );
    let service = serve(&[
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
        "--tls-client-ca".as_ref(),
        ca.as_os_str(),
    ]);
    let url = format!("https://{}/healthz", service.addr);
    let anonymous = https_client(&ca, None).get(&url).send().await;
    assert!(anonymous.is_err(), "{anonymous:?}");
    // gRPC too: the handshake (whose client half may finish first, in
    // TLS 1.3) is refused by the server, which counts it.
    if let Ok(tls) = tls_connect(&service.grpc_addr(), &ca, &[b"h2"]).await
        && let Ok((client, connection)) = h2::client::handshake(tls).await
    {
        tokio::spawn(connection);
        // Only to drive the connection: the refusal is the server's count.
        let _ = tokio::time::timeout(Duration::from_secs(5), client.ready()).await;
    }
    let with_cert = https_client(&ca, Some(&certs));
    let answer = with_cert.get(&url).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let url = format!("https://{}/metrics", service.addr);
    assert!(failures_reach(&with_cert, &url, "http", 1).await >= 1);
    assert_eq!(failures_reach(&with_cert, &url, "grpc", 1).await, 1);
}

/// `serve ARGS` exits within 10 s; its stderr.
fn start_fails(args: &[&std::ffi::OsStr]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--no-grpc",
            "--store",
            "memory://",
        ])
        .args(args)
        .env_remove("SLIDELOG_STORE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child::exit_status(&mut child, Duration::from_secs(10), "a refused TLS file");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    stderr
}

#[test]
fn a_fifo_a_device_or_a_key_of_another_certificate_stops_the_start_naming_the_flag() {
    let (a, b) = (Certs::make(), Certs::make());
    let fifo = a.path("fifo");
    common::mkfifo(&fifo);
    let (cert, key) = (a.path("server.crt"), a.path("server.key"));
    let zero = Path::new("/dev/zero").as_os_str();
    let flag = |s: &'static str| std::ffi::OsStr::new(s);

    let e = start_fails(&[flag("--tls-cert"), zero, flag("--tls-key"), key.as_os_str()]);
    assert!(
        e.contains("--tls-cert /dev/zero: not a regular file"),
        "{e}"
    );
    let e = start_fails(&[
        flag("--tls-cert"),
        cert.as_os_str(),
        flag("--tls-key"),
        fifo.as_os_str(),
    ]);
    assert!(
        e.contains("--tls-key") && e.contains("not a regular file"),
        "{e}"
    );
    let other_key = b.path("server.key");
    let e = start_fails(&[
        flag("--tls-cert"),
        cert.as_os_str(),
        flag("--tls-key"),
        other_key.as_os_str(),
    ]);
    assert!(e.contains("--tls-cert and --tls-key"), "{e}");
    let e = start_fails(&[
        flag("--tls-cert"),
        cert.as_os_str(),
        flag("--tls-key"),
        key.as_os_str(),
        flag("--tls-client-ca"),
        key.as_os_str(),
    ]);
    assert!(
        e.contains("--tls-client-ca") && e.contains("no PEM CERTIFICATE"),
        "{e}"
    );
}
