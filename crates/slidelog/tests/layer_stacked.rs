//! Two rate limit layers stacked on one route cannot charge each other: an
//! API-key layer (100 a minute) and an IP layer (20 a minute), 30 requests
//! from one client with one key. The bug: with the API-key layer outermost,
//! 20 were served and the key's log held 30 (each request the IP layer
//! refused had been counted first), and both layers' fields were named
//! "default", the outer one's replacing the inner one's. Now a layer
//! refunds a request a layer inside it refused: the key's log holds the 20
//! served, in either order, and the fields list both layers' limits under
//! distinct names. Served by axum on a loopback port with a real HTTP
//! client, on the memory store and on a real Redis.

mod common;

use axum::Router;
use axum::routing::get;
use common::{client, concurrent_gets, count, serve};
use slidelog::middleware::{Header, PeerIp};
use slidelog::{Limiter, Mode, RateLimitLayer, Request, limit::parse_list};

/// Units live in the log `key` under `limits` (a peek, which records nothing).
async fn live(limiter: &Limiter, key: &str, limits: &str) -> u64 {
    let request = Request::new(key, parse_list(limits).unwrap(), 1).unwrap();
    let d = limiter.decide_each(&request, Mode::Peek).await.unwrap();
    // A peek reports its count as if admitted; a refused one, as it is.
    d.decision.count - u64::from(d.decision.allowed)
}

/// The route behind both layers, the API-key layer outermost when
/// `key_outside`; returns the app and the API key `k`'s log.
fn stacked(limiter: &Limiter, key_outside: bool) -> (Router, String) {
    let by_key = RateLimitLayer::new(
        limiter.clone(),
        Header::named("x-api-key").unwrap(),
        "100/minute".parse().unwrap(),
    );
    let by_ip = RateLimitLayer::new(limiter.clone(), PeerIp::new(), "20/minute".parse().unwrap());
    let key_log = format!("{}:default:k", by_key.namespace());
    let route = Router::new().route("/", get(|| async { "served" }));
    // axum: the layer added last is the outermost.
    let app = if key_outside {
        route.layer(by_ip).layer(by_key)
    } else {
        route.layer(by_key).layer(by_ip)
    };
    (app, key_log)
}

/// The experiment, in one order: 20 served, 20 in the key's log, both
/// layers' limits listed under their own names.
async fn thirty_requests(limiter: Limiter, key_outside: bool) {
    let (app, key_log) = stacked(&limiter, key_outside);
    let base = serve(app).await;
    let http = client();
    let mut served = 0;
    for n in 0..30 {
        let r = http
            .get(format!("{base}/"))
            .header("x-api-key", "k")
            .send()
            .await
            .unwrap();
        let h = r.headers();
        let policy = h["ratelimit-policy"].to_str().unwrap().to_owned();
        if n > 0 || !key_outside {
            // Once the layers have met (the first request through both).
            assert!(!policy.contains("default"), "{policy}");
            assert!(policy.contains(r#""ip";q=20;w=60"#), "{policy}");
        }
        if r.status() == 200 {
            served += 1;
            assert!(
                policy.contains(r#""header-x-api-key";q=100;w=60"#),
                "{policy}"
            );
            let ratelimit = h["ratelimit"].to_str().unwrap();
            assert!(
                ratelimit.contains(r#""header-x-api-key";r="#),
                "{ratelimit}"
            );
            assert!(ratelimit.contains(r#""ip";r="#), "{ratelimit}");
        } else {
            assert_eq!(r.status(), 429);
            assert!(h.contains_key("retry-after"));
            let ratelimit = h["ratelimit"].to_str().unwrap();
            assert!(ratelimit.starts_with(r#""ip";r=0;"#), "{ratelimit}");
        }
    }
    assert_eq!(served, 20, "key outside: {key_outside}");
    assert_eq!(
        live(&limiter, &key_log, "100/minute").await,
        20,
        "key outside: {key_outside}"
    );
}

/// The same with 60 clients at once: exactly 20 served, 20 in the key's log.
async fn sixty_at_once(limiter: Limiter, key_outside: bool) {
    let (app, key_log) = stacked(&limiter, key_outside);
    let base = serve(app).await;
    let codes = concurrent_gets(&format!("{base}/"), 60, &[("x-api-key", "k")]).await;
    assert_eq!(
        count(&codes, 200),
        20,
        "key outside: {key_outside}: {codes:?}"
    );
    assert_eq!(live(&limiter, &key_log, "100/minute").await, 20);
}

#[tokio::test]
async fn memory_api_key_layer_outermost() {
    thirty_requests(Limiter::memory(), true).await;
}

#[tokio::test]
async fn memory_ip_layer_outermost() {
    thirty_requests(Limiter::memory(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_sixty_at_once_in_either_order() {
    for key_outside in [true, false] {
        sixty_at_once(Limiter::memory(), key_outside).await;
    }
}

/// A limiter on `redis`, with keys of its own.
async fn redis_limiter(redis: &slidelog_testkit::RedisServer, test: &str) -> Limiter {
    let prefix = slidelog_testkit::unique_prefix(test);
    let options = slidelog::url::StoreOptions::default().prefix(prefix);
    Limiter::builder()
        .fail_closed()
        .open(&redis.url(), options)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_either_order_leaves_the_served_requests_in_the_keys_log() {
    let redis = slidelog_testkit::RedisServer::start();
    for key_outside in [true, false] {
        thirty_requests(redis_limiter(&redis, "stacked_seq").await, key_outside).await;
        sixty_at_once(redis_limiter(&redis, "stacked_conc").await, key_outside).await;
    }
}
