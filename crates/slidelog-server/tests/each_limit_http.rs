//! Every limit's state over HTTP on Redis (docs/design.md §2): the same
//! bodies sent to a memory-store server and a Redis-store server (the
//! scripts) get the same answers, field for field: `/v1/check` and
//! `/v1/peek` with their `limits` array and the RateLimit header fields of
//! every limit, and `/v1/settle` and `/v1/charge`, which list every limit as
//! a check does. No count is `null` on either.

mod common;

use common::{TestServer, client, post_json, start, start_memory};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slidelog::url::{StoreOptions, open_store};
use slidelog_server::app::{App, AppConfig};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::Duration;

fn trusting() -> AppConfig {
    AppConfig {
        trust_client_time: true,
        ..AppConfig::default()
    }
}

/// 3 requests per 10 s, 100 tokens per 20 s, 5 requests per 40 s: with
/// these costs.
fn limits(requests: u64, tokens: u64) -> Value {
    json!([
        {"name": "requests", "max": 3, "window_ms": 10_000, "cost": requests},
        {"name": "tokens", "max": 100, "window_ms": 20_000, "cost": tokens},
        {"name": "slow", "max": 5, "window_ms": 40_000, "cost": requests},
    ])
}

/// What one server answered: status, the RateLimit header fields, the body.
#[derive(Debug, PartialEq)]
struct Answer {
    status: StatusCode,
    ratelimit: Option<String>,
    policy: Option<String>,
    body: Value,
}

async fn post(http: &reqwest::Client, server: &TestServer, path: &str, body: &Value) -> Answer {
    let r = post_json(http, server.url(path), body).await;
    let header = |name: &str| {
        r.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let (ratelimit, policy) = (header("ratelimit"), header("ratelimit-policy"));
    Answer {
        status: r.status(),
        ratelimit,
        policy,
        body: r.json().await.unwrap(),
    }
}

/// Asserts both answers are the same (receipts aside: each store names its
/// records its own way) and that every listed limit has its counts;
/// returns each server's receipt.
fn same(memory: &mut Answer, redis: &mut Answer, what: &str) -> (Option<String>, Option<String>) {
    let take = |a: &mut Answer| {
        a.body
            .as_object_mut()
            .unwrap()
            .remove("receipt")
            .map(|r| r.as_str().unwrap().to_owned())
    };
    let receipts = (take(memory), take(redis));
    assert_eq!(receipts.0.is_some(), receipts.1.is_some(), "{what}");
    assert_eq!(memory, redis, "{what}");
    let listed = redis.body["limits"].as_array().expect("a limits array");
    assert_eq!(listed.len(), 3, "{what}");
    for l in listed {
        for field in ["count", "remaining", "retry_after_ms", "reset_after_ms"] {
            assert!(l[field].is_u64(), "{what}: {field} of {l}");
        }
    }
    receipts
}

#[tokio::test]
async fn redis_answers_every_limit_as_the_memory_store_does() {
    let redis_server = RedisServer::start();
    let options = StoreOptions {
        key_prefix: unique_prefix("each-http"),
        ..StoreOptions::default()
    };
    let store = open_store(&redis_server.url(), &options, Duration::from_secs(5))
        .await
        .expect("open redis store");
    let redis = start(App::new(store, trusting())).await;
    let memory = start_memory(trusting()).await;
    let http = client();
    let t0 = 1_767_225_600_000u64;
    let check = |tokens, at: u64| json!({"key": "k", "limits": limits(1, tokens), "now_ms": at});
    let both = async |path: &str, body: Value| {
        let m = post(&http, &memory, path, &body).await;
        let r = post(&http, &redis, path, &body).await;
        (m, r)
    };
    // (A settle differs by its receipt: each store's own.)
    // Two checks, a rejection by tokens, a peek.
    let mut receipts = Vec::new();
    for (i, (tokens, at)) in [(60, t0), (30, t0 + 100), (20, t0 + 200)]
        .into_iter()
        .enumerate()
    {
        let (mut m, mut r) = both("/v1/check", check(tokens, at)).await;
        receipts.push(same(&mut m, &mut r, &format!("check {i}")));
        assert!(r.ratelimit.as_deref().unwrap().contains("tokens"), "{r:?}");
    }
    assert_eq!(receipts[2], (None, None), "the third is rejected");
    let (mut m, mut r) = both("/v1/peek", check(5, t0 + 300)).await;
    same(&mut m, &mut r, "peek");
    // Settle the first down to 10 tokens.
    let (Some(rm), Some(rr)) = receipts[0].clone() else {
        panic!("the first check was admitted")
    };
    let settle = |receipt: String| json!({"key": "k", "limits": limits(1, 10), "receipt": receipt, "now_ms": t0 + 400});
    let mut m = post(&http, &memory, "/v1/settle", &settle(rm)).await;
    let mut r = post(&http, &redis, "/v1/settle", &settle(rr)).await;
    same(&mut m, &mut r, "settle");
    assert_eq!(r.body["settled"], true);
    assert_eq!(
        (
            r.body["limits"][1]["name"].as_str(),
            r.body["limits"][1]["count"].as_u64()
        ),
        (Some("tokens"), Some(40))
    );
    // A charge above the max of tokens.
    let (mut m, mut r) = both(
        "/v1/charge",
        json!({"key": "k", "limits": limits(1, 150), "now_ms": t0 + 500}),
    )
    .await;
    same(&mut m, &mut r, "charge");
    assert_eq!(r.status, StatusCode::OK);
    let tokens = &r.body["limits"][1];
    assert_eq!(
        (tokens["count"].as_u64(), tokens["remaining"].as_u64()),
        (Some(190), Some(0))
    );
    assert!(tokens["retry_after_ms"].as_u64().unwrap() > 0);
    // And the check after it is rejected alike.
    let (mut m, mut r) = both("/v1/check", check(1, t0 + 600)).await;
    same(&mut m, &mut r, "check after the charge");
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
}
