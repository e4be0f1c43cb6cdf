//! The rate limit layer on a real axum app served on a loopback port, driven
//! by a real HTTP client (reqwest), on the memory store: exact admissions
//! under concurrency, the RateLimit header fields on both paths, per-route
//! limits, every key extractor, the missing-key policy, and the store-error
//! policy with a store that really fails (a `redis-server`, killed).

mod common;

use axum::Router;
use axum::extract::Request;
use axum::routing::{get, post};
use common::{client, concurrent_gets, count, serve};
use slidelog::middleware::{
    Constant, Header, KeyExtractor, MissingKey, PeerIp, RateLimitLayer, Route, RouteLimits,
};
use slidelog::redis::{RedisOptions, RedisStore};
use slidelog::{Decision, Limit, Limiter};
use std::sync::Arc;

const MINUTE: u64 = 60_000;

fn per_minute(max: u64) -> [Limit; 1] {
    [Limit::new(max, MINUTE).expect("valid limit")]
}

/// A handler that tells whether the layer marked the request degraded.
async fn echo_degraded(request: Request) -> String {
    match request.extensions().get::<Decision>() {
        Some(d) if d.degraded => "degraded".to_owned(),
        Some(_) => "counted".to_owned(),
        None => "not limited".to_owned(),
    }
}

fn app_with<K: KeyExtractor>(layer: RateLimitLayer<K>) -> Router {
    Router::new()
        .route("/", get(echo_degraded))
        .route("/login", post(echo_degraded))
        .route("/users/{id}", get(echo_degraded))
        .route("/healthz", get(echo_degraded))
        .layer(layer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_max_of_64_concurrent_clients_are_admitted() {
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        Constant::new("global"),
        RouteLimits::new(per_minute(20)).unwrap(),
    );
    let base = serve(app_with(layer)).await;
    let codes = concurrent_gets(&format!("{base}/"), 64, &[]).await;
    assert_eq!(count(&codes, 200), 20, "{codes:?}");
    assert_eq!(count(&codes, 429), 44, "{codes:?}");
}

#[tokio::test]
async fn ratelimit_fields_on_success_and_retry_after_on_rejection() {
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        Header::named("x-api-key").unwrap(),
        RouteLimits::new(per_minute(2)).unwrap(),
    );
    let base = serve(app_with(layer)).await;
    let http = client();
    let get = || {
        http.get(format!("{base}/"))
            .header("x-api-key", "k1")
            .send()
    };

    let first = get().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["ratelimit-policy"], r#""default";q=2;w=60"#);
    assert_eq!(first.headers()["ratelimit"], r#""default";r=1;t=60"#);
    assert!(first.headers().get("retry-after").is_none());
    assert_eq!(first.text().await.unwrap(), "counted");

    assert_eq!(get().await.unwrap().status(), 200);
    let third = get().await.unwrap();
    assert_eq!(third.status(), 429);
    let retry: u64 = third.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(third.headers()["ratelimit-policy"], r#""default";q=2;w=60"#);
    assert_eq!(
        third.headers()["ratelimit"].to_str().unwrap(),
        format!(r#""default";r=0;t={retry}"#)
    );
    assert!(third.text().await.unwrap().contains("rate limit exceeded"));
}

#[tokio::test]
async fn each_route_has_its_own_limits_and_logs() {
    let routes = RouteLimits::new(per_minute(3))
        .unwrap()
        .route("/login", per_minute(1))
        .unwrap()
        .unlimited("/healthz");
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        Header::named("x-api-key").unwrap(),
        routes,
    );
    let base = serve(app_with(layer)).await;
    let http = client();
    let login = || {
        http.post(format!("{base}/login"))
            .header("x-api-key", "k")
            .send()
    };
    assert_eq!(login().await.unwrap().status(), 200);
    assert_eq!(login().await.unwrap().status(), 429);

    // The default route still has all 3 for the same key.
    let codes = concurrent_gets(&format!("{base}/"), 5, &[("x-api-key", "k")]).await;
    assert_eq!(
        (count(&codes, 200), count(&codes, 429)),
        (3, 2),
        "{codes:?}"
    );

    // Unlimited: never counted, no RateLimit fields.
    for _ in 0..10 {
        let r = http.get(format!("{base}/healthz")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("ratelimit").is_none());
        assert_eq!(r.text().await.unwrap(), "not limited");
    }
}

#[tokio::test]
async fn header_keys_are_counted_apart_and_a_missing_key_is_a_400_or_passes() {
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        Header::named("x-api-key").unwrap(),
        RouteLimits::new(per_minute(1)).unwrap(),
    );
    let base = serve(app_with(layer.clone())).await;
    let http = client();
    for key in ["a", "b"] {
        let send = || http.get(format!("{base}/")).header("x-api-key", key).send();
        assert_eq!(send().await.unwrap().status(), 200, "{key}");
        assert_eq!(send().await.unwrap().status(), 429, "{key}");
    }
    let missing = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(missing.status(), 400);
    assert!(missing.text().await.unwrap().contains("cannot identify"));

    let passing = serve(app_with(layer.on_missing_key(MissingKey::PassThrough))).await;
    for _ in 0..3 {
        let r = http.get(format!("{passing}/")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.text().await.unwrap(), "not limited");
    }
    // An over-long key is refused even under pass-through: it cannot be
    // used to escape the limit.
    let long = "k".repeat(600);
    let r = http
        .get(format!("{passing}/"))
        .header("x-api-key", long)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("512"));
}

#[tokio::test]
async fn peer_ip_keys_by_the_connection_and_by_forwarded_for_behind_trusted_proxies() {
    let direct = RateLimitLayer::new(
        Limiter::memory(),
        PeerIp::new(),
        RouteLimits::new(per_minute(2)).unwrap(),
    );
    let base = serve(app_with(direct)).await;
    let http = client();
    // A forged X-Forwarded-For does not give a fresh key.
    for (i, forged) in ["1.1.1.1", "2.2.2.2", "3.3.3.3"].iter().enumerate() {
        let r = http
            .get(format!("{base}/"))
            .header("x-forwarded-for", *forged)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), if i < 2 { 200 } else { 429 });
    }

    // Behind a trusted proxy (the test client is on 127.0.0.1), each
    // forwarded client has its own log.
    let behind = RateLimitLayer::new(
        Limiter::memory(),
        PeerIp::new().trust_proxies(["127.0.0.1".parse().unwrap()]),
        RouteLimits::new(per_minute(1)).unwrap(),
    );
    let base = serve(app_with(behind)).await;
    for client_ip in ["198.51.100.1", "198.51.100.2"] {
        let send = || {
            http.get(format!("{base}/"))
                .header("x-forwarded-for", client_ip)
                .send()
        };
        assert_eq!(send().await.unwrap().status(), 200, "{client_ip}");
        assert_eq!(send().await.unwrap().status(), 429, "{client_ip}");
    }
}

#[tokio::test]
async fn route_keys_share_one_log_per_matched_route() {
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        Route,
        RouteLimits::new(per_minute(2)).unwrap(),
    );
    let base = serve(app_with(layer)).await;
    let http = client();
    // /users/1 and /users/2 are one route, `GET /users/{id}`.
    let codes = [
        http.get(format!("{base}/users/1"))
            .send()
            .await
            .unwrap()
            .status(),
        http.get(format!("{base}/users/2"))
            .send()
            .await
            .unwrap()
            .status(),
        http.get(format!("{base}/users/3"))
            .send()
            .await
            .unwrap()
            .status(),
    ];
    assert_eq!(codes.map(|c| c.as_u16()), [200, 200, 429]);
    // Another route has its own log.
    assert_eq!(
        http.get(format!("{base}/")).send().await.unwrap().status(),
        200
    );
}

#[tokio::test]
async fn a_closure_extracts_the_key() {
    let by_tenant = |parts: &http::request::Parts| {
        parts
            .uri
            .query()?
            .split('&')
            .find_map(|kv| kv.strip_prefix("tenant="))
            .map(str::to_owned)
    };
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        by_tenant,
        RouteLimits::new(per_minute(1)).unwrap(),
    );
    let base = serve(app_with(layer)).await;
    let http = client();
    let status = |q: &'static str| {
        let http = http.clone();
        let url = format!("{base}/?{q}");
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("tenant=acme").await, 200);
    assert_eq!(status("tenant=acme").await, 429);
    assert_eq!(status("tenant=globex").await, 200);
    assert_eq!(status("other=1").await, 400);
}

/// A memory store with room for one key: a second key makes it fail with
/// `StoreError::Full`, a real store error.
/// A Redis store on `redis`, with keys of its own.
async fn redis_store(redis: &slidelog_testkit::RedisServer, test: &str) -> Arc<RedisStore> {
    let options = RedisOptions::default().with_prefix(slidelog_testkit::unique_prefix(test));
    Arc::new(RedisStore::connect(&redis.url(), options).await.unwrap())
}

#[tokio::test]
async fn store_errors_pass_through_degraded_when_fail_open_and_503_when_fail_closed() {
    let routes = RouteLimits::new(per_minute(1)).unwrap();
    let header = Header::named("x-api-key").unwrap();
    // A real Redis, killed once the first key is decided: a store outage.
    let mut redis = slidelog_testkit::RedisServer::start();
    let open = Limiter::builder()
        .fail_open()
        .build(redis_store(&redis, "layer-open").await);
    let closed = Limiter::builder()
        .fail_closed()
        .build(redis_store(&redis, "layer-closed").await);
    let open_base = serve(app_with(RateLimitLayer::new(
        open,
        header.clone(),
        routes.clone(),
    )))
    .await;
    let closed_base = serve(app_with(RateLimitLayer::new(closed, header, routes))).await;
    let http = client();
    let send = |base: &str, key: &str| http.get(format!("{base}/")).header("x-api-key", key).send();

    // The first key fits: counted, and exact.
    for base in [&open_base, &closed_base] {
        let r = send(base, "first").await.unwrap();
        assert_eq!(r.text().await.unwrap(), "counted");
        assert_eq!(send(base, "first").await.unwrap().status(), 429);
    }
    // The store goes away: every key hits the store error.
    redis.kill();
    for _ in 0..3 {
        let r = send(&open_base, "second").await.unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("ratelimit").is_none());
        assert_eq!(r.headers()["ratelimit-policy"], r#""default";q=1;w=60"#);
        assert_eq!(r.text().await.unwrap(), "degraded");
        let r = send(&closed_base, "second").await.unwrap();
        assert_eq!(r.status(), 503);
        assert!(r.text().await.unwrap().contains("store"));
    }
}
