//! Requests that try to exhaust the service, against the built `slidelog
//! serve` (HTTP, and Envoy gRPC through a real tonic client): a request is
//! one record whatever its cost, every client-chosen number is bounded by an
//! operator flag named in the answer, and a full memory store refuses new
//! keys (503 with Retry-After) instead of admitting them under fail-open.

mod common;

use common::child;

use slidelog_envoy::proto::{
    RateLimitDescriptor, RateLimitRequest, RateLimitServiceClient, rate_limit_descriptor::Entry,
    rate_limit_response::Code,
};
use std::process::Command;

const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n";

/// `slidelog serve` with gRPC on a free port and `--config` (a user rule of
/// 10 per minute); returns it with its gRPC address.
fn serve_with_grpc(dir: &tempfile::TempDir, args: &[&str]) -> (child::Serve, String) {
    let config = dir.path().join("limits.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .arg("serve")
        .args(["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .arg("--config")
        .arg(&config)
        .args(args);
    let serve = child::spawn(command);
    let grpc = serve.grpc_addr();
    (serve, grpc)
}

fn descriptor(user: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: "user".into(),
            value: user.into(),
        }],
        ..Default::default()
    }
}

/// Resident memory of a process, from /proc (Linux).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status cannot be read: {e}"));
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kb * 1024
}

async fn post(url: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(serde_json::Value::Null))
}

#[tokio::test]
async fn checks_at_the_largest_cost_and_max_hold_one_record() {
    let serve = child::serve(&["--max-limit", "10000000", "--max-cost", "10000000"]);
    let before = rss_bytes(serve.child.id());
    let big = serde_json::json!({"key": "llm", "max": 10_000_000, "window_ms": 60_000, "cost": 10_000_000});
    let (status, first) = post(&serve.url("/v1/check"), big.clone()).await;
    assert_eq!((status, first["count"].as_u64()), (200, Some(10_000_000)));
    for _ in 0..4 {
        let (status, d) = post(&serve.url("/v1/check"), big.clone()).await;
        assert_eq!(status, 429, "{d}");
    }
    // A record per unit took ~380 MB for five such checks; one record takes nothing.
    let grown = rss_bytes(serve.child.id()).saturating_sub(before);
    assert!(grown < 8 << 20, "RSS grew by {grown} bytes");
    // Still answering, and exact: a cost of 1 does not fit either.
    let one = serde_json::json!({"key": "llm", "max": 10_000_000, "window_ms": 60_000});
    let (status, d) = post(&serve.url("/v1/peek"), one).await;
    assert_eq!((status, d["count"].as_u64()), (429, Some(10_000_000)));
}

#[tokio::test]
async fn every_client_chosen_number_is_bounded_and_the_flag_named() {
    let serve = child::serve(&["--max-cost", "50", "--max-limits", "2"]);
    let url = serve.url("/v1/check");
    let cases = [
        (
            serde_json::json!({"key": "k", "max": 100_001, "window_ms": 1_000}),
            "--max-limit",
        ),
        (
            serde_json::json!({"key": "k", "max": 100, "window_ms": 1_000, "cost": 51}),
            "--max-cost",
        ),
        (
            serde_json::json!({"key": "k", "limits": [
                {"max": 3_000, "window_ms": 60_000},
                {"max": 100_000, "window_ms": 60_000, "cost": 51}]}),
            "--max-cost",
        ),
        (
            serde_json::json!({"key": "k", "limits": [
                {"max": 1, "window_ms": 1}, {"max": 1, "window_ms": 2}, {"max": 1, "window_ms": 3}]}),
            "--max-limits",
        ),
    ];
    for (body, flag) in cases {
        let (status, answer) = post(&url, body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(flag), "{body}: {error}");
    }
    // Within the bounds, each limit is charged its own cost.
    let (status, d) = post(
        &url,
        serde_json::json!({"key": "k", "limits": [
            {"max": 3_000, "window_ms": 60_000},
            {"max": 100_000, "window_ms": 60_000, "cost": 50}]}),
    )
    .await;
    assert_eq!((status, d["limit"].as_u64()), (200, Some(3_000)), "{d}");
}

#[tokio::test]
async fn ten_thousand_descriptors_are_refused_and_nothing_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, grpc) = serve_with_grpc(&dir, &[]);
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    let flood = RateLimitRequest {
        domain: "api".into(),
        descriptors: (0..10_000).map(|i| descriptor(&format!("u{i}"))).collect(),
        hits_addend: 0,
    };
    let status = client.should_rate_limit(flood).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("--max-descriptors"), "{status:?}");
    // u0 was in the refused request: nothing was recorded for it.
    let one = RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor("u0")],
        hits_addend: 0,
    };
    let r = client.should_rate_limit(one).await.unwrap().into_inner();
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (Code::Ok as i32, 9)
    );
    // A hits_addend above --max-cost is refused the same way.
    let heavy = RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor("u1")],
        hits_addend: 100_001,
    };
    let status = client.should_rate_limit(heavy).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}

#[tokio::test]
async fn a_full_store_refuses_new_keys_under_fail_open() {
    let dir = tempfile::tempdir().unwrap();
    let (serve, grpc) = serve_with_grpc(&dir, &["--memory-key-cap", "20"]);
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    // Requests of 5 new descriptors each fill the cap of 20 keys; then one
    // with 64 new descriptors is refused whole (its descriptors are decided
    // together: none of its keys is added).
    let descriptors = |from: usize, n: usize| RateLimitRequest {
        domain: "api".into(),
        descriptors: (from..from + n)
            .map(|i| descriptor(&format!("u{i}")))
            .collect(),
        hits_addend: 0,
    };
    for from in [0, 5, 10, 15] {
        let r = client
            .should_rate_limit(descriptors(from, 5))
            .await
            .unwrap();
        assert_eq!(
            r.into_inner().overall_code,
            Code::Ok as i32,
            "{from}: keys fit"
        );
    }
    let status = client
        .should_rate_limit(descriptors(20, 64))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(status.message().contains("store full"), "{status:?}");
    // A new key is never admitted, though the policy is fail-open: 503 with
    // the wait until the first log expires.
    let body = serde_json::json!({"key": "newcomer", "max": 10, "window_ms": 60_000});
    for _ in 0..15 {
        let r = reqwest::Client::new()
            .post(serve.url("/v1/check"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 503);
        let retry: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((50..=60).contains(&retry), "Retry-After {retry}");
        let answer: serde_json::Value = r.json().await.unwrap();
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("--memory-key-cap"),
            "{answer}"
        );
    }
    // Keys the store holds are still decided exactly: u0 got one record.
    let again = RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor("u0")],
        hits_addend: 0,
    };
    let r = client.should_rate_limit(again).await.unwrap().into_inner();
    assert_eq!(r.statuses[0].limit_remaining, 8);
}
