//! `POST /v1/settle` and `POST /v1/charge` (docs/design.md §4.6) against a
//! real server: reserve, settle down and up, refund, expired records,
//! charge over the max, and every bad input a named 400 (malformed and
//! forged receipts, a receipt of another key or other limits, costs above
//! `--max-cost`, a settle without its cost).

mod common;

use common::{TestServer, client, post_json, start_memory};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slidelog_server::app::AppConfig;

fn trusting() -> AppConfig {
    AppConfig {
        trust_client_time: true,
        ..AppConfig::default()
    }
}

/// 3 requests and 100 tokens per second, with these costs.
fn limits(requests: u64, tokens: u64) -> Value {
    json!([
        {"name": "requests", "max": 3, "window_ms": 1000, "cost": requests},
        {"name": "tokens", "max": 100, "window_ms": 1000, "cost": tokens},
    ])
}

const CHECK: &str = "/v1/check";
const SETTLE: &str = "/v1/settle";
const CHARGE: &str = "/v1/charge";

/// A memory-store server trusting client time, and a client for it.
struct Api {
    server: TestServer,
    http: reqwest::Client,
}

impl Api {
    async fn start() -> Self {
        let server = start_memory(trusting()).await;
        Self {
            server,
            http: client(),
        }
    }

    /// POSTs `body` to `path`: the status and the JSON answer.
    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let r = post_json(&self.http, self.server.url(path), &body).await;
        let status = r.status();
        (status, r.json().await.unwrap())
    }
}

#[tokio::test]
async fn reserve_settle_refund_and_charge() {
    let api = Api::start().await;
    let t0 = 1_767_225_600_000u64;
    // Reserve 80 tokens: 30 more do not fit.
    let (s, d) = api
        .post(
            CHECK,
            json!({"key": "k", "limits": limits(1, 80), "now_ms": t0}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let receipt = d["receipt"].as_str().unwrap().to_owned();
    let (s, d) = api
        .post(
            CHECK,
            json!({"key": "k", "limits": limits(1, 30), "now_ms": t0 + 1}),
        )
        .await;
    assert_eq!((s, d.get("receipt")), (StatusCode::TOO_MANY_REQUESTS, None));
    // Settle down to 20 tokens: the limits as they stand after it.
    let (s, d) = api
        .post(
            SETTLE,
            json!({"key": "k", "limits": limits(1, 20), "receipt": receipt, "now_ms": t0 + 2}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["settled"], true);
    assert_eq!(
        (
            d["limit"].as_u64(),
            d["count"].as_u64(),
            d["remaining"].as_u64()
        ),
        (Some(3), Some(1), Some(2))
    );
    assert_eq!(d["limits"][1]["name"], "tokens");
    let settled_receipt = d["receipt"].as_str().unwrap().to_owned();
    // The old receipt settled once: again, it is refused by name (a
    // receipt settles once; the answer's receipt settles next).
    let (s, d) = api
        .post(
            SETTLE,
            json!({"key": "k", "limits": limits(1, 5), "receipt": receipt, "now_ms": t0 + 3}),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{d}");
    assert!(
        d["error"].as_str().unwrap().contains("already settled"),
        "{d}"
    );
    let (s, _) = api
        .post(
            CHECK,
            json!({"key": "k", "limits": limits(1, 30), "now_ms": t0 + 4}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    // Settle up past the max: over until it slides out.
    let (_, d) = api.post(SETTLE, json!({"key": "k", "limits": limits(1, 150), "receipt": settled_receipt, "now_ms": t0 + 5}),
    )
    .await;
    assert_eq!(
        (
            d["settled"].as_bool(),
            d["allowed"].as_bool(),
            d["limit"].as_u64()
        ),
        (Some(true), Some(false), Some(100))
    );
    assert_eq!(
        (d["count"].as_u64(), d["retry_after_ms"].as_u64()),
        (Some(180), Some(995))
    );
    // Refund it (0 everywhere): removed, no receipt.
    let refunded = d["receipt"].as_str().unwrap().to_owned();
    let (_, d) = api.post(SETTLE, json!({"key": "k", "max": 3, "window_ms": 1000, "cost": 0, "receipt": refunded, "now_ms": t0 + 6}),
    )
    .await;
    assert_eq!(
        d["error"].as_str().map(|e| e.contains("other limits")),
        Some(true),
        "{d}"
    );
    let (_, d) = api
        .post(
            SETTLE,
            json!({"key": "k", "limits": limits(0, 0), "receipt": refunded, "now_ms": t0 + 6}),
        )
        .await;
    assert_eq!(
        (d["settled"].as_bool(), d.get("receipt")),
        (Some(true), None)
    );
    assert_eq!(d["count"].as_u64(), Some(1));
    // Expired: settled false.
    let (_, d) = api.post(SETTLE, json!({"key": "k", "limits": limits(1, 1), "receipt": settled_receipt, "now_ms": t0 + 5_000}),
    )
    .await;
    assert_eq!(
        (d["settled"].as_bool(), d["count"].as_u64()),
        (Some(false), Some(0))
    );
    // Charge without checking, above the max.
    let (s, d) = api
        .post(
            CHARGE,
            json!({"key": "c", "limits": limits(1, 500), "now_ms": t0}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        (
            d["allowed"].as_bool(),
            d["limit"].as_u64(),
            d["count"].as_u64()
        ),
        (Some(false), Some(100), Some(500))
    );
    assert!(d["receipt"].is_string());
    let (s, _) = api
        .post(
            CHECK,
            json!({"key": "c", "limits": limits(1, 1), "now_ms": t0 + 1}),
        )
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    api.server.stop().await;
}

#[tokio::test]
async fn bad_input_is_a_named_400() {
    let api = Api::start().await;
    let (_, d) = api
        .post(
            CHECK,
            json!({"key": "alice", "max": 10, "window_ms": 60000}),
        )
        .await;
    let receipt = d["receipt"].as_str().unwrap().to_owned();
    let to = &api;
    let bad = move |body: Value, field: &'static str, says: &'static str| async move {
        let (s, d) = to.post(SETTLE, body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {d}");
        let e = d["error"].as_str().unwrap();
        assert!(e.contains(says), "{body}: {e} ({field})");
    };
    let one = |receipt: &str, key: &str, cost: u64| json!({"key": key, "max": 10, "window_ms": 60000, "cost": cost, "receipt": receipt});
    // Signed for alice: for bob its tag does not match.
    bad(
        one(&receipt, "bob", 1),
        "receipt",
        "signature does not match",
    )
    .await;
    bad(
        json!({"key": "alice", "max": 10, "window_ms": 1000, "cost": 1, "receipt": receipt}),
        "receipt",
        "other limits",
    )
    .await;
    bad(one("not a receipt!", "alice", 1), "receipt", "malformed").await;
    bad(one("", "alice", 1), "receipt", "1 to 272").await;
    bad(one(&"A".repeat(300), "alice", 1), "receipt", "1 to 272").await;
    bad(one(&receipt, "alice", 100_001), "cost", "--max-cost").await;
    bad(
        json!({"key": "alice", "max": 10, "window_ms": 60000, "receipt": receipt}),
        "cost",
        "actual cost",
    )
    .await;
    bad(
        json!({"key": "alice", "max": 10, "window_ms": 60000, "cost": 1}),
        "receipt",
        "missing field `receipt`",
    )
    .await;
    bad(
        json!({"key": "alice", "max": 10, "window_ms": 60000, "cost": 1, "receipt": 5}),
        "receipt",
        "receipt",
    )
    .await;
    // A receipt is for settle only.
    let (s, _) = api
        .post(
            CHECK,
            json!({"key": "alice", "max": 10, "window_ms": 60000, "receipt": receipt}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = api
        .post(
            CHARGE,
            json!({"key": "alice", "max": 10, "window_ms": 60000, "receipt": receipt}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, d) = api
        .post(
            CHARGE,
            json!({"key": "alice", "max": 10, "window_ms": 60000, "cost": 100_001}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{d}");
    // 10,000 forged receipts: each a 400 (signed receipts: an edited one
    // does not open), or the real receipt again (an edit of the last
    // character's spare bits decodes to the same bytes); never a 5xx.
    let bytes = |text: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .ok()
    };
    let mut state = 11u64;
    for i in 0..10_000u64 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(i);
        let mut forged = receipt.clone().into_bytes();
        let at = (state as usize) % forged.len();
        forged[at] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
            [(state >> 20) as usize % 64];
        if i % 2 == 1 {
            forged.truncate((state >> 40) as usize % forged.len());
        }
        let forged = String::from_utf8(forged).unwrap();
        let (s, d) = api.post(SETTLE, one(&forged, "alice", 2)).await;
        let refused = s == StatusCode::BAD_REQUEST;
        // The real one settles once, then is refused as settled (409).
        let settles_or_spent = s == StatusCode::OK || s == StatusCode::CONFLICT;
        let the_real_one = settles_or_spent && bytes(&forged) == bytes(&receipt);
        assert!(refused || the_real_one, "{forged}: {s} {d}");
    }
    api.server.stop().await;
}
