//! The `llm_gateway` example, run as tests/examples.rs runs the others: its
//! router on a loopback port with a real HTTP client, in front of a fake
//! upstream HTTP server that answers usage blocks. The gateway must admit
//! exactly what the real token counts allow (a plain model of the limits,
//! fed with the upstream's counts, decides every request the same way),
//! refund upstream failures, and keep the estimate when no usage comes
//! back. The library guide (docs/guide/library.md) shows the example's `app` as it is.

mod common;

#[allow(dead_code)]
#[path = "../examples/llm_gateway.rs"]
mod llm_gateway;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::routing::post;
use common::{client, serve};
use serde_json::{Value, json};
use slidelog::Limiter;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const TOKENS: u64 = 20_000;
const REQUESTS: u64 = 60;

/// The tokens the fake model really uses: the prompt's (a token per 4
/// bytes) and an answer of 10 % to 100 % of `max_tokens`, depending on the
/// prompt.
fn real_tokens(prompt: &str, max_tokens: u64) -> u64 {
    let answer = max_tokens * (1 + prompt.len() as u64 % 10) / 10;
    (prompt.len() as u64).div_ceil(4) + answer
}

/// A fake LLM API on loopback: answers a usage block with
/// [`real_tokens`]; 500 for the prompt `fail`; no usage block for the
/// prompt `quiet`. Counts the calls it answers.
async fn upstream(calls: Arc<AtomicUsize>) -> String {
    let complete = move |body: Bytes| async move {
        calls.fetch_add(1, Ordering::SeqCst);
        let request: Value = serde_json::from_slice(&body).unwrap();
        let prompt = request["prompt"].as_str().unwrap().to_owned();
        let max_tokens = request["max_tokens"].as_u64().unwrap();
        let answer = match prompt.as_str() {
            "fail" => return (StatusCode::INTERNAL_SERVER_ERROR, "overloaded".to_owned()),
            "quiet" => json!({"choices": [{"text": "…"}]}),
            _ => json!({
                "choices": [{"text": "…"}],
                "usage": {"prompt_tokens": 1, "total_tokens": real_tokens(&prompt, max_tokens)},
            }),
        };
        (StatusCode::OK, answer.to_string())
    };
    let base = serve(Router::new().route("/v1/completions", post(complete))).await;
    format!("{base}/v1/completions")
}

/// The gateway in front of a fresh fake upstream; returns its URL and the
/// upstream's call counter.
async fn gateway() -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let app = llm_gateway::app(&Limiter::memory(), upstream(calls.clone()).await).unwrap();
    (format!("{}/v1/completions", serve(app).await), calls)
}

async fn complete(url: &str, key: &str, prompt: &str, max_tokens: u64) -> reqwest::Response {
    let body = json!({"prompt": prompt, "max_tokens": max_tokens}).to_string();
    let request = client().post(url).header("x-api-key", key).body(body);
    request.send().await.unwrap()
}

/// The item of `name` in a RateLimit field: its `r`.
fn remaining(ratelimit: &str, name: &str) -> u64 {
    let item = ratelimit
        .split(", ")
        .find(|i| i.starts_with(&format!("\"{name}\";")))
        .unwrap_or_else(|| panic!("no {name} in {ratelimit}"));
    let r = item.split(';').find_map(|p| p.strip_prefix("r=")).unwrap();
    r.parse().unwrap()
}

#[tokio::test]
async fn the_gateway_admits_exactly_what_the_real_token_counts_allow() {
    let (url, calls) = gateway().await;
    // The model: the limits over the real costs of what was admitted.
    let (mut used, mut admitted, mut by_estimate) = (0, 0, 0);
    let mut estimated = 0;
    for i in 0..90u64 {
        let prompt = "x".repeat((i * 37 % 400) as usize);
        let max_tokens = 200 + i * 53 % 900;
        let body = json!({"prompt": &prompt, "max_tokens": max_tokens}).to_string();
        let estimate = llm_gateway::estimate(body.as_bytes());
        let fits = admitted < REQUESTS && used + estimate <= TOKENS;
        // Counted at the estimate alone (no settle), fewer would fit.
        if estimated + estimate <= TOKENS {
            estimated += estimate;
            by_estimate += 1;
        }
        let r = complete(&url, "ada", &prompt, max_tokens).await;
        let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
        if fits {
            assert_eq!(r.status(), 200, "request {i}: the real counts leave room");
            // The RateLimit field lists both limits, after the settle.
            let real = real_tokens(&prompt, max_tokens);
            assert_eq!(remaining(&ratelimit, "tokens"), TOKENS - used - real);
            assert_eq!(remaining(&ratelimit, "requests"), REQUESTS - admitted - 1);
            let answer: Value = r.json().await.unwrap();
            assert_eq!(answer["usage"]["total_tokens"], real);
            used += real;
            admitted += 1;
        } else {
            assert_eq!(r.status(), 429, "request {i}: {used} tokens used");
            assert_eq!(remaining(&ratelimit, "tokens"), TOKENS - used);
            if admitted < REQUESTS {
                assert!(ratelimit.starts_with("\"tokens\""), "{ratelimit}");
            }
        }
    }
    assert_eq!(calls.load(Ordering::SeqCst) as u64, admitted);
    assert!(
        admitted > by_estimate + 10,
        "settling admits more than the estimates: {admitted} vs {by_estimate}"
    );
    assert!(used > TOKENS - 1_200, "the budget was used up: {used}");
}

#[tokio::test]
async fn an_upstream_failure_is_refunded_and_an_answer_without_usage_keeps_the_estimate() {
    let (url, calls) = gateway().await;
    let r = complete(&url, "bob", "fail", 1_000).await;
    assert_eq!(r.status(), 500);
    assert_eq!(r.text().await.unwrap(), "overloaded");
    // Refunded: the next request is the first to count, in both limits.
    let r = complete(&url, "bob", "quiet", 1_000).await;
    assert_eq!(r.status(), 200);
    let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    let estimate = 2 + 1_000;
    assert_eq!(remaining(&ratelimit, "requests"), REQUESTS - 1);
    assert_eq!(remaining(&ratelimit, "tokens"), TOKENS - estimate);
    // The quiet answer kept its estimate; these two are settled to their
    // real count (51 tokens each, not the 101 reserved), as each one says.
    let real = real_tokens("abcd", 100);
    let r = complete(&url, "bob", "abcd", 100).await;
    let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert_eq!(remaining(&ratelimit, "tokens"), TOKENS - estimate - real);
    let r = complete(&url, "bob", "abcd", 100).await;
    let ratelimit = r.headers()["ratelimit"].to_str().unwrap().to_owned();
    assert_eq!(
        remaining(&ratelimit, "tokens"),
        TOKENS - estimate - 2 * real
    );
    assert_eq!(remaining(&ratelimit, "requests"), REQUESTS - 3);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // A prompt whose estimate can never fit: 413, the upstream is not called.
    let r = complete(&url, "bob", "x", 25_000).await;
    assert_eq!(r.status(), 413);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

/// The code of the example's `app`, from its doc comment to its end.
fn app_of_example() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{dir}/examples/llm_gateway.rs")).unwrap();
    let start = text.find("/// The reservation").unwrap();
    let end = text.find("/// Sends the request body").unwrap();
    text[start..end].trim_end().to_owned()
}

#[test]
fn the_library_guide_shows_the_gateway_as_it_is() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{dir}/../../docs/guide/library.md")).unwrap();
    let code = app_of_example();
    assert!(
        readme.contains(&code),
        "docs/guide/library.md must show examples/llm_gateway.rs's estimate, usage and app as they are:\n{code}"
    );
}
