//! Load generator for the Envoy gRPC API: starts `RateLimitService` on a
//! loopback port (in this process, memory store or a Redis URL), then drives
//! it with concurrent tonic clients for a fixed time and prints decisions per
//! second and latency percentiles.
//!
//! ```sh
//! cargo run --release -p slidelog-envoy --example grpc_load -- [SECONDS] [CONCURRENCY] [STORE_URL]
//! # e.g. 10 s, 64 in flight, a redis-server started for the run:
//! cargo run --release -p slidelog-envoy --example grpc_load -- 10 64 redis://127.0.0.1:6390
//! ```
//!
//! Each request carries one descriptor `(user, u<N>)` over 10,000 users under
//! a limit of 1,000 per minute, so most requests are admitted and recorded.

use slidelog_envoy::proto::{
    RateLimitDescriptor, RateLimitRequest, RateLimitServiceClient, rate_limit_descriptor::Entry,
    rate_limit_response::Code,
};
use slidelog_envoy::{ConfigHandle, RateLimitConfig, RateLimiter, ServiceOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CONFIG: &str = "domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: u64 = args.first().map_or(Ok(10), |s| s.parse())?;
    let concurrency: usize = args.get(1).map_or(Ok(64), |s| s.parse())?;
    let store_url = args.get(2).cloned();

    let store: Arc<dyn slidelog_core::Store> = match &store_url {
        Some(url) => Arc::new(
            slidelog_redis::RedisStore::connect(
                url,
                slidelog_redis::RedisOptions::default()
                    .with_prefix(format!("bench:{}:", std::process::id())),
            )
            .await?,
        ),
        None => Arc::new(slidelog_memory::MemoryStore::new()),
    };
    let config = RateLimitConfig::from_yaml_str("bench.yaml", CONFIG)?;
    let limiter = Arc::new(RateLimiter::new(
        slidelog::Limiter::from_store(store),
        ConfigHandle::fixed(config),
        ServiceOptions::default(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(slidelog_envoy::service::serve_grpc(
        listener,
        limiter,
        std::future::pending(),
    ));

    // A few HTTP/2 connections, shared by the in-flight requests.
    let mut channels = Vec::new();
    for _ in 0..4 {
        channels.push(
            tonic::transport::Endpoint::new(format!("http://{addr}"))?
                .tcp_nodelay(true)
                .connect()
                .await?,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let mut client = RateLimitServiceClient::new(channels[worker % channels.len()].clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let (mut over, mut errors) = (0u64, 0u64);
            let mut n = worker as u64;
            while Instant::now() < deadline {
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let req = RateLimitRequest {
                    domain: "bench".into(),
                    descriptors: vec![RateLimitDescriptor {
                        entries: vec![Entry {
                            key: "user".into(),
                            value: format!("u{}", (n >> 33) % 10_000),
                        }],
                        ..Default::default()
                    }],
                    hits_addend: 0,
                };
                let started = Instant::now();
                match client.should_rate_limit(req).await {
                    Ok(r) => {
                        latencies.push(started.elapsed().as_micros() as u64);
                        if r.into_inner().overall_code == Code::OverLimit as i32 {
                            over += 1;
                        }
                    }
                    Err(_) => errors += 1,
                }
            }
            (latencies, over, errors)
        }));
    }
    let mut all = Vec::new();
    let (mut over, mut errors) = (0, 0);
    for t in tasks {
        let (l, o, e) = t.await?;
        all.extend(l);
        over += o;
        errors += e;
    }
    all.sort_unstable();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    println!(
        "store={} seconds={seconds} concurrency={concurrency} decisions={} decisions/s={:.0} \
         p50={}us p99={}us p99.9={}us over_limit={over} errors={errors}",
        store_url.as_deref().unwrap_or("memory://"),
        all.len(),
        all.len() as f64 / seconds as f64,
        pct(0.50),
        pct(0.99),
        pct(0.999),
    );
    Ok(())
}
