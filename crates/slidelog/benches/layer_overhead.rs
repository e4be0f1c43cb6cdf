//! The per-request overhead of the rate limit layer: the same tower service
//! called with `oneshot` (no network) without the layer and with it, on the
//! memory store, on the admit path (a limit never reached, 1,000 API keys)
//! and on the reject path (every request over the limit); then with two
//! named limits (`requests`, `tokens`, costs by name) admitted, and the
//! same settled to the real cost a response header reports.
//!
//! Run: `cargo bench -p slidelog --bench layer_overhead`.

use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, Response};
use slidelog::middleware::{Header, RateLimitLayer, RouteLimits};
use slidelog::{Limit, Limiter};
use std::convert::Infallible;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use tower::{Layer, ServiceExt, service_fn};

/// The inner service: answers 200 with a short body, as a trivial handler does.
async fn hello(_: Request<String>) -> Result<Response<String>, Infallible> {
    Ok(Response::new("hello".to_owned()))
}

/// The inner service of a usage-based limit: reports the tokens it used.
async fn used(_: Request<String>) -> Result<Response<String>, Infallible> {
    let mut response = Response::new("hello".to_owned());
    let tokens = http::HeaderValue::from_static("40");
    response.headers_mut().insert("x-usage-tokens", tokens);
    Ok(response)
}

fn request(n: u64) -> Request<String> {
    Request::get("/")
        .header("x-api-key", format!("key-{}", n % 1_000))
        .body(String::new())
        .expect("a valid request")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let counter = AtomicU64::new(0);
    let mut group = c.benchmark_group("tower_layer");

    let bare = service_fn(hello);
    group.bench_function("without_layer", |b| {
        b.to_async(&rt).iter(|| {
            let req = request(counter.fetch_add(1, Ordering::Relaxed));
            let svc = bare;
            async move { black_box(svc.oneshot(req).await) }
        })
    });

    // 10,000,000 per second: never reached, every request is admitted.
    let admit = RouteLimits::new([Limit::new(10_000_000, 1_000).expect("limit")]).expect("routes");
    let header = Header::named("x-api-key").expect("header name");
    let limited = RateLimitLayer::new(Limiter::memory(), header.clone(), admit).layer(bare);
    group.bench_function("with_layer_admitted", |b| {
        b.to_async(&rt).iter(|| {
            let req = request(counter.fetch_add(1, Ordering::Relaxed));
            let svc = limited.clone();
            async move { black_box(svc.oneshot(req).await) }
        })
    });

    // 1 per hour on one key: every request after the first is rejected (429).
    let reject = RouteLimits::new([Limit::new(1, 3_600_000).expect("limit")]).expect("routes");
    let rejecting = RateLimitLayer::new(Limiter::memory(), header, reject).layer(bare);
    group.bench_function("with_layer_rejected", |b| {
        b.to_async(&rt).iter(|| {
            let svc = rejecting.clone();
            async move { black_box(svc.oneshot(request(0)).await) }
        })
    });

    // Two named limits, never reached (100 tokens reserved per request: at
    // most ~5,000 requests a second per key here, 500,000 tokens).
    let two = || {
        "requests=10000000/second, tokens=10000000/second"
            .parse::<RouteLimits>()
            .expect("routes")
    };
    let header = Header::named("x-api-key").expect("header name");
    let named = RateLimitLayer::new(Limiter::memory(), header.clone(), two())
        .cost_by_name(["tokens"], |_| [100])
        .expect("tokens is a limit");
    let two_admitting = named.layer(bare);
    group.bench_function("with_layer_two_limits_admitted", |b| {
        b.to_async(&rt).iter(|| {
            let req = request(counter.fetch_add(1, Ordering::Relaxed));
            let svc = two_admitting.clone();
            async move { black_box(svc.oneshot(req).await) }
        })
    });

    // The same, settled to the 40 tokens the response reports.
    let settling = RateLimitLayer::new(Limiter::memory(), header, two())
        .cost_by_name(["tokens"], |_| [100])
        .expect("tokens is a limit")
        .settle_from_header("x-usage-tokens")
        .expect("header name")
        .layer(service_fn(used));
    group.bench_function("with_layer_two_limits_settled", |b| {
        b.to_async(&rt).iter(|| {
            let req = request(counter.fetch_add(1, Ordering::Relaxed));
            let svc = settling.clone();
            async move { black_box(svc.oneshot(req).await) }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
