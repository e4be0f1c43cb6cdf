//! Client tokens (docs/design.md §5.2) against the
//! built binary: with `--api-token-file`, a decision without a valid token
//! is 401 (JSON error, `WWW-Authenticate: Bearer`) on HTTP and
//! `UNAUTHENTICATED` on gRPC, and answered with one; `--settle-tokens`
//! refuses settle and charge to other callers (403); `/metrics` is behind
//! `--metrics-token-file`; `/healthz`, `/readyz` and the admin route
//! (`--admin-token`) are not affected; each call is counted by caller;
//! a changed token file counts without a restart; no token is logged.

mod common;
mod tls_common;

use common::child;
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use tls_common::{CONFIG, grpc_call, log_lines};

const TOKENS: &str =
    "# callers of the test\n\nedge: tok-edge-1\nbilling:tok-billing-2\ntok-unnamed-3\n";

/// `serve` with the token flags (and an admin token).
fn serve(dir: &std::path::Path) -> child::Serve {
    let (tokens, metrics, config) = (
        dir.join("tokens"),
        dir.join("metrics-tokens"),
        dir.join("limits.yaml"),
    );
    std::fs::write(&tokens, TOKENS).unwrap();
    std::fs::write(&metrics, "scraper:tok-metrics-4\n").unwrap();
    std::fs::write(&config, CONFIG).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(["--store", "memory://", "--admin-token", "tok-admin-5"])
        .arg("--api-token-file")
        .arg(&tokens)
        .args(["--settle-tokens", "billing"])
        .arg("--metrics-token-file")
        .arg(&metrics)
        .arg("--config")
        .arg(&config)
        .env_remove("SLIDELOG_STORE")
        .env_remove("SLIDELOG_ADMIN_TOKEN");
    child::spawn(command)
}

/// `POST path` with `body` and `Authorization: Bearer token` when given:
/// status, `WWW-Authenticate`, and body.
async fn post(
    service: &child::Serve,
    path: &str,
    token: Option<&str>,
    body: &serde_json::Value,
) -> (u16, Option<String>, serde_json::Value) {
    let mut request = common::client().post(service.url(path)).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    let challenge =
        (answer.headers().get("www-authenticate")).map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, answer.json().await.unwrap())
}

async fn grpc(service: &child::Serve, token: Option<&str>) -> (String, String) {
    let tcp = tokio::net::TcpStream::connect(service.grpc_addr()).await;
    grpc_call(tcp.unwrap(), token, "u").await
}

/// Every decision route refuses a call without a valid token (401 with
/// `WWW-Authenticate: Bearer` and a JSON error; gRPC UNAUTHENTICATED) and
/// answers one with a token of the file.
async fn assert_decisions_need_a_token(service: &child::Serve) {
    let check = json!({"key": "k", "max": 5, "window_ms": 60000});
    let wrong = [
        None,
        Some("tok-edge"),
        Some("tok-edge-1x"),
        Some("tok-admin-5"),
    ];
    for path in ["/v1/check", "/v1/peek", "/v1/settle", "/v1/charge", "/json"] {
        for token in wrong {
            let (status, challenge, body) = post(service, path, token, &check).await;
            assert_eq!(status, 401, "{path} {token:?}: {body}");
            assert_eq!(challenge.as_deref(), Some("Bearer"), "{path}");
            assert!(body["error"].as_str().unwrap().contains("token"), "{body}");
        }
    }
    let (status, _, body) = post(service, "/v1/check", Some("tok-edge-1"), &check).await;
    assert_eq!((status, &body["allowed"]), (200, &json!(true)), "{body}");
    let (status, _, body) = post(service, "/v1/peek", Some("tok-unnamed-3"), &check).await;
    assert_eq!(status, 200, "{body}");
    let entries = json!([{"key": "user", "value": "j"}]);
    let envoy = json!({"domain": "api", "descriptors": [{"entries": entries}]});
    let (status, _, body) = post(service, "/json", Some("tok-edge-1"), &envoy).await;
    let code = &body["overallCode"];
    assert_eq!((status, code), (200, &json!("OK")), "{body}");

    assert_eq!(grpc(service, None).await.0, "16", "UNAUTHENTICATED");
    assert_eq!(grpc(service, Some("tok-nope")).await.0, "16");
    assert_eq!(grpc(service, Some("tok-edge-1")).await.0, "0");
}

/// Settle and charge: the `--settle-tokens` caller only (403 for others).
async fn assert_settle_callers(service: &child::Serve) {
    let check = json!({"key": "k", "max": 5, "window_ms": 60000});
    let (_, _, body) = post(service, "/v1/check", Some("tok-billing-2"), &check).await;
    let receipt = body["receipt"].as_str().expect("a receipt").to_owned();
    let settle = json!({"key": "k", "max": 5, "window_ms": 60000, "receipt": receipt, "cost": 0});
    let charge = json!({"key": "k", "max": 5, "window_ms": 60000, "cost": 1});
    for (path, body) in [("/v1/settle", &settle), ("/v1/charge", &charge)] {
        for token in ["tok-edge-1", "tok-unnamed-3"] {
            let (status, _, answer) = post(service, path, Some(token), body).await;
            assert_eq!(status, 403, "{path} {token}: {answer}");
            let error = answer["error"].as_str().unwrap();
            assert!(error.contains("--settle-tokens"), "{error}");
        }
        let (status, _, answer) = post(service, path, Some("tok-billing-2"), body).await;
        assert_eq!(status, 200, "{path}: {answer}");
    }
}

/// Health and readiness need no token, the admin route its own, /metrics
/// its own (and it shows the calls above counted by caller and route).
async fn assert_other_routes(service: &child::Serve) {
    let http = common::client();
    for path in ["/healthz", "/readyz"] {
        let status = common::status_of(http.get(service.url(path))).await;
        assert_eq!(status, 200, "{path}");
    }
    let reset = http.delete(service.url("/v1/keys/k"));
    assert_eq!(common::status_of(reset.try_clone().unwrap()).await, 401);
    let reset = reset.bearer_auth("tok-admin-5");
    assert_eq!(common::status_of(reset).await, 200);

    for token in [None, Some("tok-edge-1")] {
        let mut request = http.get(service.url("/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        assert_eq!(common::status_of(request).await, 401, "{token:?}");
    }
    let metrics = http
        .get(service.url("/metrics"))
        .bearer_auth("tok-metrics-4");
    let metrics = common::text_of(metrics).await;
    for series in [
        "caller=\"edge\",route=\"check\"",
        "caller=\"edge\",route=\"grpc\"",
        "caller=\"edge\",route=\"json\"",
        "caller=\"default\",route=\"peek\"",
        "caller=\"billing\",route=\"settle\"",
        "caller=\"billing\",route=\"charge\"",
    ] {
        let line = format!("slidelog_caller_requests_total{{{series}}} 1");
        let found = metrics.lines().any(|l| l == line);
        assert!(found, "no {line} in\n{metrics}");
    }
}

#[tokio::test]
async fn decisions_need_a_token_settle_needs_a_settle_caller_metrics_its_own_token() {
    let dir = tempfile::tempdir().unwrap();
    let service = serve(dir.path());
    assert_decisions_need_a_token(&service).await;
    assert_settle_callers(&service).await;
    assert_other_routes(&service).await;
    let log = log_lines(&service.log, Duration::from_millis(300));
    let all = [service.early_log.clone(), log].concat();
    let clean = all.iter().all(|l| !l.contains("tok-"));
    assert!(clean, "a token in the log: {all:#?}");
}

#[tokio::test]
async fn a_changed_token_file_counts_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let service = serve(dir.path());
    let check = json!({"key": "r", "max": 100, "window_ms": 60000});
    assert_eq!(
        post(&service, "/v1/check", Some("tok-new-6"), &check)
            .await
            .0,
        401
    );

    std::fs::write(dir.path().join("tokens"), "edge:tok-new-6\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while post(&service, "/v1/check", Some("tok-new-6"), &check)
        .await
        .0
        != 200
    {
        assert!(
            Instant::now() < deadline,
            "the new token did not count within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        post(&service, "/v1/check", Some("tok-edge-1"), &check)
            .await
            .0,
        401
    );

    // A file that does not parse keeps the tokens loaded before, logged
    // once by line number (never its text).
    std::fs::write(
        dir.path().join("tokens"),
        "edge:tok-new-6\nbad name:tok-bad-7\n",
    )
    .unwrap();
    let log = log_lines(&service.log, Duration::from_secs(5));
    let warned: Vec<_> = log.iter().filter(|l| l.contains("does not load")).collect();
    assert_eq!(warned.len(), 1, "{log:#?}");
    assert!(
        warned[0].contains("line 2") && !warned[0].contains("tok-"),
        "{warned:?}"
    );
    assert_eq!(
        post(&service, "/v1/check", Some("tok-new-6"), &check)
            .await
            .0,
        200
    );
}
