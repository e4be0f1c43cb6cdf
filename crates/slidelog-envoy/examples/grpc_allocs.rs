//! Allocations per Envoy `ShouldRateLimit` request, counted by a counting
//! global allocator (the service's own work per request).
//!
//! ```sh
//! cargo run -p slidelog-envoy --example grpc_allocs -- [REQUESTS]
//! ```
//!
//! Two measurements, on the memory store, one descriptor `(user, u<N>)` over
//! 10,000 users under 1,000,000 per minute (every check admitted and
//! recorded, as BENCHMARKS.md's throughput runs):
//!
//! - `service`: `RateLimiter::should_rate_limit` called directly: the
//!   service's own path (plan, store key, decision, metrics, response), no
//!   transport. Requests are built before counting starts.
//! - `grpc`: the same through tonic on loopback, counting only on the
//!   server runtime's threads (the client runs on its own runtime): decode,
//!   the service, encode and HTTP/2 — what a `serve` process pays per request.
//! - `grpc baseline`: the same tonic server answering a fixed `OK` (the
//!   shape of `crates/slidelog-server/examples/transport_baseline.rs`): the
//!   transport's own share, which the difference to `grpc` is measured from.
//!
//! Allocations of the memory store's logs are included in both (a key's log
//! grows as its records arrive); the numbers are the mean over the run.
//!
//! Two more modes, for instruction counts under callgrind (repeatable on a
//! shared, noisy machine), with the throughput runs' request (domain
//! `bench`, `user=hot`, 10,000,000 per minute: every call admitted and
//! recorded, one key):
//!
//! ```sh
//! # the service alone, N calls on one thread (after 10,000 warm-up calls)
//! valgrind --tool=callgrind target/release/examples/grpc_allocs calls N
//! # a tonic server of the service (or of a fixed OK) on ADDR, driven by
//! # h2load; the options switch on serve's server settings one by one:
//! # `keepalive` (HTTP/2 pings every 30 s, 10 s timeout), `streams` (1,024
//! # concurrent streams), `shutdown` (a graceful-shutdown signal)
//! target/release/examples/grpc_allocs serve ADDR slidelog|ok [keepalive] [streams] [shutdown]
//! ```

#![allow(unsafe_code)] // the counting global allocator below, and nothing else

use slidelog_envoy::proto::{
    RateLimitDescriptor, RateLimitRequest, RateLimitResponse, RateLimitService,
    RateLimitServiceClient, RateLimitServiceServer, rate_limit_descriptor::Entry,
    rate_limit_response::Code,
};
use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counts allocations (and their bytes) on threads that opted in, while on.
struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn note(size: usize) {
    if ON.load(Ordering::Relaxed) && COUNTED.try_with(Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counting touches only atomics and a const-initialized thread local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const CONFIG: &str = "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n";

fn request(n: u64) -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: format!("u{}", n % 10_000),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

fn limiter() -> Arc<RateLimiter> {
    limiter_with(CONFIG)
}

fn limiter_with(yaml: &str) -> Arc<RateLimiter> {
    let config = RateLimitConfig::from_yaml_str("bench.yaml", yaml).expect("config");
    let store = Arc::new(slidelog_memory::MemoryStore::new());
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    Arc::new(
        RateLimiter::new(
            slidelog::Limiter::from_store(store),
            ConfigHandle::fixed(config),
            ServiceOptions::default(),
        )
        .with_recorder(Arc::new(recorder)),
    )
}

/// Runs `f` with counting on; returns (allocations, bytes).
fn counted<T>(f: impl FnOnce() -> T) -> (T, u64, u64) {
    ALLOCS.store(0, Ordering::SeqCst);
    BYTES.store(0, Ordering::SeqCst);
    ON.store(true, Ordering::SeqCst);
    let out = f();
    ON.store(false, Ordering::SeqCst);
    (
        out,
        ALLOCS.load(Ordering::SeqCst),
        BYTES.load(Ordering::SeqCst),
    )
}

/// The throughput runs' config (scripts/bench/service_cost.sh).
const BENCH_CONFIG: &str = "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10000000}\n";

/// The throughput runs' request: `bench`, `user=hot`.
fn bench_request() -> RateLimitRequest {
    RateLimitRequest {
        domain: "bench".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "user".into(),
                value: "hot".into(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("calls") => return calls(args.get(1).map_or(Ok(100_000), |s| s.parse())?),
        Some("serve") => return serve(&args[1..]),
        _ => {}
    }
    let n: u64 = args.first().map_or(Ok(100_000), |s| s.parse())?;

    // The service alone, on this thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let service = limiter();
    let requests: Vec<_> = (0..10_000).map(request).collect();
    rt.block_on(async {
        // Warm up: every key's log exists, the counters are registered.
        for r in &requests {
            service.should_rate_limit(r).await.expect("decided");
        }
    });
    COUNTED.with(|c| c.set(true));
    let started = std::time::Instant::now();
    let ((), allocs, bytes) = counted(|| {
        rt.block_on(async {
            for i in 0..n {
                let r = &requests[(i % 10_000) as usize];
                std::hint::black_box(service.should_rate_limit(r).await.expect("decided"));
            }
        })
    });
    let elapsed = started.elapsed();
    COUNTED.with(|c| c.set(false));
    println!(
        "service: requests={n} allocations/request={:.2} bytes/request={:.0} ns/request={:.0} (one thread, counting on)",
        allocs as f64 / n as f64,
        bytes as f64 / n as f64,
        elapsed.as_nanos() as f64 / n as f64
    );

    // Through tonic: the server's runtime counts, the client's does not.
    let grpc_n = n.min(50_000);
    let service = slidelog_envoy::GrpcService::new(limiter()).into_server();
    let (allocs, bytes) = grpc_count(service, &requests, grpc_n)?;
    println!(
        "grpc (server threads): requests={grpc_n} allocations/request={:.2} bytes/request={:.0}",
        allocs as f64 / grpc_n as f64,
        bytes as f64 / grpc_n as f64
    );
    // The transport alone: the same server answering a fixed OK, as
    // crates/slidelog-server/examples/transport_baseline.rs does.
    let (allocs, bytes) = grpc_count(RateLimitServiceServer::new(AlwaysOk), &requests, grpc_n)?;
    println!(
        "grpc baseline (fixed OK, server threads): requests={grpc_n} allocations/request={:.2} bytes/request={:.0}",
        allocs as f64 / grpc_n as f64,
        bytes as f64 / grpc_n as f64
    );
    Ok(())
}

/// Answers every `ShouldRateLimit` with OK (transport_baseline.rs's shape).
struct AlwaysOk;

#[tonic::async_trait]
impl RateLimitService for AlwaysOk {
    async fn should_rate_limit(
        &self,
        _request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok as i32,
            ..RateLimitResponse::default()
        }))
    }
}

/// Serves `service` on a loopback port from a runtime whose threads are
/// counted, warms it up, then sends `n` requests from an uncounted client
/// runtime; returns the allocations and bytes of the server's threads.
fn grpc_count<S: RateLimitService>(
    service: RateLimitServiceServer<S>,
    requests: &[RateLimitRequest],
    n: u64,
) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(|| COUNTED.with(|c| c.set(true)))
        .enable_all()
        .build()?;
    let listener = server_rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    server_rt.spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut client = client_rt.block_on(async {
        let channel = tonic::transport::Endpoint::new(format!("http://{addr}"))?
            .tcp_nodelay(true)
            .connect()
            .await?;
        Ok::<_, Box<dyn std::error::Error>>(RateLimitServiceClient::new(channel))
    })?;
    client_rt.block_on(async {
        for r in requests {
            client.should_rate_limit(r.clone()).await.expect("answered");
        }
    });
    let ((), allocs, bytes) = counted(|| {
        client_rt.block_on(async {
            for i in 0..n {
                let r = requests[(i % requests.len() as u64) as usize].clone();
                std::hint::black_box(client.should_rate_limit(r).await.expect("answered"));
            }
        })
    });
    server_rt.shutdown_background();
    Ok((allocs, bytes))
}

/// `calls N`: the service alone on one thread, the bench request N times
/// after 10,000 warm-up calls (for callgrind: the difference of two N is
/// the cost of the calls alone).
fn calls(n: u64) -> Result<(), Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let service = limiter_with(BENCH_CONFIG);
    let request = bench_request();
    rt.block_on(async {
        for _ in 0..10_000 + n {
            let answer = service.should_rate_limit(&request).await.expect("decided");
            assert_eq!(answer.overall_code, Code::Ok as i32);
            std::hint::black_box(answer);
        }
    });
    println!("calls: {n} after 10,000 warm-up calls");
    Ok(())
}

/// `serve ADDR slidelog|ok [keepalive] [streams] [shutdown]`: a tonic server
/// (TCP_NODELAY, like serve's and the baseline's) of the service with the
/// bench config, or of a fixed OK, with serve's server settings switched on
/// one by one, until killed.
fn serve(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let addr: std::net::SocketAddr = args.first().ok_or("serve ADDR slidelog|ok")?.parse()?;
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut builder = tonic::transport::Server::builder().tcp_nodelay(true);
        if has("keepalive") {
            builder = builder
                .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)))
                .http2_keepalive_timeout(Some(std::time::Duration::from_secs(10)));
        }
        if has("streams") {
            builder = builder.max_concurrent_streams(1_024);
        }
        let router = match args.get(1).map(String::as_str) {
            Some("ok") => builder.add_service(RateLimitServiceServer::new(AlwaysOk)),
            _ => builder.add_service(
                slidelog_envoy::GrpcService::new(limiter_with(BENCH_CONFIG)).into_server(),
            ),
        };
        eprintln!("listening on {addr}");
        if has("shutdown") {
            router
                .serve_with_shutdown(addr, std::future::pending::<()>())
                .await
        } else {
            router.serve(addr).await
        }
    })?;
    Ok(())
}
