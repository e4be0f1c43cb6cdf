//! SIGTERM drains the gRPC server as well as HTTP, before the final memory
//! snapshot: a `ShouldRateLimit` call in flight when the signal arrives is
//! answered, the service exits 0, and the snapshot holds that decision (the
//! restarted service refuses the call after it). Before, the gRPC task was
//! not joined: serve wrote the snapshot and exited under the call.

use slidelog_envoy::codec::RequestCodec;
use slidelog_envoy::proto::{
    RateLimitRequest, RateLimitResponse, RateLimitServiceClient, rate_limit_response::Code,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

mod common;

use common::child;

/// Two an hour: the third call within the test is over the limit.
const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 2}\n";
const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// `serve` on both ports with [`CONFIG`] and a memory snapshot written only
/// at shutdown (the interval is far longer than the test).
fn serve(config: &Path, snapshot: &Path, extra: &[&str]) -> child::Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .arg("--config")
        .arg(config)
        .arg("--memory-snapshot")
        .arg(snapshot)
        .args(["--memory-snapshot-interval", "1h"])
        .args(extra)
        .env_remove("SLIDELOG_STORE")
        .env("RUST_LOG", "info");
    child::spawn(command)
}

/// The folder of the config ([`CONFIG`]) and the snapshot, and their paths.
fn files() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (config, snapshot) = (
        dir.path().join("limits.yaml"),
        dir.path().join("memory.snap"),
    );
    std::fs::write(&config, CONFIG).unwrap();
    (dir, config, snapshot)
}

fn request() -> RateLimitRequest {
    common::envoy_request("api", "user", "in-flight")
}

async fn connect(service: &child::Serve) -> Channel {
    Channel::from_shared(format!("http://{}", service.grpc_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Waits (at most 10 s) for a log line containing `text`.
async fn logged(service: &child::Serve, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if service.log.try_iter().any(|l| l.contains(text)) {
            return;
        }
        assert!(Instant::now() < deadline, "no log line with {text:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

type Answer = Result<tonic::Response<RateLimitResponse>, tonic::Status>;

/// A `ShouldRateLimit` call of [`request`] whose headers are sent now and
/// its message only when the returned sender fires (or is dropped).
fn held_call(channel: Channel) -> (oneshot::Sender<()>, JoinHandle<Answer>) {
    let (release, held) = oneshot::channel::<()>();
    let message = futures::stream::once(async move {
        let _ = held.await;
        request()
    });
    let mut grpc = tonic::client::Grpc::new(channel);
    let call = tokio::spawn(async move {
        grpc.ready().await.expect("the channel is ready");
        grpc.client_streaming(
            tonic::Request::new(message),
            PathAndQuery::from_static(PATH),
            RequestCodec::<RateLimitRequest, RateLimitResponse>::default(),
        )
        .await
    });
    (release, call)
}

/// `ShouldRateLimit` of [`request`] on `channel`, answered.
async fn ask(channel: Channel) -> RateLimitResponse {
    RateLimitServiceClient::new(channel)
        .should_rate_limit(request())
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_in_flight_at_sigterm_is_answered_and_in_the_final_snapshot() {
    let (_dir, config, snapshot) = files();
    let mut service = serve(&config, &snapshot, &[]);
    let channel = connect(&service).await;
    // One decision answered before the signal.
    let first = ask(channel.clone()).await;
    assert_eq!(first.overall_code, Code::Ok as i32, "{first:?}");
    assert_eq!(first.statuses[0].limit_remaining, 1, "{first:?}");
    // One in flight: its headers are sent now, its message only after the
    // service has begun shutting down.
    let (release, call) = held_call(channel);
    // Time for the call's headers to reach the service.
    tokio::time::sleep(Duration::from_millis(300)).await;
    child::signal(&service.child, "-TERM");
    logged(&service, "shutting down").await;
    // HTTP (idle) has drained by now: a service that did not wait for gRPC
    // would write its snapshot and exit meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = release.send(());
    let second = call
        .await
        .unwrap()
        .expect("the call in flight at SIGTERM is answered")
        .into_inner();
    assert_eq!(second.overall_code, Code::Ok as i32, "{second:?}");
    assert_eq!(second.statuses[0].limit_remaining, 0, "{second:?}");
    let status = child::exit_status(&mut service.child, Duration::from_secs(30), "SIGTERM");
    assert!(status.success(), "serve exited with {status}");
    // Restarted on the snapshot: both decisions are there.
    let service = serve(&config, &snapshot, &[]);
    let third = ask(connect(&service).await).await;
    assert_eq!(third.overall_code, Code::OverLimit as i32, "{third:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grace_period_bounds_a_grpc_call_that_never_finishes() {
    let (_dir, config, snapshot) = files();
    let mut service = serve(&config, &snapshot, &["--shutdown-grace", "300ms"]);
    let (release, call) = held_call(connect(&service).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    child::signal(&service.child, "-TERM");
    let status = child::exit_status(&mut service.child, Duration::from_secs(10), "SIGTERM");
    assert!(status.success(), "serve exited with {status}");
    // It waited for the call before giving up on it.
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "exited after {:?}, before the 300 ms grace period",
        started.elapsed()
    );
    logged(&service, "dropping gRPC calls still in flight").await;
    logged(&service, "stopped with requests cut off").await;
    drop(release);
    assert!(call.await.unwrap().is_err(), "the cut call is not answered");
}
