//! A cost per request in the layer: from the head, per limit (by position,
//! its length checked when the layer is built), and from a bounded body;
//! what a cost no limit admits gets (413 with the reason, never a 500 or a
//! panic); the rejection hook (a JSON 429 that keeps the RateLimit
//! fields) and the degraded-decision hook. Served by axum on loopback,
//! driven by a real HTTP client.

mod common;

use axum::Router;
use axum::routing::post;
use common::{client, serve};
use slidelog::limit::parse_list;
use slidelog::middleware::{Constant, CostListError, Header, RouteLimits};
use slidelog::{Bounds, Limiter, RateLimitLayer};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The body back: proves the inner service got it whole after it was read.
async fn echo(body: String) -> String {
    body
}

/// `x-units` as the cost (1 when absent).
fn units(parts: &http::request::Parts) -> u64 {
    let v = parts
        .headers
        .get("x-units")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    v.unwrap_or(1)
}

async fn post_units(base: &str, n: &str) -> reqwest::Response {
    let http = client();
    let request = http.post(format!("{base}/")).header("x-user", "ada");
    request.header("x-units", n).send().await.unwrap()
}

#[tokio::test]
async fn a_head_cost_is_charged_and_a_cost_above_the_max_is_413_with_the_reason() {
    let user = Header::named("x-user").unwrap();
    let layer =
        RateLimitLayer::new(Limiter::memory(), user, "10/minute".parse().unwrap()).cost(units);
    let base = serve(Router::new().route("/", post(echo).layer(layer))).await;
    let r = post_units(&base, "7").await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["ratelimit"], "\"default\";r=3;t=60");
    // 4 more would pass 10: 429, with how long to wait.
    let r = post_units(&base, "4").await;
    assert_eq!(r.status(), 429);
    assert!(r.headers().contains_key("retry-after"));
    // 11 can never pass a limit of 10: 413, and the reason names the bound.
    let r = post_units(&base, "11").await;
    assert_eq!(r.status(), 413);
    assert_eq!(r.headers()["ratelimit-policy"], "\"default\";q=10;w=60");
    let text = r.text().await.unwrap();
    assert!(text.contains("cost must be between 1 and 10"), "{text}");
    // A cost of 0 charges nothing (it once was a 400 for the client):
    // the request is served, uncounted, even while the limit is full.
    let r = post_units(&base, "0").await;
    assert_eq!(r.status(), 200);
    assert!(
        !r.headers().contains_key("ratelimit"),
        "no decision was made"
    );
    // Three still fit.
    assert_eq!(post_units(&base, "3").await.status(), 200);
}

#[tokio::test]
async fn per_limit_costs_charge_each_limit_its_own_units() {
    // 3 requests and 100 tokens per minute; each request 1 request and x-units tokens.
    let routes = "3/minute, 100/minute".parse().unwrap();
    let layer = RateLimitLayer::new(Limiter::memory(), Constant::new("all"), routes)
        .cost_by_position(|parts| [1, units(parts)])
        .unwrap();
    let base = serve(Router::new().route("/", post(echo).layer(layer))).await;
    assert_eq!(post_units(&base, "60").await.status(), 200);
    // 0 tokens: charged 1 request only, decided on the request limit.
    let r = post_units(&base, "0").await;
    assert_eq!(r.status(), 200);
    // Every limit is listed, the deciding one first.
    assert_eq!(
        r.headers()["ratelimit"],
        "\"3per60000ms\";r=1;t=60, \"100per60000ms\";r=40;t=60"
    );
    // 60 + 50 tokens is over 100: refused by the token limit.
    let r = post_units(&base, "50").await;
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.headers()["ratelimit"],
        "\"100per60000ms\";r=40;t=60, \"3per60000ms\";r=1;t=60"
    );
    assert_eq!(post_units(&base, "40").await.status(), 200);
    // 101 tokens can never be admitted.
    let r = post_units(&base, "101").await;
    assert_eq!(r.status(), 413);
    assert!(r.text().await.unwrap().contains("limits[1].cost"));
}

#[test]
fn a_cost_list_by_position_of_the_wrong_length_fails_when_the_layer_is_built() {
    // `[1, n]` against limits that are not two was only found per
    // request (500). Every limited route is checked, the default too.
    let routes = || {
        RouteLimits::new(parse_list("60/minute, 20000/minute").unwrap())
            .unwrap()
            .route("/batch", parse_list("10/minute").unwrap())
            .unwrap()
            .unlimited("/healthz")
    };
    let layer = || RateLimitLayer::new(Limiter::memory(), Constant::new("all"), routes());
    let e = layer().cost_by_position(|_| [1, 2]).unwrap_err();
    assert_eq!(
        e,
        CostListError::Length {
            got: 2,
            want: 1,
            route: "/batch".into(),
            limits: "\"default\";q=10;w=60".into(),
        }
    );
    assert_eq!(
        e.to_string(),
        "cost list: 2 costs by position, but route \"/batch\" has 1 limits (\"default\";q=10;w=60); return one cost per limit, in their order, or give costs by name"
    );
    let e = layer().cost_by_position(|_| [1]).unwrap_err();
    assert!(
        matches!(&e, CostListError::Length { got: 1, want: 2, route, .. } if route == "default")
    );
    let e = layer()
        .body_cost_by_position(64, |_, _| [1, 2, 3])
        .unwrap_err();
    assert!(matches!(e, CostListError::Length { got: 3, .. }));
    assert_eq!(
        layer().cost_by_position(|_| []).unwrap_err(),
        CostListError::Count { got: 0 }
    );
    assert_eq!(
        layer().cost_by_position(|_| [1; 17]).unwrap_err(),
        CostListError::Count { got: 17 }
    );
    // Only the unlimited route and one two-limit default: [1, n] fits.
    let two = RouteLimits::new(parse_list("60/minute, 20000/minute").unwrap())
        .unwrap()
        .unlimited("/healthz");
    let fits = RateLimitLayer::new(Limiter::memory(), Constant::new("all"), two);
    assert!(fits.cost_by_position(|_| [1, 400]).is_ok());
}

#[tokio::test]
async fn a_body_cost_by_position_charges_each_limit_its_own_units() {
    // 2 requests and 10 words per minute; each request 1 request and its words.
    let words = |_: &_, body: &[u8]| [1, body.split(u8::is_ascii_whitespace).count() as u64];
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        Header::named("x-user").unwrap(),
        "requests=2/minute, words=10/minute".parse().unwrap(),
    )
    .body_cost_by_position(64, words)
    .unwrap();
    let base = serve(Router::new().route("/", post(echo).layer(layer))).await;
    let http = client();
    let send = |body: &'static str| {
        let request = http.post(format!("{base}/")).header("x-user", "ada");
        request.body(body).send()
    };
    let r = send("one two three four five six").await.unwrap();
    assert_eq!(r.status(), 200);
    // Both limits, the one with the least left first.
    assert_eq!(
        r.headers()["ratelimit"],
        "\"requests\";r=1;t=60, \"words\";r=4;t=60"
    );
    assert_eq!(r.text().await.unwrap(), "one two three four five six");
    // 5 more words would pass 10: refused by the word limit.
    let r = send("a b c d e").await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()["ratelimit"]
            .to_str()
            .unwrap()
            .starts_with("\"words\";r=4")
    );
    assert_eq!(send("a b c d").await.unwrap().status(), 200);
    // The request limit is full now (2 of 2).
    let r = send("a").await.unwrap();
    assert_eq!(r.status(), 429);
    assert!(
        r.headers()["ratelimit"]
            .to_str()
            .unwrap()
            .starts_with("\"requests\";r=0")
    );
}

#[tokio::test]
async fn a_body_cost_reads_a_bounded_body_and_hands_it_on_whole() {
    let words = |_: &_, body: &[u8]| body.split(u8::is_ascii_whitespace).count() as u64;
    let user = Header::named("x-user").unwrap();
    let layer = RateLimitLayer::new(Limiter::memory(), user, "10/minute".parse().unwrap())
        .body_cost(64, words);
    let base = serve(Router::new().route("/", post(echo).layer(layer))).await;
    let http = client();
    let send = |body: &'static str| {
        let request = http.post(format!("{base}/")).header("x-user", "ada");
        request.body(body).send()
    };
    let r = send("one two three four five six").await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["ratelimit"], "\"default\";r=4;t=60");
    assert_eq!(r.text().await.unwrap(), "one two three four five six");
    assert_eq!(send("a b c d e").await.unwrap().status(), 429);
    // Over the limit's max: 413 (11 words); over the read bound: 413 too.
    let r = send("1 2 3 4 5 6 7 8 9 10 11").await.unwrap();
    assert_eq!(r.status(), 413);
    let long = "x".repeat(65).leak();
    let r = send(long).await.unwrap();
    assert_eq!(r.status(), 413);
    let text = r.text().await.unwrap();
    assert!(text.contains("request body over 64 bytes"), "{text}");
}

#[tokio::test]
async fn a_cost_above_the_limiters_bounds_is_413() {
    let bounds = Bounds {
        max_cost: 5,
        ..Bounds::ABSOLUTE
    };
    let limiter = Limiter::builder()
        .bounds(bounds)
        .build(Arc::new(slidelog::store::MemoryStore::new()));
    let user = Header::named("x-user").unwrap();
    let layer = RateLimitLayer::new(limiter, user, "100/minute".parse().unwrap()).cost(units);
    let base = serve(Router::new().route("/", post(echo).layer(layer))).await;
    assert_eq!(post_units(&base, "5").await.status(), 200);
    let r = post_units(&base, "6").await;
    assert_eq!(r.status(), 413);
    let text = r.text().await.unwrap();
    assert!(text.contains("too costly"), "{text}");
}

#[tokio::test]
async fn the_rejection_hook_makes_a_json_429_that_keeps_the_ratelimit_fields() {
    let user = Header::named("x-user").unwrap();
    let layer = RateLimitLayer::new(Limiter::memory(), user, "1/minute".parse().unwrap())
        .on_rejection(|r| {
            let wait = r.retry_after().unwrap_or_default().as_secs();
            let body = format!(r#"{{"error":"{:?}","retry_after_s":{wait}}}"#, r.kind());
            r.response("application/json", body)
        });
    let base = serve(Router::new().route("/", post(echo).layer(layer))).await;
    assert_eq!(post_units(&base, "1").await.status(), 200);
    let r = post_units(&base, "1").await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert!(
        r.headers()["ratelimit"]
            .to_str()
            .unwrap()
            .starts_with("\"default\";r=0;t=")
    );
    let retry: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let json: serde_json::Value = r.json().await.unwrap();
    assert_eq!(json["error"], "Limited");
    assert!(retry >= 59 && json["retry_after_s"].as_u64().unwrap() + 1 >= retry);
    // Missing key: the hook answers that too, as 400.
    let r = client().post(format!("{base}/")).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["error"],
        "BadRequest"
    );
}

#[tokio::test]
async fn the_degraded_hook_counts_fail_open_admissions() {
    // A Redis that is not there: fail-open admits every request, degraded.
    let mut redis = slidelog_testkit::RedisServer::start();
    redis.kill();
    let limiter = Limiter::builder()
        .timeout(std::time::Duration::from_millis(200))
        .open(&redis.url(), Default::default())
        .await
        .expect("fail-open opens with the store down");
    let degraded = Arc::new(AtomicU64::new(0));
    let seen = degraded.clone();
    let user = Header::named("x-user").unwrap();
    let layer =
        RateLimitLayer::new(limiter, user, "1/minute".parse().unwrap()).on_degraded(move |_, d| {
            assert!(d.degraded);
            seen.fetch_add(1, Ordering::Relaxed);
        });
    let base = serve(Router::new().route("/", post(echo).layer(layer))).await;
    for _ in 0..3 {
        let r = post_units(&base, "1").await;
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("ratelimit").is_none());
    }
    assert_eq!(degraded.load(Ordering::Relaxed), 3);
}
