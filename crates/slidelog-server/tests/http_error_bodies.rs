//! Every error of the HTTP port, over a real `serve`, is `{"error": "…"}`
//! with a 4xx status naming the real field and bound: a settle's bad cost
//! (0 to 10,000,000, not a check's "1 to the smallest max"), a top-level
//! `cost` that is out of bounds (named `cost`, not `limits[0].cost`), a key
//! in the path that is not UTF-8 (`%FF`), and a `POST /json` body above the
//! body cap (axum's own rejections were plain text).

mod common;

use common::child;
use common::raw_http::request;

/// Sends the request and checks the answer: `status`, a body that is
/// exactly `{"error": "…"}`; returns the message.
fn error_of(addr: &str, method: &str, path: &str, body: &str, status: u16) -> String {
    let (got, answer) = request(addr, method, path, body, "");
    assert_eq!(got, status, "{method} {path}: {answer}");
    let value: serde_json::Value = serde_json::from_str(&answer)
        .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {answer:?}"));
    let object = value.as_object().expect("an object");
    assert_eq!(object.len(), 1, "{answer}");
    object["error"].as_str().expect("a string").to_owned()
}

#[test]
fn bad_costs_name_the_real_field_and_bound() {
    let service = child::serve(&[]);
    let addr = &service.addr;
    // A settle's cost may be 0 (a refund): its bound is not a check's.
    for path in ["/v1/settle", "/v1/charge"] {
        // A settle names its receipt (never read: the cost is refused first).
        let receipt = if path == "/v1/settle" {
            r#","receipt":"AAAA""#
        } else {
            ""
        };
        let body = format!(r#"{{"key":"k","max":10,"window_ms":1000,"cost":-1{receipt}}}"#);
        let message = error_of(addr, "POST", path, &body, 400);
        assert!(message.starts_with("cost: "), "{path}: {message}");
        assert!(message.contains("from 0 to 10000000"), "{path}: {message}");
        assert!(!message.contains("smallest max"), "{path}: {message}");
        // Above the absolute bound: the top-level field, not limits[0].cost.
        let body = format!(r#"{{"key":"k","max":10,"window_ms":1000,"cost":20000000{receipt}}}"#);
        let message = error_of(addr, "POST", path, &body, 400);
        assert_eq!(
            message, "cost must be between 0 and 10000000 for a settle or a charge, got 20000000",
            "{path}"
        );
        let body = format!(
            r#"{{"key":"k","limits":[{{"max":10,"window_ms":1000}}],"cost":20000000{receipt}}}"#
        );
        let message = error_of(addr, "POST", path, &body, 400);
        assert!(message.starts_with("cost must be"), "{path}: {message}");
    }
    // A check's: per-limit costs where one entry takes the top-level cost.
    let body = r#"{"key":"k","limits":[{"max":10,"window_ms":1000,"cost":2},{"max":5,"window_ms":1000}],"cost":7}"#;
    let message = error_of(addr, "POST", "/v1/check", body, 400);
    assert!(
        message.starts_with("cost must be between 1 and 5 (the max of limits[1]"),
        "{message}"
    );
    // An entry's own cost is still named as the entry's.
    let body = r#"{"key":"k","limits":[{"max":10,"window_ms":1000,"cost":11},{"max":5,"window_ms":1000}],"cost":1}"#;
    let message = error_of(addr, "POST", "/v1/check", body, 400);
    assert!(message.starts_with("limits[0].cost"), "{message}");
    // A check's cost keeps its own bound.
    let body = r#"{"key":"k","max":10,"window_ms":1000,"cost":-1}"#;
    let message = error_of(addr, "POST", "/v1/check", body, 400);
    assert!(message.contains("from 1 to the smallest max"), "{message}");
}

#[test]
fn rejections_of_the_router_are_json_too() {
    let service = child::serve(&["--max-body-bytes", "256"]);
    let addr = &service.addr;
    let message = error_of(addr, "DELETE", "/v1/keys/%FF", "", 400);
    assert!(message.contains("UTF-8"), "{message}");
    assert!(message.contains("key"), "{message}");
    // A valid percent-encoded key is still reset.
    let (status, answer) = request(addr, "DELETE", "/v1/keys/%C3%A9t%C3%A9", "", "");
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(r#""key":"été""#), "{answer}");
    let big = format!(
        r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"user","value":"{}"}}]}}]}}"#,
        "x".repeat(400)
    );
    let message = error_of(addr, "POST", "/json", &big, 413);
    assert!(message.contains("length limit"), "{message}");
    // The others, as before: the API's own answers.
    error_of(addr, "POST", "/v1/check", &big, 413);
    error_of(addr, "GET", "/nowhere", "", 404);
    error_of(addr, "GET", "/v1/check", "", 405);
    error_of(addr, "POST", "/json", "{", 400);
}
