//! docs/design.md §6 over HTTP with a real `redis-server` killed and restarted: while
//! it is down, fail-open answers 200 `degraded: true` and fail-closed 503,
//! no request waits much beyond the store timeout, `/readyz` says unready;
//! once it is back, both servers are ready and exact again with no restart,
//! sharing one log across two service instances.

mod common;

use common::{TestServer, client, post_json, start, status_of, text_of};
use reqwest::StatusCode;
use serde_json::{Value, json};
use slidelog::url::{StoreOptions, open_store};
use slidelog_server::app::{App, AppConfig};
use slidelog_server::policy::FailurePolicy;
use slidelog_testkit::{RedisServer, unique_prefix};
use std::time::{Duration, Instant};

const STORE_TIMEOUT: Duration = Duration::from_millis(200);
/// What "no request hangs" means: the store timeout plus a scheduling
/// margin for a busy 2-core machine, twice the timeout in all (a request
/// that waited on a dead Redis without the timeout would take the 2 s
/// connect timeout or longer).
const HANG_BOUND: Duration = Duration::from_millis(2 * STORE_TIMEOUT.as_millis() as u64);

async fn app_over(redis: &RedisServer, prefix: &str, policy: FailurePolicy) -> App {
    let options = StoreOptions {
        key_prefix: prefix.to_owned(),
        lazy_connect: true,
        ..StoreOptions::default()
    };
    let store = open_store(&redis.url(), &options, STORE_TIMEOUT)
        .await
        .expect("open redis store");
    App::new(
        store,
        AppConfig {
            policy,
            store_timeout: STORE_TIMEOUT,
            ..AppConfig::default()
        },
    )
}

async fn wait_ready(http: &reqwest::Client, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = http.get(url).send().await
            && r.status() == StatusCode::OK
        {
            return;
        }
        assert!(Instant::now() < deadline, "{url} not ready within 20 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// POSTs a check to `server`, asserting that it is answered within
/// [`HANG_BOUND`] (`what` names the request in the failure).
async fn timed_check(
    http: &reqwest::Client,
    server: &TestServer,
    body: &Value,
    what: &str,
) -> reqwest::Response {
    let started = Instant::now();
    let r = post_json(http, server.url("/v1/check"), body).await;
    let took = started.elapsed();
    assert!(took < HANG_BOUND, "{what} took {took:?}");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_and_fail_closed_through_a_redis_outage() {
    let mut redis = RedisServer::start();
    let prefix = unique_prefix("http_outage");
    let open = start(app_over(&redis, &prefix, FailurePolicy::FailOpen).await).await;
    let closed = start(app_over(&redis, &prefix, FailurePolicy::FailClosed).await).await;
    let http = client();
    wait_ready(&http, &open.url("/readyz")).await;
    wait_ready(&http, &closed.url("/readyz")).await;

    let body = |key: &str| json!({"key": key, "max": 3, "window_ms": 3_600_000});
    // Both instances share one log in Redis: 3 admissions in all.
    let mut statuses = Vec::new();
    for server in [&open, &closed, &open, &closed] {
        statuses.push(
            post_json(&http, server.url("/v1/check"), &body("before"))
                .await
                .status(),
        );
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == StatusCode::OK).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(statuses[3], StatusCode::TOO_MANY_REQUESTS);

    redis.kill();

    for round in 0..5 {
        let r = timed_check(
            &http,
            &open,
            &body("during"),
            &format!("fail-open request {round}"),
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK);
        assert!(
            r.headers().get("ratelimit").is_none(),
            "a degraded answer claims a remaining count"
        );
        let d: Value = r.json().await.unwrap();
        assert_eq!(d["degraded"], true, "{d}");
        assert_eq!(d["allowed"], true, "{d}");

        let r = timed_check(
            &http,
            &closed,
            &body("during"),
            &format!("fail-closed request {round}"),
        )
        .await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()["retry-after"], "1");
        let e: Value = r.json().await.unwrap();
        assert!(e["error"].as_str().unwrap().contains("fail-closed"), "{e}");
    }
    for server in [&open, &closed] {
        let started = Instant::now();
        let r = http.get(server.url("/readyz")).send().await.unwrap();
        assert!(started.elapsed() < HANG_BOUND);
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            r.json::<Value>().await.unwrap()["error"]
                .as_str()
                .unwrap()
                .contains("redis")
        );
        // Liveness does not depend on the store.
        assert_eq!(
            status_of(http.get(server.url("/healthz"))).await,
            StatusCode::OK
        );
    }
    let metrics = text_of(http.get(open.url("/metrics"))).await;
    for series in [
        r#"slidelog_degraded_decisions_total{op="check"} 5"#,
        r#"slidelog_store_errors_total{op="check","#,
        r#"transient="true""#,
        "slidelog_store_up 0",
    ] {
        assert!(metrics.contains(series), "{metrics}");
    }

    // Redis comes back (empty: nothing is persisted). No service restart.
    redis.restart();
    wait_ready(&http, &open.url("/readyz")).await;
    wait_ready(&http, &closed.url("/readyz")).await;

    // Exact again, across both instances and under concurrency: 3 of 12.
    let mut tasks = Vec::new();
    for i in 0..12 {
        let url = if i % 2 == 0 {
            open.url("/v1/check")
        } else {
            closed.url("/v1/check")
        };
        let (http, b) = (http.clone(), body("after"));
        tasks.push(tokio::spawn(async move {
            let r = http.post(url).json(&b).send().await.unwrap();
            let status = r.status();
            let d: Value = r.json().await.unwrap();
            assert!(d.get("degraded").is_none(), "{d}");
            status
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        match t.await.unwrap() {
            StatusCode::OK => admitted += 1,
            StatusCode::TOO_MANY_REQUESTS => {}
            other => panic!("unexpected {other} after recovery"),
        }
    }
    assert_eq!(admitted, 3);
    let metrics = text_of(http.get(open.url("/metrics"))).await;
    assert!(metrics.contains("slidelog_store_up 1"), "{metrics}");

    open.stop().await;
    closed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_when_redis_dies_are_bounded_too() {
    let mut redis = RedisServer::start();
    let prefix = unique_prefix("http_inflight");
    let open = start(app_over(&redis, &prefix, FailurePolicy::FailOpen).await).await;
    let http = client();
    wait_ready(&http, &open.url("/readyz")).await;

    // A steady stream of requests while Redis is killed under it.
    let url = open.url("/v1/check");
    let load = tokio::spawn({
        let http = http.clone();
        async move {
            let mut worst = Duration::ZERO;
            let mut degraded = 0;
            for i in 0..60 {
                let started = Instant::now();
                let r = http
                    .post(&url)
                    .json(&json!({"key": format!("k{}", i % 7), "max": 1000, "window_ms": 60_000}))
                    .send()
                    .await
                    .unwrap();
                worst = worst.max(started.elapsed());
                assert_eq!(r.status(), StatusCode::OK);
                if r.json::<Value>().await.unwrap()["degraded"] == true {
                    degraded += 1;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (worst, degraded)
        }
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    redis.kill();
    let (worst, degraded) = load.await.unwrap();
    assert!(worst < HANG_BOUND, "a request took {worst:?}");
    assert!(degraded > 0, "no request saw the outage");
    open.stop().await;
}
