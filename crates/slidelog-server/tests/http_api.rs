//! The HTTP API of docs/design.md §5 against a real server on a loopback port, with a
//! real HTTP client: exactness under concurrency, status codes and decision
//! bodies, Retry-After and the RateLimit header fields, peek, reset with the
//! admin token, client time, readiness and metrics content.

mod common;

use common::{client, json_of, post_json, start_memory};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slidelog_server::app::AppConfig;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

fn trusting() -> AppConfig {
    AppConfig {
        trust_client_time: true,
        ..AppConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_clients_on_one_key_admit_exactly_max() {
    let server = start_memory(AppConfig::default()).await;
    let url = server.url("/v1/check");
    let allowed = Arc::new(AtomicU64::new(0));
    let rejected = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (url, allowed, rejected) = (url.clone(), allowed.clone(), rejected.clone());
        // One client (one connection pool) per task: 64 concurrent clients.
        tasks.push(tokio::spawn(async move {
            let http = client();
            for _ in 0..4 {
                let response = http
                    .post(&url)
                    .json(&json!({"key": "shared", "max": 100, "window_ms": 3_600_000}))
                    .send()
                    .await
                    .expect("request");
                match response.status() {
                    StatusCode::OK => allowed.fetch_add(1, Ordering::Relaxed),
                    StatusCode::TOO_MANY_REQUESTS => rejected.fetch_add(1, Ordering::Relaxed),
                    other => panic!("unexpected status {other}"),
                };
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(allowed.load(Ordering::Relaxed), 100);
    assert_eq!(rejected.load(Ordering::Relaxed), 64 * 4 - 100);
    let last = json_of(
        client()
            .post(&url)
            .json(&json!({"key": "shared", "max": 100, "window_ms": 3_600_000})),
    )
    .await;
    assert_eq!(
        (last["allowed"].as_bool(), last["count"].as_u64()),
        (Some(false), Some(100))
    );
    server.stop().await;
}

#[tokio::test]
async fn decisions_carry_status_body_retry_after_and_ratelimit_fields() {
    let server = start_memory(trusting()).await;
    let http = client();
    let t0 = 1_700_000_000_000u64;
    let body = |now: u64| json!({"key": "hdr", "max": 2, "window_ms": 60_000, "now_ms": now});

    let r = post_json(&http, server.url("/v1/check"), &body(t0)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["ratelimit-policy"], r#""default";q=2;w=60"#);
    assert_eq!(r.headers()["ratelimit"], r#""default";r=1;t=60"#);
    assert!(r.headers().get("retry-after").is_none());
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let mut d: Value = r.json().await.unwrap();
    // An admitted check names its record (docs/design.md §4.6).
    let receipt = d.as_object_mut().unwrap().remove("receipt").unwrap();
    // Signed (version 2): the unsigned decoder refuses it by its version.
    assert_eq!(
        slidelog::Receipt::decode(receipt.as_str().unwrap()),
        Err(slidelog::ReceiptError::Version { got: 2 })
    );
    assert_eq!(
        d,
        json!({"allowed": true, "limit": 2, "window_ms": 60000, "count": 1, "remaining": 1,
               "retry_after_ms": 0, "reset_after_ms": 60000})
    );

    let r = post_json(&http, server.url("/v1/check"), &body(t0 + 1_000)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["ratelimit"], r#""default";r=0;t=60"#);

    // Rejected 1.5 s after the first: the first record expires in 58.5 s.
    let r = post_json(&http, server.url("/v1/check"), &body(t0 + 1_500)).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "59");
    assert_eq!(r.headers()["ratelimit"], r#""default";r=0;t=59"#);
    let d: Value = r.json().await.unwrap();
    assert_eq!(d["retry_after_ms"], 58_500);
    assert_eq!(d["reset_after_ms"], 59_500);
    assert_eq!(
        (d["count"].as_u64(), d["remaining"].as_u64()),
        (Some(2), Some(0))
    );
    assert!(d.get("degraded").is_none());

    // Admitted exactly when the oldest record expires, not a millisecond before.
    let r = post_json(&http, server.url("/v1/check"), &body(t0 + 59_999)).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "1");
    let r = post_json(&http, server.url("/v1/check"), &body(t0 + 60_000)).await;
    assert_eq!(r.status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn several_limits_are_all_advertised_and_the_deciding_one_reported() {
    let server = start_memory(trusting()).await;
    let http = client();
    let body = |now: u64| {
        json!({"key": "multi", "now_ms": now,
               "limits": [{"max": 2, "window_ms": 1_000}, {"max": 3, "window_ms": 10_000}]})
    };
    for now in [0, 1] {
        let r = post_json(&http, server.url("/v1/check"), &body(now)).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(
            r.headers()["ratelimit-policy"],
            r#""2per1000ms";q=2;w=1, "3per10000ms";q=3;w=10"#
        );
    }
    let r = post_json(&http, server.url("/v1/check"), &body(2)).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    // Every limit, the deciding one first (a client reading one item reads it).
    assert_eq!(
        r.headers()["ratelimit"],
        r#""2per1000ms";r=0;t=1, "3per10000ms";r=1;t=10"#
    );
    // At 1.5 s the per-second limit admits; the 10 s limit then decides.
    let r = post_json(&http, server.url("/v1/check"), &body(1_500)).await;
    assert_eq!(r.status(), StatusCode::OK);
    let d: Value = r.json().await.unwrap();
    assert_eq!(
        (d["limit"].as_u64(), d["window_ms"].as_u64()),
        (Some(3), Some(10_000))
    );
    server.stop().await;
}

#[tokio::test]
async fn named_limits_are_reported_each_by_name() {
    let server = start_memory(trusting()).await;
    let http = client();
    let body = |now: u64, tokens: u64| {
        json!({"key": "named", "now_ms": now, "limits": [
            {"name": "requests", "max": 3, "window_ms": 60_000, "cost": 1},
            {"name": "tokens", "max": 1_000, "window_ms": 60_000, "cost": tokens}]})
    };
    let r = post_json(&http, server.url("/v1/check"), &body(0, 400)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()["ratelimit-policy"],
        r#""requests";q=3;w=60, "tokens";q=1000;w=60"#
    );
    assert_eq!(
        r.headers()["ratelimit"],
        r#""requests";r=2;t=60, "tokens";r=600;t=60"#
    );
    let d: Value = r.json().await.unwrap();
    // The top level is the deciding limit, as before; `limits` has every one.
    assert_eq!(
        (d["limit"].as_u64(), d["remaining"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(
        d["limits"][1],
        json!({"name": "tokens", "limit": 1000, "window_ms": 60000, "count": 400,
               "remaining": 600, "retry_after_ms": 0, "reset_after_ms": 60000})
    );
    // Refused by tokens: its wait, while requests still has room.
    let r = post_json(&http, server.url("/v1/check"), &body(1_000, 700)).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let d: Value = r.json().await.unwrap();
    assert_eq!(d["limits"][0]["remaining"], 2);
    assert_eq!(d["limits"][0]["retry_after_ms"], 0);
    assert_eq!(d["limits"][1]["retry_after_ms"], 59_000);
    // Bad and repeated names are 400s naming the field and the bound.
    for (limits, says) in [
        (
            json!([{"name": "two words", "max": 1, "window_ms": 1}]),
            "limits[0].name must be 1 to 32 bytes",
        ),
        (
            json!([{"name": "a", "max": 1, "window_ms": 1}, {"name": "a", "max": 2, "window_ms": 1}]),
            "limits[].name must be unique",
        ),
    ] {
        let r = post_json(
            &http,
            server.url("/v1/check"),
            &json!({"key": "k", "limits": limits}),
        )
        .await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let e: Value = r.json().await.unwrap();
        assert!(e["error"].as_str().unwrap().contains(says), "{e}");
    }
    server.stop().await;
}

#[tokio::test]
async fn peek_reports_without_recording() {
    let server = start_memory(AppConfig::default()).await;
    let http = client();
    let body = json!({"key": "peeked", "max": 1, "window_ms": 60_000});
    for _ in 0..5 {
        let r = post_json(&http, server.url("/v1/peek"), &body).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.json::<Value>().await.unwrap()["count"], 1);
    }
    let r = post_json(&http, server.url("/v1/check"), &body).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = post_json(&http, server.url("/v1/peek"), &body).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().get("retry-after").is_some());
    let r = post_json(&http, server.url("/v1/check"), &body).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    server.stop().await;
}

#[tokio::test]
async fn reset_needs_the_admin_token_when_one_is_set() {
    let server = start_memory(AppConfig {
        admin_token: Some("s3cret".into()),
        ..AppConfig::default()
    })
    .await;
    let http = client();
    let body = json!({"key": "user/42", "max": 1, "window_ms": 60_000});
    assert_eq!(
        post_json(&http, server.url("/v1/check"), &body)
            .await
            .status(),
        StatusCode::OK
    );
    // The key holds a '/', percent-encoded in the path.
    let url = server.url("/v1/keys/user%2F42");
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Basic s3cret"),
        Some("Bearer s3cret2"),
    ] {
        let mut req = http.delete(&url);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let e: Value = r.json().await.unwrap();
        assert!(e["error"].as_str().unwrap().contains("admin token"), "{e}");
    }
    // Still limited: nothing was reset.
    assert_eq!(
        post_json(&http, server.url("/v1/check"), &body)
            .await
            .status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let r = http
        .delete(&url)
        .bearer_auth("s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.json::<Value>().await.unwrap(),
        json!({"key": "user/42", "deleted": true})
    );
    assert_eq!(
        post_json(&http, server.url("/v1/check"), &body)
            .await
            .status(),
        StatusCode::OK
    );
    server.stop().await;

    // Without a configured token, reset is open (the default bind is loopback).
    let server = start_memory(AppConfig::default()).await;
    let r = http
        .delete(server.url("/v1/keys/absent"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["deleted"], false);
    let long = "k".repeat(513);
    let r = http
        .delete(server.url(&format!("/v1/keys/{long}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    server.stop().await;
}

#[tokio::test]
async fn client_time_is_used_only_when_trusted() {
    let server = start_memory(trusting()).await;
    let http = client();
    let at = |now: u64| json!({"key": "ct", "max": 1, "window_ms": 1_000, "now_ms": now});
    let status = |r: reqwest::Response| r.status();
    assert_eq!(
        status(post_json(&http, server.url("/v1/check"), &at(1_000)).await),
        StatusCode::OK
    );
    let r = post_json(&http, server.url("/v1/check"), &at(1_999)).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json::<Value>().await.unwrap()["retry_after_ms"], 1);
    assert_eq!(
        status(post_json(&http, server.url("/v1/check"), &at(2_000)).await),
        StatusCode::OK
    );
    let r = post_json(&http, server.url("/v1/check"), &at(1 << 53)).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("9007199254740991"));
    server.stop().await;

    let server = start_memory(AppConfig::default()).await;
    let r = post_json(&http, server.url("/v1/check"), &at(1_000)).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"].as_str().unwrap().contains("--trust-client-time"),
        "{e}"
    );
    server.stop().await;
}

#[tokio::test]
async fn health_readiness_and_metrics_content() {
    let server = start_memory(AppConfig::default()).await;
    let http = client();
    let r = http.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["store"], "memory");

    let secret_key = "customer-9f3a1c";
    for _ in 0..3 {
        post_json(
            &http,
            server.url("/v1/check"),
            &json!({"key": secret_key, "max": 2, "window_ms": 60_000}),
        )
        .await;
    }
    post_json(
        &http,
        server.url("/v1/peek"),
        &json!({"key": secret_key, "max": 2, "window_ms": 60_000}),
    )
    .await;
    post_json(
        &http,
        server.url("/v1/check"),
        &json!({"key": "x", "max": 0, "window_ms": 60_000}),
    )
    .await;

    let r = http.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = r.text().await.unwrap();
    for expected in [
        r#"slidelog_decisions_total{op="check",result="allowed"} 2"#,
        r#"slidelog_decisions_total{op="check",result="rejected"} 1"#,
        r#"slidelog_decisions_total{op="peek",result="rejected"} 1"#,
        r#"slidelog_rule_decisions_total{rule="2/60000ms",result="allowed"} 2"#,
        r#"slidelog_decision_duration_seconds_bucket{op="check",le="0.00005"}"#,
        r#"slidelog_decision_duration_seconds_count{op="check"} 3"#,
        r#"slidelog_bad_requests_total{field="max"} 1"#,
        "slidelog_memory_keys 1",
        "slidelog_memory_key_cap 1000000",
        "slidelog_store_up 1",
        r#"slidelog_degraded_decisions_total{op="check"} 0"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(
        !text.contains(secret_key),
        "a key leaked into metrics:\n{text}"
    );
    server.stop().await;
}
