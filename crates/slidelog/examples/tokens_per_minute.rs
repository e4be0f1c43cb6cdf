//! A weighted limit, "10,000 tokens per minute per user": a request to
//! `/complete` costs the tokens of its body (here: its whitespace-separated
//! pieces; a real service counts with its tokenizer), read up to 64 KiB. A
//! body over 10,000 tokens can never be admitted: 413, with the reason.
//!
//! ```text
//! cargo run -p slidelog --example tokens_per_minute
//! curl -i -H 'x-user: ada' -d 'four tokens right here' http://127.0.0.1:3000/complete
//! ```

use axum::{Router, routing::post};
use slidelog::{Limiter, RateLimitLayer, middleware::Header};

/// One route, behind a limit on tokens per user.
pub fn app(limiter: &Limiter) -> Result<Router, Box<dyn std::error::Error>> {
    let tokens = |_: &_, body: &[u8]| body.split(u8::is_ascii_whitespace).count() as u64;
    let user = Header::named("x-user")?;
    let layer = RateLimitLayer::new(limiter.clone(), user, "10000/minute".parse()?)
        .body_cost(64 * 1024, tokens);
    let echo = post(|body: String| async move { body });
    Ok(Router::new().route("/complete", echo.layer(layer)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    Ok(axum::serve(listener, app(&Limiter::memory())?).await?)
}
