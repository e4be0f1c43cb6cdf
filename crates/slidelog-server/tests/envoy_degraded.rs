//! Envoy's API during a store outage, through the service's one limiter: a
//! fail-open answer admits and claims no count (no `limit_remaining`, no
//! `x-ratelimit-remaining`: nothing was counted), and is counted in the
//! server's metrics as degraded; a fail-closed service answers UNAVAILABLE.
//! A real `redis-server`, killed.

use slidelog::redis::{RedisOptions, RedisStore};
use slidelog_envoy::proto::{RateLimitRequest, rate_limit_response::Code};
use slidelog_envoy::{ConfigHandle, RateLimitConfig, ServiceError, ServiceOptions};
use slidelog_server::app::{App, AppConfig};
use slidelog_server::policy::FailurePolicy;
use slidelog_testkit::{RedisServer, unique_prefix};
use std::sync::Arc;
use std::time::Duration;

mod common;

const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n";

fn request() -> RateLimitRequest {
    common::envoy_request("api", "user", "down")
}

async fn app_over(redis: &RedisServer, policy: FailurePolicy) -> App {
    let options = RedisOptions::default().with_prefix(unique_prefix("envoy-degraded"));
    let store = RedisStore::connect(&redis.url(), options).await.unwrap();
    App::new(
        Arc::new(store),
        AppConfig {
            policy,
            store_timeout: Duration::from_millis(200),
            ..AppConfig::default()
        },
    )
}

#[tokio::test]
async fn degraded_envoy_answers_claim_no_count() {
    let mut redis = RedisServer::start();
    let open = app_over(&redis, FailurePolicy::FailOpen).await;
    let closed = app_over(&redis, FailurePolicy::FailClosed).await;
    let config = || ConfigHandle::fixed(RateLimitConfig::from_yaml_str("t.yaml", CONFIG).unwrap());
    let options = || ServiceOptions {
        response_headers: true,
        ..ServiceOptions::default()
    };
    let open_envoy = slidelog_server::envoy::limiter(&open, config(), options());
    let closed_envoy = slidelog_server::envoy::limiter(&closed, config(), options());

    // While the store answers, the count is real and reported.
    let r = open_envoy.should_rate_limit(&request()).await.unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 9);
    assert!(
        r.response_headers_to_add
            .iter()
            .any(|h| h.key == "x-ratelimit-remaining" && h.value == "9")
    );

    redis.kill();
    let r = open_envoy.should_rate_limit(&request()).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32, "fail-open admits");
    assert_eq!(r.statuses[0].limit_remaining, 0, "no count is claimed");
    let headers: Vec<&str> = r
        .response_headers_to_add
        .iter()
        .map(|h| h.key.as_str())
        .collect();
    assert!(!headers.contains(&"x-ratelimit-remaining"), "{headers:?}");
    assert!(headers.contains(&"x-ratelimit-limit"), "{headers:?}");
    let json = slidelog_envoy::json::response_to_json(&r);
    assert!(
        json["statuses"][0].get("limitRemaining").is_none(),
        "{json}"
    );

    let e = closed_envoy
        .should_rate_limit(&request())
        .await
        .unwrap_err();
    assert!(matches!(e, ServiceError::Unavailable(_)), "{e}");

    let text = open.metrics().render();
    assert!(
        text.contains(r#"slidelog_degraded_decisions_total{op="check"} 1"#),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("slidelog_envoy_decisions_total{")
                && l.contains(r#"result="degraded""#)
                && l.ends_with(" 1")),
        "{text}"
    );
}
