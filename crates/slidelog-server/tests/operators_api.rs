//! The operators' API over HTTP (docs/design.md §5, "Operators' API"): the
//! admin guard (token, or loopback only), the key browser on the memory
//! store, Redis and Redis Cluster (bounded pages that together list every
//! key), policies named by requests (`--require-policy` refusing
//! client-chosen limits), and `/openapi.json` against the router.

mod common;

use common::{TestServer, client, post_json, start, start_memory};
use serde_json::{Value, json};
use slidelog::url::{StoreOptions, open_store};
use slidelog_server::app::{App, AppConfig};
use slidelog_server::browse::KeySpace;
use slidelog_server::policies::PolicyHandle;
use slidelog_testkit::{RedisCluster, RedisServer, unique_prefix};
use std::collections::BTreeSet;
use std::time::Duration;

const POLICIES: &str = "api-key: requests=3/minute, tokens=100/minute\nlogin: 2/minute block=10m\n";

fn with_policies(require: bool) -> AppConfig {
    AppConfig {
        policies: Some(PolicyHandle::fixed(POLICIES.parse().unwrap())),
        require_policy: require,
        ..AppConfig::default()
    }
}

async fn get(server: &TestServer, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = client().get(server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Checks `key` once (cost 1, 10 per minute).
async fn touch(server: &TestServer, key: &str) {
    let body = json!({"key": key, "max": 10, "window_ms": 60_000});
    let response = post_json(&client(), server.url("/v1/check"), &body).await;
    assert_eq!(response.status(), 200, "{key}");
}

/// Every key of the pages under `prefix`, `limit` at a time; also checks
/// each page holds at most `limit` keys.
async fn list_all(server: &TestServer, prefix: &str, limit: usize) -> (BTreeSet<String>, usize) {
    let (mut keys, mut pages, mut cursor) = (BTreeSet::new(), 0, None::<String>);
    loop {
        let mut path = format!("/v1/keys?prefix={prefix}&limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = get(server, &path, None).await;
        assert_eq!(status, 200, "{page}");
        let got = page["keys"].as_array().unwrap();
        assert!(got.len() <= limit, "{page}");
        for k in got {
            assert!(k["records"].as_u64().unwrap() >= 1, "{k}");
            assert!(k["ttl_ms"].as_u64().unwrap() <= 60_000, "{k}");
            assert!(k["newest_ms"].as_u64().unwrap() > 1_600_000_000_000, "{k}");
            keys.insert(k["key"].as_str().unwrap().to_owned());
        }
        pages += 1;
        assert!(pages < 10_000, "the cursor never ends");
        match page["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return (keys, pages),
        }
    }
}

/// The key browser's behaviour on one store: what a test of each store runs.
async fn browse_on(server: &TestServer) {
    let wanted: BTreeSet<String> = (0..25).map(|i| format!("user:{i}")).collect();
    for key in &wanted {
        touch(server, key).await;
    }
    touch(server, "other").await;
    touch(server, "user:3").await;
    let (keys, pages) = list_all(server, "user:", 4).await;
    assert_eq!(keys, wanted);
    assert!(pages >= 7, "{pages} pages of at most 4 for 25 keys");
    let (status, one) = get(server, "/v1/keys/user:3", None).await;
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["log"]["records"], 2, "{one}");
    assert_eq!(one["log"]["units"], 2, "{one}");
    let (status, missing) = get(server, "/v1/keys/nobody", None).await;
    assert_eq!(status, 404, "{missing}");
    // Bounds and bad input: 400 naming the field.
    for (path, field) in [
        ("/v1/keys?limit=0", "limit"),
        ("/v1/keys?limit=1001", "limit"),
        ("/v1/keys?limit=x", "limit"),
        ("/v1/keys?cursor=nonsense", "cursor"),
        ("/v1/keys?color=red", "color"),
    ] {
        let (status, e) = get(server, path, None).await;
        assert_eq!(status, 400, "{path}: {e}");
        assert!(e["error"].as_str().unwrap().contains(field), "{path}: {e}");
    }
    let (_, e) = get(server, "/v1/keys?limit=1001", None).await;
    assert!(e["error"].as_str().unwrap().contains("1000"), "{e}");
}

#[tokio::test]
async fn memory_store_lists_every_key_in_bounded_pages() {
    let server = start_memory(AppConfig::default()).await;
    browse_on(&server).await;
}

async fn redis_app(url: &str, test: &str) -> App {
    let prefix = unique_prefix(test);
    let options = StoreOptions {
        key_prefix: prefix.clone(),
        ..StoreOptions::default()
    };
    let store = open_store(url, &options, Duration::from_secs(5))
        .await
        .unwrap();
    let config = AppConfig {
        key_space: KeySpace::new(url, &prefix, Duration::from_secs(5)),
        ..AppConfig::default()
    };
    App::new(store, config)
}

#[tokio::test]
async fn redis_lists_every_key_in_bounded_pages() {
    let redis = RedisServer::start();
    let server = start(redis_app(&redis.url(), "browse").await).await;
    browse_on(&server).await;
}

#[tokio::test]
async fn cluster_lists_every_key_of_every_master() {
    let cluster = RedisCluster::start_with(3, 0);
    let server = start(redis_app(&cluster.url(), "browse-cluster").await).await;
    browse_on(&server).await;
}

/// With a token: 401 (and `WWW-Authenticate: Bearer`) without it on every
/// admin operation, the operation with it.
#[tokio::test]
async fn admin_operations_need_the_token_when_one_is_set() {
    let server = start_memory(AppConfig {
        admin_token: Some("s3cret".into()),
        ..AppConfig::default()
    })
    .await;
    touch(&server, "k").await;
    for path in ["/v1/keys", "/v1/keys/k"] {
        for token in [None, Some("wrong")] {
            let mut request = client().get(server.url(path));
            if let Some(t) = token {
                request = request.bearer_auth(t);
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 401, "{path}");
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
        }
        let (status, _) = get(&server, path, Some("s3cret")).await;
        assert_eq!(status, 200, "{path}");
    }
    let reset = client().delete(server.url("/v1/keys/k"));
    assert_eq!(reset.send().await.unwrap().status(), 401);
    // Not admin operations: no token needed.
    let (status, _) = get(&server, "/openapi.json", None).await;
    assert_eq!(status, 200);
}

/// Without a token the router alone (no connection, so no loopback peer)
/// refuses admin operations with 403; served on loopback they answer.
#[tokio::test]
async fn without_a_token_only_loopback_callers_are_answered() {
    use tower::ServiceExt as _;
    let app = App::with_memory_store(
        std::sync::Arc::new(slidelog::store::MemoryStore::new()),
        AppConfig::default(),
    );
    let router = slidelog_server::http::router(app.clone(), 1024);
    for (method, path) in [
        ("GET", "/v1/keys"),
        ("GET", "/v1/keys/k"),
        ("DELETE", "/v1/keys/k"),
    ] {
        let request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .body(axum::body::Body::empty())
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), 403, "{method} {path}");
    }
    let server = start(app).await;
    let (status, _) = get(&server, "/v1/keys", None).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_check_decides_under_the_named_policy() {
    let server = start_memory(with_policies(false)).await;
    let http = client();
    let check = json!({"key": "p", "policy": "api-key", "cost": 1});
    for i in 0..3 {
        let r = post_json(&http, server.url("/v1/check"), &check).await;
        assert_eq!(r.status(), 200, "{i}");
    }
    let r = post_json(&http, server.url("/v1/check"), &check).await;
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["limit"], 3, "{body}");
    // Its state under the policy, as a peek reports it (one more would not fit).
    let (status, key) = get(&server, "/v1/keys/p?policy=api-key", None).await;
    assert_eq!(status, 200, "{key}");
    assert_eq!(key["state"]["allowed"], false, "{key}");
    assert_eq!(key["state"]["limits"][1]["count"], 3, "{key}");
    // A cost per limit by name; a settle names the policy its check was
    // decided under.
    let checked = json!({"key": "s", "policy": "api-key", "costs": {"tokens": 40}});
    let r = post_json(&http, server.url("/v1/check"), &checked).await;
    let decided: Value = r.json().await.unwrap();
    assert_eq!(decided["limits"][0]["count"], 1, "{decided}");
    assert_eq!(decided["limits"][1]["count"], 40, "{decided}");
    let receipt = decided["receipt"].clone();
    let settle =
        json!({"key": "s", "policy": "api-key", "costs": {"tokens": 10}, "receipt": receipt});
    let r = post_json(&http, server.url("/v1/settle"), &settle).await;
    let settled: Value = r.json().await.unwrap();
    assert_eq!(settled["settled"], true, "{settled}");
    assert_eq!(settled["limits"][1]["count"], 10, "{settled}");
    for body in [
        json!({"key": "s", "policy": "api-key", "costs": {"words": 1}}),
        json!({"key": "s", "max": 5, "window_ms": 1000, "costs": {"tokens": 1}}),
    ] {
        let r = post_json(&http, server.url("/v1/check"), &body).await;
        assert_eq!(r.status(), 400, "{body}");
        assert!(r.text().await.unwrap().contains("costs"), "{body}");
    }
    // Unknown policy; a policy and limits at once; client limits still allowed.
    let cases = [
        (json!({"key": "p", "policy": "nope"}), 400, "policy"),
        (
            json!({"key": "p", "policy": "login", "max": 5, "window_ms": 1000}),
            400,
            "limits",
        ),
        (json!({"key": "q", "max": 5, "window_ms": 1000}), 200, ""),
    ];
    for (body, status, field) in cases {
        let r = post_json(&http, server.url("/v1/check"), &body).await;
        assert_eq!(r.status(), status, "{body}");
        let text = r.text().await.unwrap();
        assert!(text.contains(field), "{body}: {text}");
    }
}

#[tokio::test]
async fn require_policy_refuses_client_chosen_limits() {
    let server = start_memory(with_policies(true)).await;
    let http = client();
    let cases = [
        (json!({"key": "p", "max": 5, "window_ms": 1000}), "max"),
        (
            json!({"key": "p", "limits": [{"max": 5, "window_ms": 1000}]}),
            "limits",
        ),
        (
            json!({"checks": [{"key": "p", "max": 5, "window_ms": 1000}]}),
            "limits",
        ),
    ];
    for path in ["/v1/check", "/v1/peek"] {
        for (body, field) in &cases {
            let r = post_json(&http, server.url(path), body).await;
            assert_eq!(r.status(), 400, "{path} {body}");
            let e: Value = r.json().await.unwrap();
            let message = e["error"].as_str().unwrap();
            assert!(
                message.starts_with(field) && message.contains("--require-policy"),
                "{message}"
            );
        }
    }
    let ok = json!({"key": "p", "policy": "login"});
    assert_eq!(
        post_json(&http, server.url("/v1/check"), &ok)
            .await
            .status(),
        200
    );
}

/// Every route of the table answers from its handler (not the fallback's
/// 404 or 405); unknown routes point at `/openapi.json`.
#[tokio::test]
async fn every_documented_route_is_routed_and_unknown_ones_point_at_the_document() {
    use slidelog_server::http::routes::ROUTES;
    let app = App::with_memory_store(
        std::sync::Arc::new(slidelog::store::MemoryStore::new()),
        AppConfig::default(),
    );
    let limiter = slidelog_server::envoy::limiter(
        &app,
        slidelog_envoy::ConfigHandle::fixed(slidelog_envoy::RateLimitConfig::empty()),
        slidelog_envoy::ServiceOptions::default(),
    );
    let server = common::start_router(app, slidelog_envoy::json::router(limiter)).await;
    let http = client();
    for route in ROUTES {
        let path = route.path.replace("{key}", "k");
        let method = reqwest::Method::from_bytes(route.method.as_bytes()).unwrap();
        let response = http
            .request(method, server.url(&path))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let fell_through = (status == 404 && text.contains("no such endpoint")) || status == 405;
        assert!(
            !fell_through,
            "{} {}: {status} {text}",
            route.method, route.path
        );
    }
    let (status, e) = get(&server, "/v2/nothing", None).await;
    assert_eq!(status, 404);
    assert!(
        e["error"].as_str().unwrap().contains("/openapi.json"),
        "{e}"
    );
    let (status, doc) = get(&server, "/openapi.json", None).await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
}

/// A policy's `on-store-error=fail-closed` answers 503 where the service's
/// fail-open would answer degraded; other policies keep the service's.
#[tokio::test]
async fn a_fail_closed_policy_refuses_a_degraded_answer() {
    let options = StoreOptions {
        lazy_connect: true,
        ..StoreOptions::default()
    };
    let dead = format!("redis://127.0.0.1:{}", slidelog_testkit::free_port());
    let store = open_store(&dead, &options, Duration::from_millis(200))
        .await
        .unwrap();
    let policies = "strict: 5/minute, on-store-error=fail-closed\nlenient: 5/minute\n";
    let config = AppConfig {
        store_timeout: Duration::from_millis(200),
        policies: Some(PolicyHandle::fixed(policies.parse().unwrap())),
        ..AppConfig::default()
    };
    let server = start(App::new(store, config)).await;
    let http = client();
    let strict = json!({"key": "k", "policy": "strict"});
    let r = post_json(&http, server.url("/v1/check"), &strict).await;
    assert_eq!(r.status(), 503);
    let lenient = json!({"key": "k", "policy": "lenient"});
    let r = post_json(&http, server.url("/v1/check"), &lenient).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["degraded"], true, "{body}");
}

/// This machine's address on the interface of its default route (a UDP
/// "connect" sends nothing; it only picks the route).
fn non_loopback_ip() -> std::net::IpAddr {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    socket
        .connect("192.0.2.1:9")
        .expect("this test needs a non-loopback IPv4 interface with a route");
    let ip = socket.local_addr().unwrap().ip();
    assert!(!ip.is_loopback(), "no non-loopback address: {ip}");
    ip
}

/// Over a real connection from a non-loopback address: without a token an
/// admin operation is 403 (a decision is not); with a token, the token decides.
#[tokio::test]
async fn a_caller_beyond_loopback_is_refused_without_a_token() {
    let ip = non_loopback_ip();
    for (token, expected) in [(None, 403), (Some("s3cret"), 200)] {
        let app = App::with_memory_store(
            std::sync::Arc::new(slidelog::store::MemoryStore::new()),
            AppConfig {
                admin_token: token.map(Into::into),
                ..AppConfig::default()
            },
        );
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (trigger, shutdown) = slidelog_server::shutdown::channel();
        let router = slidelog_server::http::service(app, 1 << 14, axum::Router::new());
        let task = tokio::spawn(slidelog_server::server::serve_http(
            listener,
            router,
            shutdown,
            Duration::from_secs(5),
        ));
        let http = client();
        let mut request = http.get(format!("http://{addr}/v1/keys"));
        if let Some(t) = token {
            request = request.bearer_auth(t);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), expected, "token {token:?}");
        if expected == 403 {
            let e: Value = response.json().await.unwrap();
            assert!(
                e["error"].as_str().unwrap().contains("--admin-token"),
                "{e}"
            );
        }
        let check = json!({"key": "k", "max": 1, "window_ms": 1000});
        let decided = post_json(&http, format!("http://{addr}/v1/check"), &check).await;
        assert_eq!(decided.status(), 200);
        trigger.trigger();
        task.await.unwrap().unwrap();
    }
}
