//! Shared helpers of the Envoy tests: requests, a config, and servers on
//! port 0 (gRPC with tonic, HTTP with axum) that stop when the test ends.
#![allow(dead_code)]

use slidelog_envoy::proto::{RateLimitDescriptor, RateLimitRequest, rate_limit_descriptor::Entry};
use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
use std::net::SocketAddr;
use std::sync::Arc;

/// The config most tests use.
pub const CONFIG: &str = r#"
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /login
    rate_limit: {unit: hour, requests_per_unit: 2, name: login}
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: client
    value: internal
    rate_limit: {unlimited: true}
  - key: burst
    rate_limit: {requests_per_unit: 2, window: 90s}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100, replaces: [{name: login}]}
"#;

/// The service over `store` with the default (fail-open) limiter.
pub fn limiter(store: Arc<dyn slidelog_core::Store>, options: ServiceOptions) -> Arc<RateLimiter> {
    limiter_with(slidelog::Limiter::from_store(store), options)
}

/// The service over a fresh in-memory store, with the default options.
pub fn memory_limiter() -> Arc<RateLimiter> {
    limiter(
        Arc::new(slidelog_memory::MemoryStore::new()),
        ServiceOptions::default(),
    )
}

/// The service over `limiter` (its timeout and failure policy apply).
pub fn limiter_with(limiter: slidelog::Limiter, options: ServiceOptions) -> Arc<RateLimiter> {
    let config = RateLimitConfig::from_yaml_str("test.yaml", CONFIG).unwrap();
    Arc::new(RateLimiter::new(
        limiter,
        ConfigHandle::fixed(config),
        options,
    ))
}

/// The service over `store` with the rules of `yaml` (default limiter).
pub fn limiter_for(store: Arc<dyn slidelog_core::Store>, yaml: &str) -> Arc<RateLimiter> {
    let config = RateLimitConfig::from_yaml_str("test.yaml", yaml).unwrap();
    Arc::new(RateLimiter::new(
        slidelog::Limiter::from_store(store),
        ConfigHandle::fixed(config),
        ServiceOptions::default(),
    ))
}

/// A config in the reference service's own style: wildcards anywhere,
/// `share_threshold`, `requests_per_unit: 0`, `unlimited` beside
/// `requests_per_unit`, and the three kinds of match for one key.
pub const COMPAT: &str = r#"
domain: compat
descriptors:
  - key: mid
    value: bar*b
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: multi
    value: foo*bar*baz
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: trusted
    rate_limit:
      unlimited: true
      requests_per_unit: 10
  - key: k
    value: ab
    rate_limit: {unit: minute, requests_per_unit: 7}
  - key: k
    value: a*
    rate_limit: {unit: minute, requests_per_unit: 8}
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 9}
"#;

/// Usage-based limits: requests per user, and tokens per model charged as
/// Envoy reports them (`charge: true`, slidelog's).
pub const USAGE: &str = r#"
domain: usage
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: model
    rate_limit: {unit: minute, requests_per_unit: 1000, charge: true}
"#;

pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        limit: None,
        hits_addend: None,
    }
}

pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}

/// Starts the gRPC service on 127.0.0.1:0; the server stops when the runtime does.
pub async fn start_grpc(limiter: Arc<RateLimiter>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(slidelog_envoy::service::serve_grpc(
        listener,
        limiter,
        std::future::pending(),
    ));
    addr
}

/// Starts `POST /json` on 127.0.0.1:0.
pub async fn start_http(limiter: Arc<RateLimiter>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = slidelog_envoy::json::router(limiter);
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Starts `POST /json` over a fresh in-memory store; returns its URL.
pub async fn start_json_on_memory() -> String {
    let addr = start_http(memory_limiter()).await;
    format!("http://{addr}/json")
}
