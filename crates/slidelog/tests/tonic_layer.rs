//! The rate limit layer on a real tonic server (the standard gRPC health
//! service) called by a real tonic client over loopback: the limit per client
//! address answers RESOURCE_EXHAUSTED with the RateLimit fields as metadata,
//! exact under concurrency, and a failing store under fail-closed answers
//! UNAVAILABLE.

use slidelog::middleware::{Constant, KeyExtractor, PeerIp, RateLimitLayer, RouteLimits};
use slidelog::store::MemoryStore;
use slidelog::{Limit, Limiter};
use std::sync::Arc;
use tonic::Code;
use tonic::transport::{Channel, Server, server::TcpIncoming};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// Serves the health service behind `layer` on 127.0.0.1:0; returns a client.
async fn serve<K: KeyExtractor>(layer: RateLimitLayer<K>) -> HealthClient<Channel> {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        Server::builder()
            .layer(layer)
            .add_service(health)
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .expect("tonic server");
    });
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect()
        .await
        .expect("connect to the tonic server");
    HealthClient::new(channel)
}

fn per_minute(max: u64) -> RouteLimits {
    RouteLimits::new([Limit::new(max, 60_000).expect("valid limit")]).expect("valid routes")
}

#[tokio::test]
async fn the_limit_per_client_answers_resource_exhausted_with_ratelimit_metadata() {
    let mut client = serve(RateLimitLayer::new(
        Limiter::memory(),
        PeerIp::new(),
        per_minute(3),
    ))
    .await;
    for _ in 0..3 {
        let ok = client
            .check(HealthCheckRequest::default())
            .await
            .expect("admitted");
        assert_eq!(
            ok.metadata().get("ratelimit-policy").unwrap(),
            r#""default";q=3;w=60"#
        );
    }
    let status = client
        .check(HealthCheckRequest::default())
        .await
        .expect_err("the fourth call is over the limit");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("rate limit exceeded"),
        "{status:?}"
    );
    let retry: u64 = status
        .metadata()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry));
    assert!(
        status
            .metadata()
            .get("ratelimit")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(r#""default";r=0;t="#)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_grpc_calls_are_admitted_exactly() {
    let client = serve(RateLimitLayer::new(
        Limiter::memory(),
        Constant::new("all"),
        per_minute(10),
    ))
    .await;
    let calls: Vec<_> = (0..40)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move { client.check(HealthCheckRequest::default()).await })
        })
        .collect();
    let (mut ok, mut exhausted) = (0, 0);
    for call in calls {
        match call.await.expect("task") {
            Ok(_) => ok += 1,
            Err(s) if s.code() == Code::ResourceExhausted => exhausted += 1,
            Err(s) => panic!("unexpected status {s:?}"),
        }
    }
    assert_eq!((ok, exhausted), (10, 30));
}

#[tokio::test]
async fn a_failing_store_under_fail_closed_answers_unavailable() {
    // A memory store with room for one key fails for the second key.
    let store = Arc::new(MemoryStore::new().with_key_cap(1));
    let limiter = Limiter::builder().fail_closed().build(store);
    limiter
        .check("someone-else", &[Limit::new(1, 60_000).unwrap()], 1)
        .await
        .expect("the first key fits");
    let mut client = serve(RateLimitLayer::new(limiter, PeerIp::new(), per_minute(3))).await;
    let status = client
        .check(HealthCheckRequest::default())
        .await
        .expect_err("the store is full");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("store full"), "{status:?}");
}
