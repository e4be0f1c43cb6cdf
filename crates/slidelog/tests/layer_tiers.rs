//! Tiers in the layer, on a real Redis: a free and a paid API key on one
//! route each get exactly their own tier's limit (30 concurrent requests
//! each: 5 and 20 admitted), listed under the tier's limit names in the
//! RateLimit fields; a key in no tier gets the layer's own limit; the
//! metrics hook hears every decision with its tier.

mod common;

use axum::{Router, routing::get};
use common::{concurrent_gets, count, serve};
use parking_lot::Mutex;
use slidelog::metrics::MetricsHook;
use slidelog::middleware::{Header, Tiers};
use slidelog::url::StoreOptions;
use slidelog::{Decision, Limiter, RateLimitLayer};
use std::collections::HashMap;
use std::sync::Arc;

/// Decisions per tier, admitted and refused.
#[derive(Debug, Default)]
struct ByTier(Mutex<HashMap<String, (usize, usize)>>);

impl MetricsHook for ByTier {
    fn tier_decided(&self, tier: &str, decision: &Decision) {
        let mut counts = self.0.lock();
        let entry = counts.entry(tier.to_owned()).or_default();
        if decision.allowed {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }
}

/// The plan of an API key: `pk_…` paid, `fk_…` free, anything else none.
fn plan(api_key: &str) -> Option<String> {
    match api_key.split('_').next() {
        Some("pk") => Some("paid".into()),
        Some("fk") => Some("free".into()),
        _ => None,
    }
}

/// A limiter on `redis` telling `hook`. Behaviour, not latency: generous
/// for a busy machine, and fail-closed so a slow call is never a degraded
/// admission that counts nothing.
async fn on_redis(redis: &slidelog_testkit::RedisServer, hook: Arc<ByTier>) -> Limiter {
    let options = StoreOptions::default().prefix(slidelog_testkit::unique_prefix("tiers"));
    Limiter::builder()
        .timeout(std::time::Duration::from_secs(5))
        .fail_closed()
        .metrics(hook)
        .open(&redis.url(), options)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_and_a_paid_key_each_get_their_own_limit_exactly() {
    let redis = slidelog_testkit::RedisServer::start();
    let hook = Arc::new(ByTier::default());
    let limiter = on_redis(&redis, hook.clone()).await;
    let tiers = Tiers::new(plan)
        .tier("free", "free-requests=5/minute".parse().unwrap())
        .unwrap()
        .tier("paid", "paid-requests=20/minute".parse().unwrap())
        .unwrap();
    let key = Header::named("x-api-key").unwrap();
    let layer = RateLimitLayer::new(limiter, key, "10/minute".parse().unwrap())
        .name("api")
        .unwrap()
        .tiers(tiers);
    let base = serve(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    for (api_key, admitted) in [("fk_1", 5), ("pk_1", 20), ("anon", 10)] {
        let codes = concurrent_gets(&base, 30, &[("x-api-key", api_key)]).await;
        assert_eq!(count(&codes, 200), admitted, "{api_key}: {codes:?}");
        assert_eq!(count(&codes, 429), 30 - admitted, "{api_key}: {codes:?}");
    }
    let http = common::client();
    let r = http
        .get(&base)
        .header("x-api-key", "pk_2")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["ratelimit-policy"],
        "\"paid-requests\";q=20;w=60"
    );
    assert_eq!(r.headers()["ratelimit"], "\"paid-requests\";r=19;t=60");
    let r = http
        .get(&base)
        .header("x-api-key", "fk_2")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["ratelimit-policy"],
        "\"free-requests\";q=5;w=60"
    );
    let counts = hook.0.lock().clone();
    assert_eq!(counts["free"], (6, 25), "{counts:?}");
    assert_eq!(counts["paid"], (21, 10), "{counts:?}");
    assert_eq!(counts["default"], (10, 20), "{counts:?}");
}

#[tokio::test]
async fn tiers_price_the_first_key_and_the_other_keys_keep_their_limits() {
    let tiers = Tiers::new(plan)
        .tier("paid", "paid-requests=20/minute".parse().unwrap())
        .unwrap();
    let key = Header::named("x-api-key").unwrap();
    let layer = RateLimitLayer::new(Limiter::memory(), key, "10/minute".parse().unwrap())
        .tiers(tiers)
        .key_name("api-key")
        .unwrap()
        .key(
            "ip",
            slidelog::middleware::PeerIp::new(),
            "3/minute".parse().unwrap(),
        )
        .unwrap();
    let base = serve(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let http = common::client();
    let r = http
        .get(&base)
        .header("x-api-key", "pk_1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["ratelimit-policy"],
        "\"api-key.paid-requests\";q=20;w=60, \"ip\";q=3;w=60"
    );
    let codes = concurrent_gets(&base, 5, &[("x-api-key", "pk_1")]).await;
    assert_eq!(
        count(&codes, 200),
        2,
        "the IP's 3 a minute decides: {codes:?}"
    );
}
