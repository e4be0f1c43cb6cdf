//! Decisions per descriptor, the same suite over the memory store and a real
//! `redis-server`: limits, value-less keys (one log per value), nesting,
//! shadow mode, unlimited, `replaces`, cost (`hits_addend`), overrides,
//! unknown domains, and the Redis key of a descriptor.

mod common;

use common::{descriptor, limiter, request};
use slidelog_core::Store;
use slidelog_envoy::proto::rate_limit_response::{Code, rate_limit::Unit};
use slidelog_envoy::proto::{
    RateLimitResponse, RateLimitUnit, rate_limit_descriptor::RateLimitOverride,
};
use slidelog_envoy::{RateLimiter, ServiceError, ServiceOptions};
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, ServerKind, unique_prefix};
use std::sync::Arc;

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

async fn ask(l: &RateLimiter, entries: &[&[(&str, &str)]]) -> RateLimitResponse {
    let descriptors = entries.iter().map(|e| descriptor(e)).collect();
    l.should_rate_limit(&request("api", descriptors))
        .await
        .unwrap()
}

fn codes(r: &RateLimitResponse) -> Vec<i32> {
    r.statuses.iter().map(|s| s.code).collect()
}

async fn suite(store: Arc<dyn Store>) {
    let l = limiter(store, ServiceOptions::default());

    // 3 per minute for each user: each distinct value has its own log.
    for remaining in [2, 1, 0] {
        let r = ask(&l, &[&[("user", "alice")]]).await;
        assert_eq!(r.overall_code, OK);
        let s = &r.statuses[0];
        assert_eq!(s.limit_remaining, remaining);
        let cl = s.current_limit.as_ref().unwrap();
        assert_eq!((cl.requests_per_unit, cl.unit), (3, Unit::Minute as i32));
        let reset = s.duration_until_reset.unwrap();
        assert!((59..=60).contains(&reset.seconds), "{reset:?}");
    }
    let r = ask(&l, &[&[("user", "alice")]]).await;
    assert_eq!(r.overall_code, OVER);
    assert_eq!(r.statuses[0].limit_remaining, 0);
    let wait = r.statuses[0].duration_until_reset.unwrap();
    assert!((55..=60).contains(&wait.seconds), "retry wait {wait:?}");
    assert_eq!(ask(&l, &[&[("user", "bob")]]).await.overall_code, OK);

    // Several descriptors: decided together (tests/joint.rs), one status each, in order.
    let r = ask(
        &l,
        &[
            &[("user", "alice")],
            &[("user", "carol")],
            &[("nothing", "x")],
        ],
    )
    .await;
    assert_eq!(codes(&r), vec![OVER, OK, OK]);
    assert_eq!(r.overall_code, OVER);
    assert!(r.statuses[2].current_limit.is_none());

    // Nested: (path=/login, user=dave) has its own 1 per hour.
    let nested: &[(&str, &str)] = &[("path", "/login"), ("user", "dave")];
    assert_eq!(ask(&l, &[nested]).await.overall_code, OK);
    assert_eq!(ask(&l, &[nested]).await.overall_code, OVER);
    assert_eq!(
        ask(&l, &[&[("path", "/login"), ("user", "erin")]])
            .await
            .overall_code,
        OK
    );

    // Shadow mode: over the limit is recorded but answered OK.
    for _ in 0..3 {
        let r = ask(&l, &[&[("shadow", "s")]]).await;
        assert_eq!(r.overall_code, OK);
    }

    // Unlimited: always OK.
    for _ in 0..5 {
        let r = ask(&l, &[&[("client", "internal")]]).await;
        assert_eq!(r.overall_code, OK);
        assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
    }

    // slidelog's window: 2 per 90 s, reported as a minute.
    let r = ask(&l, &[&[("burst", "b")]]).await;
    let s = &r.statuses[0];
    assert_eq!(s.current_limit.as_ref().unwrap().unit, Unit::Minute as i32);
    assert!((89..=90).contains(&s.duration_until_reset.unwrap().seconds));

    // `replaces`: the tenant rule replaces the rule named "login".
    let r = ask(&l, &[&[("path", "/login")], &[("tenant", "t1")]]).await;
    assert!(
        r.statuses[0].current_limit.is_none(),
        "replaced rule is not applied"
    );
    assert!(r.statuses[1].current_limit.is_some());

    // Cost, as the reference reads it: the descriptor's hits_addend when set
    // (0 included: a look that records nothing), else the request's, 0
    // meaning 1.
    let mut req = request("api", vec![descriptor(&[("user", "frank")])]);
    req.hits_addend = 2;
    let r = l.should_rate_limit(&req).await.unwrap();
    assert_eq!(r.statuses[0].limit_remaining, 1);
    req.hits_addend = 0;
    req.descriptors[0].hits_addend = Some(0);
    let r = l.should_rate_limit(&req).await.unwrap();
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 1));
    req.descriptors[0].hits_addend = Some(1);
    let r = l.should_rate_limit(&req).await.unwrap();
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 0));
    // A full log is not over: a look is still OK (the reference's INCRBY 0).
    req.descriptors[0].hits_addend = Some(0);
    let r = l.should_rate_limit(&req).await.unwrap();
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 0));
    req.descriptors[0].hits_addend = Some(2);
    let r = l.should_rate_limit(&req).await.unwrap();
    assert_eq!(r.overall_code, OVER, "2 more than the 0 remaining");
    // Above requests_per_unit (3) but within --max-cost: over the limit, as
    // in the reference, reported with the rule's limit.
    req.descriptors[0].hits_addend = Some(4);
    let r = l.should_rate_limit(&req).await.unwrap();
    let s = &r.statuses[0];
    assert_eq!((r.overall_code, s.limit_remaining), (OVER, 0));
    assert_eq!(s.current_limit.as_ref().unwrap().requests_per_unit, 3);
    // Above --max-cost: refused, naming the field and the bound.
    for hits in [10_000_001, u64::MAX] {
        req.descriptors[0].hits_addend = Some(hits);
        let err = l.should_rate_limit(&req).await.unwrap_err();
        assert!(
            matches!(err, ServiceError::InvalidArgument(ref m)
                if m.contains("descriptors[0]: hits_addend") && m.contains("--max-cost")),
            "{err}"
        );
    }

    // A limit override from the client applies in a configured domain.
    let mut d = descriptor(&[("anything", "x")]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: RateLimitUnit::Second as i32,
    });
    let req = request("api", vec![d]);
    assert_eq!(l.should_rate_limit(&req).await.unwrap().overall_code, OK);
    assert_eq!(l.should_rate_limit(&req).await.unwrap().overall_code, OVER);

    // Unknown domain: not limited. Empty domain or descriptors: an error.
    let r = l
        .should_rate_limit(&request("nope", vec![descriptor(&[("user", "alice")])]))
        .await
        .unwrap();
    assert_eq!(codes(&r), vec![OK]);
    let err = l
        .should_rate_limit(&request("", vec![descriptor(&[("user", "a")])]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::InvalidArgument(ref m) if m.contains("domain")),
        "{err}"
    );
    let err = l
        .should_rate_limit(&request("api", vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::InvalidArgument(ref m) if m.contains("descriptors")),
        "{err}"
    );
}

#[tokio::test]
async fn decisions_on_the_memory_store() {
    suite(Arc::new(slidelog_memory::MemoryStore::new())).await;
}

#[tokio::test]
async fn decisions_on_redis_and_the_key_layout() {
    let server = RedisServer::start();
    let prefix = unique_prefix("envoy");
    let store = RedisStore::connect(&server.url(), RedisOptions::default().with_prefix(&prefix))
        .await
        .unwrap();
    suite(Arc::new(store)).await;

    // One sorted set per descriptor, named by the documented key.
    let mut c = server.client();
    let key = format!("{prefix}envoy:api:user=alice");
    let n: u64 = redis::cmd("ZCARD").arg(&key).query(&mut c).unwrap();
    assert_eq!(n, 3);
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut c).unwrap();
    assert!(ttl > 50_000 && ttl <= 60_000, "{ttl}");
    let nested = format!("{prefix}envoy:api:path=/login:user=dave");
    let n: u64 = redis::cmd("ZCARD").arg(&nested).query(&mut c).unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn response_headers_report_the_tightest_descriptor() {
    let l = limiter(
        Arc::new(slidelog_memory::MemoryStore::new()),
        ServiceOptions {
            response_headers: true,
            ..ServiceOptions::default()
        },
    );
    let r = ask(&l, &[&[("tenant", "t")], &[("user", "u")]]).await;
    let h: Vec<(&str, &str)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(
        h,
        vec![
            ("x-ratelimit-limit", "3, 3;w=60"),
            ("x-ratelimit-remaining", "2"),
            ("x-ratelimit-reset", "60"),
        ]
    );
    // Off (the default): no headers, however many descriptors are limited.
    let l = limiter(
        Arc::new(slidelog_memory::MemoryStore::new()),
        ServiceOptions::default(),
    );
    let r = ask(&l, &[&[("tenant", "t")], &[("user", "u")]]).await;
    assert_eq!(r.statuses.len(), 2);
    assert!(r.response_headers_to_add.is_empty());
    let r = ask(&l, &[&[("user", "u")]]).await;
    assert!(r.response_headers_to_add.is_empty());
}

async fn ask_compat(l: &RateLimiter, entries: &[(&str, &str)]) -> RateLimitResponse {
    l.should_rate_limit(&request("compat", vec![descriptor(entries)]))
        .await
        .unwrap()
}

#[tokio::test]
async fn share_threshold_and_blocking_decide_as_the_reference_on_redis() {
    let server = RedisServer::start();
    let prefix = unique_prefix("envoy-compat");
    let store = RedisStore::connect(&server.url(), RedisOptions::default().with_prefix(&prefix))
        .await
        .unwrap();
    let l = common::limiter_for(Arc::new(store), common::COMPAT);

    // share_threshold: files/a, files/b and files/c spend one budget of 3.
    for (name, remaining) in [("a", 2), ("b", 1), ("c", 0)] {
        let value = format!("files/{name}");
        let r = ask_compat(&l, &[("files", value.as_str())]).await;
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (OK, remaining)
        );
    }
    let r = ask_compat(&l, &[("files", "files/d")]).await;
    assert_eq!(r.overall_code, OVER);

    // A wildcard without share_threshold: one log per value.
    for value in ["bar-1-b", "bar-2-b"] {
        let r = ask_compat(&l, &[("mid", value)]).await;
        assert_eq!(r.statuses[0].limit_remaining, 1, "{value}");
    }

    // requests_per_unit: 0 is over the limit, with the configured unit, and
    // nothing is written: the store is not asked.
    for _ in 0..3 {
        let r = ask_compat(&l, &[("blocked", "anyone")]).await;
        assert_eq!(r.overall_code, OVER);
        let s = &r.statuses[0];
        let cl = s.current_limit.as_ref().unwrap();
        assert_eq!((cl.requests_per_unit, cl.unit), (0, Unit::Hour as i32));
        assert_eq!(s.limit_remaining, 0);
        assert_eq!(s.duration_until_reset.unwrap().seconds, 3600);
    }

    // unlimited beside requests_per_unit, without a unit.
    let r = ask_compat(&l, &[("trusted", "me")]).await;
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (OK, u32::MAX)
    );

    let mut c = server.client();
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(&mut c)
        .unwrap();
    keys.sort();
    let keys: Vec<&str> = keys.iter().map(|k| &k[prefix.len()..]).collect();
    assert_eq!(
        keys,
        vec![
            "envoy:compat:files=files/*",
            "envoy:compat:mid=bar-1-b",
            "envoy:compat:mid=bar-2-b",
        ]
    );
    let n: u64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}envoy:compat:files=files/*"))
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 3);
}

#[tokio::test]
async fn blocking_in_shadow_mode_answers_ok() {
    let yaml = "domain: compat\ndescriptors:\n  - key: b\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 0}\n";
    let l = common::limiter_for(Arc::new(slidelog_memory::MemoryStore::new()), yaml);
    let r = ask_compat(&l, &[("b", "x")]).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        0
    );
}

/// Usage-based limits on `store`: a look (cost 0) records nothing, a charge
/// (`charge: true`) records even past the limit, and counts stay exact.
async fn usage_suite(store: Arc<dyn slidelog_core::Store>) {
    let l = common::limiter_for(store, common::USAGE);
    let call = |hits: Option<u64>, entries: &'static [(&'static str, &'static str)]| {
        let mut d = descriptor(entries);
        d.hits_addend = hits;
        let req = request("usage", vec![d]);
        let l = Arc::clone(&l);
        async move {
            let r = l.should_rate_limit(&req).await.unwrap();
            (r.overall_code, r.statuses[0].limit_remaining)
        }
    };
    let model: &[(&str, &str)] = &[("model", "m")];
    assert_eq!(call(Some(0), model).await, (OK, 1000));
    assert_eq!(call(Some(600), model).await, (OK, 400));
    assert_eq!(call(Some(0), model).await, (OK, 400));
    // Past the limit: recorded, answered over; the next look is over.
    assert_eq!(call(Some(500), model).await, (OVER, 0));
    assert_eq!(call(Some(0), model).await, (OVER, 0));
    // On a rule that does not charge, a cost that does not fit records nothing.
    let user: &[(&str, &str)] = &[("user", "u")];
    assert_eq!(call(Some(2), user).await, (OK, 1));
    assert_eq!(call(Some(2), user).await, (OVER, 1));
    assert_eq!(call(Some(4), user).await, (OVER, 0));
    assert_eq!(call(Some(0), user).await, (OK, 1));
    assert_eq!(call(None, user).await, (OK, 0));
    assert_eq!(call(Some(0), user).await, (OK, 0));
}

#[tokio::test]
async fn usage_based_limits_on_the_memory_store() {
    usage_suite(Arc::new(slidelog_memory::MemoryStore::new())).await;
}

#[tokio::test]
async fn usage_based_limits_on_redis() {
    let server = RedisServer::start();
    let prefix = unique_prefix("envoy-usage");
    let store = RedisStore::connect(&server.url(), RedisOptions::default().with_prefix(&prefix))
        .await
        .unwrap();
    usage_suite(Arc::new(store)).await;
    // The charges are one log of two records on the descriptor's key.
    let mut c = server.client();
    let n: u64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}envoy:usage:model=m"))
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
}

/// The same usage suite on the Redis module engine (`engine=module`):
/// looks go through `SLIDELOG.CHECK` (a peek of cost 1), charges through
/// `SLIDELOG.CHARGE`; the answers are the scripts' and the memory store's.
#[tokio::test]
async fn usage_based_limits_on_the_redis_module() {
    let server = RedisServer::start_with_module(ServerKind::Redis, &[]);
    let prefix = unique_prefix("envoy-usage-module");
    let url = format!("{}?engine=module", server.url());
    let store = RedisStore::connect(&url, RedisOptions::default().with_prefix(&prefix))
        .await
        .unwrap();
    usage_suite(Arc::new(store)).await;
    // The charges are one log of the module's type on the descriptor's key.
    let mut c = server.client();
    let kind: String = redis::cmd("TYPE")
        .arg(format!("{prefix}envoy:usage:model=m"))
        .query(&mut c)
        .unwrap();
    assert_ne!(kind, "zset", "the module engine keeps its own type");
    assert_ne!(kind, "none");
}
