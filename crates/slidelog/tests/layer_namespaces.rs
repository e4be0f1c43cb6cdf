//! Each layer counts in its own key namespace: two layers on one limiter,
//! whose extractors produce the same key value, never touch each other's
//! logs (the bug: an `x-api-key: 127.0.0.1` search trimmed the upload log of
//! the client 127.0.0.1, and its next upload went from 429 to 200). Served by
//! axum on a loopback port, driven by a real HTTP client.

mod common;

use axum::Router;
use axum::routing::{get, post};
use common::{client, serve};
use slidelog::middleware::{Header, PeerIp};
use slidelog::{Limiter, RateLimitLayer};

/// `/search` per API key, `/upload` per client IP, on one limiter.
fn two_layers(limiter: &Limiter, search: &str, upload: &str) -> Router {
    let key = Header::named("x-api-key").unwrap();
    let per_key = RateLimitLayer::new(limiter.clone(), key, search.parse().unwrap());
    let per_ip = RateLimitLayer::new(limiter.clone(), PeerIp::new(), upload.parse().unwrap());
    Router::new()
        .route("/search", get(|| async { "results" }).layer(per_key))
        .route("/upload", post(|| async { "stored" }).layer(per_ip))
}

#[tokio::test]
async fn a_search_key_equal_to_a_client_ip_leaves_that_ips_uploads_alone() {
    let limiter = Limiter::memory();
    let base = serve(two_layers(&limiter, "100/minute", "1/minute")).await;
    let http = client();
    let upload = || http.post(format!("{base}/upload")).send();
    assert_eq!(upload().await.unwrap().status(), 200);
    assert_eq!(upload().await.unwrap().status(), 429);
    // Searches whose API key is the client's own IP, the colliding value.
    for left in (95..100).rev() {
        let r = http
            .get(format!("{base}/search"))
            .header("x-api-key", "127.0.0.1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert_eq!(ratelimit, format!("\"default\";r={left};t=60"));
    }
    // The upload log of 127.0.0.1 still holds its one record: still 429.
    assert_eq!(upload().await.unwrap().status(), 429);
}

#[tokio::test]
async fn two_layers_with_the_same_extractor_and_limit_count_apart_unless_named_alike() {
    let limiter = Limiter::memory();
    let ip = || PeerIp::new();
    let a = RateLimitLayer::new(limiter.clone(), ip(), "2/minute".parse().unwrap());
    let b = RateLimitLayer::new(limiter.clone(), ip(), "2/minute".parse().unwrap());
    assert!(a.namespace().starts_with("auto-ip-"), "{}", a.namespace());
    assert_eq!(b.namespace(), format!("{}-2", a.namespace()));
    // Two layers given one name share a budget, on purpose.
    let shared = || {
        RateLimitLayer::new(limiter.clone(), ip(), "2/minute".parse().unwrap())
            .name("writes")
            .unwrap()
    };
    let app = Router::new()
        .route("/a", get(|| async { "a" }).layer(a))
        .route("/b", get(|| async { "b" }).layer(b))
        .route("/c", get(|| async { "c" }).layer(shared()))
        .route("/d", get(|| async { "d" }).layer(shared()));
    let base = serve(app).await;
    let http = client();
    let status = |path: &'static str| {
        let request = http.get(format!("{base}{path}"));
        async move { request.send().await.unwrap().status().as_u16() }
    };
    // Independent: each route admits its own 2.
    for path in ["/a", "/a", "/b", "/b"] {
        assert_eq!(status(path).await, 200, "{path}");
    }
    assert_eq!((status("/a").await, status("/b").await), (429, 429));
    // Shared: 2 between them.
    assert_eq!((status("/c").await, status("/d").await), (200, 200));
    assert_eq!((status("/c").await, status("/d").await), (429, 429));
}

#[test]
fn a_name_must_fit_in_a_key() {
    let layer = || RateLimitLayer::new(Limiter::memory(), PeerIp::new(), "1/s".parse().unwrap());
    assert!(layer().name("").is_err());
    assert!(layer().name("a:b").is_err());
    assert!(layer().name(&"n".repeat(65)).is_err());
    let err = layer().name("a:b").unwrap_err().to_string();
    assert!(err.contains("1 to 64 bytes without ':'"), "{err}");
    assert_eq!(layer().name("search").unwrap().namespace(), "search");
}

/// Two limiters (two services) on one Redis, each with an unnamed
/// layer keyed by IP, `/a` at 10 a second and `/b` at 5 a minute. Both were
/// `auto-ip`: after 6 hits on `/a`, `/b` answered 429 on its first call.
/// Now they count apart, unless given the same explicit name.
#[tokio::test]
async fn two_limiters_on_one_redis_share_counts_only_under_one_explicit_name() {
    let redis = slidelog_testkit::RedisServer::start();
    let prefix = slidelog_testkit::unique_prefix("layer_ns_two_limiters");
    let open = || async {
        let options = slidelog::url::StoreOptions::default().prefix(prefix.clone());
        Limiter::builder()
            .open(&redis.url(), options)
            .await
            .unwrap()
    };
    let (first, second) = (open().await, open().await);
    let a = RateLimitLayer::new(first.clone(), PeerIp::new(), "10/second".parse().unwrap());
    let b = RateLimitLayer::new(second.clone(), PeerIp::new(), "5/minute".parse().unwrap());
    assert_ne!(a.namespace(), b.namespace());
    let named = |limiter: &Limiter, limits: &str| {
        RateLimitLayer::new(limiter.clone(), PeerIp::new(), limits.parse().unwrap())
            .name("shared")
            .unwrap()
    };
    let base_a = serve(
        Router::new()
            .route("/a", get(|| async { "a" }).layer(a))
            .route("/c", get(|| async { "c" }).layer(named(&first, "5/minute"))),
    )
    .await;
    let base_b = serve(
        Router::new()
            .route("/b", get(|| async { "b" }).layer(b))
            .route(
                "/d",
                get(|| async { "d" }).layer(named(&second, "5/minute")),
            ),
    )
    .await;
    let http = client();
    let status = |url: String| {
        let request = http.get(url);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    for _ in 0..6 {
        assert_eq!(status(format!("{base_a}/a")).await, 200);
    }
    assert_eq!(status(format!("{base_b}/b")).await, 200, "counted apart");
    // Named alike: one budget of 5 across both services.
    for _ in 0..5 {
        assert_eq!(status(format!("{base_a}/c")).await, 200);
    }
    assert_eq!(status(format!("{base_b}/d")).await, 429, "shared by name");
}
