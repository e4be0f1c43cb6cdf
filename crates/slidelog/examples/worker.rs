//! A background worker under "5 jobs a second", shared by every worker on
//! the store: each job waits for room (`until_ready`) instead of failing.
//! Run two at once and together they still start at most 5 a second.
//!
//! ```text
//! SLIDELOG_STORE=redis://127.0.0.1:6379 cargo run -p slidelog --example worker
//! ```

use slidelog::{Limiter, Wait};
use std::time::Duration;

/// Runs `jobs` jobs, each once the shared limit has room; returns the time
/// of each admission (Unix ms, on the store's clock).
pub async fn run(limiter: &Limiter, jobs: usize) -> Result<Vec<u64>, Box<dyn std::error::Error>> {
    let limits = ["5/second".parse()?];
    let mut started = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        // Jitter: workers in other processes do not all ask at the same instant.
        let wait = Wait::up_to(Duration::from_secs(30)).jitter(Duration::from_millis(10));
        let decision = limiter.until_ready("jobs", &limits, 1, wait).await?;
        if decision.degraded {
            // Store down, fail-open: nothing was counted; slow down by hand.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        started.push(decision.record.map_or(0, |r| r.ts));
        // … the job itself …
    }
    Ok(started)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("SLIDELOG_STORE").unwrap_or("redis://127.0.0.1:6379".into());
    let limiter = Limiter::from_url(&url).await?;
    for at in run(&limiter, 20).await? {
        println!("job started at {at}");
    }
    Ok(())
}
