//! Blocks and penalties through Envoy's API (docs/design.md §5.4): a key an
//! operator blocked is answered `OVER_LIMIT` (and the whole request with
//! it), and a rule's `block: 3s` keeps a descriptor it refused refused for
//! 3 s although its 1 s window slid; `block` is read from the YAML, bounded,
//! and refused beside `unlimited`.

mod common;

use common::{descriptor, request};
use slidelog_envoy::proto::rate_limit_response::Code;
use slidelog_envoy::{ConfigError, ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

const YAML: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1, block: 3s}\n  - key: route\n    rate_limit: {unit: minute, requests_per_unit: 100}\n";

fn service(limiter: slidelog::Limiter) -> Arc<RateLimiter> {
    let config = RateLimitConfig::from_yaml_str("blocks.yaml", YAML).unwrap();
    Arc::new(RateLimiter::new(
        limiter,
        ConfigHandle::fixed(config),
        ServiceOptions::default(),
    ))
}

async fn overall(s: &RateLimiter, entries: &[&[(&str, &str)]]) -> i32 {
    let descriptors = entries.iter().map(|e| descriptor(e)).collect();
    s.should_rate_limit(&request("api", descriptors))
        .await
        .unwrap()
        .overall_code
}

#[tokio::test]
async fn a_rule_block_outlasts_its_window() {
    let s = service(slidelog::Limiter::memory());
    let user: &[(&str, &str)] = &[("user", "u1")];
    let start = Instant::now();
    assert_eq!(overall(&s, &[user]).await, OK);
    assert_eq!(overall(&s, &[user]).await, OVER);
    tokio::time::sleep(Duration::from_millis(1_300).saturating_sub(start.elapsed())).await;
    assert_eq!(overall(&s, &[user]).await, OVER);
    tokio::time::sleep(Duration::from_millis(3_300).saturating_sub(start.elapsed())).await;
    assert_eq!(overall(&s, &[user]).await, OK);
}

#[tokio::test]
async fn an_operator_block_refuses_the_descriptor_and_the_whole_request() {
    let limiter = slidelog::Limiter::memory();
    let s = service(limiter.clone());
    let route: &[(&str, &str)] = &[("route", "/a")];
    let user: &[(&str, &str)] = &[("user", "u2")];
    let key = slidelog_envoy::key::descriptor_key("api", route);
    limiter
        .block(&key, Duration::from_secs(30), "maintenance")
        .await
        .unwrap();
    assert_eq!(overall(&s, &[route]).await, OVER);
    assert_eq!(overall(&s, &[user, route]).await, OVER);
    // Refused whole: the user's 1 per second was not spent.
    limiter.unblock(&key).await.unwrap();
    assert_eq!(overall(&s, &[user]).await, OK);
}

#[test]
fn block_is_read_bounded_and_refused_beside_unlimited() {
    let config = RateLimitConfig::from_yaml_str("blocks.yaml", YAML).unwrap();
    let rule = config.find("api", &[("user", "x")]).unwrap();
    assert_eq!(rule.limit().unwrap().block_ms(), 3_000);
    let bad = |yaml: &str| match RateLimitConfig::from_yaml_str("bad.yaml", yaml) {
        Err(e @ ConfigError::Invalid { .. }) => e.to_string(),
        other => panic!("expected an invalid config, got {other:?}"),
    };
    let msg = bad(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, block: 400d}\n",
    );
    assert!(
        msg.contains("block_ms") && msg.contains("bad.yaml:4"),
        "{msg}"
    );
    let msg = bad(
        "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, block: soon}\n",
    );
    assert!(msg.contains("not a duration"), "{msg}");
    let msg =
        bad("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, block: 1s}\n");
    assert!(msg.contains("should not specify a block"), "{msg}");
}
