//! The shipped monitoring files checked by the real tools: `promtool check
//! rules` on `deploy/prometheus/alerts.yml`, `promtool test rules` on its
//! unit tests (`deploy/prometheus/alerts_test.yml`: every alert fires on its
//! series and stays quiet otherwise), and a real Prometheus server that
//! scrapes running `slidelog serve` processes and sees every metric the
//! Grafana dashboard (`deploy/grafana/slidelog.json`) queries.
//!
//! promtool and prometheus come from Debian's `prometheus` package, which
//! `scripts/test.sh` installs; a missing one fails the test saying so.

mod common;

use common::{child, json_of};

use slidelog_testkit::{RedisServer, free_port, tools};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn deploy(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(path)
}

fn promtool(args: &[&str]) -> String {
    let out = Command::new(tools::require("promtool", "prometheus"))
        .args(args)
        .current_dir(deploy("prometheus"))
        .output()
        .expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// The alert names of alerts.yml.
fn alert_names() -> BTreeSet<String> {
    let text = std::fs::read_to_string(deploy("prometheus/alerts.yml")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_owned())
        .collect()
}

#[test]
fn promtool_checks_the_alert_rules() {
    let out = promtool(&["check", "rules", "alerts.yml"]);
    let rules = alert_names().len();
    assert!(
        out.contains(&format!("SUCCESS: {rules} rules found")),
        "{out}"
    );
}

#[test]
fn promtool_unit_tests_fire_and_stay_quiet_for_every_alert() {
    let out = promtool(&["test", "rules", "alerts_test.yml"]);
    assert!(out.contains("SUCCESS"), "{out}");
    // Every alert has a case where it fires (exp_alerts listed) and one
    // where it must not (exp_alerts: []).
    let tests = std::fs::read_to_string(deploy("prometheus/alerts_test.yml")).unwrap();
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    for alert in alert_names() {
        let (mut fires, mut quiet) = (false, false);
        for (i, line) in lines.iter().enumerate() {
            if *line != format!("alertname: {alert}") {
                continue;
            }
            match lines.get(i + 1) {
                Some(&"exp_alerts: []") => quiet = true,
                Some(&"exp_alerts:") => fires = true,
                other => panic!("{alert}: unexpected line after alertname: {other:?}"),
            }
        }
        assert!(fires, "no case in alerts_test.yml where {alert} fires");
        assert!(
            quiet,
            "no case in alerts_test.yml where {alert} stays quiet"
        );
    }
}

/// Every `slidelog_…` series name the dashboard's queries use.
fn dashboard_metrics() -> BTreeSet<String> {
    let text = std::fs::read_to_string(deploy("grafana/slidelog.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&json, &mut exprs);
    assert!(exprs.len() > 10, "the dashboard has queries: {exprs:?}");
    exprs
        .iter()
        .flat_map(|e| slidelog_inspect::names::mentioned(e))
        .collect()
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => collect_exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_exprs(v, out)),
        _ => {}
    }
}

/// A Prometheus server on a free port with its own config and storage.
struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(targets: &[&str]) -> Self {
        let binary = tools::require("prometheus", "prometheus");
        let dir = tempfile::tempdir().unwrap();
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - '{}'\n\
             scrape_configs:\n  - job_name: slidelog\n    static_configs:\n      - targets: [{}]\n",
            deploy("prometheus/alerts.yml").display(),
            targets.join(", ")
        );
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The metric names Prometheus has for job "slidelog", by instant query.
    async fn scraped_names(&self, http: &reqwest::Client) -> Option<BTreeSet<String>> {
        let r = http
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", "count by (__name__) ({job=\"slidelog\"})")])
            .send()
            .await
            .ok()?;
        let v: serde_json::Value = r.json().await.ok()?;
        Some(
            v["data"]["result"]
                .as_array()?
                .iter()
                .filter_map(|s| s["metric"]["__name__"].as_str().map(str::to_owned))
                .collect(),
        )
    }
}

/// One raw request to a `slidelog serve` child.
fn http_once() -> reqwest::Client {
    reqwest::Client::new()
}

async fn post(http: &reqwest::Client, url: String, body: &str) -> u16 {
    http.post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("request to slidelog")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_every_metric_the_dashboard_uses() {
    let wanted: BTreeSet<String> = dashboard_metrics().into_iter().collect();
    // A Redis store with the key-space scan, and a memory store whose key
    // cap of 1 makes the second key a store error (counted, and answered
    // degraded under fail-open): between them every series of the dashboard.
    // The Redis one also serves an Envoy config (the `slidelog_envoy_*`
    // series), the memory one keeps a snapshot (`slidelog_memory_snapshot_*`).
    let redis = RedisServer::start();
    let files = tempfile::tempdir().unwrap();
    let config = files.path().join("envoy.yaml");
    std::fs::write(&config, common::ENVOY_CONFIG).unwrap();
    let snapshot = files.path().join("memory.snap");
    let on_redis = child::serve(&[
        "--store",
        &redis.url(),
        "--inspect-every",
        "1s",
        "--inspect-max",
        "100",
        "--config",
        config.to_str().unwrap(),
    ]);
    let on_memory = child::serve(&[
        "--memory-key-cap",
        "1",
        "--memory-snapshot",
        snapshot.to_str().unwrap(),
    ]);
    assert_eq!(
        post(&http_once(), on_redis.url("/json"), common::ENVOY_JSON).await,
        200
    );
    let http = reqwest::Client::new();
    for service in [&on_redis, &on_memory] {
        let check = service.url("/v1/check");
        let a = r#"{"key":"a","max":1,"window_ms":60000}"#;
        assert_eq!(post(&http, check.clone(), a).await, 200);
        assert_eq!(post(&http, check.clone(), a).await, 429);
        let bad = r#"{"key":"a","max":0,"window_ms":60000}"#;
        assert_eq!(post(&http, check.clone(), bad).await, 400);
    }
    // The memory store is full: a store error (whatever the answer).
    let b = r#"{"key":"b","max":1,"window_ms":60000}"#;
    let status = post(&http, on_memory.url("/v1/check"), b).await;
    assert!(status >= 200, "{status}");

    let prometheus = Prometheus::start(&[&on_redis.addr, &on_memory.addr]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let missing = loop {
        let seen = prometheus.scraped_names(&http).await.unwrap_or_default();
        let missing: Vec<&String> = wanted.iter().filter(|m| !seen.contains(*m)).collect();
        if missing.is_empty() {
            break missing;
        }
        if Instant::now() > deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        missing.is_empty(),
        "Prometheus never saw {missing:?} (the dashboard queries them).\nprometheus log:\n{}",
        prometheus.log()
    );
    // Both targets are up, as Prometheus itself reports.
    let r = json_of(
        http.get(format!("{}/api/v1/query", prometheus.base))
            .query(&[("query", "sum(up{job=\"slidelog\"})")]),
    )
    .await;
    assert_eq!(r["data"]["result"][0]["value"][1], "2", "{r}");
}
