//! The bad-input table of docs/design.md §1 over HTTP: every malformed, mistyped,
//! unknown, missing or out-of-bound field gets a 4xx whose JSON `error`
//! names the field and its bound; nothing is recorded for a bad request, and
//! the server keeps answering (it never panics on input).

mod common;

use common::{client, post_json, start_memory, start_with_body_cap, status_of, text_of};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slidelog::store::MemoryStore;
use slidelog_server::app::{App, AppConfig};
use std::sync::Arc;

/// (body, expected status, substrings the error message must hold).
fn table() -> Vec<(String, StatusCode, Vec<&'static str>)> {
    let bad = StatusCode::BAD_REQUEST;
    let k = "victim";
    let mut rows: Vec<(String, StatusCode, Vec<&'static str>)> = vec![
        ("".into(), bad, vec!["not valid JSON"]),
        ("{".into(), bad, vec!["not valid JSON"]),
        ("{\"key\": \"victim\", \"max\": 1, \"window_ms\": 1000} trailing".into(), bad, vec!["not valid JSON"]),
        ("[\"victim\", 1, 1000]".into(), bad, vec!["JSON object"]),
        ("null".into(), bad, vec!["JSON object"]),
        (r#"{"max": 1, "window_ms": 1000}"#.into(), bad, vec!["missing field `key`", "512"]),
        (r#"{"key": 7, "max": 1, "window_ms": 1000}"#.into(), bad, vec!["key", "512"]),
        (r#"{"key": null, "max": 1, "window_ms": 1000}"#.into(), bad, vec!["key", "512"]),
        (r#"{"key": "", "max": 1, "window_ms": 1000}"#.into(), bad, vec!["key", "512"]),
        (json!({"key": "k".repeat(513), "max": 1, "window_ms": 1000}).to_string(), bad, vec!["key", "513", "512"]),
        (r#"{"key": "victim", "window_ms": 1000}"#.into(), bad, vec!["max", "10000000"]),
        (r#"{"key": "victim", "max": 1}"#.into(), bad, vec!["window_ms", "31622400000"]),
        (r#"{"key": "victim"}"#.into(), bad, vec!["max", "window_ms", "limits"]),
        (r#"{"key": "victim", "max": 0, "window_ms": 1000}"#.into(), bad, vec!["max", "10000000"]),
        (r#"{"key": "victim", "max": 10000001, "window_ms": 1000}"#.into(), bad, vec!["max", "10000000"]),
        (r#"{"key": "victim", "max": -1, "window_ms": 1000}"#.into(), bad, vec!["max", "10000000"]),
        (r#"{"key": "victim", "max": 1.5, "window_ms": 1000}"#.into(), bad, vec!["max", "10000000"]),
        (r#"{"key": "victim", "max": "5", "window_ms": 1000}"#.into(), bad, vec!["max", "10000000"]),
        (r#"{"key": "victim", "max": 99999999999999999999999, "window_ms": 1000}"#.into(), bad, vec!["max"]),
        (r#"{"key": "victim", "max": 1, "window_ms": 0}"#.into(), bad, vec!["window_ms", "31622400000"]),
        (r#"{"key": "victim", "max": 1, "window_ms": 31622400001}"#.into(), bad, vec!["window_ms", "31622400000"]),
        (r#"{"key": "victim", "max": 1, "window_ms": "1s"}"#.into(), bad, vec!["window_ms", "31622400000"]),
        (r#"{"key": "victim", "max": 5, "window_ms": 1000, "cost": 0}"#.into(), bad, vec!["cost", "5"]),
        (r#"{"key": "victim", "max": 5, "window_ms": 1000, "cost": 6}"#.into(), bad, vec!["cost", "5", "6"]),
        (r#"{"key": "victim", "max": 5, "window_ms": 1000, "cost": true}"#.into(), bad, vec!["cost"]),
        (r#"{"key": "victim", "max": 5, "window_ms": 1000, "cots": 2}"#.into(), bad, vec!["unknown field `cots`"]),
        (r#"{"key": "victim", "max": 5, "window": 1000}"#.into(), bad, vec!["unknown field `window`"]),
        (r#"{"key": "victim", "max": 5, "max": 6, "window_ms": 1000}"#.into(), bad, vec!["duplicate field `max`"]),
        (r#"{"key": "victim", "max": 5, "window_ms": 1000, "limits": [{"max": 1, "window_ms": 1}]}"#.into(), bad, vec!["limits", "not both"]),
        (r#"{"key": "victim", "limits": []}"#.into(), bad, vec!["limits", "16"]),
        (r#"{"key": "victim", "limits": {"max": 1}}"#.into(), bad, vec!["limits", "16"]),
        (r#"{"key": "victim", "limits": [{"max": 1}]}"#.into(), bad, vec!["limits[0]", "missing field `window_ms`"]),
        (r#"{"key": "victim", "limits": [{"max": 1, "window_ms": 1000, "burst": 2}]}"#.into(), bad, vec!["limits[0]", "unknown field `burst`"]),
        (r#"{"key": "victim", "limits": [{"max": 1, "window_ms": 1000}, {"max": 0, "window_ms": 1000}]}"#.into(), bad, vec!["limits[1].max", "10000000"]),
        (r#"{"key": "victim", "limits": [{"max": 1, "window_ms": 1000}, {"max": 2, "window_ms": 0}]}"#.into(), bad, vec!["limits[1].window_ms", "31622400000"]),
        (r#"{"key": "victim", "limits": [{"max": 3, "window_ms": 1000}, {"max": 2, "window_ms": 5000}], "cost": 3}"#.into(), bad, vec!["cost", "2"]),
        (r#"{"key": "victim", "max": 1, "window_ms": 1000, "now_ms": 5}"#.into(), bad, vec!["now_ms", "--trust-client-time"]),
    ];
    let seventeen: Vec<Value> = (0..17)
        .map(|_| json!({"max": 1, "window_ms": 1000}))
        .collect();
    rows.push((
        json!({"key": k, "limits": seventeen}).to_string(),
        bad,
        vec!["limits", "16", "17"],
    ));
    rows
}

#[tokio::test]
async fn every_bad_request_is_a_4xx_naming_field_and_bound_and_records_nothing() {
    let server = start_memory(AppConfig::default()).await;
    let http = client();
    for (body, status, needles) in table() {
        for path in ["/v1/check", "/v1/peek"] {
            let r = http
                .post(server.url(path))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), status, "{path} {body}");
            assert!(
                r.headers()["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("application/json")
            );
            let e: Value = r
                .json()
                .await
                .unwrap_or_else(|e| panic!("{body}: not JSON: {e}"));
            let message = e["error"].as_str().unwrap_or_else(|| panic!("{body}: {e}"));
            for needle in &needles {
                assert!(
                    message.contains(needle),
                    "{body}\n  error {message:?} lacks {needle:?}"
                );
            }
        }
    }
    // Nothing was recorded: the key's log is empty and the store holds no key.
    let d: Value = post_json(
        &http,
        server.url("/v1/peek"),
        &json!({"key": "victim", "max": 1, "window_ms": 1000}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        d["count"], 1,
        "a peek of cost 1 on an empty log counts only itself: {d}"
    );
    assert_eq!(server.app.memory_store().unwrap().key_count(), 0);
    let metrics = text_of(http.get(server.url("/metrics"))).await;
    assert!(metrics.contains(r#"slidelog_decisions_total{op="check",result="allowed"} 0"#));
    server.stop().await;
}

#[tokio::test]
async fn transport_errors_are_json_too() {
    let app = App::with_memory_store(Arc::new(MemoryStore::new()), AppConfig::default());
    let server = start_with_body_cap(app, 1024).await;
    let http = client();

    // Over the cap: 413, whether the length is announced or streamed.
    let big = json!({"key": "k".repeat(2000), "max": 1, "window_ms": 1000}).to_string();
    let r = http
        .post(server.url("/v1/check"))
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"].as_str().unwrap().contains("--max-body-bytes"),
        "{e}"
    );
    let addr = server.base.trim_start_matches("http://").to_owned();
    let status = tokio::task::spawn_blocking(move || chunked_post(&addr, &big))
        .await
        .unwrap();
    assert_eq!(status, 413);

    // A form body is not JSON: 415 saying what to send.
    let r = http
        .post(server.url("/v1/check"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("key=a")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        r.json::<Value>().await.unwrap()["error"]
            .as_str()
            .unwrap()
            .contains("application/json")
    );

    // No Content-Type at all is accepted (curl --data-binary without -H).
    let r = http
        .post(server.url("/v1/check"))
        .body(r#"{"key":"a","max":1,"window_ms":1000}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let r = http.get(server.url("/v1/check")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.json::<Value>().await.unwrap()["error"].is_string());
    let r = http.get(server.url("/nope")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(r.json::<Value>().await.unwrap()["error"].is_string());

    // Still serving after all of that.
    assert_eq!(
        status_of(http.get(server.url("/healthz"))).await,
        StatusCode::OK
    );
    server.stop().await;
}

/// POSTs `body` in two chunks with `Transfer-Encoding: chunked` (no length
/// announced) over a raw connection; returns the status code.
fn chunked_post(addr: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let (a, b) = body.split_at(body.len() / 2);
    let request = format!(
        "POST /v1/check HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
         {:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    // The server may answer and close before reading everything: ignore
    // write errors, read what came back.
    let _ = tcp.write_all(request.as_bytes());
    let mut answer = String::new();
    let _ = tcp.read_to_string(&mut answer);
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {answer:?}"))
}
