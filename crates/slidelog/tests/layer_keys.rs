//! One layer, several keyed limits, one decision (docs/design.md §1): "100
//! a minute per API key and 20 a minute per IP" is one `RateLimitLayer`
//! with two keys, decided by one `Limiter::decide_all`. A request the IP
//! limit refuses records nothing in the API key's log; the RateLimit fields
//! list both limits by key name; under many concurrent clients exactly the
//! tightest limit is admitted and every log holds exactly the admissions.
//! Served by axum on a loopback port, driven by a real HTTP client; the
//! store-generic cases run on the memory store and on a real Redis.

mod common;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use common::{client, concurrent_gets, count, serve};
use slidelog::middleware::{Header, MissingKey, PeerIp, RouteLimits};
use slidelog::{Limiter, Mode, RateLimitLayer, Request, limit::parse_list};

/// Units live in the log `key` under `limits` (a peek, which records nothing).
async fn live(limiter: &Limiter, key: &str, limits: &str) -> u64 {
    let request = Request::new(key, parse_list(limits).unwrap(), 1).unwrap();
    let d = limiter.decide_each(&request, Mode::Peek).await.unwrap();
    // A peek reports its count as if admitted; a refused one, as it is.
    d.decision.count - u64::from(d.decision.allowed)
}

/// The app: `/` behind the API key (`key_limits`) and IP (`ip_limits`)
/// limits of one layer, `/fail` answering 500 (refunded in both keys),
/// `/healthz` not limited per IP. Returns the app and the logs' names for
/// the API key `k` and the client 127.0.0.1.
fn app(limiter: &Limiter, key_limits: &str, ip_limits: &str) -> (Router, String, String) {
    let ip_routes: RouteLimits = ip_limits.parse().unwrap();
    let layer = RateLimitLayer::new(
        limiter.clone(),
        Header::named("x-api-key").unwrap(),
        key_limits.parse().unwrap(),
    )
    .key_name("api-key")
    .unwrap()
    .key("ip", PeerIp::new(), ip_routes.unlimited("/healthz"))
    .unwrap()
    .refund_on(|status| status.is_server_error());
    let ns = layer.namespace().to_owned();
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .route("/fail", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
        .route("/healthz", get(|| async { "ok" }))
        .layer(layer);
    let key_log = format!("{ns}:default:k");
    let ip_log = format!("{ns}+ip:default:127.0.0.1");
    (app, key_log, ip_log)
}

/// 30 requests, the IP allows 20: 20 served, and the key's log holds 20,
/// not 30; the fields list both limits by name; `Retry-After` is the IP's.
async fn ip_refusals_record_nothing_in_the_keys_log(limiter: Limiter) {
    let (app, key_log, ip_log) = app(&limiter, "100/minute", "20/minute");
    let base = serve(app).await;
    let http = client();
    let get = |path: &str, key: &str| {
        http.get(format!("{base}{path}"))
            .header("x-api-key", key)
            .send()
    };
    let first = get("/", "k").await.unwrap();
    assert_eq!(first.status(), 200);
    let h = first.headers();
    assert_eq!(
        h["ratelimit-policy"],
        r#""api-key";q=100;w=60, "ip";q=20;w=60"#
    );
    // The deciding key first: the IP has the least left, relatively.
    assert_eq!(h["ratelimit"], r#""ip";r=19;t=60, "api-key";r=99;t=60"#);
    let mut served = 1;
    for _ in 1..30 {
        let r = get("/", "k").await.unwrap();
        if r.status() == 200 {
            served += 1;
            continue;
        }
        assert_eq!(r.status(), 429);
        let h = r.headers();
        assert!(h["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 59);
        let ratelimit = h["ratelimit"].to_str().unwrap();
        assert!(ratelimit.starts_with(r#""ip";r=0;t="#), "{ratelimit}");
        // A key that would admit reports its counts as if admitted (a
        // peek's: the joint decision's), though nothing was recorded; a
        // refusal answered by the rejection cache (a remote store) did not
        // evaluate it, and lists no count for it (docs/design.md §1).
        let evaluated = ratelimit.contains(r#""api-key";r=79;"#);
        let cached = limiter.rejection_cache().is_some() && !ratelimit.contains("api-key");
        assert!(evaluated || cached, "{ratelimit}");
        assert!(r.text().await.unwrap().contains("ip: 20 per 60000 ms"));
    }
    assert_eq!(served, 20);
    assert_eq!(live(&limiter, &key_log, "100/minute").await, 20);
    assert_eq!(live(&limiter, &ip_log, "20/minute").await, 20);
    // Another key from the full IP: refused, and not recorded in its log.
    assert_eq!(get("/", "other").await.unwrap().status(), 429);
    let other = key_log.replace(":k", ":other");
    assert_eq!(live(&limiter, &other, "100/minute").await, 0);
    // A route the IP does not limit: the key alone decides and is listed.
    let r = get("/healthz", "k").await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["ratelimit-policy"], r#""api-key";q=100;w=60"#);
    assert_eq!(live(&limiter, &key_log, "100/minute").await, 21);
}

/// Many clients at once: exactly the tightest limit is admitted, 0 beyond
/// it, and no refused request is recorded in either log.
async fn exact_under_concurrency(limiter: Limiter) {
    for (key_limits, ip_limits, want) in [
        ("100/minute", "25/minute", 25),
        ("15/minute", "100/minute", 15),
    ] {
        let (app, key_log, ip_log) = app(&limiter, key_limits, ip_limits);
        let base = serve(app).await;
        let codes = concurrent_gets(&format!("{base}/"), 60, &[("x-api-key", "k")]).await;
        assert_eq!(
            count(&codes, 200),
            want,
            "{key_limits} + {ip_limits}: {codes:?}"
        );
        assert_eq!(count(&codes, 429), 60 - want);
        assert_eq!(live(&limiter, &key_log, key_limits).await, want as u64);
        assert_eq!(live(&limiter, &ip_log, ip_limits).await, want as u64);
    }
}

#[tokio::test]
async fn memory_ip_refusals_record_nothing_in_the_keys_log() {
    ip_refusals_record_nothing_in_the_keys_log(Limiter::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_exact_under_concurrency() {
    exact_under_concurrency(Limiter::memory()).await;
}

/// A limiter on a Redis of this test's own, with keys of its own.
async fn redis_limiter(redis: &slidelog_testkit::RedisServer, test: &str) -> Limiter {
    let prefix = slidelog_testkit::unique_prefix(test);
    let options = slidelog::url::StoreOptions::default().prefix(prefix);
    Limiter::builder()
        .fail_closed()
        .open(&redis.url(), options)
        .await
        .unwrap()
}

/// The same cases on a real Redis: fail-closed, so a store that cannot
/// decide several keys answers 503 and fails the test rather than pass
/// requests degraded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_several_keys_decide_as_one() {
    let redis = slidelog_testkit::RedisServer::start();
    ip_refusals_record_nothing_in_the_keys_log(redis_limiter(&redis, "keys_ip").await).await;
    exact_under_concurrency(redis_limiter(&redis, "keys_exact").await).await;
}

#[tokio::test]
async fn a_5xx_is_refunded_in_every_key() {
    let limiter = Limiter::memory();
    let (app, key_log, ip_log) = app(&limiter, "100/minute", "20/minute");
    let base = serve(app).await;
    let http = client();
    for _ in 0..3 {
        let r = http.get(format!("{base}/fail")).header("x-api-key", "k");
        assert_eq!(r.send().await.unwrap().status(), 500);
    }
    assert_eq!(live(&limiter, &key_log, "100/minute").await, 0);
    assert_eq!(live(&limiter, &ip_log, "20/minute").await, 0);
}

#[tokio::test]
async fn a_missing_key_is_refused_by_name_or_left_out_when_passed_through() {
    let limiter = Limiter::memory();
    let (app, _, ip_log) = app(&limiter, "100/minute", "20/minute");
    let base = serve(app).await;
    let r = client().get(format!("{base}/")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("no api-key key"));
    assert_eq!(live(&limiter, &ip_log, "20/minute").await, 0);
    // Passed through: the request is decided on the keys it has.
    let layer = RateLimitLayer::new(
        limiter.clone(),
        Header::named("x-api-key").unwrap(),
        "requests=100/minute".parse().unwrap(),
    )
    .key("ip", PeerIp::new(), "1/minute".parse().unwrap())
    .unwrap()
    .on_missing_key(MissingKey::PassThrough);
    let base = serve(
        Router::new()
            .route("/", get(|| async { "served" }))
            .layer(layer),
    )
    .await;
    let anonymous = || client().get(format!("{base}/")).send();
    let r = anonymous().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["ratelimit-policy"],
        r#""ip";q=1;w=60"#,
        "only the key the request has"
    );
    assert_eq!(anonymous().await.unwrap().status(), 429);
    // With the API key, its named limit is listed under the first key's
    // derived name, and the full IP still refuses.
    let r = client()
        .get(format!("{base}/"))
        .header("x-api-key", "k")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.headers()["ratelimit-policy"],
        r#""header-x-api-key.requests";q=100;w=60, "ip";q=1;w=60"#
    );
}
