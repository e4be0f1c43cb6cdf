//! The examples run here, as CI runs the tests: `check` as it is, and the
//! two servers' routers (`app`) on a loopback port with a real HTTP client,
//! on the memory store and on a Redis that is down when the app starts. The
//! library guide (docs/guide/library.md) and the README show each example's code as it is in `examples/`; the last test
//! holds them equal (the worker example runs in tests/worker_processes.rs).

mod common;

#[path = "../examples/check.rs"]
mod check;

#[allow(dead_code)]
#[path = "../examples/axum_app.rs"]
mod axum_app;

#[allow(dead_code)]
#[path = "../examples/tokens_per_minute.rs"]
mod tokens_per_minute;

use common::{client, serve};
use slidelog::Limiter;

#[test]
fn the_check_example_runs() {
    check::main().expect("examples/check.rs");
}

#[tokio::test]
async fn the_axum_app_limits_per_key_and_per_ip_without_crossing() {
    let base = serve(axum_app::app(&Limiter::memory()).unwrap()).await;
    let http = client();
    for _ in 0..10 {
        let r = http.post(format!("{base}/upload")).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = http.post(format!("{base}/upload")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    // An API key equal to the client's IP counts apart from its uploads.
    let search = || {
        http.get(format!("{base}/search"))
            .header("x-api-key", "127.0.0.1")
    };
    let r = search().send().await.unwrap();
    assert_eq!(
        (r.status().as_u16(), r.text().await.unwrap()),
        (200, "results\n".into())
    );
    let r = search().send().await.unwrap();
    assert_eq!(r.headers()["ratelimit"], "\"default\";r=98;t=60");
    // No key: 400.
    let r = http.get(format!("{base}/search")).send().await.unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn the_axum_app_starts_and_serves_while_redis_is_down() {
    let mut redis = slidelog_testkit::RedisServer::start();
    redis.kill();
    let limiter = Limiter::from_url(&redis.url())
        .await
        .expect("fail-open opens");
    let base = serve(axum_app::app(&limiter).unwrap()).await;
    let r = client()
        .post(format!("{base}/upload"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers().get("ratelimit").is_none(),
        "degraded: nothing counted"
    );
    assert_eq!(r.headers()["ratelimit-policy"], "\"default\";q=10;w=60");
    assert_eq!(r.headers()["x-ratelimit-degraded"], "store-unavailable");
}

#[tokio::test]
async fn the_tokens_example_charges_tokens_and_refuses_what_never_fits() {
    let base = serve(tokens_per_minute::app(&Limiter::memory()).unwrap()).await;
    let http = client();
    let send = |user: &str, words: usize| {
        let body = vec!["tok"; words].join(" ");
        let request = http.post(format!("{base}/complete")).header("x-user", user);
        request.body(body).send()
    };
    let r = send("ada", 6_000).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["ratelimit"], "\"default\";r=4000;t=60");
    assert_eq!(r.text().await.unwrap().len(), 6_000 * 4 - 1);
    assert_eq!(send("ada", 6_000).await.unwrap().status(), 429);
    assert_eq!(send("bob", 6_000).await.unwrap().status(), 200);
    let r = send("cy", 10_001).await.unwrap();
    assert_eq!(r.status(), 413);
    assert!(r.text().await.unwrap().contains("between 1 and 10000"));
}

/// The code of an example without its header comment.
fn code_of(example: &str) -> String {
    let text = std::fs::read_to_string(example).unwrap();
    let code = text
        .lines()
        .skip_while(|l| l.starts_with("//!") || l.is_empty());
    code.collect::<Vec<_>>().join("\n")
}

#[test]
fn the_guide_and_the_readme_show_each_example_as_it_is() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let pages = [
        (
            "docs/guide/library.md",
            &["check", "axum_app", "tokens_per_minute", "worker"][..],
        ),
        ("README.md", &["check"][..]),
    ];
    for (page, examples) in pages {
        let text = std::fs::read_to_string(format!("{dir}/../../{page}")).unwrap();
        for example in examples {
            let code = code_of(&format!("{dir}/examples/{example}.rs"));
            assert!(
                text.contains(&format!("```rust\n{code}\n```")),
                "{page} must show examples/{example}.rs as it is:\n{code}"
            );
        }
    }
}
