//! The HTTP API's own cost per request, in process: heap
//! allocations and CPU time of `POST /v1/check` through the service's
//! router (body extraction, validation, the memory store's decision, the
//! metrics, the JSON answer and the RateLimit header fields), beside the
//! same router shape answering a fixed body as `examples/transport_baseline.rs`
//! does. No socket and no hyper connection: what is counted is the path
//! between the transport and the store, which is what slidelog adds.
//!
//! A counting global allocator (`stats_alloc`) counts every allocation and
//! reallocation made while the requests are answered (building the requests is done before, outside the
//! count). Every check admits and records (10,000 keys, max 1,000,000 per
//! 60 s), as in the wrk runs of BENCHMARKS.md.
//!
//! ```sh
//! cargo bench -p slidelog-server --bench http_path            # 200,000 requests per shape
//! cargo bench -p slidelog-server --bench http_path -- 50000   # fewer
//! ```

use axum::body::{Body, Bytes};
use axum::http::{Request, header};
use axum::routing::post;
use slidelog::store::MemoryStore;
use slidelog_server::app::{App, AppConfig};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::sync::Arc;
use std::time::Instant;
use tower::ServiceExt;

/// Counts every allocation and reallocation, on every thread (the runtime
/// has one).
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Distinct keys, as in the wrk runs.
const KEYS: usize = 10_000;

/// One body shape: a name and the JSON of request `i`.
struct Shape {
    name: &'static str,
    body: fn(usize) -> String,
}

const SHAPES: [Shape; 2] = [
    Shape {
        name: "one limit (the wrk body)",
        body: |i| format!(r#"{{"key":"bench:{i}","max":1000000,"window_ms":60000}}"#),
    },
    Shape {
        name: "two named limits, own costs",
        body: |i| {
            format!(
                r#"{{"key":"bench:{i}","limits":[{{"name":"requests","max":1000000,"window_ms":60000}},{{"name":"tokens","max":1000000,"window_ms":3600000,"cost":40}}]}}"#
            )
        },
    },
];

/// The service's router over a fresh memory store, as `serve` builds and
/// serves it (panics caught; the bounds raised to admit max 1,000,000, as
/// `--max-limit 1000000`).
fn service() -> slidelog_server::http::Api {
    let config = AppConfig {
        bounds: slidelog::Bounds {
            max_limit: 1_000_000,
            ..slidelog::Bounds::SERVICE
        },
        ..AppConfig::default()
    };
    let app = App::with_memory_store(Arc::new(MemoryStore::new()), config);
    slidelog_server::http::service(
        app,
        slidelog_server::http::DEFAULT_MAX_BODY_BYTES,
        axum::Router::new(),
    )
}

/// The baseline's `/v1/check`: a fixed admitted answer (examples/transport_baseline.rs).
fn baseline() -> axum::Router {
    async fn check(_body: Bytes) -> axum::Json<serde_json::Value> {
        axum::Json(serde_json::json!({
            "allowed": true, "limit": 10_000_000, "window_ms": 60_000, "count": 1,
            "remaining": 9_999_999, "retry_after_ms": 0, "reset_after_ms": 60_000
        }))
    }
    axum::Router::new().route("/v1/check", post(check))
}

/// What is measured: a router, or the service `serve` makes of one.
trait Service:
    tower::Service<
        Request<Body>,
        Response = axum::response::Response,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone
{
}

impl<S> Service for S where
    S: tower::Service<
            Request<Body>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
            Future: Send,
        > + Clone
{
}

fn requests(n: usize, body: fn(usize) -> String) -> Vec<Request<Body>> {
    (0..n)
        .map(|i| {
            Request::post("/v1/check")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body(i % KEYS)))
                .expect("a valid request")
        })
        .collect()
}

/// Answers `n` requests of `shape` through `router`; returns (allocations
/// per request, bytes allocated per request, ns per request).
async fn measure<S: Service>(router: &S, n: usize, body: fn(usize) -> String) -> (f64, f64, f64) {
    // Warm up: every key gets its log, the metrics their series.
    for request in requests(KEYS, body) {
        answer(router, request).await;
    }
    let batch = requests(n, body);
    let region = Region::new(GLOBAL);
    let started = Instant::now();
    for request in batch {
        answer(router, request).await;
    }
    let elapsed = started.elapsed();
    let change = region.change();
    let allocs = change.allocations + change.reallocations;
    // Bytes newly asked for: allocations, and what reallocations grew by.
    let bytes = change.bytes_allocated as f64 + change.bytes_reallocated.max(0) as f64;
    let n = n as f64;
    (allocs as f64 / n, bytes / n, elapsed.as_nanos() as f64 / n)
}

/// Sends one request and reads the whole answer, as a client would.
async fn answer<S: Service>(router: &S, request: Request<Body>) {
    let response = router.clone().oneshot(request).await.expect("infallible");
    assert!(response.status().is_success(), "{}", response.status());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("an answer body");
    std::hint::black_box(body);
}

fn main() {
    // `cargo bench` passes `--bench`; a number is the request count.
    let n = std::env::args()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(200_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        println!("| path | body | allocations / request | bytes allocated / request | ns / request (1 thread, in process) |");
        println!("|---|---|---|---|---|");
        for shape in &SHAPES {
            let (allocs, bytes, ns) = measure(&service(), n, shape.body).await;
            println!(
                "| slidelog /v1/check | {} | {allocs:.1} | {bytes:.0} | {ns:.0} |",
                shape.name
            );
        }
        let (allocs, bytes, ns) = measure(&baseline(), n, SHAPES[0].body).await;
        println!(
            "| baseline (fixed answer) | {} | {allocs:.1} | {bytes:.0} | {ns:.0} |",
            SHAPES[0].name
        );
    });
}
