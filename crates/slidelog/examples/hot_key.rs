//! The hot-key workload of the rejection cache, in process: 64 Tokio tasks
//! check ONE key limited to 100 per second on a `redis-server` this example
//! starts, through a `Limiter` with the rejection cache (the default) and
//! without it. Prints decisions/s, the share rejected, and Redis `EVALSHA`
//! calls per request (`INFO commandstats` after `CONFIG RESETSTAT`).
//!
//! `cargo run --release -p slidelog --example hot_key -- [SECONDS]`

use slidelog::url::StoreOptions;
use slidelog::{Limit, Limiter};
use slidelog_testkit::RedisServer;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let server = RedisServer::start();
    println!(
        "| rejection cache | decisions/s | admitted | rejected | Redis calls per request | per rejected request |"
    );
    println!("|---|---|---|---|---|---|");
    for round in 0..2 {
        for cache in [true, false] {
            let builder = Limiter::builder().timeout(Duration::from_secs(5));
            let builder = if cache {
                builder
            } else {
                builder.no_rejection_cache()
            };
            let options = StoreOptions::default().prefix(format!("hot{round}{cache}:"));
            let limiter = builder.open(&server.url(), options).await.expect("open");
            let mut c = server.client();
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();
            let (total, rejected) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
            let end = Instant::now() + Duration::from_secs(seconds);
            let start = Instant::now();
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let (limiter, total, rejected) =
                        (limiter.clone(), total.clone(), rejected.clone());
                    tokio::spawn(async move {
                        let limits = [Limit::new(100, 1_000).unwrap()];
                        while Instant::now() < end {
                            let d = limiter.check("hot", &limits, 1).await.unwrap();
                            total.fetch_add(1, Ordering::Relaxed);
                            if !d.allowed {
                                rejected.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            for t in tasks {
                t.await.unwrap();
            }
            let elapsed = start.elapsed().as_secs_f64();
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut c)
                .unwrap();
            let calls: f64 = info
                .lines()
                .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
                .and_then(|v| v.split(',').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            let (n, r) = (
                total.load(Ordering::Relaxed),
                rejected.load(Ordering::Relaxed),
            );
            println!(
                "| {} | {:.0} | {} | {:.3}% | {:.4} | {:.4} |",
                if cache { "on" } else { "off" },
                n as f64 / elapsed,
                n - r,
                100.0 * r as f64 / n as f64,
                calls / n as f64,
                calls / r.max(1) as f64
            );
        }
    }
}
