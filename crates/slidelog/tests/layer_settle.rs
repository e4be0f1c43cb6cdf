//! The layer's named limits and its settle from the response
//! (docs/design.md §4.5): RateLimit / RateLimit-Policy list every limit by name; a cost list
//! given by name that does not fit the limits fails when the layer is
//! built; a reservation is settled to the real cost a response header, a
//! `Usage` extension or the body reports, refunded on chosen statuses,
//! never counted twice, and a settle that fails leaves the response alone.
//! Driven through axum routers with `oneshot` (memory store) and one
//! loopback Redis.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use slidelog::middleware::{CostListError, Header, SettleOutcome, Usage};
use slidelog::{Bounds, Limit, Limiter, RateLimitLayer, limit::parse_list};
use std::sync::{Arc, Mutex};
use tower::ServiceExt;

const LIMITS: &str = "requests=5/minute, tokens=1000/minute";

/// A handler answering the status and usage header the request asks for
/// (`x-status`, `x-used`), and the `Usage` extension `x-ext` asks for.
async fn handler(request: Request<Body>) -> Response {
    let header = |name: &str| {
        let v = request.headers().get(name)?.to_str().ok()?;
        v.parse::<u64>().ok()
    };
    let status =
        header("x-status").map_or(StatusCode::OK, |s| StatusCode::from_u16(s as u16).unwrap());
    let mut response = (status, "done").into_response();
    if let Some(used) = request.headers().get("x-used") {
        response
            .headers_mut()
            .insert("x-usage-tokens", used.clone());
    }
    if let Some(n) = header("x-ext") {
        response.extensions_mut().insert(Usage(n));
    }
    response
}

/// `x-reserve` tokens (100 when absent), and 1 request.
fn reserve(parts: &http::request::Parts) -> [u64; 1] {
    let v = parts
        .headers
        .get("x-reserve")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    [v.unwrap_or(100)]
}

async fn call(app: &Router, headers: &[(&str, &str)]) -> Response {
    let mut request = Request::post("/").header("x-api-key", "ada");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    app.clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

fn ratelimit(response: &Response) -> &str {
    response.headers()["ratelimit"].to_str().unwrap()
}

/// Outcomes told to `on_settle`, by label.
#[derive(Clone, Default)]
struct Outcomes(Arc<Mutex<Vec<String>>>);

impl Outcomes {
    fn hook(&self) -> impl Fn(&SettleOutcome) + Send + Sync + 'static {
        let seen = self.0.clone();
        move |o: &SettleOutcome| {
            let label = match o {
                SettleOutcome::Settled { actual } => format!("settled {actual}"),
                SettleOutcome::Failed(e) => format!("failed: {e}"),
                other => other.label().to_owned(),
            };
            seen.lock().unwrap().push(label);
        }
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

fn app(limiter: &Limiter, outcomes: &Outcomes) -> Router {
    let layer = RateLimitLayer::new(
        limiter.clone(),
        Header::named("x-api-key").unwrap(),
        LIMITS.parse().unwrap(),
    )
    .name("t")
    .unwrap()
    .cost_by_name(["tokens"], reserve)
    .unwrap()
    .settle_from_extension()
    .settle_from_header("x-usage-tokens")
    .unwrap()
    .refund_on(|s| s.is_server_error())
    .on_settle(outcomes.hook());
    Router::new().route("/", post(handler).layer(layer))
}

#[tokio::test]
async fn every_limit_is_listed_by_name_and_the_reservation_settles_to_the_header() {
    let outcomes = Outcomes::default();
    let app = app(&Limiter::memory(), &outcomes);
    let r = call(&app, &[("x-reserve", "300"), ("x-used", "120")]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["ratelimit-policy"],
        "\"requests\";q=5;w=60, \"tokens\";q=1000;w=60"
    );
    // After the settle to 120: 4 requests and 880 tokens left (the
    // deciding limit first).
    assert_eq!(
        ratelimit(&r),
        "\"requests\";r=4;t=60, \"tokens\";r=880;t=60"
    );
    assert_eq!(outcomes.take(), ["settled 120"]);
    // No usage reported: the answer shows the admission, 880 - 300.
    let r = call(&app, &[("x-reserve", "300")]).await;
    assert_eq!(
        ratelimit(&r),
        "\"requests\";r=3;t=60, \"tokens\";r=580;t=60"
    );
    assert_eq!(outcomes.take(), ["no_usage"]);
    // The extension comes first; the header is the fallback.
    let r = call(&app, &[("x-ext", "10"), ("x-used", "999")]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(outcomes.take(), ["settled 10"]);
    // 120 + 300 + 10 used: 570 left, a reservation of 600 is refused by tokens.
    let r = call(&app, &[("x-reserve", "600")]).await;
    assert_eq!(r.status(), 429);
    assert_eq!(
        ratelimit(&r),
        "\"tokens\";r=570;t=60, \"requests\";r=2;t=60"
    );
    assert!(
        outcomes.take().is_empty(),
        "a refusal has nothing to settle"
    );
}

#[tokio::test]
async fn chosen_statuses_are_refunded_and_other_failures_keep_their_reservation() {
    let outcomes = Outcomes::default();
    let app = app(&Limiter::memory(), &outcomes);
    let r = call(&app, &[("x-status", "503"), ("x-used", "50")]).await;
    assert_eq!(r.status(), 503);
    assert_eq!(outcomes.take(), ["refunded"]);
    let r = call(&app, &[("x-status", "404"), ("x-used", "50")]).await;
    assert_eq!(r.status(), 404);
    assert_eq!(outcomes.take(), ["settled 50"]);
    // The refunded request counts nowhere: 1 request and 50 tokens used.
    let r = call(&app, &[]).await;
    assert_eq!(
        ratelimit(&r),
        "\"requests\";r=3;t=60, \"tokens\";r=850;t=60"
    );
}

#[tokio::test]
async fn a_settle_that_fails_keeps_the_estimate_and_the_response() {
    // Costs above the limiter's bound of 500 cannot be settled to.
    let bounds = Bounds {
        max_cost: 500,
        ..Bounds::default()
    };
    let limiter = Limiter::builder()
        .bounds(bounds)
        .build(Arc::new(slidelog::store::MemoryStore::new()));
    let outcomes = Outcomes::default();
    let app = app(&limiter, &outcomes);
    for hostile in ["900", "18446744073709551615", "-3", "lots"] {
        let r = call(&app, &[("x-reserve", "100"), ("x-used", hostile)]).await;
        assert_eq!(r.status(), 200, "{hostile}");
        let body = axum::body::to_bytes(r.into_body(), 64).await.unwrap();
        assert_eq!(&body[..], b"done");
    }
    let seen = outcomes.take();
    assert!(
        seen[0].starts_with("failed: ") && seen[0].contains("500"),
        "{seen:?}"
    );
    assert!(seen[1].starts_with("failed: "), "{seen:?}");
    assert_eq!(seen[2..], ["no_usage", "no_usage"]);
    // Every estimate stayed: 4 x 100 tokens.
    let r = call(&app, &[]).await;
    assert_eq!(
        ratelimit(&r),
        "\"requests\";r=0;t=60, \"tokens\";r=500;t=60"
    );
}

#[tokio::test]
async fn concurrent_settles_count_each_record_once() {
    let limiter = Limiter::memory();
    let layer = RateLimitLayer::new(
        limiter.clone(),
        Header::named("x-api-key").unwrap(),
        "tokens=1000/minute".parse().unwrap(),
    )
    .name("c")
    .unwrap()
    .cost(|_| 100u64)
    .settle_from_header("x-usage-tokens")
    .unwrap();
    let app = Router::new().route("/", post(handler).layer(layer));
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move { call(&app, &[("x-used", "7")]).await.status() })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += u64::from(t.await.unwrap() == 200);
    }
    // Reserving 100 of 1,000 with settles racing in: at least 10 admitted;
    // each settled record holds exactly 7.
    assert!(admitted >= 10, "{admitted}");
    let limits = [Limit::new(1_000, 60_000).unwrap().named("tokens").unwrap()];
    let peek = limiter.peek("c:default:ada", &limits, 1).await.unwrap();
    assert_eq!(
        peek.count,
        7 * admitted + 1,
        "peek counts itself as if admitted"
    );
}

#[test]
fn a_cost_list_that_does_not_fit_the_limits_fails_when_the_layer_is_built() {
    let routes = || {
        let limits = parse_list(LIMITS).unwrap();
        slidelog::middleware::RouteLimits::new(limits.clone())
            .unwrap()
            .route("/batch", parse_list("requests=10/minute").unwrap())
            .unwrap()
    };
    let layer = || {
        RateLimitLayer::new(
            Limiter::memory(),
            Header::named("x-api-key").unwrap(),
            routes(),
        )
    };
    // "tokens" is missing from the /batch route's limits.
    let e = layer().cost_by_name(["tokens"], |_| [1]).unwrap_err();
    assert!(matches!(&e, CostListError::UnknownName { index: 0, route, .. } if route == "/batch"));
    assert_eq!(
        e.to_string(),
        "cost names[0]: \"tokens\" names no limit of route \"/batch\" (its limits: \"requests\";q=10;w=60); name limits with Limit::named or \"name=60/minute\""
    );
    let e = layer()
        .cost_by_name(["requests", "requests"], |_| [1, 1])
        .unwrap_err();
    assert_eq!(e.to_string(), "cost names[1]: \"requests\" is given twice");
    let e = layer().cost_by_name([], |_| []).unwrap_err();
    assert_eq!(e, CostListError::Count { got: 0 });
    // Every route carries "requests": fine, per route.
    assert!(layer().cost_by_name(["requests"], |_| [2]).is_ok());
    // Two limits of one route with the same name are refused by the routes.
    let twice = parse_list("a=1/s, b=2/s").unwrap();
    let same = vec![twice[0], twice[1].named("a").unwrap()];
    assert!(slidelog::middleware::RouteLimits::new(same).is_err());
}

#[tokio::test]
async fn the_body_usage_settles_and_a_single_limit_keeps_its_default_name() {
    let limiter = Limiter::memory();
    let layer = RateLimitLayer::new(
        limiter.clone(),
        Header::named("x-api-key").unwrap(),
        "100/minute".parse().unwrap(),
    )
    .cost(|_| 50u64)
    .settle_with(1024, |_, body: &[u8]| Some(body.len() as u64));
    let app = Router::new().route("/", post(|| async { "four" }).layer(layer));
    let r = call(&app, &[]).await;
    assert_eq!(ratelimit(&r), "\"default\";r=96;t=60", "settled to 4");
    let body = axum::body::to_bytes(r.into_body(), 64).await.unwrap();
    assert_eq!(
        &body[..],
        b"four",
        "the body read for its usage is handed on"
    );
    let r = call(&app, &[]).await;
    assert_eq!(ratelimit(&r), "\"default\";r=92;t=60");
}

#[tokio::test]
async fn the_layer_settles_on_redis_too() {
    let redis = slidelog_testkit::RedisServer::start();
    let limiter = Limiter::from_url(&redis.url()).await.unwrap();
    let outcomes = Outcomes::default();
    let app = app(&limiter, &outcomes);
    let r = call(&app, &[("x-reserve", "400"), ("x-used", "30")]).await;
    assert_eq!(r.status(), 200);
    // The Redis script reports every limit too (after the settle to 30).
    assert_eq!(
        ratelimit(&r),
        "\"requests\";r=4;t=60, \"tokens\";r=970;t=60"
    );
    assert_eq!(outcomes.take(), ["settled 30"]);
    let r = call(&app, &[("x-reserve", "970")]).await;
    assert_eq!(r.status(), 200, "30 + 970 fit in 1,000 once settled");
    let r = call(&app, &[("x-status", "500"), ("x-reserve", "1")]).await;
    assert_eq!(r.status(), 429);
    let r = call(&app, &[("x-reserve", "0")]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(outcomes.take(), ["no_usage", "no_usage"]);
}
