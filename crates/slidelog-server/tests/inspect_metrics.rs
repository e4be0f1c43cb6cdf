//! `slidelog serve --inspect-every` exports the key-space gauges on
//! `/metrics`, and every metric name that the shipped Grafana dashboard and
//! Prometheus alert rules use is one that a running service really exports
//! (scraped from the built binary: a Redis-backed service through a store
//! outage, a memory-backed one, and a Cluster-backed one for the per-master
//! gauges only a cluster store exports).

use slidelog_inspect::names;
use slidelog_testkit::{RedisCluster, RedisServer, unique_prefix};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::child;
use common::raw_http::{check, get, request};

/// `slidelog serve` with ARGS (gRPC on a free port), ready once it listens.
fn serve(args: &[&str]) -> child::Serve {
    let mut command = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    command
        .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "info");
    child::spawn(command)
}

/// Scrapes /metrics until `want` appears in it (generous: scans run every 1 s).
fn scrape_until(addr: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, text) = get(addr, "/metrics");
        assert_eq!(status, 200);
        if text.contains(want) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{want} never appeared in\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The metric names of a Prometheus text exposition.
fn exported(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(|series| names::base_name(series).to_owned())
        .collect()
}

fn deploy(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../deploy/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn serve_exports_inspect_gauges_and_every_name_the_deploy_files_use() {
    let mut redis = RedisServer::start();
    let prefix = unique_prefix("serve_inspect");
    // A key written without the script: no TTL, 12 records > 2 x 5.
    let mut conn = redis.client();
    let mut zadd = redis::cmd("ZADD");
    zadd.arg(format!("{prefix}legacy"));
    for i in 0..12u64 {
        zadd.arg(1_764_400_000_000u64 + i)
            .arg(format!("01JDQ3W7ZK{i:04}ABCDEFGHJKMN"));
    }
    zadd.exec(&mut conn).unwrap();

    let service = serve(&[
        "--store",
        &redis.url(),
        "--store-timeout",
        "500ms",
        "--key-prefix",
        &prefix,
        "--inspect-every",
        "1s",
        "--inspect-max",
        "5",
    ]);
    let addr = service.addr.clone();
    let body = r#"{"key":"u1","max":1,"window_ms":60000}"#;
    assert_eq!(check(&addr, body).0, 200);
    assert_eq!(check(&addr, body).0, 429);
    let bad = r#"{"key":"","max":1,"window_ms":60000}"#;
    assert_eq!(check(&addr, bad).0, 400);

    // The scan sees both keys: the legacy one and the one the service wrote.
    let text = scrape_until(&addr, "slidelog_inspect_keys 2");
    for series in [
        r#"slidelog_inspect_problem_keys{kind="no_ttl"} 1"#,
        r#"slidelog_inspect_problem_keys{kind="oversized"} 1"#,
        "slidelog_inspect_max_zcard 12",
        "slidelog_inspect_limit_max 5",
        "slidelog_inspect_records 13",
    ] {
        assert!(text.contains(series), "{text}");
    }

    // A store outage: the decision is degraded, the next scan fails.
    redis.kill();
    let (status, answer) = check(&addr, r#"{"key":"u2","max":1,"window_ms":60000}"#);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(r#""degraded":true"#), "{answer}");
    let text = scrape_until(&addr, "slidelog_inspect_scan_errors_total 1");
    let mut names_seen = exported(&text);

    // The in-memory store's own gauges come from a memory-backed service,
    // and its snapshot's from one that keeps a --memory-snapshot.
    let snapshot_dir = tempfile::tempdir().unwrap();
    let snapshot = snapshot_dir.path().join("memory.snap");
    // It also serves an Envoy config: one `/json` decision exports the
    // `slidelog_envoy_*` series.
    let envoy = snapshot_dir.path().join("envoy.yaml");
    std::fs::write(&envoy, common::ENVOY_CONFIG).unwrap();
    let memory = serve(&[
        "--store",
        "memory://",
        "--memory-snapshot",
        snapshot.to_str().unwrap(),
        "--config",
        envoy.to_str().unwrap(),
    ]);
    let (status, answer) = request(&memory.addr, "POST", "/json", common::ENVOY_JSON, "");
    assert_eq!(status, 200, "{answer}");
    names_seen.extend(exported(&scrape_until(
        &memory.addr,
        "slidelog_memory_snapshot_bytes",
    )));

    // The per-master gauges (slidelog_store_nodes*) come from a service on
    // a Redis Cluster: only a cluster store has masters to count.
    let cluster = RedisCluster::start_with(3, 0);
    let on_cluster = serve(&["--store", &cluster.url()]);
    let (status, answer) = check(
        &on_cluster.addr,
        r#"{"key":"c1","max":1,"window_ms":60000}"#,
    );
    assert_eq!(status, 200, "{answer}");
    names_seen.extend(exported(&scrape_until(
        &on_cluster.addr,
        "slidelog_store_nodes_down_seconds",
    )));

    // The local policy's series come from a service under
    // --on-store-error local (registered at 0 from start-up).
    let local = serve(&[
        "--store",
        &cluster.url(),
        "--on-store-error",
        "local",
        "--local-share",
        "0.5",
    ]);
    names_seen.extend(exported(&scrape_until(
        &local.addr,
        "slidelog_local_journal_full_total",
    )));

    // Every name in slidelog_inspect::names is really exported ...
    let missing: Vec<_> = names::all()
        .into_iter()
        .filter(|n| !names_seen.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "not exported: {missing:?}\n{names_seen:?}"
    );
    // ... and so is every name the dashboard and the alerts use.
    for file in ["grafana/slidelog.json", "prometheus/alerts.yml"] {
        for name in names::mentioned(&deploy(file)) {
            let base = names::base_name(&name);
            assert!(
                names_seen.contains(base),
                "{file} uses {name}, not exported"
            );
        }
    }
}

#[test]
fn inspect_every_needs_a_redis_store_and_a_sane_interval() {
    for (args, message) in [
        (&["--inspect-every", "60s"][..], "needs a Redis store"),
        (
            &["--store", "redis://127.0.0.1:1", "--inspect-every", "10ms"][..],
            "at least 1s",
        ),
        (
            &[
                "--store",
                "redis://127.0.0.1:1",
                "--inspect-every",
                "5s",
                "--inspect-max",
                "0",
            ][..],
            "--inspect-max must be 1 ..= 10000000",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_slidelog"))
            .args(["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn inspect_every_takes_its_max_from_the_envoy_config() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.yaml");
    std::fs::write(
        &config,
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: minute\n      requests_per_unit: 7\n",
    )
    .unwrap();
    let prefix = unique_prefix("serve_inspect_config");
    let service = serve(&[
        "--store",
        &redis.url(),
        "--key-prefix",
        &prefix,
        "--config",
        config.to_str().unwrap(),
        "--inspect-every",
        "1s",
    ]);
    scrape_until(&service.addr, "slidelog_inspect_limit_max 7");
}
