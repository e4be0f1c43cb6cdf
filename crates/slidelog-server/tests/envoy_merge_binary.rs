//! The built `slidelog serve` with a `--config` folder whose files configure
//! one domain: refused at start (exit 2) unless merging is on, by the flag
//! `--merge-domain-config` or the reference service's `MERGE_DOMAIN_CONFIG`;
//! merged, the rules of both files answer on `POST /json`, and a descriptor
//! configured in both files is still refused.

use std::path::Path;
use std::process::Command;

const FIRST: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n";
const SECOND: &str = "domain: api\ndescriptors:\n  - key: path\n    value: /admin*\n    rate_limit: {unit: hour, requests_per_unit: 0}\n";
const CLASH: &str = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 9}\n";

mod common;

use common::child;

fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn serve(config: &Path, flag: bool, env: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_slidelog"));
    cmd.args(["serve", "--http", "127.0.0.1:0", "--no-grpc", "--config"])
        .arg(config)
        .env_remove("MERGE_DOMAIN_CONFIG");
    if flag {
        cmd.arg("--merge-domain-config");
    }
    if let Some(v) = env {
        cmd.env("MERGE_DOMAIN_CONFIG", v);
    }
    cmd
}

/// Runs a start that must fail; returns its stderr.
fn refused(mut cmd: Command) -> String {
    let out = cmd.output().expect("run slidelog serve");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

/// Starts the binary; returns it with its HTTP address from the log.
fn started(cmd: Command) -> (child::Serve, String) {
    let service = child::spawn(cmd);
    let addr = service.addr.clone();
    (service, addr)
}

async fn json(http: &str, key: &str, value: &str) -> serde_json::Value {
    let body = serde_json::json!({
        "domain": "api",
        "descriptors": [{"entries": [{"key": key, "value": value}]}]
    });
    reqwest::Client::new()
        .post(format!("http://{http}/json"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[test]
fn a_domain_in_two_files_is_refused_without_merging() {
    let dir = folder(&[("a.yaml", FIRST), ("b.yaml", SECOND)]);
    let stderr = refused(serve(dir.path(), false, None));
    assert!(
        stderr.contains("b.yaml:1:9: duplicate domain \"api\""),
        "{stderr}"
    );
    assert!(stderr.contains("MERGE_DOMAIN_CONFIG"), "{stderr}");
    let stderr = refused(serve(dir.path(), false, Some("false")));
    assert!(stderr.contains("duplicate domain"), "{stderr}");
}

#[tokio::test]
async fn the_flag_and_the_reference_setting_merge_the_files() {
    let dir = folder(&[("a.yaml", FIRST), ("b.yaml", SECOND)]);
    for (flag, env) in [(true, None), (false, Some("true")), (false, Some("1"))] {
        let (_service, http) = started(serve(dir.path(), flag, env));
        let v = json(&http, "user", "alice").await;
        assert_eq!(
            v["statuses"][0]["currentLimit"]["requestsPerUnit"], 2,
            "{v}"
        );
        let v = json(&http, "path", "/admin/users").await;
        assert_eq!(v["overallCode"], "OVER_LIMIT", "{v}");
        assert_eq!(v["statuses"][0]["currentLimit"]["unit"], "HOUR", "{v}");
    }
}

#[test]
fn merging_still_refuses_a_descriptor_configured_twice() {
    let dir = folder(&[("a.yaml", FIRST), ("c.yaml", CLASH)]);
    let stderr = refused(serve(dir.path(), true, None));
    assert!(
        stderr.contains("c.yaml:3:")
            && stderr.contains("duplicate descriptor composite key 'api.user'"),
        "{stderr}"
    );
}
