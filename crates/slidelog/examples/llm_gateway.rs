//! An LLM gateway with usage-based limits: per API key, 60 requests and
//! 20,000 tokens per minute. Each request reserves an estimate of its
//! tokens from its body (a token per 4 bytes of prompt, plus `max_tokens`),
//! is forwarded to the upstream, and is settled to the tokens the upstream
//! counted (`usage.total_tokens` in its answer); an upstream failure (5xx)
//! is refunded. So the limit holds what was really used, exactly.
//!
//! ```text
//! UPSTREAM=http://127.0.0.1:8000/v1/completions cargo run -p slidelog --example llm_gateway
//! curl -i -H 'x-api-key: ada' -d '{"prompt":"Hello","max_tokens":200}' http://127.0.0.1:3000/v1/completions
//! ```

use axum::{Router, body::Bytes, extract::State, http::StatusCode, routing::post};
use serde_json::Value;
use slidelog::{Limiter, RateLimitLayer, middleware::Header};

/// The reservation: a token per 4 bytes of prompt, plus the most the answer may use.
pub fn estimate(request: &[u8]) -> u64 {
    let request: Value = serde_json::from_slice(request).unwrap_or_default();
    let prompt = request["prompt"].as_str().unwrap_or_default().len() as u64;
    prompt.div_ceil(4) + request["max_tokens"].as_u64().unwrap_or(256)
}

/// What the upstream counted: `usage.total_tokens` (none: the estimate stays).
fn usage(_: &http::response::Parts, answer: &[u8]) -> Option<u64> {
    let answer: Value = serde_json::from_slice(answer).ok()?;
    answer["usage"]["total_tokens"].as_u64()
}

/// `POST /v1/completions`, forwarded to `upstream` behind the limits.
pub fn app(limiter: &Limiter, upstream: String) -> Result<Router, Box<dyn std::error::Error>> {
    let limits = "requests=60/minute, tokens=20000/minute".parse()?;
    let layer = RateLimitLayer::new(limiter.clone(), Header::named("x-api-key")?, limits)
        .name("llm")?
        .body_cost_by_name(64 * 1024, ["tokens"], |_, body| [estimate(body)])?
        .settle_with(1024 * 1024, usage)
        .refund_on(|status| status.is_server_error());
    let route = post(forward).layer(layer);
    let upstream = (reqwest::Client::new(), upstream);
    Ok(Router::new()
        .route("/v1/completions", route)
        .with_state(upstream))
}

/// Sends the request body to the upstream and answers with its answer.
async fn forward(
    State((http, url)): State<(reqwest::Client, String)>,
    body: Bytes,
) -> (StatusCode, Bytes) {
    let sent = http.post(url).header("content-type", "application/json");
    match sent.body(body).send().await {
        Ok(answer) => (answer.status(), answer.bytes().await.unwrap_or_default()),
        Err(_) => (StatusCode::BAD_GATEWAY, Bytes::new()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let upstream =
        std::env::var("UPSTREAM").unwrap_or("http://127.0.0.1:8000/v1/completions".into());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    Ok(axum::serve(listener, app(&Limiter::memory(), upstream)?).await?)
}
