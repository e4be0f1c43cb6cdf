//! Blocks, a limit's `block_ms` and overrides through the limiter, the same
//! scenarios on the memory store, one Redis and a Redis Cluster (a
//! `redis-server` this test starts on free ports): block / unblock with the
//! reason and time left, `block_ms` 3000 on a 1 s window (refused at 1.3 s,
//! served at 3.3 s, refusals during the block do not extend it), an
//! override of max 2 admitting exactly 2 of 5 checks that ask for max 100
//! and the request's limits again after its deletion, allow and deny, a
//! joint request refused whole by one blocked key, and the cap.

mod common;

use axum::Router;
use axum::routing::get;
use slidelog::middleware::Header;
use slidelog::url::StoreOptions;
use slidelog::{Checks, Limit, Limiter, Request, Rule};
use slidelog_testkit::{RedisCluster, RedisServer, unique_prefix};
use std::time::{Duration, Instant};

/// Every scenario on `limiter`; `key` makes the keys of this run unique.
async fn every_scenario(limiter: &Limiter) {
    block_and_unblock(limiter).await;
    block_ms_outlasts_the_window(limiter).await;
    override_replaces_the_limits(limiter).await;
    allow_and_deny(limiter).await;
    // One slot (a shared hash tag), and on a Cluster two slots
    // (reservations, docs/design.md §4.7): refused whole either way.
    a_blocked_key_refuses_a_joint_request(limiter, "{j}user", "{j}route").await;
    a_blocked_key_refuses_a_joint_request(limiter, "x-user", "y-route").await;
}

async fn block_and_unblock(limiter: &Limiter) {
    let limits = [Limit::new(100, 60_000).unwrap()];
    assert!(limiter.check("b-user", &limits, 1).await.unwrap().allowed);
    limiter
        .block("b-user", Duration::from_secs(10), "scraping")
        .await
        .unwrap();
    let d = limiter.check("b-user", &limits, 1).await.unwrap();
    assert!(!d.allowed && d.blocked, "{d:?}");
    assert!((9_000..=10_000).contains(&d.retry_after_ms), "{d:?}");
    let block = limiter.block_of("b-user").await.unwrap().unwrap();
    assert_eq!(block.reason, "scraping");
    assert!(block.remaining_ms <= 10_000);
    // A blocked key records nothing: after the unblock, 99 more fit.
    assert!(limiter.unblock("b-user").await.unwrap());
    assert!(!limiter.unblock("b-user").await.unwrap());
    let d = limiter.check("b-user", &limits, 1).await.unwrap();
    assert!(d.allowed && !d.blocked);
    assert_eq!(d.remaining, 98);
    assert!(limiter.block_of("b-user").await.unwrap().is_none());
}

async fn block_ms_outlasts_the_window(limiter: &Limiter) {
    let limits = [Limit::new(1, 1_000).unwrap().with_block_ms(3_000).unwrap()];
    let start = Instant::now();
    assert!(limiter.check("b-ms", &limits, 1).await.unwrap().allowed);
    let refused = limiter.check("b-ms", &limits, 1).await.unwrap();
    assert!(!refused.allowed && refused.blocked, "{refused:?}");
    // Refusals during the block do not extend it.
    sleep_until(start, 800).await;
    assert!(!limiter.check("b-ms", &limits, 1).await.unwrap().allowed);
    sleep_until(start, 1_300).await;
    let d = limiter.check("b-ms", &limits, 1).await.unwrap();
    assert!(!d.allowed && d.blocked, "refused at 1.3 s: {d:?}");
    assert!(d.retry_after_ms <= 1_800, "{d:?}");
    sleep_until(start, 3_300).await;
    let d = limiter.check("b-ms", &limits, 1).await.unwrap();
    assert!(d.allowed, "served at 3.3 s: {d:?}");
}

async fn override_replaces_the_limits(limiter: &Limiter) {
    let ask = [Limit::new(100, 60_000).unwrap()];
    let two = Rule::Limits(vec![Limit::new(2, 60_000).unwrap()]);
    limiter
        .set_override("o-tenant", two, Duration::from_secs(60))
        .await
        .unwrap();
    let mut admitted = 0;
    for _ in 0..5 {
        admitted += u32::from(limiter.check("o-tenant", &ask, 1).await.unwrap().allowed);
    }
    assert_eq!(admitted, 2);
    assert!(limiter.remove_override("o-tenant").await.unwrap());
    let d = limiter.check("o-tenant", &ask, 1).await.unwrap();
    assert!(d.allowed);
    assert_eq!((d.limit, d.remaining), (100, 97));
}

async fn allow_and_deny(limiter: &Limiter) {
    let one = [Limit::new(1, 60_000).unwrap()];
    let hour = Duration::from_secs(3_600);
    limiter
        .set_override("o-allow", Rule::Allow, hour)
        .await
        .unwrap();
    for _ in 0..5 {
        assert!(limiter.check("o-allow", &one, 1).await.unwrap().allowed);
    }
    limiter
        .set_override("o-deny", Rule::Deny, hour)
        .await
        .unwrap();
    let d = limiter.check("o-deny", &one, 1).await.unwrap();
    assert!(!d.allowed && d.retry_after_ms > 0);
    limiter.remove_override("o-allow").await.unwrap();
    limiter.remove_override("o-deny").await.unwrap();
    assert!(limiter.check("o-deny", &one, 1).await.unwrap().allowed);
    assert!(limiter.check("o-allow", &one, 1).await.unwrap().allowed);
    assert!(!limiter.check("o-allow", &one, 1).await.unwrap().allowed);
}

async fn a_blocked_key_refuses_a_joint_request(limiter: &Limiter, user: &str, route: &str) {
    let limit = Limit::new(10, 60_000).unwrap();
    let (user_key, route_key) = (user, route);
    let user = Request::single(user_key, limit).unwrap();
    let route = Request::single(route_key, limit).unwrap();
    let both = Checks::new([user.clone(), route]).unwrap();
    limiter
        .block(route_key, Duration::from_secs(30), "maintenance")
        .await
        .unwrap();
    let joint = limiter.check_all(&both).await.unwrap();
    assert!(!joint.allowed);
    assert_eq!(joint.refused_by.unwrap().check, 1);
    assert!(joint.checks[1].decision.blocked);
    // Refused whole: the user's log recorded nothing.
    let alone = limiter
        .decide_each(&user, slidelog::Mode::Peek)
        .await
        .unwrap();
    assert_eq!(alone.decision.remaining, 9);
    limiter.unblock(route_key).await.unwrap();
    assert!(limiter.check_all(&both).await.unwrap().allowed);
}

async fn sleep_until(start: Instant, ms: u64) {
    let at = start + Duration::from_millis(ms);
    tokio::time::sleep(at.saturating_duration_since(Instant::now())).await;
}

async fn on_url(url: &str, test: &str) -> Limiter {
    Limiter::builder()
        .timeout(Duration::from_secs(2))
        .override_cache(Duration::ZERO)
        .open(url, StoreOptions::default().prefix(unique_prefix(test)))
        .await
        .expect("open the test store")
}

#[tokio::test]
async fn on_the_memory_store() {
    every_scenario(&Limiter::memory()).await;
}

#[tokio::test]
async fn on_redis() {
    let redis = RedisServer::start();
    every_scenario(&on_url(&redis.url(), "blocks").await).await;
}

#[tokio::test]
async fn on_a_redis_cluster() {
    let cluster = RedisCluster::start();
    every_scenario(&on_url(&cluster.url(), "blocks_cluster").await).await;
}

#[tokio::test]
async fn bad_bounds_name_the_field_and_the_bound() {
    let limiter = Limiter::memory();
    let huge = Duration::from_millis(slidelog_core_max() + 1);
    let e = limiter.block("k", huge, "x").await.unwrap_err();
    assert!(e.to_string().contains("duration_ms") && e.to_string().contains("31622400000"));
    let e = limiter
        .set_override("k", Rule::Allow, huge)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("ttl_ms"), "{e}");
    let e = Limit::new(1, 1_000)
        .unwrap()
        .with_block_ms(u64::MAX)
        .unwrap_err();
    assert!(e.to_string().contains("block_ms"), "{e}");
}

fn slidelog_core_max() -> u64 {
    366 * 24 * 3_600 * 1_000
}

#[tokio::test]
async fn blocks_are_bounded_by_the_cap_with_a_clear_error() {
    let store = slidelog::store::MemoryStore::new().with_max_controls(100_000);
    let limiter = Limiter::from_store(std::sync::Arc::new(store));
    let hour = Duration::from_secs(3_600);
    for i in 0..100_000 {
        limiter.block(&format!("k{i}"), hour, "bulk").await.unwrap();
    }
    let e = limiter.block("one-more", hour, "bulk").await.unwrap_err();
    assert!(e.to_string().contains("--max-blocks"), "{e}");
    assert_eq!(limiter.control_count().await.unwrap(), Some((100_000, 0)));
    // A key already held is replaced, not refused.
    limiter.block("k7", hour, "again").await.unwrap();
}

#[tokio::test]
async fn on_redis_the_cap_bounds_blocks_and_overrides_together() {
    let redis = RedisServer::start();
    let options = StoreOptions {
        max_controls: 50,
        ..StoreOptions::default().prefix(unique_prefix("blocks_cap"))
    };
    let limiter = Limiter::builder()
        .timeout(Duration::from_secs(2))
        .open(&redis.url(), options)
        .await
        .unwrap();
    let hour = Duration::from_secs(3_600);
    for i in 0..40 {
        limiter.block(&format!("k{i}"), hour, "bulk").await.unwrap();
    }
    for i in 0..10 {
        limiter
            .set_override(&format!("o{i}"), Rule::Deny, hour)
            .await
            .unwrap();
    }
    let e = limiter.block("one-more", hour, "bulk").await.unwrap_err();
    assert!(e.to_string().contains("--max-blocks"), "{e}");
    let e = limiter
        .set_override("one-more", Rule::Allow, hour)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("--max-blocks"), "{e}");
    assert_eq!(limiter.control_count().await.unwrap(), Some((40, 10)));
    // Held ones are replaced; a deletion makes room.
    limiter.block("k3", hour, "again").await.unwrap();
    assert!(limiter.unblock("k4").await.unwrap());
    limiter.block("one-more", hour, "bulk").await.unwrap();
    // Every index key has a TTL.
    let mut conn = redis.client();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*controls*")
        .query(&mut conn)
        .unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap();
        assert!(ttl > 0, "{key} {ttl}");
    }
}

/// The tower layer answers a blocked key 429 with `Retry-After` within the
/// block, and serves it again once lifted.
#[tokio::test]
async fn the_layer_answers_a_blocked_key_429() {
    let limiter = Limiter::memory();
    let layer = slidelog::RateLimitLayer::new(
        limiter.clone(),
        Header::named("x-api-key").unwrap(),
        "100/minute".parse().unwrap(),
    );
    let log = format!("{}:default:k", layer.namespace());
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .layer(layer);
    let base = common::serve(app).await;
    let http = common::client();
    let get = || http.get(format!("{base}/")).header("x-api-key", "k").send();
    assert_eq!(get().await.unwrap().status(), 200);
    limiter
        .block(&log, Duration::from_secs(30), "abuse")
        .await
        .unwrap();
    let refused = get().await.unwrap();
    assert_eq!(refused.status(), 429);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&retry), "{retry}");
    limiter.unblock(&log).await.unwrap();
    assert_eq!(get().await.unwrap().status(), 200);
}

/// On Redis the refusal and its `block_ms` block are one script run: the
/// store alone (no limiter step after it) answers the refusal blocked, and
/// a refusal during the block leaves its TTL as it was (NX).
#[tokio::test]
async fn on_redis_block_ms_is_set_in_the_refusals_own_step() {
    use slidelog::{Mode, Now};
    let redis = RedisServer::start();
    let limiter = on_url(&redis.url(), "blocks_script").await;
    let store = limiter.store();
    let limit = Limit::new(1, 60_000).unwrap().with_block_ms(5_000).unwrap();
    let request = Request::single("s-key", limit).unwrap();
    let first = store
        .decide(&request, Mode::Record, Now::Server)
        .await
        .unwrap();
    assert!(first.allowed);
    let refused = store
        .decide(&request, Mode::Record, Now::Server)
        .await
        .unwrap();
    assert!(!refused.allowed && refused.blocked, "{refused:?}");
    // The window's wait (up to 60 s) is longer than the block: the larger.
    assert!(refused.retry_after_ms >= 5_000, "{refused:?}");
    let block = store.get_block("s-key").await.unwrap().unwrap();
    assert_eq!(block.reason, "block_ms");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = store
        .decide(&request, Mode::Record, Now::Server)
        .await
        .unwrap();
    assert!(again.blocked);
    let later = store.get_block("s-key").await.unwrap().unwrap();
    assert!(
        later.remaining_ms <= block.remaining_ms - 250,
        "{later:?} {block:?}"
    );
    // A peek never blocks.
    let other = Request::single("s-peek", limit).unwrap();
    store
        .decide(&other, Mode::Record, Now::Server)
        .await
        .unwrap();
    let peek = store.decide(&other, Mode::Peek, Now::Server).await.unwrap();
    assert!(!peek.allowed && !peek.blocked);
    assert!(store.get_block("s-peek").await.unwrap().is_none());
}

/// On the module engine the command reads no block key: a block is refused
/// with a clear error rather than stored and not enforced.
#[tokio::test]
async fn on_the_module_engine_a_block_is_refused_not_ignored() {
    let server = RedisServer::start_with_module(slidelog_testkit::ServerKind::Redis, &[]);
    let limiter = on_url(&format!("{}?engine=module", server.url()), "blocks_module").await;
    let e = limiter
        .block("m-key", Duration::from_secs(10), "x")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("module engine"), "{e}");
    let limits = [Limit::new(1, 60_000).unwrap()];
    assert!(limiter.check("m-key", &limits, 1).await.unwrap().allowed);
}
