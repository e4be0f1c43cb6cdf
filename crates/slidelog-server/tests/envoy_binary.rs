//! The built `slidelog serve` with `--config`: Envoy's `ShouldRateLimit` over
//! gRPC on `--grpc` and `POST /json` on `--http`, sharing one log per
//! descriptor; a config error at start exits 2 naming the file and the line.

use slidelog_envoy::proto::{RateLimitServiceClient, rate_limit_response::Code};
use std::process::Command;

const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";

mod common;

use common::{child, text_of};

/// Starts the binary; returns it with its HTTP and gRPC addresses from the log.
fn spawn(config: &std::path::Path) -> (child::Serve, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .arg("--config")
        .arg(config);
    let service = child::spawn(command);
    let (http, grpc) = (service.addr.clone(), service.grpc_addr());
    (service, http, grpc)
}

/// The binary over [`CONFIG`], written to a folder that lives as long as
/// the returned guard.
fn spawn_with_config() -> (tempfile::TempDir, child::Serve, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, CONFIG).unwrap();
    let (service, http, grpc) = spawn(&path);
    (dir, service, http, grpc)
}

/// POSTs `body` to `/json` on `http` once per expected status, in order.
async fn post_json_expecting(http: &str, body: &serde_json::Value, expected: &[u16]) {
    let client = reqwest::Client::new();
    for (i, status) in expected.iter().enumerate() {
        let r = client
            .post(format!("http://{http}/json"))
            .json(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), *status, "request {i}");
    }
}

#[tokio::test]
async fn grpc_and_json_share_the_descriptor_log() {
    let (_dir, _service, http, grpc) = spawn_with_config();

    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    let req = common::envoy_request("api", "user", "bin");
    let r = client
        .should_rate_limit(req.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses[0].limit_remaining, 1);

    let body = serde_json::json!({
        "domain": "api",
        "descriptors": [{"entries": [{"key": "user", "value": "bin"}]}]
    });
    post_json_expecting(&http, &body, &[200, 429]).await;
    let r = client.should_rate_limit(req).await.unwrap().into_inner();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
}

#[test]
fn a_config_error_at_start_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.yaml");
    std::fs::write(
        &path,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 2}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("broken.yaml:4") && stderr.contains("fortnight"),
        "{stderr}"
    );
}

/// The Envoy API's own counters reach the running server's `/metrics`
/// (they once went to a global recorder that nothing installed), next to
/// the decisions the one limiter counts for every transport.
#[tokio::test]
async fn envoy_counters_appear_in_the_servers_metrics() {
    let (_dir, _service, http, _grpc) = spawn_with_config();
    let http_client = reqwest::Client::new();
    let body = serde_json::json!({
        "domain": "api",
        "descriptors": [{"entries": [{"key": "user", "value": "metrics"}]}]
    });
    post_json_expecting(&http, &body, &[200, 200, 429]).await;
    let text = text_of(http_client.get(format!("http://{http}/metrics"))).await;
    let value = |result: &str| -> f64 {
        text.lines()
            .find(|l| {
                l.starts_with("slidelog_envoy_decisions_total{")
                    && l.contains(r#"domain="api""#)
                    && l.contains(&format!(r#"result="{result}""#))
            })
            .unwrap_or_else(|| panic!("no slidelog_envoy_decisions_total for {result}:\n{text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(value("ok"), 2.0, "{text}");
    assert_eq!(value("over_limit"), 1.0, "{text}");
    // The same three decisions, counted once by the limiter they went through.
    assert!(
        text.contains(r#"slidelog_decisions_total{op="check",result="allowed"} 2"#)
            && text.contains(r#"slidelog_decisions_total{op="check",result="rejected"} 1"#),
        "{text}"
    );
}
