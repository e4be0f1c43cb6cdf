//! Shared helpers of the server tests: start the real service in-process on
//! a free loopback port (port 0) and stop it through its shutdown signal;
//! run the built binary as a child ([`child`]); speak raw HTTP/1.1 to
//! either ([`raw_http`]).
#![allow(dead_code)]

pub mod child;
pub mod local;
pub mod pages;
pub mod raw_http;

use slidelog::store::MemoryStore;
use slidelog_envoy::proto::{RateLimitDescriptor, RateLimitRequest, rate_limit_descriptor::Entry};
use slidelog_server::app::{App, AppConfig};
use slidelog_server::http;
use slidelog_server::server::{Stopped, serve_http};
use slidelog_server::shutdown::{self, ShutdownTrigger};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// An Envoy config (`--config`) with one limited descriptor, `user`, and
/// the `/json` body of one decision on it plus one descriptor no rule
/// matches: between them every `slidelog_envoy_*` series.
pub const ENVOY_CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n";
/// See [`ENVOY_CONFIG`].
pub const ENVOY_JSON: &str = r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"a"}]},{"entries":[{"key":"other","value":"b"}]}]}"#;

/// A service running in this process.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Its state (for metrics and store access).
    pub app: App,
    trigger: ShutdownTrigger,
    task: JoinHandle<std::io::Result<Stopped>>,
}

impl TestServer {
    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Triggers shutdown and waits for the server to stop.
    pub async fn stop(self) -> Stopped {
        self.trigger.trigger();
        self.task.await.expect("server task").expect("server io")
    }
}

/// Starts the service over `app` with the default body cap.
pub async fn start(app: App) -> TestServer {
    start_with_body_cap(app, http::DEFAULT_MAX_BODY_BYTES).await
}

/// Starts the service over `app` with bodies capped at `max_body_bytes`.
pub async fn start_with_body_cap(app: App, max_body_bytes: usize) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (trigger, shutdown) = shutdown::channel();
    let router = http::service(app.clone(), max_body_bytes, axum::Router::new());
    let task = tokio::spawn(serve_http(
        listener,
        router,
        shutdown,
        Duration::from_secs(5),
    ));
    TestServer {
        base,
        app,
        trigger,
        task,
    }
}

/// Starts the service over `app` with `extra` routes (e.g. Envoy's `/json`).
pub async fn start_router(app: App, extra: axum::Router<App>) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (trigger, shutdown) = shutdown::channel();
    let router = http::service(app.clone(), http::DEFAULT_MAX_BODY_BYTES, extra);
    let task = tokio::spawn(serve_http(
        listener,
        router,
        shutdown,
        Duration::from_secs(5),
    ));
    TestServer {
        base,
        app,
        trigger,
        task,
    }
}

/// Starts the service over a fresh in-memory store.
pub async fn start_memory(config: AppConfig) -> TestServer {
    start(App::with_memory_store(Arc::new(MemoryStore::new()), config)).await
}

/// `POST url` with a JSON body; panics when no answer comes.
pub async fn post_json(
    http: &reqwest::Client,
    url: String,
    body: &serde_json::Value,
) -> reqwest::Response {
    http.post(url)
        .json(body)
        .send()
        .await
        .expect("POST answered")
}

/// An HTTP client with a timeout, so that no test can hang on a request.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("reqwest client")
}

/// Sends `request` and reads the answer's body as text; panics when none comes.
pub async fn text_of(request: reqwest::RequestBuilder) -> String {
    request
        .send()
        .await
        .expect("answered")
        .text()
        .await
        .expect("a text body")
}

/// Sends `request` and reads the answer's body as JSON; panics when none comes.
pub async fn json_of(request: reqwest::RequestBuilder) -> serde_json::Value {
    request
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a JSON body")
}

/// Sends `request` and returns the answer's status; panics when none comes.
pub async fn status_of(request: reqwest::RequestBuilder) -> reqwest::StatusCode {
    request.send().await.expect("answered").status()
}

/// An Envoy `RateLimitRequest` of one descriptor with one entry, `key` =
/// `value`, in `domain`, of the default cost.
pub fn envoy_request(domain: &str, key: &str, value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: key.into(),
                value: value.into(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

/// Makes a named pipe at `path` (the hostile-file tests: opening one for
/// reading would wait for a writer).
pub fn mkfifo(path: &std::path::Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
}

/// The `long = value  # source` line of `--print-settings` output.
pub fn setting<'a>(printed: &'a str, long: &str) -> &'a str {
    printed
        .lines()
        .find(|l| l.starts_with(&format!("{long} = ")))
        .unwrap_or_else(|| panic!("no {long} in\n{printed}"))
}

/// Each of `lines` (`long = value  # source`) is the line of `printed` for its flag.
pub fn shows(printed: &str, lines: &[&str]) {
    for line in lines {
        let long = line.split(" = ").next().unwrap();
        assert_eq!(setting(printed, long), *line);
    }
}
