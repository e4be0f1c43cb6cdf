//! A gRPC call ends at its client's deadline (`grpc-timeout`), as it did
//! when tonic's server served the port: with the store frozen and
//! `--store-timeout 5s`, a call with a 300 ms deadline is answered
//! `CANCELLED` ("Timeout expired", percent-encoded on the wire) within
//! about that time, not after the store's timeout. Any other method or
//! service is answered `UNIMPLEMENTED`. The client is a raw HTTP/2 one
//! (`h2`): tonic's client would enforce the deadline itself and hide what
//! the server does.

use axum::body::Bytes;
use axum::http::{Request, Response};
use prost::Message as _;
use slidelog_testkit::RedisServer;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::child;

const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100}\n";
const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// Sends one `ShouldRateLimit` call over a fresh HTTP/2 connection, with
/// `grpc-timeout` when given; returns the response head (whose headers
/// carry `grpc-status` in a trailers-only answer) and when it came.
async fn call(grpc: &str, timeout: Option<&str>) -> (Response<h2::RecvStream>, Duration) {
    call_on(grpc, PATH, timeout).await
}

/// [`call`] on `path`.
async fn call_on(
    grpc: &str,
    path: &str,
    timeout: Option<&str>,
) -> (Response<h2::RecvStream>, Duration) {
    call_as(grpc, path, timeout, "deadline").await
}

/// [`call_on`] for the descriptor value `user`.
async fn call_as(
    grpc: &str,
    path: &str,
    timeout: Option<&str>,
    user: &str,
) -> (Response<h2::RecvStream>, Duration) {
    let tcp = tokio::net::TcpStream::connect(grpc).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let mut request = Request::post(format!("http://{grpc}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = timeout {
        request = request.header("grpc-timeout", t);
    }
    let message = common::envoy_request("api", "user", user).encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    body.extend_from_slice(&message);
    let start = Instant::now();
    let (response, mut send) = client
        .send_request(request.body(()).unwrap(), false)
        .unwrap();
    send.send_data(Bytes::from(body), true).unwrap();
    let response = response.await.unwrap();
    (response, start.elapsed())
}

/// The `grpc-status` of an answer: in its headers when trailers-only, else
/// in its trailers.
async fn grpc_status(response: Response<h2::RecvStream>) -> (String, String) {
    let header =
        |h: &axum::http::HeaderMap, name: &str| h.get(name).map(|v| v.to_str().unwrap().to_owned());
    if let Some(status) = header(response.headers(), "grpc-status") {
        let message = header(response.headers(), "grpc-message").unwrap_or_default();
        return (status, message);
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    let trailers = body.trailers().await.unwrap().expect("trailers");
    (
        header(&trailers, "grpc-status").expect("grpc-status"),
        header(&trailers, "grpc-message").unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_call_ends_at_its_client_deadline_not_at_the_store_timeout() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(["--store", &redis.url(), "--store-timeout", "5s"])
        .arg("--config")
        .arg(&config)
        .env_remove("SLIDELOG_STORE");
    let service = child::spawn(command);
    let grpc = service.grpc_addr();

    // Answered by the store, deadline or not.
    for timeout in [None, Some("10S")] {
        let (response, _) = call(&grpc, timeout).await;
        assert_eq!(response.status(), 200);
        assert_eq!(grpc_status(response).await.0, "0", "deadline {timeout:?}");
    }

    // Any other method or service is UNIMPLEMENTED (12), as tonic's
    // router answered it.
    for path in [
        "/envoy.service.ratelimit.v3.RateLimitService/Other",
        "/grpc.health.v1.Health/Check",
        "/",
    ] {
        let (response, _) = call_on(&grpc, path, None).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(grpc_status(response).await.0, "12", "{path}");
    }

    redis.pause();
    let (response, took) = call(&grpc, Some("300m")).await;
    let status = grpc_status(response).await;
    redis.resume();
    assert_eq!(
        status,
        ("1".to_owned(), "Timeout%20expired".to_owned()),
        "CANCELLED at the client's deadline"
    );
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "answered after {took:?}: the deadline is 300 ms, the store's timeout 5 s"
    );
}

/// The client's deadline goes down to the store: with Redis frozen
/// (SIGSTOP) and a 5 s store timeout, ten calls with `grpc-timeout` 20 ms
/// are answered `CANCELLED`; when Redis resumes it runs their queued checks
/// past that deadline, so none records: no record on Redis and
/// `slidelog_store_late_records_total` stays 0.
#[tokio::test]
async fn a_cancelled_call_leaves_no_late_record() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(["--store", &redis.url(), "--store-timeout", "5s"])
        .arg("--config")
        .arg(&config)
        .env_remove("SLIDELOG_STORE");
    let service = child::spawn(command);
    let grpc = service.grpc_addr();
    let (warm, _) = call_as(&grpc, PATH, None, "warm").await;
    assert_eq!(grpc_status(warm).await.0, "0");
    redis.pause();
    for _ in 0..10 {
        let (response, _) = call_as(&grpc, PATH, Some("20m"), "frozen").await;
        assert_eq!(grpc_status(response).await.0, "1", "CANCELLED");
    }
    redis.resume();
    // Every queued check has run (and been refused) once a later call on
    // the same connection is answered.
    let (after, _) = call_as(&grpc, PATH, None, "warm").await;
    assert_eq!(grpc_status(after).await.0, "0");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let metrics = common::raw_http::get(&service.addr, "/metrics").1;
    let late = common::raw_http::metric(&metrics, "slidelog_store_late_records_total");
    assert_eq!(late, 0.0, "late records");
    let mut conn = redis.client();
    let keys: Vec<String> = redis::cmd("KEYS").arg("*frozen*").query(&mut conn).unwrap();
    let mut held = 0u64;
    for key in keys.iter().filter(|k| !k.contains("#w")) {
        held += redis::cmd("ZCARD")
            .arg(key)
            .query::<u64>(&mut conn)
            .unwrap_or(0);
    }
    assert_eq!(held, 0, "records of cancelled calls on Redis: {keys:?}");
}
