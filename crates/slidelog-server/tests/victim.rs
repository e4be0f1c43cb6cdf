//! Another key's limit cannot be erased (docs/design.md §1, the horizon;
//! §4.6, signed receipts), against a real server: a victim key full at 10
//! per 60 s stays refused after an attacker's check with a 1 ms window on
//! it and after 2,050 forged settles (a receipt for every millisecond of the
//! last two seconds, unsigned or signed with the attacker's own key); the
//! victim's own receipt still settles, once.

mod common;

use common::{client, post_json, start_memory};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slidelog::{Limit, Receipt, ReceiptKey, RecordRef, Request};
use slidelog_server::app::AppConfig;
use std::time::{SystemTime, UNIX_EPOCH};

const VICTIM: &str = "victim";

fn victim_check() -> Value {
    json!({"key": VICTIM, "max": 10, "window_ms": 60_000})
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Receipts an attacker can build for `ms`: the unsigned form, and one
/// signed with a key of its own.
fn forgeries(ms: u64) -> [String; 2] {
    let limits = vec![Limit::new(10, 60_000).unwrap()];
    let request = Request::usage(VICTIM, limits, vec![1]).unwrap();
    let receipt = Receipt::new(&request, RecordRef { ts: ms, id: None });
    [
        receipt.encode(),
        ReceiptKey::random().seal(&receipt, VICTIM),
    ]
}

#[tokio::test]
async fn a_full_victim_stays_refused_after_a_short_window_and_forged_settles() {
    let server = start_memory(AppConfig::default()).await;
    let http = client();
    let post = |path: &'static str, body: Value| {
        let (http, url) = (http.clone(), server.url(path));
        async move {
            let r = post_json(&http, url, &body).await;
            let status = r.status();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let mut receipts = Vec::new();
    for i in 0..10 {
        let (s, d) = post("/v1/check", victim_check()).await;
        assert_eq!(s, StatusCode::OK, "check {i}: {d}");
        receipts.push(d["receipt"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        post("/v1/check", victim_check()).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );

    // A check with a 1 ms window on the victim's key: its own answer is
    // whatever it is, but it drops none of the victim's records.
    let (s, d) = post(
        "/v1/check",
        json!({"key": VICTIM, "max": 1, "window_ms": 1}),
    )
    .await;
    assert!(
        s == StatusCode::OK || s == StatusCode::TOO_MANY_REQUESTS,
        "{d}"
    );
    // Admitted (nothing of the last millisecond), it is one more unit in
    // the key's log, as any request on that key is.
    let attacker_recorded = u64::from(s == StatusCode::OK);
    let (s, d) = post("/v1/check", victim_check()).await;
    assert_eq!(
        s,
        StatusCode::TOO_MANY_REQUESTS,
        "after the 1 ms window: {d}"
    );

    // 2,050 forged refunds: every one a named 400, none settles anything.
    let end = now_ms();
    let mut sent = 0;
    for ms in (end - 1_025)..end {
        for forged in forgeries(ms) {
            let body = json!({"key": VICTIM, "max": 10, "window_ms": 60_000, "cost": 0, "receipt": forged});
            let (s, d) = post("/v1/settle", body).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{d}");
            assert!(d["error"].as_str().unwrap().contains("receipt"), "{d}");
            sent += 1;
        }
    }
    assert_eq!(sent, 2_050);
    let (s, d) = post("/v1/check", victim_check()).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "after the forgeries: {d}");

    // The victim's own receipts refund its records: that many more checks
    // fit (less the attacker's unit), and no more.
    let refund = |receipt: &str| json!({"key": VICTIM, "max": 10, "window_ms": 60_000, "cost": 0, "receipt": receipt});
    for receipt in &receipts[..2] {
        let (s, d) = post("/v1/settle", refund(receipt)).await;
        assert_eq!((s, &d["settled"]), (StatusCode::OK, &json!(true)), "{d}");
    }
    for _ in 0..2 - attacker_recorded {
        assert_eq!(post("/v1/check", victim_check()).await.0, StatusCode::OK);
    }
    assert_eq!(
        post("/v1/check", victim_check()).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let refund = refund(&receipts[0]);
    // The same receipt again is refused by name: it settles once.
    let (s, d) = post("/v1/settle", refund).await;
    assert_eq!(s, StatusCode::CONFLICT, "a replay: {d}");
    assert!(
        d["error"].as_str().unwrap().contains("already settled"),
        "{d}"
    );
    assert_eq!(
        post("/v1/check", victim_check()).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    server.stop().await;
}
