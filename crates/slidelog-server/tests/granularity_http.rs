//! Granularity per limit over HTTP (docs/design.md §1.1): `granularity_ms`
//! on a limit (at the root with `max`/`window_ms`, or per entry of
//! `limits`) rounds a record's time up in that limit, the answer's limits
//! report it (omitted when 1), and a bad one is a 400 naming the field and
//! the bound.

mod common;

use common::{client, post_json, start_memory};
use reqwest::StatusCode;
use serde_json::json;
use slidelog_server::app::AppConfig;

fn trusting() -> AppConfig {
    AppConfig {
        trust_client_time: true,
        ..AppConfig::default()
    }
}

#[tokio::test]
async fn a_granular_limit_counts_at_the_rounded_time() {
    let server = start_memory(trusting()).await;
    let http = client();
    let body = |now: u64| json!({"key": "g", "max": 2, "window_ms": 1000, "granularity_ms": 100, "now_ms": now});
    for now in [1_050, 1_120] {
        let r = post_json(&http, server.url("/v1/check"), &body(now)).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    // Counted as if at 1,100 and 1,200: the next fits at 2,100, not 2,050.
    let r = post_json(&http, server.url("/v1/check"), &body(2_050)).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let answer: serde_json::Value = r.json().await.unwrap();
    assert_eq!(answer["retry_after_ms"], 50, "{answer}");
    let r = post_json(&http, server.url("/v1/check"), &body(2_100)).await;
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_answer_s_limits_report_the_granularity() {
    let server = start_memory(trusting()).await;
    let http = client();
    let body = json!({"key": "each", "now_ms": 5_000, "limits": [
        {"name": "fine", "max": 10, "window_ms": 1000, "granularity_ms": 10},
        {"name": "day", "max": 100000, "window_ms": 86400000, "granularity_ms": 60000},
        {"name": "exact", "max": 5, "window_ms": 1000},
    ]});
    let r = post_json(&http, server.url("/v1/check"), &body).await;
    assert_eq!(r.status(), StatusCode::OK);
    let answer: serde_json::Value = r.json().await.unwrap();
    let limits = answer["limits"].as_array().expect("limits");
    assert_eq!(limits[0]["granularity_ms"], 10, "{answer}");
    assert_eq!(limits[1]["granularity_ms"], 60000, "{answer}");
    assert!(limits[2].get("granularity_ms").is_none(), "{answer}");
}

#[tokio::test]
async fn a_bad_granularity_is_a_400_naming_the_field_and_the_bound() {
    let server = start_memory(AppConfig::default()).await;
    let http = client();
    for body in [
        json!({"key": "b", "max": 1, "window_ms": 1000, "granularity_ms": 300}),
        json!({"key": "b", "max": 1, "window_ms": 1000, "granularity_ms": 0}),
        json!({"key": "b", "limits": [{"max": 1, "window_ms": 1000, "granularity_ms": 2000}]}),
    ] {
        let r = post_json(&http, server.url("/v1/check"), &body).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
        let answer: serde_json::Value = r.json().await.unwrap();
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains("granularity_ms"), "{error}");
        assert!(error.contains("1000"), "{error}");
    }
}

#[tokio::test]
async fn the_operator_floor_raises_the_granularity_and_says_so() {
    use slidelog_server::app::App;
    use std::sync::Arc;
    let store = Arc::new(slidelog_memory::MemoryStore::new());
    let floor: slidelog::GranularityFloor = "1/600".parse().unwrap();
    let app = App::with_builder(store, trusting(), |b| b.min_granularity(floor));
    let server = common::start(app).await;
    let http = client();
    // 60 s at 1 ms asked: raised to 100 ms, and the answer says so.
    let body = json!({"key": "f", "max": 2, "window_ms": 60000, "now_ms": 1_050});
    let r = post_json(&http, server.url("/v1/check"), &body).await;
    assert_eq!(r.status(), StatusCode::OK);
    let answer: serde_json::Value = r.json().await.unwrap();
    assert_eq!(answer["limits"][0]["granularity_ms"], 100, "{answer}");
    assert_eq!(answer["reset_after_ms"], 1_100 + 60_000 - 1_050, "{answer}");
    // Above the floor: kept.
    let body =
        json!({"key": "f2", "max": 2, "window_ms": 60000, "granularity_ms": 1000, "now_ms": 1_050});
    let answer: serde_json::Value = post_json(&http, server.url("/v1/check"), &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["limits"][0]["granularity_ms"], 1000, "{answer}");
}
