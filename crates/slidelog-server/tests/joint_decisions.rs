//! Joint decisions through the built binary (docs/design.md §1, "One
//! request, several keys"; §5, §5.1): a request over several keys is
//! admitted only if every key admits, and a refused one records nothing.
//!
//! The scenario: `user` 10/minute and `path=/login` 3/minute; six requests
//! carrying both are OK×3 then refused×3, and the user alone then gets 7
//! more (not 4: the refused requests were recorded nowhere). Through
//! Envoy's gRPC `ShouldRateLimit`, `POST /json`, `POST /v1/check`'s
//! `{"checks"}` and `slidelog check --and`, on the memory store; the same
//! on Redis and Valkey in [`the_scenario_on_redis_and_valkey`].

mod common;

use common::{child, client, post_json};
use serde_json::{Value, json};
use slidelog_envoy::proto::rate_limit_descriptor::Entry;
use slidelog_envoy::proto::rate_limit_response::Code;
use slidelog_envoy::proto::{RateLimitDescriptor, RateLimitRequest, RateLimitServiceClient};
use std::process::Command;

const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: path\n    value: /login\n    rate_limit: {unit: minute, requests_per_unit: 3}\n";

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// `slidelog serve` with both ports and [`CONFIG`], plus `args`; the
/// config's folder lives as long as the returned guard.
fn serve(args: &[&str]) -> (tempfile::TempDir, child::Serve) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .arg("--config")
        .arg(&config)
        .args(args);
    (dir, child::spawn(command))
}

fn descriptor(key: &str, value: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: key.into(),
            value: value.into(),
        }],
        ..Default::default()
    }
}

fn envoy(descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: "api".into(),
        descriptors,
        hits_addend: 0,
    }
}

/// The scenario over gRPC: the overall codes of six requests with both
/// descriptors, and how many the user alone gets after them (up to 20).
async fn grpc_scenario(grpc: &str, user: &str) -> (Vec<i32>, usize) {
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    let both = envoy(vec![descriptor("user", user), descriptor("path", "/login")]);
    let mut codes = Vec::new();
    for _ in 0..6 {
        let r = client.should_rate_limit(both.clone()).await.unwrap();
        codes.push(r.into_inner().overall_code);
    }
    let alone = envoy(vec![descriptor("user", user)]);
    let mut more = 0;
    while more < 20 {
        let r = client.should_rate_limit(alone.clone()).await.unwrap();
        if r.into_inner().overall_code != OK {
            break;
        }
        more += 1;
    }
    (codes, more)
}

#[tokio::test]
async fn grpc_decides_the_descriptors_of_a_request_together() {
    let (_dir, service) = serve(&[]);
    let (codes, more) = grpc_scenario(&service.grpc_addr(), "alice").await;
    assert_eq!(codes, [OK, OK, OK, OVER, OVER, OVER]);
    assert_eq!(more, 7, "the refused requests were recorded nowhere");
}

#[tokio::test]
async fn independent_descriptors_keep_the_old_answers() {
    let (_dir, service) = serve(&["--envoy-independent-descriptors"]);
    let (codes, more) = grpc_scenario(&service.grpc_addr(), "alice").await;
    assert_eq!(codes, [OK, OK, OK, OVER, OVER, OVER]);
    assert_eq!(more, 4, "each descriptor decided alone, as before");
}

/// `POST /json` statuses of six requests with both descriptors, then how
/// many the user alone gets (up to 20).
async fn json_scenario(http: &str, user: &str) -> (Vec<u16>, usize) {
    let entries = |k: &str, v: &str| json!({"entries": [{"key": k, "value": v}]});
    let both =
        json!({"domain": "api", "descriptors": [entries("user", user), entries("path", "/login")]});
    let alone = json!({"domain": "api", "descriptors": [entries("user", user)]});
    let http_client = client();
    let url = format!("http://{http}/json");
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let r = post_json(&http_client, url.clone(), &both).await;
        statuses.push(r.status().as_u16());
        if r.status() == 429 {
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["overallCode"], "OVER_LIMIT");
            assert_eq!(body["statuses"][0]["code"], "OK", "{body}");
            assert_eq!(body["statuses"][1]["code"], "OVER_LIMIT", "{body}");
        }
    }
    let mut more = 0;
    while more < 20 && post_json(&http_client, url.clone(), &alone).await.status() == 200 {
        more += 1;
    }
    (statuses, more)
}

#[tokio::test]
async fn post_json_decides_the_descriptors_of_a_request_together() {
    let (_dir, service) = serve(&[]);
    let (statuses, more) = json_scenario(&service.addr, "bob").await;
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
    assert_eq!(more, 7);
}

/// The HTTP body of the scenario's two keys.
fn both_keys(user: &str) -> Value {
    json!({"checks": [
        {"key": format!("user:{user}"), "max": 10, "window_ms": 60000},
        {"key": "path:/login", "limits": [{"name": "login", "max": 3, "window_ms": 60000}]},
    ]})
}

/// `POST /v1/check` with `{"checks"}` on the service at `base`: the
/// scenario's statuses, with the answer's shape and header fields (the
/// deciding check's) and a receipt per admitted check; then how many the
/// user alone gets.
async fn http_scenario(base: &str, user: &str) -> (Vec<u16>, usize) {
    let http = client();
    let url = format!("{base}/v1/check");
    let mut statuses = Vec::new();
    for i in 0..6 {
        let r = post_json(&http, url.clone(), &both_keys(user)).await;
        let status = r.status().as_u16();
        statuses.push(status);
        let headers = r.headers().clone();
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["checks"].as_array().unwrap().len(), 2, "{body}");
        if status == 200 {
            assert_eq!(body["allowed"], true);
            assert!(body.get("refused_by").is_none(), "{body}");
            // Each admitted check names its own record.
            assert!(body["checks"][0]["receipt"].is_string(), "{body}");
            assert!(body["checks"][1]["receipt"].is_string(), "{body}");
            // The deciding check: the least remaining relative to its max.
            let left = 2 - i;
            assert_eq!(
                headers["ratelimit"],
                format!("\"login\";r={left};t=60").as_str()
            );
        } else {
            assert_eq!(body["allowed"], false);
            assert_eq!(body["refused_by"], json!({"check": 1, "limit": 0}));
            assert_eq!(body["checks"][0]["allowed"], true, "the user would admit");
            assert_eq!(body["checks"][1]["allowed"], false);
            assert_eq!(body["checks"][1]["limits"][0]["name"], "login");
            assert!(
                body["checks"][0].get("receipt").is_none(),
                "nothing recorded"
            );
            assert!(headers.contains_key("retry-after"));
            let ratelimit = headers["ratelimit"].to_str().unwrap();
            assert!(ratelimit.starts_with("\"login\";r=0;"), "{ratelimit}");
        }
    }
    let alone = json!({"key": format!("user:{user}"), "max": 10, "window_ms": 60000});
    let mut more = 0;
    while more < 20 && post_json(&http, url.clone(), &alone).await.status() == 200 {
        more += 1;
    }
    (statuses, more)
}

#[tokio::test]
async fn http_checks_decide_several_keys_together() {
    let service = child::serve(&[]);
    let (statuses, more) = http_scenario(&service.url(""), "carol").await;
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
    assert_eq!(more, 7);
}

/// A peek of several keys records nothing; a check's receipt of a joint
/// answer settles as a single check's.
#[tokio::test]
async fn http_peek_records_nothing_and_joint_receipts_settle() {
    let service = child::serve(&[]);
    let http = client();
    for _ in 0..5 {
        let r = post_json(&http, service.url("/v1/peek"), &both_keys("dave")).await;
        assert_eq!(r.status(), 200);
    }
    let r = post_json(&http, service.url("/v1/check"), &both_keys("dave")).await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["checks"][1]["remaining"], 2,
        "the peeks recorded nothing"
    );
    let receipt = body["checks"][1]["receipt"].as_str().unwrap();
    let settle = json!({
        "key": "path:/login",
        "limits": [{"name": "login", "max": 3, "window_ms": 60000}],
        "receipt": receipt,
        "cost": 0,
    });
    let r = post_json(&http, service.url("/v1/settle"), &settle).await;
    assert_eq!(r.status(), 200);
    let settled: Value = r.json().await.unwrap();
    assert_eq!(
        (settled["settled"].as_bool(), settled["remaining"].as_u64()),
        (Some(true), Some(3))
    );
}

/// Bad entries are named by their path; too many entries or descriptors
/// are refused naming `--max-descriptors`.
#[tokio::test]
async fn errors_name_the_entry_and_the_bound() {
    let (_dir, service) = serve(&["--max-descriptors", "2"]);
    let http = client();
    let ok = json!({"key": "k", "max": 1, "window_ms": 1000});
    let bad = json!({"checks": [ok, ok, {"key": "c", "limits": [{"max": 0, "window_ms": 1000}]}]});
    let too_many = json!({"checks": [ok, {"key": "b", "max": 1, "window_ms": 1000}, {"key": "c", "max": 1, "window_ms": 1000}]});
    let cases = [
        (
            json!({"checks": [ok, {"key": "b", "limits": [{"max": 0, "window_ms": 1000}]}]}),
            "checks[1].limits[0].max must be between 1 and 10000000, got 0",
        ),
        (
            json!({"checks": [ok, {"key": "b", "max": "x", "window_ms": 1000}]}),
            "checks[1].max: invalid type",
        ),
        (
            bad,
            "checks holds 3 keys, above the most allowed, 2 (set by --max-descriptors",
        ),
        (
            too_many,
            "checks holds 3 keys, above the most allowed, 2 (set by --max-descriptors",
        ),
    ];
    for (body, says) in cases {
        let r = post_json(&http, service.url("/v1/check"), &body).await;
        assert_eq!(r.status(), 400, "{body}");
        let error: Value = r.json().await.unwrap();
        let message = error["error"].as_str().unwrap();
        assert!(message.starts_with(says), "{body}: {message}");
    }
    let three = || {
        (0..3)
            .map(|i| descriptor("user", &format!("u{i}")))
            .collect()
    };
    let mut grpc = RateLimitServiceClient::connect(format!("http://{}", service.grpc_addr()))
        .await
        .unwrap();
    let status = grpc.should_rate_limit(envoy(three())).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("--max-descriptors"), "{status:?}");
    let entries: Vec<Value> = (0..3)
        .map(|i| json!({"entries": [{"key": "user", "value": format!("u{i}")}]}))
        .collect();
    let r = post_json(
        &http,
        service.url("/json"),
        &json!({"domain": "api", "descriptors": entries}),
    )
    .await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("--max-descriptors"));
}

/// `slidelog check … --and …` on the memory store: one process, one
/// decision; the verdict names the refusing key and exits 1.
#[test]
fn cli_check_decides_several_keys_together() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_slidelog"))
            .arg("check")
            .args(args)
            .args(["--store", "memory://"])
            .output()
            .unwrap()
    };
    let out = run(&[
        "user:alice",
        "--limit",
        "10/minute",
        "--and",
        "path=/login",
        "--limit",
        "login=3/minute",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.starts_with("allowed: every key admits"), "{text}");
    assert!(text.contains("\nuser:alice: allowed: 1/10 used"), "{text}");
    assert!(text.contains("\npath=/login: allowed: 1/3 used"), "{text}");
    // The same key twice is one check, its costs added: 2 of a max of 1.
    let out = run(&[
        "a", "--limit", "1/minute", "--and", "b", "--limit", "3/minute", "--and", "a", "--limit",
        "1/minute", "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["allowed"], false);
    assert_eq!(body["refused_by"], json!({"check": 0, "limit": 0}));
    assert_eq!(body["checks"].as_array().unwrap().len(), 2);
    assert_eq!(body["checks"][1]["allowed"], true);
    let out = run(&[
        "a", "--limit", "1/minute", "--cost", "2", "--and", "b", "--limit", "3/minute",
    ]);
    let text = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text.contains("key \"a\": cost must be between 1 and 1"),
        "{text}"
    );
    let out = run(&[
        "a", "--limit", "1/minute", "--and", "b", "--max", "3", "--window", "1m",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("--max and --window belong to the first key")
    );
}

/// The CLI's scenario over a shared store, `slidelog check` run once per
/// request: exit codes of six requests with both keys, then how many the
/// user alone gets.
fn cli_scenario(store: &str) -> (Vec<i32>, usize) {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
            .arg("check")
            .args(args)
            .args(["--store", store])
            .output()
            .unwrap();
        out.status.code().unwrap()
    };
    let both = [
        "user:erin",
        "--limit",
        "10/minute",
        "--and",
        "path=/login",
        "--limit",
        "3/minute",
    ];
    let codes = (0..6).map(|_| run(&both)).collect();
    let mut more = 0;
    while more < 20 && run(&["user:erin", "--limit", "10/minute"]) == 0 {
        more += 1;
    }
    (codes, more)
}

/// The scenario through every interface on `redis-server` and
/// `valkey-server`: needs the Redis stores' joint decisions.
#[tokio::test]
async fn the_scenario_on_redis_and_valkey() {
    for kind in slidelog_testkit::ServerKind::ALL {
        let redis = slidelog_testkit::RedisServer::start_kind(kind);
        let url = redis.url();
        let (_dir, service) = serve(&["--store", &url]);
        let (codes, more) = grpc_scenario(&service.grpc_addr(), &format!("{kind:?}-grpc")).await;
        assert_eq!(
            (codes, more),
            (vec![OK, OK, OK, OVER, OVER, OVER], 7),
            "{kind:?} gRPC"
        );
        // /json shares the login descriptor's log with gRPC: emptied, and
        // asked through a fresh instance (the first one's rejection cache
        // still holds the login's refusal, rightly: it cannot see a DEL).
        let login = "rate:sliding:envoy:api:path=/login";
        let () = redis::cmd("DEL")
            .arg(login)
            .query(&mut redis.client())
            .unwrap();
        let (_dir, service) = serve(&["--store", &url]);
        let (statuses, more) = json_scenario(&service.addr, &format!("{kind:?}-json")).await;
        assert_eq!(
            (statuses, more),
            (vec![200, 200, 200, 429, 429, 429], 7),
            "{kind:?} /json"
        );
        let (statuses, more) = http_scenario(&service.url(""), &format!("{kind:?}-http")).await;
        assert_eq!(
            (statuses, more),
            (vec![200, 200, 200, 429, 429, 429], 7),
            "{kind:?} HTTP"
        );
        let (codes, more) = cli_scenario(&url);
        assert_eq!((codes, more), (vec![0, 0, 0, 1, 1, 1], 7), "{kind:?} CLI");
    }
}
