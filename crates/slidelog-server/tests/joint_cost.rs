//! What a two-descriptor Envoy request costs, before and after joint
//! decisions (docs/design.md §1, "One request, several keys"), measured
//! side by side in one run, not asserted: 2,000 `ShouldRateLimit` calls of
//! `user` + `path=/login` (limits far above the load, so all admitted) to a
//! `serve` on its own Redis, once with `--envoy-independent-descriptors`
//! (one store call per descriptor, the reference's way) and once joint (one
//! call over both keys), on the scripts and on the module engine. Printed:
//! Redis's CPU per request (the sum of `INFO commandstats` usec over the
//! run) and the service's CPU per request (`/proc/<pid>/stat` utime +
//! stime). Run with
//! `cargo test --release -p slidelog-server --test joint_cost -- --ignored --nocapture`.

mod common;

use slidelog_envoy::proto::rate_limit_descriptor::Entry;
use slidelog_envoy::proto::{RateLimitDescriptor, RateLimitRequest, RateLimitServiceClient};
use slidelog_testkit::{RedisServer, ServerKind};
use std::process::Command;

const CONFIG: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n  - key: path\n    value: /login\n    rate_limit: {unit: minute, requests_per_unit: 1000000}\n";
const CALLS: u32 = 2_000;

/// Microseconds Redis spent on commands so far (every `cmdstat_*` line).
fn redis_usec(server: &RedisServer) -> f64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client())
        .unwrap();
    stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_") && !l.starts_with("cmdstat_info:"))
        .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix("usec=")))
        .map(|v| v.parse::<f64>().unwrap())
        .sum()
}

/// CPU seconds the process `pid` used so far (user + system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn request(user: &str) -> RateLimitRequest {
    let descriptor = |key: &str, value: &str| RateLimitDescriptor {
        entries: vec![Entry {
            key: key.into(),
            value: value.into(),
        }],
        ..Default::default()
    };
    RateLimitRequest {
        domain: "api".into(),
        descriptors: vec![descriptor("user", user), descriptor("path", "/login")],
        hits_addend: 0,
    }
}

/// (Redis usec, service usec) per request for one configuration.
async fn measure(server: &RedisServer, engine: &str, independent: bool) -> (f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    let url = format!("{}?engine={engine}", server.url());
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(["--store", &url, "--no-rejection-cache"])
        .arg("--config")
        .arg(&config)
        .env_remove("SLIDELOG_STORE");
    if independent {
        command.arg("--envoy-independent-descriptors");
    }
    let service = common::child::spawn(command);
    let mut client = RateLimitServiceClient::connect(format!("http://{}", service.grpc_addr()))
        .await
        .unwrap();
    client.should_rate_limit(request("warm")).await.unwrap();
    let (redis_before, cpu_before) = (redis_usec(server), cpu_seconds(service.child.id()));
    for i in 0..CALLS {
        let answer = client
            .should_rate_limit(request(&format!("u{}", i % 200)))
            .await;
        assert_eq!(answer.unwrap().into_inner().overall_code, 1, "OK");
    }
    let redis = (redis_usec(server) - redis_before) / f64::from(CALLS);
    let cpu = (cpu_seconds(service.child.id()) - cpu_before) * 1e6 / f64::from(CALLS);
    (redis, cpu)
}

#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn a_two_descriptor_request_before_and_after() {
    for engine in ["script", "module"] {
        let server = match engine {
            "module" => RedisServer::start_with_module(ServerKind::Redis, &[]),
            _ => RedisServer::start(),
        };
        for independent in [true, false, true, false] {
            let (redis, cpu) = measure(&server, engine, independent).await;
            let how = if independent { "independent" } else { "joint" };
            eprintln!(
                "engine={engine} {how}: Redis {redis:.1} usec/request, service {cpu:.1} usec CPU/request"
            );
        }
    }
}
