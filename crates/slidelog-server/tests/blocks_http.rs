//! Blocks and overrides through the built binary's HTTP API (docs/design.md
//! §5.4): two `slidelog serve` instances on one Redis (and on a Redis
//! Cluster) share them: a block put through one refuses the key on the
//! other (429, `Retry-After` <= the block, the reason in the body) and it
//! is served after; an override of max 2 admits exactly 2 of 5 checks that
//! ask for max 100 across both, and the request's limits apply again after
//! its deletion; allow and deny. On the memory store: `block_ms` 3000 on a
//! 1 s window (refused at 1.3 s, served at 3.3 s), the admin token, bad
//! input named with its bound, the metrics.

mod common;

use common::{child, client};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slidelog_testkit::{RedisCluster, RedisServer, unique_prefix};
use std::time::{Duration, Instant};

/// `POST /v1/check` of `key` at max `max` per minute: (status, Retry-After, body).
async fn check(serve: &child::Serve, key: &str, max: u64) -> (StatusCode, Option<u64>, Value) {
    let body = json!({"key": key, "max": max, "window_ms": 60_000});
    let answer = client()
        .post(serve.url("/v1/check"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let retry = answer
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (status, retry, answer.json().await.unwrap())
}

/// `method path` with a JSON body and the admin token: (status, body).
async fn admin(
    serve: &child::Serve,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = client()
        .request(method, serve.url(path))
        .bearer_auth("admin-secret");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = request.send().await.unwrap();
    (answer.status(), answer.json().await.unwrap())
}

fn two_instances(store: &str, prefix: &str) -> (child::Serve, child::Serve) {
    let args = [
        "--store",
        store,
        "--key-prefix",
        prefix,
        "--admin-token",
        "admin-secret",
        "--store-timeout",
        "2s",
    ];
    (child::serve(&args), child::serve(&args))
}

/// A block through `a` refuses on `b`, with the reason and a Retry-After
/// within the block, and the key is served once it expired.
async fn a_block_holds_on_the_other_instance(a: &child::Serve, b: &child::Serve) {
    use reqwest::Method;
    assert_eq!(check(b, "abuser", 100).await.0, StatusCode::OK);
    let body = json!({"duration_ms": 2_000, "reason": "credential stuffing"});
    let (status, _) = admin(a, Method::PUT, "/v1/keys/abuser/block", Some(body)).await;
    assert_eq!(status, StatusCode::OK);
    let started = Instant::now();
    let (status, retry, body) = check(b, "abuser", 100).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(retry.unwrap() <= 2, "{retry:?}");
    assert_eq!(body["blocked"], true);
    assert_eq!(body["reason"], "credential stuffing");
    assert!(body["retry_after_ms"].as_u64().unwrap() <= 2_000);
    tokio::time::sleep(Duration::from_millis(2_100).saturating_sub(started.elapsed())).await;
    let (status, _, body) = check(b, "abuser", 100).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The blocked checks recorded nothing: 2 recorded of 100.
    assert_eq!(body["remaining"], 98);
    // Blocked again, then lifted through the other instance.
    let body = json!({"duration_ms": 60_000, "reason": "again"});
    admin(a, Method::PUT, "/v1/keys/abuser/block", Some(body)).await;
    assert_eq!(
        check(a, "abuser", 100).await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    let (status, body) = admin(b, Method::DELETE, "/v1/keys/abuser/block", None).await;
    assert_eq!((status, &body["deleted"]), (StatusCode::OK, &json!(true)));
    assert_eq!(check(a, "abuser", 100).await.0, StatusCode::OK);
}

/// An override of max 2 put through `a` admits exactly 2 of 5 checks
/// asking for max 100 across both instances; deleted, max 100 applies.
async fn an_override_holds_on_both(a: &child::Serve, b: &child::Serve) {
    use reqwest::Method;
    let body = json!({"limits": [{"max": 2, "window_ms": 60_000}], "ttl_ms": 60_000});
    let (status, answer) = admin(a, Method::PUT, "/v1/keys/tenant/override", Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let mut admitted = 0;
    for i in 0..5 {
        let serve = if i % 2 == 0 { a } else { b };
        admitted += u32::from(check(serve, "tenant", 100).await.0 == StatusCode::OK);
    }
    assert_eq!(admitted, 2);
    let (status, _) = admin(b, Method::DELETE, "/v1/keys/tenant/override", None).await;
    assert_eq!(status, StatusCode::OK);
    // Each instance may reuse what it read for up to --override-cache (1 s).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    for serve in [a, b] {
        let (status, _, body) = check(serve, "tenant", 100).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["limit"], 100);
    }
    // Allow and deny.
    let allow = json!({"allow": true, "ttl_ms": 60_000});
    admin(a, Method::PUT, "/v1/keys/vip/override", Some(allow)).await;
    let deny = json!({"deny": true, "ttl_ms": 60_000});
    admin(a, Method::PUT, "/v1/keys/banned/override", Some(deny)).await;
    for _ in 0..3 {
        assert_eq!(check(b, "vip", 1).await.0, StatusCode::OK);
        assert_eq!(
            check(b, "banned", 100).await.0,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_redis_share_blocks_and_overrides() {
    let redis = RedisServer::start();
    let prefix = unique_prefix("blocks_http");
    let (a, b) = two_instances(&redis.url(), &prefix);
    a_block_holds_on_the_other_instance(&a, &b).await;
    an_override_holds_on_both(&a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_a_cluster_share_blocks_and_overrides() {
    let cluster = RedisCluster::start();
    let prefix = unique_prefix("blocks_cluster_http");
    let (a, b) = two_instances(&cluster.url(), &prefix);
    a_block_holds_on_the_other_instance(&a, &b).await;
    an_override_holds_on_both(&a, &b).await;
    // The block and the override lived in the log's slot: their keys share
    // the log key's hash tag.
    let key = format!("{prefix}tenant");
    assert_eq!(
        slidelog_core::slot::slot(format!("{{{key}}}#v").as_bytes()),
        slidelog_core::slot::slot(key.as_bytes())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_ms_outlasts_the_window_and_bad_input_names_the_bound() {
    use reqwest::Method;
    let serve = child::serve(&["--admin-token", "admin-secret", "--max-blocks", "3"]);
    let http = client();
    let body = json!({"key": "k", "max": 1, "window_ms": 1_000, "block_ms": 3_000});
    let started = Instant::now();
    let send = || http.post(serve.url("/v1/check")).json(&body).send();
    assert_eq!(send().await.unwrap().status(), StatusCode::OK);
    let refused = send().await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["blocked"], true);
    tokio::time::sleep(Duration::from_millis(1_300).saturating_sub(started.elapsed())).await;
    assert_eq!(
        send().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    tokio::time::sleep(Duration::from_millis(3_300).saturating_sub(started.elapsed())).await;
    assert_eq!(send().await.unwrap().status(), StatusCode::OK);

    // No token: 401. Huge duration / ttl / block_ms: 400 naming the field.
    let no_token = http
        .put(serve.url("/v1/keys/x/block"))
        .json(&json!({"duration_ms": 1_000}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status(), StatusCode::UNAUTHORIZED);
    let huge = json!({"duration_ms": 40_000_000_000u64});
    let (status, body) = admin(&serve, Method::PUT, "/v1/keys/x/block", Some(huge)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let text = body["error"].as_str().unwrap();
    assert!(
        text.contains("duration_ms") && text.contains("31622400000"),
        "{text}"
    );
    let huge = json!({"deny": true, "ttl_ms": 40_000_000_000u64});
    let (status, body) = admin(&serve, Method::PUT, "/v1/keys/x/override", Some(huge)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().contains("ttl_ms"), "{body}");
    let both = json!({"deny": true, "allow": true});
    let (status, _) = admin(&serve, Method::PUT, "/v1/keys/x/override", Some(both)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let bad = json!({"key": "k", "max": 1, "window_ms": 1_000, "block_ms": 40_000_000_000u64});
    let answer = http
        .post(serve.url("/v1/check"))
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);

    // The cap (3 here): the penalty's expired entry makes room; three
    // fit, then 409.
    for key in ["c1", "c2", "c3"] {
        let body = json!({"duration_ms": 60_000});
        let (status, _) = admin(
            &serve,
            Method::PUT,
            &format!("/v1/keys/{key}/block"),
            Some(body),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let body = json!({"duration_ms": 60_000});
    let (status, body) = admin(&serve, Method::PUT, "/v1/keys/c4/block", Some(body)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        body["error"].as_str().unwrap().contains("--max-blocks"),
        "{body}"
    );

    let metrics = http.get(serve.url("/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    for line in [
        r#"slidelog_blocks_total{op="penalty"} 1"#,
        r#"slidelog_blocks_total{op="put"} 3"#,
        r#"slidelog_blocked_refusals_total{op="check"} 1"#,
        r#"slidelog_decisions_total{op="check",result="blocked"} 1"#,
        "slidelog_blocks_active 3",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}
