//! The service over its transports: gRPC `ShouldRateLimit` from a tonic
//! client, `POST /json` from an HTTP client, and the store failure policy
//! (fail-open answers OK, fail-closed answers gRPC UNAVAILABLE / HTTP 503).

mod common;

use common::{
    descriptor, limiter, limiter_with, memory_limiter, request, start_grpc, start_json_on_memory,
};
use slidelog_envoy::ServiceOptions;
use slidelog_envoy::proto::RateLimitServiceClient;
use slidelog_envoy::proto::rate_limit_response::Code;
use slidelog_redis::{RedisOptions, RedisStore};
use slidelog_testkit::{RedisServer, unique_prefix};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn grpc_should_rate_limit_from_a_tonic_client() {
    let addr = start_grpc(memory_limiter()).await;
    let mut client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let req = request("api", vec![descriptor(&[("user", "grpc")])]);
    let mut codes = Vec::new();
    for _ in 0..4 {
        let r = client
            .should_rate_limit(req.clone())
            .await
            .unwrap()
            .into_inner();
        codes.push(r.overall_code);
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    assert_eq!(codes, vec![ok, ok, ok, over]);

    let err = client
        .should_rate_limit(request("", vec![descriptor(&[("user", "x")])]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("domain"), "{}", err.message());
}

#[tokio::test]
async fn post_json_answers_the_json_form() {
    let url = start_json_on_memory().await;
    let http = reqwest::Client::new();
    let body = serde_json::json!({
        "domain": "api",
        "descriptors": [{"entries": [{"key": "user", "value": "json"}]}, {"entries": [{"key": "x", "value": "y"}]}]
    });
    let r = http.post(&url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["overallCode"], "OK");
    assert_eq!(v["statuses"][0]["code"], "OK");
    assert_eq!(v["statuses"][0]["currentLimit"]["requestsPerUnit"], 3);
    assert_eq!(v["statuses"][0]["currentLimit"]["unit"], "MINUTE");
    assert_eq!(v["statuses"][0]["limitRemaining"], 2);
    assert_eq!(v["statuses"][0]["durationUntilReset"], "60s");
    assert_eq!(v["statuses"][1], serde_json::json!({"code": "OK"}));

    let body = serde_json::json!({
        "domain": "api", "hits_addend": 3,
        "descriptors": [{"entries": [{"key": "user", "value": "json"}]}]
    });
    let r = http.post(&url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["overallCode"], "OVER_LIMIT");
    assert_eq!(v["statuses"][0]["code"], "OVER_LIMIT");

    let r = http.post(&url).body("{not json").send().await.unwrap();
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("JSON"), "{v}");
    let r = http
        .post(&url)
        .json(&serde_json::json!({"domain": "api"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn store_failure_follows_the_policy_and_recovers() {
    let mut server = RedisServer::start();
    let prefix = unique_prefix("envoy-fail");
    let options = RedisOptions::default().with_prefix(&prefix);
    let store: Arc<dyn slidelog_core::Store> =
        Arc::new(RedisStore::connect(&server.url(), options).await.unwrap());
    let open = start_grpc(limiter(store.clone(), ServiceOptions::default())).await;
    let closed = start_grpc(limiter_with(
        slidelog::Limiter::builder().fail_closed().build(store),
        ServiceOptions::default(),
    ))
    .await;
    let mut open = RateLimitServiceClient::connect(format!("http://{open}"))
        .await
        .unwrap();
    let mut closed = RateLimitServiceClient::connect(format!("http://{closed}"))
        .await
        .unwrap();
    let req = request("api", vec![descriptor(&[("user", "f")])]);
    assert_eq!(
        closed
            .should_rate_limit(req.clone())
            .await
            .unwrap()
            .into_inner()
            .overall_code,
        Code::Ok as i32
    );

    server.kill();
    let started = std::time::Instant::now();
    let r = open
        .should_rate_limit(req.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.overall_code, Code::Ok as i32, "fail-open admits");
    let err = closed.should_rate_limit(req.clone()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a dead store never hangs a caller"
    );

    server.restart();
    let mut recovered = false;
    for _ in 0..100 {
        if let Ok(r) = closed.should_rate_limit(req.clone()).await {
            // The restarted server kept no data (no persistence): a fresh log.
            assert_eq!(r.into_inner().statuses[0].limit_remaining, 2, "exact again");
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "decisions resume after the store returns");
}

#[tokio::test]
async fn undecodable_protobuf_is_invalid_argument() {
    let addr = start_grpc(memory_limiter()).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    // A Duration's field 1 is a varint; RateLimitRequest's field 1 (domain)
    // is a string, so these bytes are no RateLimitRequest.
    let not_a_request = prost_types::Duration {
        seconds: 5,
        nanos: 0,
    };
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
    );
    let codec = tonic_prost::ProstCodec::<
        prost_types::Duration,
        slidelog_envoy::proto::RateLimitResponse,
    >::default();
    let err = grpc
        .unary(tonic::Request::new(not_a_request), path, codec)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("not a valid protobuf message"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn post_json_refuses_unknown_fields_naming_them() {
    let url = start_json_on_memory().await;
    let http = reqwest::Client::new();
    let bodies = [
        (
            serde_json::json!({"domain": "api", "colour": 1, "descriptors": []}),
            "colour",
        ),
        (
            serde_json::json!({"domain": "api", "descriptors": [{"entries": [{"key": "user", "valeu": "x"}]}]}),
            "valeu",
        ),
        (
            serde_json::json!({"domain": "api", "descriptors": [{"entries": [], "hits": 2}]}),
            "hits",
        ),
    ];
    for (body, field) in bodies {
        let r = http.post(&url).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let v: serde_json::Value = r.json().await.unwrap();
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains(&format!("unknown field `{field}`")), "{msg}");
    }
}

#[tokio::test]
async fn post_json_takes_per_descriptor_hits_addend_as_the_reference() {
    let url = start_json_on_memory().await;
    let http = reqwest::Client::new();
    let post = |hits: serde_json::Value| {
        let body = serde_json::json!({
            "domain": "api",
            "descriptors": [{"entries": [{"key": "user", "value": "j"}], "hitsAddend": hits}],
        });
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.post(&url).json(&body).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().await.unwrap())
        }
    };
    // 0 looks and records nothing; "2" (protobuf JSON's string form) counts 2.
    let (status, v) = post(serde_json::json!(0)).await;
    assert_eq!(
        (status, &v["statuses"][0]["limitRemaining"]),
        (200, &serde_json::json!(3)),
        "{v}"
    );
    let (status, v) = post(serde_json::json!("2")).await;
    assert_eq!(
        (status, &v["statuses"][0]["limitRemaining"]),
        (200, &serde_json::json!(1)),
        "{v}"
    );
    // Above the limit: 429; above the bound: 400 naming the field.
    let (status, _) = post(serde_json::json!(4)).await;
    assert_eq!(status, 429);
    let (status, v) = post(serde_json::json!(u64::MAX)).await;
    assert_eq!(status, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("hits_addend"), "{v}");
}

/// A charge has no failure policy in the library; the Envoy API answers a
/// failed one by the service's: degraded OK under fail-open, UNAVAILABLE
/// under fail-closed.
#[tokio::test]
async fn a_failed_charge_follows_the_service_policy() {
    let mut server = RedisServer::start();
    let options = RedisOptions::default().with_prefix(unique_prefix("envoy-charge-fail"));
    let store: Arc<dyn slidelog_core::Store> =
        Arc::new(RedisStore::connect(&server.url(), options).await.unwrap());
    let service = |limiter: slidelog::Limiter| {
        let config = slidelog_envoy::RateLimitConfig::from_yaml_str("usage.yaml", common::USAGE);
        Arc::new(slidelog_envoy::RateLimiter::new(
            limiter,
            slidelog_envoy::ConfigHandle::fixed(config.unwrap()),
            ServiceOptions::default(),
        ))
    };
    let open = service(slidelog::Limiter::from_store(store.clone()));
    let closed = service(slidelog::Limiter::builder().fail_closed().build(store));
    let mut d = descriptor(&[("model", "m")]);
    d.hits_addend = Some(700);
    let charge = request("usage", vec![d]);
    let r = closed.should_rate_limit(&charge).await.unwrap();
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (Code::Ok as i32, 300)
    );

    server.kill();
    let r = open.should_rate_limit(&charge).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32, "fail-open answers OK");
    assert_eq!(
        r.statuses[0].limit_remaining, 0,
        "degraded: no remaining claimed"
    );
    let err = closed.should_rate_limit(&charge).await.unwrap_err();
    assert!(
        matches!(err, slidelog_envoy::ServiceError::Unavailable(_)),
        "{err}"
    );
}

/// A store that decides (the memory store's decisions) but cannot take
/// charges: it keeps `Store::charge`'s default, which refuses with
/// `StoreError::Unsupported`.
#[derive(Debug, Default)]
struct ChargelessStore(slidelog_memory::MemoryStore);

#[async_trait::async_trait]
impl slidelog_core::Store for ChargelessStore {
    async fn decide(
        &self,
        request: &slidelog_core::Request,
        mode: slidelog_core::Mode,
        now: slidelog_core::Now,
    ) -> Result<slidelog_core::Decision, slidelog_core::StoreError> {
        self.0.decide(request, mode, now).await
    }
    async fn reset(&self, key: &str) -> Result<bool, slidelog_core::StoreError> {
        self.0.reset(key).await
    }
    async fn ping(&self) -> Result<(), slidelog_core::StoreError> {
        Ok(())
    }
    fn kind(&self) -> &'static str {
        "chargeless"
    }
}

/// A `charge: true` rule on a store that cannot take charges
/// (`StoreError::Unsupported`) is answered UNAVAILABLE whatever the
/// policy: a capability gap is no outage, so fail-open does not turn it
/// into a degraded OK. Looks (cost 0) and plain checks on the same store
/// still answer.
#[tokio::test]
async fn a_store_without_charges_answers_unavailable_under_both_policies() {
    let store: Arc<dyn slidelog_core::Store> = Arc::new(ChargelessStore::default());
    let service = |limiter: slidelog::Limiter| {
        let config = slidelog_envoy::RateLimitConfig::from_yaml_str("usage.yaml", common::USAGE);
        Arc::new(slidelog_envoy::RateLimiter::new(
            limiter,
            slidelog_envoy::ConfigHandle::fixed(config.unwrap()),
            ServiceOptions::default(),
        ))
    };
    let open = service(slidelog::Limiter::from_store(store.clone()));
    let closed = service(slidelog::Limiter::builder().fail_closed().build(store));
    fn with_cost(entries: &[(&str, &str)], hits: u64) -> slidelog_envoy::proto::RateLimitRequest {
        let mut d = descriptor(entries);
        d.hits_addend = Some(hits);
        request("usage", vec![d])
    }
    let charge = with_cost(&[("model", "m")], 700);
    for (policy, service) in [("fail-open", &open), ("fail-closed", &closed)] {
        let err = service.should_rate_limit(&charge).await.unwrap_err();
        assert!(
            matches!(
                &err,
                slidelog_envoy::ServiceError::Unavailable(slidelog_core::StoreError::Unsupported {
                    operation: "charge",
                    ..
                })
            ),
            "{policy}: {err:?}"
        );
        let status = tonic::Status::from(err);
        assert_eq!(status.code(), tonic::Code::Unavailable, "{policy}");
        assert!(status.message().contains("charge"), "{policy}: {status:?}");
        // A look on the charged rule and a check on another rule answer.
        let r = service
            .should_rate_limit(&with_cost(&[("model", "m")], 0))
            .await
            .unwrap();
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (Code::Ok as i32, 1000)
        );
        let r = service
            .should_rate_limit(&with_cost(&[("user", policy)], 1))
            .await
            .unwrap();
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (Code::Ok as i32, 2)
        );
    }

    // Over gRPC: the status code Envoy sees.
    let addr = start_grpc(open).await;
    let mut client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    let err = client.should_rate_limit(charge).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
}
