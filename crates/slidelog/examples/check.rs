//! One decision on the in-memory store: 100 requests per minute for `user123`.
//!
//! ```text
//! cargo run -p slidelog --example check
//! ```

/// One decision, printed (`pub`: tests/examples.rs runs it).
#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = slidelog::Limiter::memory(); // or Limiter::from_url("redis://…").await?
    let decision = limiter
        .check("user123", &["100/minute".parse()?], 1)
        .await?;
    println!("allowed: {}, {} left", decision.allowed, decision.remaining);
    Ok(())
}
